import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from tf2rnn_hf.distill.quantization_aware import (
    RoundedWeight,
    clip_ratios,
    has_rounded_weights,
    plain_state_dict,
    round_linear_weights,
    round_weight,
)


def _levels(w: torch.Tensor, group: int) -> torch.Tensor:
    """Each value over its group's scale (max |w| / 7): whole numbers in [-7, 7] if w is on the int4 grid."""
    blocks = w.reshape(w.shape[0], -1, group)
    return blocks / (blocks.abs().amax(-1, keepdim=True) / 7)


@pytest.mark.parametrize("group", [None, 16])
def test_round_weight_puts_each_row_or_group_on_the_int4_grid(group):
    torch.manual_seed(0)
    w = torch.randn(6, 64)
    r = round_weight(w, 4, group)
    levels = _levels(r, group or 64)
    assert torch.allclose(levels, levels.round(), atol=1e-4) and levels.abs().max() <= 7 + 1e-4
    # each block keeps its largest magnitude (the scale's anchor), and nothing moves more than half a step
    size = group or 64
    assert torch.allclose(r.reshape(6, -1, size).abs().amax(-1), w.reshape(6, -1, size).abs().amax(-1))
    step = w.reshape(6, -1, size).abs().amax(-1, keepdim=True) / 7
    assert ((r - w).reshape(6, -1, size).abs() <= step / 2 + 1e-6).all()
    assert torch.equal(round_weight(r, 4, group), r)  # rounding twice changes nothing
    assert torch.equal(round_weight(w, 32), w)


@pytest.mark.parametrize("group", [None, 64])
def test_clip_ratios_trade_a_rows_outliers_for_a_finer_step_and_keep_a_weight_on_its_grid(group):
    torch.manual_seed(0)
    w = torch.randn(6, 256)
    ratios = clip_ratios(w, 4, group)
    assert ratios.shape == (6, 256 // (group or 256), 1)
    clipped, plain = round_weight(w, 4, group, ratios), round_weight(w, 4, group)
    errors = [(r - w).reshape(6, -1, group or 256).square().sum(-1) for r in (clipped, plain)]
    assert (errors[0] <= errors[1]).all() and (ratios < 1).any()  # 1.0 is a candidate: never worse than no clip
    assert errors[0].sum() < 0.9 * errors[1].sum()  # a Gaussian row's largest values are rare: clip them
    levels = _levels(clipped, group or 256)  # still a symmetric int4 grid, its scale at the clipped values
    assert torch.allclose(levels, levels.round(), atol=1e-4) and levels.abs().max() <= 7 + 1e-4
    assert torch.equal(clip_ratios(clipped, 4, group), torch.ones_like(ratios))  # on its grid: nothing to clip
    # rounded again, the same values up to a float ulp (the scale is recomputed as 7 steps / 7)
    assert torch.allclose(round_weight(clipped, 4, group, clip_ratios(clipped, 4, group)), clipped, atol=1e-6, rtol=0)


def test_round_weight_refuses_a_group_that_does_not_split_the_row():
    with pytest.raises(ValueError, match="64 columns do not split into groups of 24"):
        round_weight(torch.randn(2, 64), 4, 24)
    with pytest.raises(ValueError, match="at least 2 bits"):
        round_weight(torch.randn(2, 64), 1)


def test_rounded_weight_runs_the_rounded_weight_and_passes_the_gradient_through():
    torch.manual_seed(0)
    layer = nn.Linear(32, 4)
    latent = layer.weight.detach().clone()
    parametrize.register_parametrization(layer, "weight", RoundedWeight(4))
    x = torch.randn(5, 32)
    y = layer(x)
    assert torch.allclose(y, nn.functional.linear(x, round_weight(latent, 4), layer.bias))
    dy = torch.randn_like(y)
    y.backward(dy)
    # straight through: the latent weight gets the gradient the rounded one would (dy^T x), not zero
    assert torch.allclose(layer.parametrizations.weight.original.grad, dy.T @ x, atol=1e-6)


def test_round_linear_weights_covers_every_linear_and_states_use_plain_names():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 32), nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    latent = model[1].weight.detach().clone()
    assert not has_rounded_weights(model)
    assert round_linear_weights(model, 4, 32) == ["1", "3"]
    assert has_rounded_weights(model)
    with pytest.raises(ValueError, match="rounds its linear weights already"):
        round_linear_weights(model, 4)
    rounded, kept = plain_state_dict(model, rounded=True), plain_state_dict(model, rounded=False)
    assert set(rounded) == set(kept) == {"0.weight", "1.weight", "1.bias", "3.weight", "3.bias"}
    assert torch.equal(rounded["1.weight"], round_weight(latent, 4, 32)) and torch.equal(kept["1.weight"], latent)
    assert torch.equal(rounded["0.weight"], model[0].weight)  # the token table is not rounded
    assert has_rounded_weights(model) and torch.equal(model[1].weight, rounded["1.weight"])  # the model is unchanged
    # A rounded model loads a plain state into its latent weights (a checkpoint, when training resumes).
    again = nn.Sequential(nn.Embedding(10, 32), nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    round_linear_weights(again, 4, 32)
    again.load_state_dict(kept)
    assert torch.equal(again[1].parametrizations.weight.original, latent)
    with pytest.raises(ValueError, match="no nn.Linear weights"):
        round_linear_weights(nn.Sequential(nn.Embedding(4, 4)), 4)
    kept = nn.Sequential(nn.Linear(32, 64), nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 32)))
    assert round_linear_weights(kept, 4, keep=("1",)) == ["0"]  # a kept module and those under it stay fp32
    assert not parametrize.is_parametrized(kept[1][0], "weight")
    by_last_part = nn.Sequential(nn.Linear(32, 64), nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 32)))
    assert round_linear_weights(by_last_part, 4, keep=("0",)) == ["1.1"]  # "0" is "0" and "1.0"'s last part
    with pytest.raises(ValueError, match=r"\['2'\], which match no linear layer"):
        round_linear_weights(nn.Sequential(nn.Linear(32, 64)), 4, keep=("2",))
    with pytest.raises(ValueError, match="do not split into groups"):
        round_linear_weights(nn.Sequential(nn.Linear(30, 4)), 4, 32)
    with pytest.raises(ValueError, match="'0' is a GRU, whose weights would stay unrounded"):
        round_linear_weights(nn.Sequential(nn.GRU(8, 8), nn.Linear(8, 4)), 4)


def test_learned_scales_start_at_the_least_squares_clip_train_and_stay_on_the_grid_the_kernel_reads():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 16), nn.GELU(), nn.Linear(16, 4))
    first = model[0].weight.detach().clone()
    assert round_linear_weights(model, 4, learned_scale=True) == ["0", "2"]
    scale = model[0].parametrizations.weight[0].scale
    # it starts where the least-squares clip puts it, so the rounding is already closer than at each row's maximum
    assert torch.allclose(model[0].weight, round_weight(first, 4, clip=clip_ratios(first, 4)), atol=1e-6)
    assert (model[0].weight - first).square().sum() < (round_weight(first, 4) - first).square().sum()
    x = torch.randn(32, 128)
    model(x).square().sum().backward()
    latent = model[0].parametrizations.weight.original
    clipped = first.abs() > 7 * scale.detach()[:, :, 0] + 1e-6
    assert clipped.any() and (latent.grad[clipped] == 0).all() and (latent.grad[~clipped] != 0).all()
    assert scale.grad is not None and scale.grad.abs().sum() > 0  # the scale trains with the weights
    # Whatever the scale, the weight stays on a grid whose row maximum is the top level: what the int4 kernel reads.
    for factor in (0.5, 10.0):
        with torch.no_grad():
            scale.mul_(factor)
        assert torch.allclose(round_weight(model[0].weight, 4), model[0].weight, atol=1e-6, rtol=0)
    # The saved student holds the rounded weights alone; a checkpoint keeps the scales, and loads them back.
    assert set(plain_state_dict(model, rounded=True)) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    kept = plain_state_dict(model, rounded=False)
    assert torch.equal(kept["0.parametrizations.weight.0.scale"], scale)
    again = nn.Sequential(nn.Linear(128, 16), nn.GELU(), nn.Linear(16, 4))
    round_linear_weights(again, 4, learned_scale=True)
    again.load_state_dict(kept)
    assert torch.equal(again[0].weight, model[0].weight)

"""Bad or unusual inputs to the model itself: each gets a finite correct answer or an error of ours that
names the argument, never NaN and never a bare torch error (issue: no silent wrong answers)."""

import math

import pytest
import torch
from conftest import tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from tf2rnn_hf import CELL_TYPES, TF2RNNConfig, TF2RNNModel


def test_a_partial_load_initialises_the_new_layers(cell_type, tmp_path):
    """A config asking for more layers than the weights hold: the new layer is initialised, not garbage."""
    small = tiny_model(cell_type)
    small.save_pretrained(tmp_path)
    config = TF2RNNConfig.from_pretrained(tmp_path, num_hidden_layers=small.config.num_hidden_layers + 1)
    for _ in range(3):  # uninitialised memory differs between allocations: try more than once
        model = TF2RNNModel.from_pretrained(tmp_path, config=config).eval()
        assert all(torch.isfinite(p).all() for p in model.parameters()), cell_type
        out = model(torch.tensor([[2, 3, 4, 5]])).pooler_output.detach()
        assert torch.isfinite(out).all() and abs(float(out.norm()) - 1) < 1e-5


@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_at_load(tmp_path, poison):
    tiny_model("gru").save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    weights["embeddings.weight"][7, 3] = poison
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"non-finite.*embeddings\.weight"):
        TF2RNNModel.from_pretrained(tmp_path)


def test_attention_mask_must_match_input_ids():
    model = tiny_model("gru")
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.tensor([[2, 3, 4], [5, 6, 7]]), attention_mask=torch.tensor([1, 1, 0]))


def test_past_state_of_another_model_is_refused():
    model = tiny_model("gru")
    other = tiny_model("gru", hidden_size=32)
    with pytest.raises(ValueError, match="past_state"):
        model(torch.tensor([[2, 3]]), past_state=other.init_state(1))
    with pytest.raises(ValueError, match="past_state"):
        model.step(torch.tensor([2]), other.init_state(1))
    state = model.init_state(1)
    state.last_embedding = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="past_state"):
        model(torch.tensor([[2, 3]]), past_state=state)


def test_past_state_on_another_device_is_refused():
    model = tiny_model("gru")
    state = model.init_state(1, device="meta")
    with pytest.raises(ValueError, match="device"):
        model(torch.tensor([[2, 3]]), past_state=state)


@pytest.mark.parametrize("field,value", [("layer_norm_eps", -1.0), ("layer_norm_eps", 0.0),
                                         ("initializer_range", -0.1), ("layer_norm_eps", float("nan")),
                                         ("dropout", float("nan"))])
def test_config_refuses_bad_floats(field, value):
    with pytest.raises(ValueError, match=field):
        TF2RNNConfig(**{field: value})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cell=st.sampled_from(CELL_TYPES),
       ids=st.lists(st.lists(st.integers(-3, 60), min_size=0, max_size=6), min_size=1, max_size=3),
       mask_kind=st.sampled_from(["none", "ones", "random", "1d", "short", "float"]),
       use_state=st.booleans(), seed=st.integers(0, 3))
def test_forward_and_step_are_finite_or_refused(cell, ids, mask_kind, use_state, seed):
    """Random (often bad) inputs: a finite, unit-norm answer equal to stepping, or our ValueError/TypeError
    naming the argument."""
    model = _MODELS[cell]
    width = max(len(r) for r in ids)
    if len({len(r) for r in ids}) > 1:
        ids = [r + [0] * (width - len(r)) for r in ids]
    input_ids = torch.tensor(ids, dtype=torch.long).reshape(len(ids), width)
    gen = torch.Generator().manual_seed(seed)
    mask = {"none": None, "ones": torch.ones_like(input_ids),
            "random": torch.randint(0, 2, input_ids.shape, generator=gen),
            "1d": torch.ones(width, dtype=torch.long), "short": torch.ones(len(ids), max(0, width - 1)),
            "float": torch.rand(input_ids.shape, generator=gen)}[mask_kind]
    state = model.init_state(len(ids)) if use_state else None
    try:
        out = model(input_ids, attention_mask=mask, past_state=state)
    except (ValueError, TypeError) as err:
        assert any(word in str(err) for word in ("input_ids", "attention_mask", "past_state")), str(err)
        return
    assert torch.isfinite(out.last_hidden_state).all()
    norms = out.pooler_output.detach().norm(dim=-1)
    assert all(math.isclose(float(n), 1, abs_tol=1e-4) or float(n) == 0 for n in norms)
    if mask is None and width and bool(model.step_mask(input_ids).all()):  # stepping gives the same answer
        s, emb = None, None
        for t in range(width):
            emb, s = model.step(input_ids[:, t], s)
        assert torch.allclose(emb, out.pooler_output, atol=1e-5)


_MODELS = {cell: tiny_model(cell) for cell in CELL_TYPES}

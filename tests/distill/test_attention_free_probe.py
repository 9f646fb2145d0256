"""The attention-free probe (benchmarks/probes/stage_variants.py) that session 64's rows rest on: a flagged layer
reads no other token (its output at a step is its own feed-forward of its input after the output map's bias), in the
parallel form, the evicting form past the cache and a step alike, while the layers not flagged still attend."""

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from conftest import tiny_model

from tf2rnn_hf.models.tf2rnn.cells_tf2rnn import _PostNormLayer

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "probes" / "stage_variants.py"
spec = importlib.util.spec_from_file_location("stage_variants", SCRIPT)
stage_variants = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_variants)


def _alone(layer: _PostNormLayer, x: torch.Tensor) -> torch.Tensor:
    """What a layer that attends to nothing makes of its input x [..., H]."""
    x = layer.attention_norm(x + layer.out.bias)
    return layer.output_norm(x + layer.down(F.gelu(layer.up(x))))


def test_a_flagged_layer_reads_no_other_token_and_the_rest_still_attend(monkeypatch):
    monkeypatch.setattr(_PostNormLayer, "mix", stage_variants.mix_or_nothing)  # undone after the test
    model = tiny_model("tova_attention", num_slots=4)
    cell = model.cell
    cell.layers[0].attention_free = True
    torch.manual_seed(1)
    with torch.no_grad():  # weights large enough that attending moves the outputs, biases that count
        for module in cell.layers.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0, 0.5)
                module.bias.normal_(0, 0.5)
    inputs = torch.randn(2, 9, cell.config.hidden_size)  # 9 steps: past the 4 slots, so the evicting form runs too
    lengths = torch.tensor([9, 3])
    with torch.no_grad():
        (first, second, _), _ = cell(inputs, cell.init_state(2), lengths)
        embedded = cell._embed(inputs, 1 + torch.arange(9)[None])
        valid = torch.arange(9)[None] < lengths[:, None]  # steps past a row's length are padding
        torch.testing.assert_close(first[valid], _alone(cell.layers[0], embedded)[valid], rtol=1e-5, atol=1e-5)
        # The second layer still mixes steps: its output at a step moves when an earlier input does.
        changed = inputs.clone()
        changed[:, 0] += torch.randn(cell.config.hidden_size)  # not a constant: the embedding norm removes that
        (first_changed, second_changed, _), _ = cell(changed, cell.init_state(2), lengths)
        later = valid & (torch.arange(9)[None] > 0)
        torch.testing.assert_close(first_changed[later], first[later])
        assert (second_changed[0, 1:] - second[0, 1:]).abs().max() > 1e-3
        # A step, one token at a time, agrees with the parallel and evicting forms.
        state, steps = cell.init_state(1), []
        for j in range(9):
            out, state = cell._step_all(inputs[:1, j], state)
            steps.append(out[0])
        torch.testing.assert_close(torch.stack(steps, 1), first[:1], rtol=1e-5, atol=1e-5)
    cell.layers[0].attention_free = False
    with torch.no_grad():
        (attending, _, _), _ = cell(changed, cell.init_state(2), lengths)
    assert (attending[0, 1:] - first_changed[0, 1:]).abs().max() > 1e-3  # unflagged, the same layer attends

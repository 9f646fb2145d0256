"""The int8 steps of `gru_step.c` and `tova_step.c` in PyTorch: the references the kernels are tested against."""

from contextlib import contextmanager
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ...models import TF2RNNModel, TF2RNNState
from ...models.tf2rnn.cells_tf2rnn import _WordTailAdapter
from . import int4_codes, quantize_rows


def int8_linear(weight: torch.Tensor, bias: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """weight @ x + bias as the kernel computes it: int8 rows (int4 where the kernel reads them so, `int4_codes`, with
    a scale per row or per 128 columns), the input quantised per call to 8 bits."""
    q, scale, _ = int4_codes(weight) or quantize_rows(weight)
    sx = x.abs().max().clamp(min=1e-30) / 127 if x.abs().max() > 0 else torch.tensor(1.0)
    xq = torch.round(x / sx)
    if scale.dim() == 2:  # each 128 columns' integer sum times its scale
        blocks = (q.double().reshape(q.shape[0], -1, 128) * xq.double().reshape(-1, 128)).sum(-1)
        return (blocks * scale.double()).sum(-1).float() * sx + bias
    return (q.double() @ xq.double()).float() * scale * sx + bias


@torch.no_grad()
def int8_gru_step(model: TF2RNNModel, token: int, state: TF2RNNState) -> Tuple[torch.Tensor, torch.Tensor]:
    """(embedding [1, O], new h [H]) after one token of a one-layer GRU student, in the kernel's arithmetic."""
    gru, hidden = model.cell.layers[0], model.config.hidden_size
    x, h = model.embeddings.weight[token], state.cell_state[0].reshape(-1)
    gi, gh = int8_linear(gru.weight_ih_l0, gru.bias_ih_l0, x), int8_linear(gru.weight_hh_l0, gru.bias_hh_l0, h)
    r = torch.sigmoid(gi[:hidden] + gh[:hidden])
    z = torch.sigmoid(gi[hidden:2 * hidden] + gh[hidden:2 * hidden])
    h_new = (1 - z) * torch.tanh(gi[2 * hidden:] + r * gh[2 * hidden:]) + z * h
    raw = int8_linear(model.readout.weight, model.readout.bias, h_new)
    if model.config.residual_token_mean:
        raw = raw + (state.token_sum + x)[0] / (state.seen_tokens + 1)
    return F.normalize(raw, dim=-1)[None], h_new


@contextmanager
def int8_linears(model: nn.Module):
    """Inside, every nn.Linear of `model` (and a tail_layers student's adapter) computes its rows one by one as the
    kernels do (`int8_linear`)."""
    linears = [m for m in model.modules() if isinstance(m, (nn.Linear, _WordTailAdapter))]

    def rows(m, x):
        flat = x.reshape(-1, x.shape[-1])
        return torch.stack([int8_linear(m.weight, m.bias, row) for row in flat]).reshape(*x.shape[:-1], -1)

    for m in linears:
        m.forward = lambda x, m=m: rows(m, x)
    try:
        yield model
    finally:
        for m in linears:
            del m.forward


@torch.no_grad()
def int8_tova_step(model: TF2RNNModel, token: int, state: TF2RNNState) -> Tuple[torch.Tensor, TF2RNNState]:
    """(embedding [1, O], new state) after one token of a `tova_attention` student, in the kernel's
    arithmetic: the model's own step with its linear layers in int8."""
    with int8_linears(model):
        return model.step_reference(torch.tensor([token]), state)


@torch.no_grad()
def int8_tova_step_deferred(model: TF2RNNModel, token: int, state: TF2RNNState, begins_word: bool = True
                            ) -> Tuple[torch.Tensor, TF2RNNState]:
    """`tf2rnn_tova_step_deferred`'s arithmetic: the model's `step_deferred_reference` with its linear layers (and the
    adapter) in int8."""
    with int8_linears(model):
        return model.step_deferred_reference(torch.tensor([token]), state, begins_word)


@torch.no_grad()
def int8_tova_commit(model: TF2RNNModel, state: TF2RNNState) -> Tuple[torch.Tensor, TF2RNNState]:
    """`tf2rnn_tova_commit`'s arithmetic: the model's `commit_word_reference` with its linear layers in int8."""
    with int8_linears(model):
        return model.commit_word_reference(state)

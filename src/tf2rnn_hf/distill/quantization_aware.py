"""Quantisation-aware training: the student's linear weights rounded to symmetric int-N in every forward.

A keystroke of an inherited student is bound by the int8 weights it reads, and int4 products read half the bytes
(benchmarks/probes/int4_gemv.c times them), but rounding a trained student to int4 afterwards costs 0.015-0.07 final
cosine (benchmarks/quality/weight_bits.py). Training through the rounding lets the weights settle where it costs
least. The forward sees the rounded weight and the gradient passes to the latent fp32 one unchanged (the
straight-through estimator); the student is saved with the rounded values, so its plain fp32 forward is the one that
was trained, and the fused step reads them as int4 (`inference/kernels`). The trainer keeps the readout unrounded.
A row's scale clipped below its largest value (`clip_ratios`) rounds a trained weight closer, and after training that
pays; trained through at a fixed ratio, it cost more than it bought (docs/experiments.md, session 55). A learned scale
(`learned_scale`, after LSQ: Esser et al. 2020) starts at that ratio and trains with the weights, the values it clips
getting no gradient.
"""

from typing import Dict, List, Optional, Sequence

import torch
from torch import nn
from torch.nn.utils import parametrize


def round_weight(weight: torch.Tensor, bits: int, group: Optional[int] = None,
                 clip: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`weight` [rows, cols] rounded to symmetric `bits`-bit integers (levels -(2^(bits-1) - 1) .. 2^(bits-1) - 1),
    one scale per `group` columns of each row (None: per row), returned as floats on that grid. Each scale spans the
    block's largest magnitude, or that times `clip` ([rows, blocks, 1], as `clip_ratios` returns), the rest clipped."""
    if bits >= 32:
        return weight.clone()
    if bits < 2:
        raise ValueError(f"Symmetric rounding needs at least 2 bits, got {bits}.")
    rows, cols = weight.shape
    if group is not None and (group < 1 or cols % group):
        raise ValueError(f"{cols} columns do not split into groups of {group}.")
    blocks = weight.reshape(rows, -1, group or cols)
    qmax = 2 ** (bits - 1) - 1
    scale = blocks.abs().amax(-1, keepdim=True).clamp(min=1e-12) / qmax
    if clip is not None:
        scale = scale * clip
    return (torch.round(blocks / scale).clamp(-qmax, qmax) * scale).reshape(rows, cols)


CLIP_RATIOS = tuple(round(1 - 0.05 * i, 2) for i in range(15))  # 1.0 down to 0.3: a trained two-layer student's
# best int4 ratios are 0.65-0.88 for most rows, and reach 0.5 in its down projections


def clip_ratios(weight: torch.Tensor, bits: int, group: Optional[int] = None) -> torch.Tensor:
    """Each block's ratio among `CLIP_RATIOS` whose `round_weight` leaves the least squared error ([rows, blocks, 1]).
    With 15 levels a row's few largest values set a coarse step for all the others; clipping them is usually cheaper
    for a weight rounded after training (weight_bits.py). Not for training through: there the straight-through
    gradient keeps moving the clipped values it cannot see (0.003 final cosine lost against each row's maximum)."""
    rows, cols = weight.shape
    size = group or cols
    best = best_error = None
    for ratio in CLIP_RATIOS:
        clip = torch.full((rows, cols // size, 1), ratio, dtype=weight.dtype, device=weight.device)
        error = (round_weight(weight, bits, group, clip) - weight).reshape(rows, -1, size).square().sum(-1, True)
        if best is None:
            best, best_error = clip, error
        else:  # strictly less: a tie keeps the larger ratio, so a weight on the grid already stays where it is
            better = error < best_error
            best, best_error = torch.where(better, clip, best), torch.where(better, error, best_error)
    return best


class RoundedWeight(nn.Module):
    """A parametrization: the weight as `round_weight` leaves it, with the gradient of the unrounded one.

    With `learned_scale` (the weight it starts from) each block's scale is a parameter (`scale` [rows, blocks, 1]),
    started at `clip_ratios`' least-squares clip and trained by the straight-through gradient of the rounding (LSQ);
    values beyond the clip get none. A scale never exceeds its block's largest magnitude over the top level, so the
    largest value sits on that level and the saved weight is on the grid `quantize_rows4` reads (one scale a row, or
    per 128 columns)."""

    def __init__(self, bits: int, group: Optional[int] = None, learned_scale: Optional[torch.Tensor] = None):
        super().__init__()
        self.bits, self.group = bits, group
        self.scale = None
        if learned_scale is not None:
            w = learned_scale.detach().float()
            anchor = self._anchor(w)
            self.scale = nn.Parameter((anchor * clip_ratios(w, bits, group)).to(learned_scale.dtype))

    def _anchor(self, weight: torch.Tensor) -> torch.Tensor:
        """Each block's largest magnitude over the top level: `round_weight`'s scale ([rows, blocks, 1])."""
        qmax = 2 ** (self.bits - 1) - 1
        return weight.reshape(weight.shape[0], -1, self.group or weight.shape[1]).abs().amax(-1, keepdim=True) \
            .clamp(min=1e-12) / qmax

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        if self.scale is None:
            return weight + (round_weight(weight.detach(), self.bits, self.group) - weight.detach())
        qmax = 2 ** (self.bits - 1) - 1
        scale = torch.minimum(self.scale.abs(), self._anchor(weight.detach()))
        levels = (weight.reshape(*scale.shape[:2], -1) / scale).clamp(-qmax, qmax)
        return ((levels + (levels.round() - levels).detach()) * scale).reshape(weight.shape)


def round_linear_weights(model: nn.Module, bits: int, group: Optional[int] = None,
                         keep: Sequence[str] = (), learned_scale: bool = False) -> List[str]:
    """Make every `nn.Linear` of `model` run on its weight rounded to int-`bits` (`RoundedWeight`, its scales learned
    with `learned_scale`), except those named in `keep` (a module's name, its name's last part, or a module above it)
    and those under them; returns their names. The token table is an embedding and stays fp32, as the int8 kernels
    keep it. The modules still load a plain state (`weight`, as `plain_state_dict` writes it) into their latent
    weights."""
    if has_rounded_weights(model):
        raise ValueError(f"{type(model).__name__} rounds its linear weights already (round_linear_weights ran).")
    recurrent = [(name, type(m).__name__) for name, m in model.named_modules() if isinstance(m, nn.RNNBase)]
    if recurrent:  # its gate weights would stay fp32 while the readout rounds: not the int-N student asked for
        raise ValueError(f"Rounded weights cover nn.Linear layers only; {recurrent[0][0]!r} is a {recurrent[0][1]}, "
                         "whose weights would stay unrounded. Use an attention-like cell (tova_attention).")
    def kept(name: str, k: str) -> bool:
        return name == k or name.startswith(k + ".") or name.rsplit(".", 1)[-1] == k

    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    unmatched = [k for k in keep if not any(kept(name, k) for name in linears)]
    if unmatched:  # a misspelt name would round what the caller meant to keep
        raise ValueError(f"keep names {unmatched}, which match no linear layer of {type(model).__name__}.")
    names = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and not any(kept(name, k) for k in keep):
            round_weight(module.weight.detach(), bits, group)  # a group that does not divide the row fails here
            parametrize.register_parametrization(
                module, "weight", RoundedWeight(bits, group, module.weight if learned_scale else None))
            module.register_load_state_dict_pre_hook(_load_plain_weight)
            names.append(name)
    if not names:
        raise ValueError(f"{type(model).__name__} has no nn.Linear weights to round.")
    return names


def _load_plain_weight(module, state_dict, prefix, *args) -> None:
    if prefix + "weight" in state_dict and prefix + _LATENT not in state_dict:
        state_dict[prefix + _LATENT] = state_dict.pop(prefix + "weight")


_LATENT = "parametrizations.weight.original"  # where a parametrized module keeps its unrounded weight
_SCALE = "parametrizations.weight.0.scale"  # a learned scale (RoundedWeight's)


def is_learned_scale(name: str) -> bool:
    """Whether a state entry is a learned scale of `RoundedWeight` (a checkpoint's, which a plain student has not)."""
    return name == _SCALE or name.endswith("." + _SCALE)


def has_rounded_weights(model: nn.Module) -> bool:
    """Whether `round_linear_weights` applies to some module of `model`."""
    return any(isinstance(m, nn.Linear) and parametrize.is_parametrized(m, "weight") for m in model.modules())


def plain_state_dict(model: nn.Module, rounded: bool) -> Dict[str, torch.Tensor]:
    """`model`'s state under its plain names (`weight`, not the parametrization's): each weight rounded, as the
    forward uses it (what a saved student holds), or latent (what a checkpoint holds, to resume training from, with
    the learned scales)."""
    state = {}
    for name, tensor in model.state_dict().items():
        if rounded and is_learned_scale(name):
            continue  # in the rounded weight already
        if name == _LATENT or name.endswith("." + _LATENT):
            owner = name[:-len(_LATENT)].rstrip(".")
            plain = f"{owner}.weight" if owner else "weight"
            state[plain] = model.get_submodule(owner).weight.detach() if rounded else tensor
        else:
            state[name] = tensor
    return state

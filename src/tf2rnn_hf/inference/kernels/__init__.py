"""A keystroke in one native call: the int8 steps of `gru_step.c` (one-layer GRU students) and
`tova_step.c` (`tova_attention` students), with their PyTorch references in `naive.py`.

At batch 1, PyTorch spends most of a step dispatching small ops (a GRU keystroke is ~25; an inherited
six-layer student's is ~40 per layer: projections, attention, eviction, norms, the state's tensors);
the arithmetic is a few int8 matrix-vector products. This module compiles each whole step into one C
function (once per machine, cached under the tf2rnn cache folder, with `-march=native` so it uses the
CPU's vector dot products) and calls it through ctypes. Where torch may use two threads or more, a
`tova_attention` keystroke splits its products (rows of each matrix, heads of each attention) with one helper
thread (`pool.h`); it computes the same bytes on one.

`quantize_int8` attaches the one that covers the model (`step_kernel_for`) as its `step_kernel`:
`model.step` then runs single rows here and batches through PyTorch's int8 modules. Needs a C compiler
(`cc`, or `$CC`); without one the int8 model simply runs through PyTorch. Weights are int8 per output
row, activations are quantised per call: tests/inference/test_kernels.py holds each kernel to 1e-4 of the
same int8 arithmetic written in PyTorch (`naive.py`) and its streams, after edits, close to the fp32
model run from scratch. A `tova_attention` student trained through int4 weights (`--weight_bits 4`) has its layers'
on a 4-bit grid already (its readout stays fp32): on CPUs with AVX512-VNNI or AVX2 each product whose weights are on
the grid reads them as int4 (`quantize_rows4`), half the bytes, with one scale a row or, trained with
`--weight_group 128`, one per 128 columns (`int8.h`'s gemv4_groups; 6% more bytes at 384 columns).
A `tail_layers` student's keystroke runs its lower layers (`tf2rnn_tova_step_deferred`) and a word's end the upper
ones (`tf2rnn_tova_commit`; with `tail_open_tokens`, `tf2rnn_tova_commit_open`: the word joins the upper layers' open
block, whose full blocks enter the caches).
"""

import ctypes
import hashlib
import logging
import math
import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Tuple

import torch

from ...models import TF2RNNModel, TF2RNNState
from ...models.tf2rnn.cells_tf2rnn import TOVAAttentionCell
from ...utils import cpu_flags, default_cache_dir

logger = logging.getLogger(__name__)
SOURCES = [Path(__file__).parent / name for name in ("gru_step.c", "tova_step.c", "pool.c")]
HEADERS = [Path(__file__).parent / name for name in ("int8.h", "pool.h")]


class _Params(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in ("E", "H", "O", "residual")] + [
        (name, ctypes.c_void_p) for name in ("table", "w_ih", "s_ih", "r_ih", "b_ih", "w_hh", "s_hh", "r_hh",
                                             "b_hh", "w_o", "s_o", "r_o", "b_o")]


class _TOVAParams(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in ("H", "L", "heads", "S", "P", "I", "O", "residual",
                                                    "weighted", "upper_open")] + [
        ("eps", ctypes.c_float), ("pool_exp", ctypes.c_float)] + [(name, ctypes.c_void_p) for name in (
            "table", "position", "emb_bias", "emb_norm_w", "emb_norm_b",
            "w_qkv", "s_qkv", "r_qkv", "b_qkv", "w_out", "s_out", "r_out", "b_out",
            "w_up", "s_up", "r_up", "b_up", "w_down", "s_down", "r_down", "b_down",
            "norm1_w", "norm1_b", "norm2_w", "norm2_b", "sink_key", "sink_value", "sink_output",
            "w_o", "s_o", "r_o", "b_o", "w4_qkv", "w4_out", "w4_up", "w4_down", "w4_o",
            "g_qkv", "g_out", "g_up", "g_down", "g_o")] + [
        (name, ctypes.c_uint32) for name in ("l4_qkv", "l4_out", "l4_up", "l4_down")]


def find_compiler() -> Optional[str]:
    """The C compiler the kernels build with: `$CC`, else cc, gcc or clang on PATH; None without one."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


@lru_cache(maxsize=None)
def load_library() -> Optional[ctypes.CDLL]:
    """The compiled kernel (built on first use), or None where no C compiler is available."""
    # -march=native code runs only on CPUs like this one: the cache key holds the CPU's flags.
    code = b"".join(f.read_bytes() for f in SOURCES + HEADERS)
    key = hashlib.sha256(code + cpu_flags().encode() + platform.machine().encode()).hexdigest()[:16]
    target = Path(default_cache_dir()) / "kernels" / f"steps-{key}.so"
    if not target.is_file():
        cc = find_compiler()
        if cc is None:
            logger.warning("No C compiler found: int8 keystrokes run through PyTorch (slower). Set CC to use one.")
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        cmd = [cc, "-O3", "-march=native", "-shared", "-fPIC", "-pthread", *map(str, SOURCES), "-o", str(tmp), "-lm"]
        build = subprocess.run(cmd, capture_output=True, text=True)
        if build.returncode != 0:
            logger.warning("Building the fused keystroke kernel failed (%s); int8 keystrokes run through "
                           "PyTorch.\n%s", " ".join(cmd), build.stderr[-2000:])
            return None
        os.replace(tmp, target)  # atomic: concurrent builders never load a half-written library
    lib = ctypes.CDLL(str(target))
    lib.tf2rnn_gru_step.restype = None
    lib.tf2rnn_gru_step.argtypes = [ctypes.POINTER(_Params), ctypes.c_int64] + [ctypes.c_void_p] * 6
    lib.tf2rnn_tova_step.restype = None
    lib.tf2rnn_tova_step.argtypes = [ctypes.POINTER(_TOVAParams), ctypes.c_int64] + [ctypes.c_void_p] * 9
    lib.tf2rnn_set_threads.restype = None
    lib.tf2rnn_set_threads.argtypes = [ctypes.c_int]
    lib.tf2rnn_pool_prewake.restype = None
    lib.tf2rnn_pool_prewake.argtypes = []
    lib.tf2rnn_pool_hold.restype = None
    lib.tf2rnn_pool_hold.argtypes = [ctypes.c_int]
    lib.tf2rnn_helper_waited_ns.restype = ctypes.c_longlong
    lib.tf2rnn_helper_waited_ns.argtypes = []
    lib.tf2rnn_tova_open_step.restype = None
    lib.tf2rnn_tova_open_step.argtypes = [ctypes.POINTER(_TOVAParams), ctypes.c_int64, ctypes.c_int32] + [
        ctypes.c_void_p] * 9
    lib.tf2rnn_tova_step_many.restype = None
    lib.tf2rnn_tova_step_many.argtypes = [ctypes.POINTER(_TOVAParams), ctypes.c_int32] + [ctypes.c_void_p] * 10
    lib.tf2rnn_int4_products.restype = ctypes.c_int
    lib.tf2rnn_int4_products.argtypes = []
    lib.tf2rnn_tova_step_deferred.restype = None
    lib.tf2rnn_tova_step_deferred.argtypes = [ctypes.POINTER(_TOVAParams), ctypes.c_int64, ctypes.c_int32,
                                              ctypes.c_int32] + [ctypes.c_void_p] * 15
    lib.tf2rnn_tova_commit_open.restype = None
    lib.tf2rnn_tova_commit_open.argtypes = [ctypes.POINTER(_TOVAParams), ctypes.c_int32, ctypes.c_int32] + [
        ctypes.c_void_p] * 9
    lib.tf2rnn_tova_commit.restype = None
    lib.tf2rnn_tova_commit.argtypes = [ctypes.POINTER(_TOVAParams), ctypes.c_int32, ctypes.c_int32] + [
        ctypes.c_void_p] * 9
    lib.tf2rnn_tova_restore.restype = None
    lib.tf2rnn_tova_restore.argtypes = [ctypes.c_void_p] + [ctypes.c_int32] * 4 + [ctypes.c_void_p] * 2
    return lib


def quantize_rows(weight: torch.Tensor):
    """Symmetric int8 per output row: (int8 [rows, cols], fp32 scales [rows], int32 row sums [rows])."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
    return q, scale.contiguous(), q.sum(dim=1, dtype=torch.int32).contiguous()


def quantize_rows4(weight: torch.Tensor) -> Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """A weight on a symmetric 4-bit grid already as (int8 codes in [-7, 7] [rows, cols], fp32 scales, int32 row sums
    [rows]): scales [rows] where one scale a row puts it there (`--weight_bits 4`'s rounding), else [rows, cols / 128]
    where one per 128 columns does (`--weight_group 128`); None for any other weight (a trained fp32 weight is nowhere
    near such a grid, nor one rounded in smaller groups), or where the columns do not pack in blocks of 128."""
    w = weight.detach().float()
    rows, cols = w.shape
    if cols % 128:
        return None
    for group in (cols, 128):
        scale = w.reshape(rows, -1, group).abs().amax(-1, keepdim=True).clamp(min=1e-12) / 7.0
        steps = w.reshape(rows, -1, group) / scale
        codes = torch.round(steps)
        if (steps - codes).abs().max() <= 1e-3:  # a float ulp or two off the grid, never a step's thousandth
            codes = codes.reshape(rows, cols).to(torch.int8).contiguous()
            scale = scale.reshape(rows, -1)
            return codes, (scale[:, 0] if group == cols else scale).contiguous(), codes.sum(1, dtype=torch.int32)
    return None


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """Codes in [-8, 7] [rows, cols] as int8.h's gemv4_rows reads them: per row and 128 columns, 64 bytes, byte b
    holding column b's code + 8 in its low nibble and column 64 + b's in its high one ([rows, cols / 2] uint8)."""
    rows, cols = codes.shape
    u = (codes.to(torch.int16) + 8).to(torch.uint8).reshape(rows, cols // 128, 2, 64)
    return (u[:, :, 0] | (u[:, :, 1] << 4)).reshape(rows, cols // 2).contiguous()


def int4_codes(weight: torch.Tensor) -> Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """`quantize_rows4(weight)` where the kernels read int4 products on this CPU (AVX512-VNNI or AVX2), else None: the
    one test, for the kernel and its reference in `naive.py`."""
    lib = load_library()
    return quantize_rows4(weight) if lib is not None and lib.tf2rnn_int4_products() else None


def _stacked_product(pairs: List[Tuple[torch.Tensor, torch.Tensor]]) -> Tuple[dict, str, Tuple[int, ...]]:
    """One product's (weight, bias) in every layer as the kernel's arrays: s, r, b [L, ...], the int8 weights w of
    the layers that read them, and, of the layers whose weight is on a 4-bit grid (`int4_codes`), the packed w4 in
    their place and, where some has a scale per 128 columns, g (those scales; one with one a row repeats it) beside
    s (each row's largest, unread); how they are read ("int8", "int4" or "int4/128"), and the layers that read w4.
    Each layer's s and r are those of the form it reads: a student trained with some layers kept off the grid
    (`--weight_keep cell.layers.N`) reads those as int8 and the rest as int4."""
    codes = [int4_codes(w) for w, _ in pairs]
    int4_layers = tuple(k for k, c in enumerate(codes) if c is not None)
    forms = [c or quantize_rows(w) for c, (w, _) in zip(codes, pairs)]  # (codes, scales, row sums) as read
    scales = [f[1] for f in forms]
    arrays = {"r": torch.stack([f[2] for f in forms]), "b": torch.stack([_fp32(b) for _, b in pairs])}
    if len(int4_layers) < len(pairs):
        arrays["w"] = torch.stack([f[0] for f, c in zip(forms, codes) if c is None])
    if int4_layers:
        arrays["w4"] = torch.stack([pack_int4(codes[k][0]) for k in int4_layers])
    if any(s.dim() == 2 for s in scales):  # only int4 layers scale per 128 columns
        blocks = pairs[0][0].shape[1] // 128
        arrays["g"] = torch.stack([scales[k] if scales[k].dim() == 2 else scales[k][:, None].expand(-1, blocks)
                                   for k in int4_layers])
        scales = [s.amax(-1) if s.dim() == 2 else s for s in scales]
    arrays["s"] = torch.stack(scales)
    return arrays, "int4/128" if "g" in arrays else "int4" if int4_layers else "int8", int4_layers


def _fp32(t: torch.Tensor) -> torch.Tensor:
    return t.detach().float().contiguous()


_threads_set = [0]  # what the library was last told (tf2rnn_set_threads is a process-wide setting)


def _follow_torch_threads(lib: ctypes.CDLL) -> None:
    """A fused keystroke splits its products over two threads where torch may use two or more
    (`torch.set_num_threads(1)` keeps it on one); the result is the same either way."""
    threads = torch.get_num_threads()
    if threads != _threads_set[0]:
        lib.tf2rnn_set_threads(threads)
        _threads_set[0] = threads


class _FusedStep:
    """What the fused keystrokes share: the refusals, the library, the sizes and the token check."""

    covers = ""  # the students a subclass covers, for its refusal

    @staticmethod
    def supports(model: TF2RNNModel) -> bool:
        raise NotImplementedError

    def __init__(self, model: TF2RNNModel):
        config = model.config
        if not self.supports(model):
            raise ValueError(f"The fused step covers {self.covers}, not {config.num_hidden_layers} "
                             f"layer(s) of {config.cell_type!r} with readout_hidden_size="
                             f"{config.readout_hidden_size}.")
        if not isinstance(model.readout, torch.nn.Linear) or model.readout.weight.device.type != "cpu":
            raise ValueError("Build the fused step from the fp32 model on CPU (before quantize_int8).")
        self.lib = load_library()
        if self.lib is None:
            raise RuntimeError("The fused keystroke kernel could not be built (no C compiler?).")
        self.hidden_size, self.output_size = config.hidden_size, config.output_size
        self.vocab_size = model.embeddings.weight.shape[0]
        self.residual = bool(config.residual_token_mean)

    def prewake(self) -> None:
        """Wake the helper thread as a keystroke starts, so that its wake-up overlaps the keystroke's Python part
        (`tf2rnn_pool_prewake`); a no-op on one thread."""
        _follow_torch_threads(self.lib)
        self.lib.tf2rnn_pool_prewake()

    def _token(self, input_ids) -> int:
        token_id = int(input_ids)
        if not 0 <= token_id < self.vocab_size:  # the kernel reads the table row unchecked
            raise IndexError(f"Token id {token_id} is outside the vocabulary (size {self.vocab_size}).")
        return token_id


class Int8GRUStep(_FusedStep):
    """One keystroke of a one-layer GRU student at batch 1 in a single native call.

    >>> step = Int8GRUStep(model)          # from the fp32 model (before quantize_int8 replaces its modules)
    >>> emb, state = step(torch.tensor([token_id]), state)  # like model.step(torch.tensor([token_id]), state)
    """

    @staticmethod
    def supports(model: TF2RNNModel) -> bool:
        """Whether the fused step covers this student (a one-layer GRU with a linear readout)."""
        config = model.config
        return config.cell_type == "gru" and config.num_hidden_layers == 1 and config.readout_hidden_size is None

    covers = "one-layer GRU students with a linear readout"

    def __init__(self, model: TF2RNNModel):
        super().__init__(model)
        config, gru = model.config, model.cell.layers[0]
        if not isinstance(gru, torch.nn.GRU):
            raise ValueError("Build the fused step from the fp32 model on CPU (before quantize_int8).")
        keep: List[torch.Tensor] = [_fp32(model.embeddings.weight)]
        pointers = {"table": keep[0].data_ptr()}
        for prefix, weight, bias in (("ih", gru.weight_ih_l0, gru.bias_ih_l0), ("hh", gru.weight_hh_l0, gru.bias_hh_l0),
                                     ("o", model.readout.weight, model.readout.bias)):
            q, scale, rowsum = quantize_rows(weight)
            b = _fp32(bias)
            keep += [q, scale, rowsum, b]  # the struct holds raw pointers: keep the tensors alive
            for name, t in zip(("w", "s", "r", "b"), (q, scale, rowsum, b)):
                pointers[f"{name}_{prefix}"] = t.data_ptr()
        self._keep = keep
        self._params = _Params(E=config.embedding_size, H=config.hidden_size, O=config.output_size,
                               residual=int(self.residual), **pointers)
        self._params_ref = ctypes.byref(self._params)

    def __call__(self, input_ids, state: TF2RNNState):
        """(embedding [1, O], new state) after one token (an int or a one-element tensor); `state` is a
        batch-1 fp32 CPU state."""
        token_id = self._token(input_ids)
        h, tsum = state.cell_state[0], state.token_sum
        if not (h.is_contiguous() and tsum.is_contiguous()):
            h, tsum = h.contiguous(), tsum.contiguous()
        h_out, emb = torch.empty(1, 1, self.hidden_size), torch.empty(1, self.output_size)
        token_sum = torch.empty(1, self.output_size) if self.residual else tsum  # the kernel writes it only then
        seen = state.seen_tokens + 1
        _follow_torch_threads(self.lib)
        self.lib.tf2rnn_gru_step(self._params_ref, token_id, h.data_ptr(), tsum.data_ptr(), seen.data_ptr(),
                                 h_out.data_ptr(), token_sum.data_ptr(), emb.data_ptr())
        return emb, TF2RNNState((h_out,), token_sum, seen, emb)


class Int8TOVAStep(_FusedStep):
    """One keystroke of a `tova_attention` student at batch 1 in a single native call (`tova_step.c`).

    >>> step = Int8TOVAStep(model)          # from the fp32 model (before quantize_int8 replaces its modules)
    >>> emb, state = step(torch.tensor([token_id]), state)  # like model.step(torch.tensor([token_id]), state)
    """

    @staticmethod
    def supports(model: TF2RNNModel) -> bool:
        """Whether the fused step covers this student (a `tova_attention` student of up to 32 layers, as its
        int4 layer masks hold, with a linear readout and no bidirectional pooling; with open tokens,
        `tf2rnn_tova_open_step`; with open tokens in the upper layers only, `tail_open_tokens`, a word's end is
        `tf2rnn_tova_commit_open`)."""
        config = model.config
        return (config.cell_type == "tova_attention" and config.readout_hidden_size is None
                and not config.bidirectional_pooling and config.num_hidden_layers <= 32)

    covers = "tova_attention students of up to 32 layers with a linear readout and no bidirectional pooling"

    def __init__(self, model: TF2RNNModel):
        super().__init__(model)
        config, cell = model.config, model.cell
        self.layers, self.open = len(cell.layers), config.open_tokens
        self.tail_open = getattr(config, "tail_open_tokens", 1)
        layers = cell.layers
        tensors = {
            "table": _fp32(model.embeddings.weight), "position": _fp32(cell.position_embeddings.weight),
            "emb_bias": _fp32(cell.embedding_bias), "emb_norm_w": _fp32(cell.embedding_norm.weight),
            "emb_norm_b": _fp32(cell.embedding_norm.bias), "sink_output": _fp32(cell.sink_output),
        }
        stack = {  # every layer's weights in one [L, ...] array each
            "qkv": [(torch.cat([a.query.weight, a.key.weight, a.value.weight]),
                     torch.cat([a.query.bias, a.key.bias, a.value.bias])) for a in layers],
            "out": [(a.out.weight, a.out.bias) for a in layers],
            "up": [(a.up.weight, a.up.bias) for a in layers],
            "down": [(a.down.weight, a.down.bias) for a in layers],
        }
        read = {}  # each product's weights as the step reads them: int8, int4, or int4 with a scale per 128 columns
        self.int4_layers = {}  # the layers reading each product as int4 (all but those --weight_keep named)
        for name, pairs in stack.items():
            arrays, read[name], self.int4_layers[name] = _stacked_product(pairs)
            tensors.update({f"{prefix}_{name}": t for prefix, t in arrays.items()})
        arrays, read["o"], _ = _stacked_product([(model.readout.weight, model.readout.bias)])
        tensors.update({f"{prefix}_o": t[0] for prefix, t in arrays.items()})  # one [O, H] matrix
        self.int4 = tuple(name for name, kind in read.items() if kind != "int8")  # of qkv, out, up, down, o
        self.int4_groups = tuple(name for name, kind in read.items() if kind == "int4/128")  # those scaled per 128
        for name, get in (("norm1_w", lambda a: a.attention_norm.weight), ("norm1_b", lambda a: a.attention_norm.bias),
                          ("norm2_w", lambda a: a.output_norm.weight), ("norm2_b", lambda a: a.output_norm.bias),
                          ("sink_key", lambda a: a.sink_key), ("sink_value", lambda a: a.sink_value)):
            tensors[name] = torch.stack([_fp32(get(a)) for a in layers]).contiguous()
        self._keep = tensors  # the struct holds raw pointers: keep the tensors alive
        self._params = _TOVAParams(
            H=config.hidden_size, L=self.layers, heads=config.num_attention_heads, S=config.num_slots,
            P=config.max_position_embeddings, I=config.intermediate_size, O=config.output_size,
            residual=int(self.residual), eps=config.layer_norm_eps, upper_open=self.tail_open,
            weighted=int(cell.pooling_exponent is not None),
            pool_exp=cell.pooling_exponent.item() if cell.pooling_exponent is not None else 0.0,
            **{name: t.data_ptr() for name, t in tensors.items()},
            **{f"l4_{name}": sum(1 << k for k in layers) for name, layers in self.int4_layers.items()})
        self._params_ref = ctypes.byref(self._params)
        # Open tokens commit a block of rows every `open` steps (tf2rnn_tova_open_step), a causal step one row.
        self._native, self._first = (self.lib.tf2rnn_tova_open_step, (self.open,)) if self.open > 1 else \
            (self.lib.tf2rnn_tova_step, ())
        self._shapes = model.cell.state_shapes()
        self._pointers = ctypes.c_void_p * len(self._shapes)
        self.small = TOVAAttentionCell.rewritten_entries(self.layers, len(self._shapes))
        self._record_small = [math.prod(self._shapes[i]) for i in self.small]
        self._record_offsets = [sum(self._record_small[:k]) for k in range(len(self.small))]
        self._record_emb = sum(self._record_small)  # then the token sum (residual students), then the rows
        self._record_tsum = self._record_emb + self.output_size
        self._record_head = self._record_tsum + (self.output_size if self.residual else 0)
        self._small_bytes = [4 * o for o in self._record_offsets]
        self._layouts = {}
        self.tail_layers = config.tail_layers
        if self.tail_layers is not None:  # the adapter in int8 per row (tf2rnn_tova_step_deferred)
            self._adapter = (*quantize_rows(cell.tail_adapter.weight), _fp32(cell.tail_adapter.bias))
            self._adapter_pointers = tuple(t.data_ptr() for t in self._adapter)
        # A word's end: one row a token into each upper layer, or with `tail_open_tokens` the open block's commits
        # (the same arguments).
        self._commit = self.lib.tf2rnn_tova_commit_open if self.tail_open > 1 else self.lib.tf2rnn_tova_commit

    def __call__(self, input_ids, state: TF2RNNState):
        """(embedding [1, O], new state) after one token (an int or a one-element tensor); `state` is a
        batch-1 fp32 CPU state, left unchanged."""
        if self.tail_open > 1:  # each token a word of its own, as `TOVAAttentionCell._step_all` runs it
            return self.commit_word(self.step_deferred(input_ids, state)[1])
        token_id = self._token(input_ids)
        old = [t if t.is_contiguous() else t.contiguous() for t in state.cell_state]
        new = [torch.empty((1, *shape)) for shape in self._shapes]
        tsum = state.token_sum if state.token_sum.is_contiguous() else state.token_sum.contiguous()
        token_sum = torch.empty(1, self.output_size) if self.residual else tsum  # written only then
        emb, seen = torch.empty(1, self.output_size), state.seen_tokens + 1
        _follow_torch_threads(self.lib)
        self._native(self._params_ref, token_id, *self._first, self._pointers(*(t.data_ptr() for t in old)),
                     self._pointers(*(t.data_ptr() for t in new)), None, None, None,
                     tsum.data_ptr(), seen.data_ptr(), token_sum.data_ptr(), emb.data_ptr())
        return emb, TF2RNNState(tuple(new), token_sum, seen, emb)

    def step_deferred(self, input_ids, state: TF2RNNState, begins_word: bool = True):
        """`TF2RNNModel.step_deferred` at batch 1 in one native call (two where `begins_word` first commits the word
        held): (the second embedding [1, O], the new state). The new state's lower layers are new tensors; the upper
        layers' and the pooling's are `state`'s own, which stays unchanged."""
        if self.tail_layers is None:
            raise ValueError("step_deferred steps a student with config.tail_layers; this one has none.")
        token_id = self._token(input_ids)
        if begins_word and state.held_tokens:
            state = self.commit_word(state)[1]
        k, held_n = self.tail_layers, state.held_tokens
        old = [t if t.is_contiguous() else t.contiguous() for t in state.cell_state]
        new = [torch.empty((1, *shape)) if i < 3 * k else t for i, (shape, t) in enumerate(zip(self._shapes, old))]
        held = torch.empty(1, held_n + 1, self.hidden_size)  # the kernel copies the word's earlier outputs in
        earlier = state.held_outputs.contiguous() if held_n else None  # alive until the native call
        held_in = earlier.data_ptr() if held_n else None
        tsum = state.token_sum if state.token_sum.is_contiguous() else state.token_sum.contiguous()
        token_sum = torch.empty(1, self.output_size) if self.residual else tsum
        emb, seen = torch.empty(1, self.output_size), state.seen_tokens + 1
        _follow_torch_threads(self.lib)
        self.lib.tf2rnn_tova_step_deferred(
            self._params_ref, token_id, k, held_n, held_in, held.data_ptr(), *self._adapter_pointers,
            self._pointers(*(t.data_ptr() for t in old)), self._pointers(*(t.data_ptr() for t in new)), None, None,
            None, tsum.data_ptr(), seen.data_ptr(), token_sum.data_ptr(), emb.data_ptr())
        return emb, TF2RNNState(tuple(new), token_sum, seen, emb, held)

    def commit_word(self, state: TF2RNNState):
        """`TF2RNNModel.commit_word` at batch 1 in one native call: (the full embedding [1, O], the state holding no
        word, whose lower layers are `state`'s own tensors)."""
        if not state.held_tokens:
            return state.last_embedding, state
        k = 3 * self.tail_layers
        old = [t if t.is_contiguous() else t.contiguous() for t in state.cell_state]
        new = [t if i < k else torch.empty((1, *shape)) for i, (shape, t) in enumerate(zip(self._shapes, old))]
        held = state.held_outputs.contiguous()
        tsum = state.token_sum if state.token_sum.is_contiguous() else state.token_sum.contiguous()
        emb = torch.empty(1, self.output_size)
        _follow_torch_threads(self.lib)
        self._commit(self._params_ref, self.tail_layers, held.shape[1], held.data_ptr(),
                     self._pointers(*(t.data_ptr() for t in old)), self._pointers(*(t.data_ptr() for t in new)), None,
                     None, None, tsum.data_ptr(), state.seen_tokens.data_ptr(), emb.data_ptr())
        return emb, TF2RNNState(tuple(new), state.token_sum, state.seen_tokens, emb)

    # A deferring stream (`BatchStreamingEncoder` with `defer_words`) on a live cache: each step one record, as
    # `step_live`'s: `small`'s entries, the embedding, the token sum (residual students), then for a step of the lower
    # layers the word's held outputs [held + 1, H], its rows [K, 2, H], slots [K] and the rows they replaced [K, 2, H];
    # for a commit, in groups of tokens written together: a causal student's n tokens one at a time, a
    # `tail_open_tokens` student's full blocks of W (their number first, as int32 bits), the rows [groups, L - K,
    # width, 2, H], slots [groups, L - K, width] and replaced rows [groups, L - K, width, 2, H].

    def _deferred_layout(self, commit: bool, n: int):
        """(record type, offsets in floats of held outputs (None for a commit), rows, slots, replaced rows) for the
        lower layers' step from a state holding `n` tokens of a word, or for a commit writing `n` groups of rows
        (`_commit_groups`)."""
        key = ("commit" if commit else "deferred", n)
        layout = self._layouts.get(key)
        if layout is None:
            h, k = self.hidden_size, self.tail_layers
            layers, count = (self.layers - k, n * self.tail_open) if commit else (k, 1)
            held = None if commit else self._record_head
            rows = self._record_head + (self.tail_open > 1) if commit else held + (n + 1) * h
            slots = rows + count * layers * 2 * h
            replaced = slots + count * layers
            layout = self._layouts[key] = (ctypes.c_float * (replaced + count * layers * 2 * h), held, rows, slots,
                                           replaced)
        return layout

    def _commit_groups(self, record: ctypes.Array, n: int) -> Tuple[int, int]:
        """(groups, their width) of the rows a commit of `n` tokens wrote: n tokens of one row a layer, or the
        blocks of `tail_open_tokens` rows that it committed (as many as its record says)."""
        if self.tail_open == 1:
            return n, 1
        return ctypes.c_int32.from_buffer(record, 4 * self._record_head).value, self.tail_open

    def _deferred_record(self, kv, small: List[int], commit: bool, n: int):
        """A new record for a deferring stream's live step, `kv`'s entries for `small` pointed at the parent's and the
        record's: (record, its address, layout)."""
        layout = self._deferred_layout(commit, n)
        record = layout[0]()
        base = ctypes.addressof(record)
        ins, outs = kv
        for i, a, o in zip(self.small, small, self._small_bytes):
            ins[i], outs[i] = a, base + o
        return record, base, layout

    def step_deferred_live(self, input_ids, kv: Tuple[ctypes.Array, ctypes.Array], small: List[int], token_sum: int,
                           seen: int, held: Optional[int], held_n: int) -> ctypes.Array:
        """`step_deferred` of a stream's live cache (`kv`, its `cache_pointers`), in place, as `step_live`: the
        parent's small entries, token sum and `held_n` held outputs (at `held`) read where they are. Returns the
        record."""
        token_id = self._token(input_ids)
        record, base, (_, held_at, rows, slots, replaced) = self._deferred_record(kv, small, False, held_n)
        _follow_torch_threads(self.lib)
        self.lib.tf2rnn_tova_step_deferred(
            self._params_ref, token_id, self.tail_layers, held_n, held, base + 4 * held_at, *self._adapter_pointers,
            *kv, base + 4 * rows, base + 4 * slots, base + 4 * replaced, token_sum,
            ctypes.byref(ctypes.c_int64(seen + 1)), base + 4 * self._record_tsum if self.residual else token_sum,
            base + 4 * self._record_emb)
        return record

    def commit_live(self, kv: Tuple[ctypes.Array, ctypes.Array], small: List[int], token_sum: int, seen: int,
                    held: int, n: int) -> ctypes.Array:
        """`commit_word` of a stream's live cache for its `n` held outputs (at `held`), in place. Returns the
        record."""
        groups = n
        if self.tail_open > 1:  # the blocks the word fills, after the open tokens the parent holds
            opened = ctypes.c_float.from_address(small[self.small.index(3 * self.layers + 1)]).value
            groups = (int(opened) + n) // self.tail_open
        record, base, (_, _, rows, slots, replaced) = self._deferred_record(kv, small, True, groups)
        if self.tail_open > 1:
            ctypes.c_int32.from_buffer(record, 4 * self._record_head).value = groups
        _follow_torch_threads(self.lib)
        self._commit(self._params_ref, self.tail_layers, n, held, *kv, base + 4 * rows, base + 4 * slots,
                     base + 4 * replaced, token_sum, ctypes.byref(ctypes.c_int64(seen)), base + 4 * self._record_emb)
        if self.residual:  # the word is in the token sum already: the record keeps it for the steps after
            ctypes.memmove(base + 4 * self._record_tsum, token_sum, 4 * self.output_size)
        return record

    def deferred_views(self, record: ctypes.Array, commit: bool, n: int):
        """A deferring record's parts as tensors (views): (`small`'s entries, embedding [1, O], token sum [1, O] or
        None, held outputs [1, n + 1, H] or None for a commit, and each layer's writes, newest first: (slot, key and
        value row [2, H]) lists)."""
        groups, width = self._commit_groups(record, n) if commit else (1, 1)
        _, held_at, rows, slots, replaced = self._deferred_layout(commit, groups if commit else n)
        t = torch.frombuffer(record, dtype=torch.float32)
        small = [t[o:o + m].view(1, *self._shapes[i])
                 for o, m, i in zip(self._record_offsets, self._record_small, self.small)]
        emb = t[self._record_emb:self._record_emb + self.output_size].view(1, -1)
        token_sum = t[self._record_tsum:self._record_head].view(1, -1) if self.residual else None
        h, k = self.hidden_size, self.tail_layers
        layers = self.layers - k if commit else k
        row = t[rows:slots].view(groups, layers, width, 2, h)
        slot = t[slots:replaced].view(torch.int32).view(groups, layers, width).tolist()
        writes = [[] for _ in range(self.layers)]
        for g in reversed(range(groups)):
            for j in reversed(range(width)):
                for layer in range(layers):
                    writes[layer + (k if commit else 0)].append((slot[g][layer][j], row[g, layer, j]))
        held = None if commit else t[held_at:rows].view(1, n + 1, h)
        return small, emb, token_sum, held, writes

    def restore_deferred(self, kv: torch.Tensor, record: ctypes.Array, commit: bool, n: int) -> None:
        """Undo a deferring record's step on the live cache `kv` ([layers, 2, 1, S, H]): a commit's groups of rows
        newest first (a later token may have evicted an earlier one's row)."""
        groups, width = self._commit_groups(record, n) if commit else (1, 1)
        _, _, rows, slots, replaced = self._deferred_layout(commit, groups if commit else n)
        base, h, k, s = ctypes.addressof(record), self.hidden_size, self.tail_layers, kv.shape[-2]
        if not commit:
            self.lib.tf2rnn_tova_restore(kv.data_ptr(), k, 1, s, h, base + 4 * slots, base + 4 * replaced)
            return
        upper, at = self.layers - k, kv.data_ptr() + 4 * k * 2 * s * h
        for g in reversed(range(groups)):
            self.lib.tf2rnn_tova_restore(at, upper, width, s, h, base + 4 * (slots + g * upper * width),
                                         base + 4 * (replaced + g * upper * width * 2 * h))

    def rows_written(self, held: int) -> int:
        """Rows a layer the next step commits from a state holding `held` open tokens: one (causal), the block
        (`open_tokens`) when this token completes it, else none."""
        if self.open == 1:
            return 1
        return self.open if held + 1 == self.open else 0

    # A keystroke of one stream (`BatchStreamingEncoder`) allocates one record and makes one native call: whole
    # tensors, views and a state object per step cost more than a one-layer student's arithmetic (the
    # keystroke-overhead probe). The record is fp32: each of `small`'s entries, the embedding [O], the token sum
    # [O] (residual students), then, where the step commits rows, the rows [L, m, 2, H], their slots [L, m]
    # (int32 bits) and, where they overwrite rows in use, the rows replaced [L, m, 2, H]. It is a ctypes array, not
    # a tensor: a typist's keystroke follows an idle gap in which the caches went cold, and there each torch call
    # (dispatch, allocator) cost ~60-120 us against ~30 for a ctypes array (experiments.md, session 39); `record_views`
    # makes tensors of it only where a state is rebuilt.

    def _layout(self, width: int, overwrites: bool):
        """(the record's array type, byte offsets of its rows, their slots and the rows replaced, each None where the
        step writes none) for a step writing `width` rows a layer: a handful of layouts, each built once."""
        layout = self._layouts.get((width, overwrites))
        if layout is None:
            head, block, size = self._record_sizes(width, overwrites)
            rows, slots = (4 * head, 4 * (head + block)) if width else (None, None)
            replaced = slots + 4 * self.layers * width if width and overwrites else None
            layout = self._layouts[(width, overwrites)] = (ctypes.c_float * size, rows, slots, replaced)
        return layout

    def _record_sizes(self, width: int, overwrites: bool):
        """(where the rows start, their size, the record's size), in floats."""
        block = self.layers * width * 2 * self.hidden_size
        return self._record_head, block, \
            self._record_head + block + self.layers * width + (block if width and overwrites else 0)

    def record_pointers(self, record: ctypes.Array):
        """(pointers of `small`'s entries, of the token sum) in a record: what a step from it reads."""
        base = ctypes.addressof(record)
        return [base + o for o in self._small_bytes], base + 4 * self._record_tsum

    def cache_pointers(self, kv: torch.Tensor) -> Tuple[ctypes.Array, ctypes.Array]:
        """The state pointers `step_live` reads and writes over a live cache `kv` ([layers, 2, 1, S, H],
        contiguous): (inputs, outputs), two native arrays holding each layer's keys and values, whose `small`
        entries each step sets (building the two arrays cost a one-layer keystroke more than setting them)."""
        if not kv.is_contiguous() or kv.dtype != torch.float32:
            raise ValueError("A live cache is one contiguous fp32 tensor [layers, 2, 1, slots, hidden].")
        ins = self._pointers()
        for layer in range(self.layers):
            ins[3 * layer], ins[3 * layer + 1] = kv[layer, 0].data_ptr(), kv[layer, 1].data_ptr()
        return ins, self._pointers(*ins)

    def step_live(self, input_ids, kv: Tuple[ctypes.Array, ctypes.Array], small: List[int], token_sum: int, seen: int,
                  width: int, overwrites: bool) -> ctypes.Array:
        """One step written into a cache the caller owns: `kv` is its `cache_pointers`, `small` and `token_sum`
        point to the parent state's other entries, `seen` counts its tokens and `width` is `rows_written`; with
        `overwrites` the rows replaced are saved so that `restore` can undo the step. Returns the step's record
        (`record_views` reads it)."""
        if self.tail_open > 1:  # its native step is causal in every layer
            raise ValueError("step_live runs every layer; a tail_open_tokens student steps its live cache with "
                             "step_deferred_live and commit_live.")
        token_id = self._token(input_ids)
        record, rows, slots, replaced, token_sum_out, emb = self._live_record(kv, small, token_sum, width, overwrites)
        _follow_torch_threads(self.lib)
        self._native(self._params_ref, token_id, *self._first, *kv, rows, slots, replaced, token_sum,
                     ctypes.byref(ctypes.c_int64(seen + 1)), token_sum_out, emb)
        return record

    def step_live_many(self, input_ids: List[int], kvs: List[Tuple[ctypes.Array, ctypes.Array]],
                       smalls: List[List[int]], token_sums: List[int], seens: List[int],
                       overwrites: List[bool]) -> List[ctypes.Array]:
        """`step_live` for several causal streams (one token each, each on its own cache) in one native call: the
        products run once over all their tokens (`tf2rnn_tova_step_many`), the same records bit for bit."""
        if self.open > 1 or self.tail_open > 1:
            raise ValueError("step_live_many steps causal students; with open tokens step each stream alone.")
        n = len(input_ids)
        sizes = [len(kvs), len(smalls), len(token_sums), len(seens), len(overwrites)]
        if any(size != n for size in sizes):  # the kernel would read a missing stream's pointers as NULL
            raise ValueError(f"step_live_many takes one entry per stream in each list: {n} tokens, and "
                             f"{sizes} caches, small entries, token sums, counts and overwrite flags.")
        ids = (ctypes.c_int64 * n)(*map(self._token, input_ids))
        seen = (ctypes.c_int64 * n)(*(k + 1 for k in seens))
        pointers = ctypes.c_void_p * n
        ins, outs, rows, slots, replaced, token_sum_out, emb = (pointers() for _ in range(7))
        records = []
        for j, (kv, small, token_sum, over) in enumerate(zip(kvs, smalls, token_sums, overwrites)):
            record, rows[j], slots[j], replaced[j], token_sum_out[j], emb[j] = self._live_record(
                kv, small, token_sum, 1, over)
            ins[j], outs[j] = ctypes.addressof(kv[0]), ctypes.addressof(kv[1])
            records.append(record)
        _follow_torch_threads(self.lib)
        self.lib.tf2rnn_tova_step_many(self._params_ref, n, ids, ins, outs, rows, slots, replaced,
                                       pointers(*token_sums), pointers(*(ctypes.addressof(seen) + 8 * j
                                                                         for j in range(n))), token_sum_out, emb)
        return records

    def _live_record(self, kv, small: List[int], token_sum: int, width: int, overwrites: bool):
        """A new record for one live step and where the step writes into it: (record, rows, slots, rows replaced,
        token sum, embedding), pointers or None; `kv`'s entries for `small` are pointed at the parent's and the
        record's."""
        kind, rows, slots, replaced = self._layout(width, overwrites)
        record = kind()
        base = ctypes.addressof(record)
        ins, outs = kv
        for i, a, o in zip(self.small, small, self._small_bytes):
            ins[i], outs[i] = a, base + o
        return (record, None if rows is None else base + rows, None if slots is None else base + slots,
                None if replaced is None else base + replaced,
                base + 4 * self._record_tsum if self.residual else token_sum, base + 4 * self._record_emb)

    def record_views(self, record: ctypes.Array, width: int, overwrites: bool):
        """A record's parts as tensors (views): (`small`'s entries, embedding [1, O], token sum [1, O] or None
        without the residual, rows, slots, rows replaced or None). A causal step's rows are [layers, 2, H] and its
        slots [layers]; with open tokens [layers, m, 2, H] and [layers][m]."""
        head, block, _ = self._record_sizes(width, overwrites)
        record = torch.frombuffer(record, dtype=torch.float32)  # shares the array's memory and keeps it alive
        small = [record[o:o + n].view(1, *self._shapes[i])
                 for o, n, i in zip(self._record_offsets, self._record_small, self.small)]
        at = self._record_emb
        emb = record[at:at + self.output_size].view(1, -1)
        token_sum = record[self._record_tsum:head].view(1, -1) if self.residual else None
        shape = (self.layers, width, 2, self.hidden_size)
        rows = record[head:head + block].view(shape)
        slots = record[head + block:head + block + self.layers * width].view(torch.int32).view(self.layers, width)
        replaced = record[head + block + self.layers * width:].view(shape) if width and overwrites else None
        if self.open == 1:
            rows, slots = rows[:, 0], slots[:, 0]
            replaced = None if replaced is None else replaced[:, 0]
        return small, emb, token_sum, rows, slots.tolist(), replaced

    def record_embedding(self, record: ctypes.Array) -> torch.Tensor:
        """The embedding a record holds ([O], a copy)."""
        out = torch.empty(self.output_size)
        ctypes.memmove(out.data_ptr(), ctypes.addressof(record) + 4 * self._record_emb, 4 * self.output_size)
        return out

    def restore(self, kv: torch.Tensor, record: ctypes.Array, width: int) -> None:
        """Undo the step that wrote `record` (with `overwrites`) on the live cache `kv` ([layers, 2, 1, S, H])."""
        _, _, slots, replaced = self._layout(width, True)
        base = ctypes.addressof(record)
        self.lib.tf2rnn_tova_restore(kv.data_ptr(), self.layers, width, kv.shape[-2], self.hidden_size, base + slots,
                                     base + replaced)


KERNELS = (Int8GRUStep, Int8TOVAStep)


def step_kernel_for(model: TF2RNNModel) -> Optional[object]:
    """The fused int8 keystroke that covers `model` (built from its fp32 weights), or None where none does
    or no C compiler is available."""
    kernel = next((k for k in KERNELS if k.supports(model)), None)
    if kernel is None or load_library() is None:
        return None
    return kernel(model)

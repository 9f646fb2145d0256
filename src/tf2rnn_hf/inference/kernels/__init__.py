"""A keystroke in one native call: the int8 GRU step of `gru_step.c`, with its PyTorch reference in `naive.py`.

At batch 1, PyTorch spends most of a step dispatching ~25 small ops (embedding, the quantized GRU and
readout, the running mean, normalisation, the state's tensors); the arithmetic is a few int8
matrix-vector products. This module compiles that whole step into one C function (once per machine,
cached under the tf2rnn cache folder, with `-march=native` so it uses the CPU's vector dot products) and
calls it through ctypes.

`quantize_int8` attaches it as the model's `step_kernel` for one-layer GRU students: `model.step` then
runs single rows here and batches through PyTorch's int8 modules. Needs a C compiler (`cc`, or `$CC`); without one the
int8 model simply runs through PyTorch. Weights are int8 per output row, activations are quantised per
call: tests/test_fused_step.py holds a stream of it, after edits, to cosine >= 0.999 with the fp32 model
run from scratch, and the kernel to 1e-4 of the same int8 arithmetic written in PyTorch (`naive.py`).
"""

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import List, Optional

import torch

from ...models import TF2RNNModel, TF2RNNState
from ...utils import cpu_flags, default_cache_dir

logger = logging.getLogger(__name__)
SOURCE = Path(__file__).parent / "gru_step.c"


class _Params(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in ("E", "H", "O", "residual")] + [
        (name, ctypes.c_void_p) for name in ("table", "w_ih", "s_ih", "r_ih", "b_ih", "w_hh", "s_hh", "r_hh",
                                             "b_hh", "w_o", "s_o", "r_o", "b_o")]


@lru_cache(maxsize=None)
def load_library() -> Optional[ctypes.CDLL]:
    """The compiled kernel (built on first use), or None where no C compiler is available."""
    # -march=native code runs only on CPUs like this one: the cache key holds the CPU's flags.
    key = hashlib.sha256(SOURCE.read_bytes() + cpu_flags().encode() + platform.machine().encode()).hexdigest()[:16]
    target = Path(default_cache_dir()) / "kernels" / f"gru_step-{key}.so"
    if not target.is_file():
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            logger.warning("No C compiler found: int8 keystrokes run through PyTorch (slower). Set CC to use one.")
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        cmd = [cc, "-O3", "-march=native", "-shared", "-fPIC", str(SOURCE), "-o", str(tmp), "-lm"]
        build = subprocess.run(cmd, capture_output=True, text=True)
        if build.returncode != 0:
            logger.warning("Building the fused keystroke kernel failed (%s); int8 keystrokes run through "
                           "PyTorch.\n%s", " ".join(cmd), build.stderr[-2000:])
            return None
        os.replace(tmp, target)  # atomic: concurrent builders never load a half-written library
    lib = ctypes.CDLL(str(target))
    lib.tf2rnn_gru_step.restype = None
    lib.tf2rnn_gru_step.argtypes = [ctypes.POINTER(_Params), ctypes.c_int64] + [ctypes.c_void_p] * 6
    return lib


def quantize_rows(weight: torch.Tensor):
    """Symmetric int8 per output row: (int8 [rows, cols], fp32 scales [rows], int32 row sums [rows])."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
    return q, scale.contiguous(), q.sum(dim=1, dtype=torch.int32).contiguous()


class Int8GRUStep:
    """One keystroke of a one-layer GRU student at batch 1 in a single native call.

    >>> step = Int8GRUStep(model)          # from the fp32 model (before quantize_int8 replaces its modules)
    >>> emb, state = step(torch.tensor([token_id]), state)  # like model.step(torch.tensor([token_id]), state)
    """

    @staticmethod
    def supports(model: TF2RNNModel) -> bool:
        """Whether the fused step covers this student (a one-layer GRU)."""
        return model.config.cell_type == "gru" and model.config.num_hidden_layers == 1

    def __init__(self, model: TF2RNNModel):
        config = model.config
        if not self.supports(model):
            raise ValueError(f"The fused step covers one-layer GRU students, not {config.num_hidden_layers} "
                             f"layer(s) of {config.cell_type!r}.")
        gru = model.cell.layers[0]
        if not isinstance(gru, torch.nn.GRU) or gru.weight_ih_l0.device.type != "cpu":
            raise ValueError("Build the fused step from the fp32 model on CPU (before quantize_int8).")
        self.lib = load_library()
        if self.lib is None:
            raise RuntimeError("The fused keystroke kernel could not be built (no C compiler?).")
        self.hidden_size, self.output_size = config.hidden_size, config.output_size
        self.vocab_size = model.embeddings.weight.shape[0]
        self.residual = bool(config.residual_token_mean)
        keep: List[torch.Tensor] = [model.embeddings.weight.detach().float().contiguous()]
        pointers = {"table": keep[0].data_ptr()}
        for prefix, weight, bias in (("ih", gru.weight_ih_l0, gru.bias_ih_l0), ("hh", gru.weight_hh_l0, gru.bias_hh_l0),
                                     ("o", model.readout.weight, model.readout.bias)):
            q, scale, rowsum = quantize_rows(weight)
            b = bias.detach().float().contiguous()
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
        token_id = int(input_ids)
        if not 0 <= token_id < self.vocab_size:  # the kernel reads the table row unchecked
            raise IndexError(f"Token id {token_id} is outside the vocabulary (size {self.vocab_size}).")
        h, tsum = state.cell_state[0], state.token_sum
        if not (h.is_contiguous() and tsum.is_contiguous()):
            h, tsum = h.contiguous(), tsum.contiguous()
        h_out, emb = torch.empty(1, 1, self.hidden_size), torch.empty(1, self.output_size)
        token_sum = torch.empty(1, self.output_size) if self.residual else tsum  # the kernel writes it only then
        seen = state.seen_tokens + 1
        self.lib.tf2rnn_gru_step(self._params_ref, token_id, h.data_ptr(), tsum.data_ptr(), seen.data_ptr(),
                                 h_out.data_ptr(), token_sum.data_ptr(), emb.data_ptr())
        return emb, TF2RNNState((h_out,), token_sum, seen, emb)

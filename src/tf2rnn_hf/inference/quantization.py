"""Int8 weights for CPU inference.

At batch 1 a keystroke is bound by reading the recurrent weights from memory (a GRU-768 step reads
11.8 MB of fp32), not by arithmetic. PyTorch's dynamic quantization stores `nn.GRU`, `nn.LSTM` and
`nn.Linear` weights as int8 (4x fewer bytes; `nn.Linear`'s with one scale per row) and runs them with fbgemm
kernels; activations are quantized per call (one scale for the whole input), so results depend on what is
batched together: an inherited student's text alone and inside a batch agree to ~0.989 cosine
(`benchmarks/probes/batch_dependence.py`), fp32 exactly. `benchmarks/run.py` reports the speed and the fidelity
cost side by side.

Those modules still leave a batch-1 keystroke to dozens of dispatched ops; for one-layer GRU students and
`tova_attention` students the whole keystroke also runs as one native call (`kernels.step_kernel_for`),
the model's `step_kernel`. A `tova_attention` student trained with `--weight_bits 4` keeps its layers' weights on a
4-bit grid, and that step reads them as int4 where the CPU has AVX512-VNNI or AVX2 (`step_kernel.int4` names the
products; `step_kernel.int4_groups` those trained with `--weight_group 128`, a scale per 128 columns).
"""

import copy
import warnings

import torch
from torch import nn

from ..models import TF2RNNModel


def quantize_int8(model: TF2RNNModel, inplace: bool = False, fused: bool = True) -> TF2RNNModel:
    """A copy of `model` for CPU inference with int8 recurrent and linear weights (token table stays fp32).

    With `fused` (one-layer GRU and tova_attention students, where a C compiler is available) its
    `step_kernel` is a whole batch-1 keystroke in one native call (`kernels.step_kernel_for`), which
    `model.step` runs for single rows.
    The result is for inference only: it cannot be trained or saved with `save_pretrained`; quantize after
    loading instead."""
    if is_quantized(model):
        raise ValueError("This model is already int8 (quantize_int8 was applied); quantize the fp32 model once.")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("Int8 dynamic quantization runs on CPU; move the model with .cpu() first.")
    if model.dtype != torch.float32:
        raise ValueError(f"Int8 quantization starts from float32 weights; this model is {model.dtype}. "
                         "Use model.float() first.")
    if not set(torch.backends.quantized.supported_engines) & {"x86", "fbgemm", "qnnpack"}:
        raise RuntimeError("This PyTorch build has no quantized CPU engine (fbgemm or qnnpack).")
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    model = model if inplace else copy.deepcopy(model)
    model.eval()
    step = None
    if fused:
        from .kernels import step_kernel_for

        step = step_kernel_for(model)  # from the fp32 weights, before the modules are replaced
    with warnings.catch_warnings():  # the eager API is deprecated in favour of torchao; it still ships
        warnings.simplefilter("ignore")
        # One scale per output row for the linear layers, as the fused steps keep: quantize_dynamic's default (one
        # per matrix) left an inherited student at 0.95-0.96 cosine to its fp32 model, per row at 0.99+.
        spec = {nn.Linear: per_channel_dynamic_qconfig, nn.GRU: default_dynamic_qconfig,
                nn.LSTM: default_dynamic_qconfig}
        quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)
    model.step_kernel = step
    model.requires_grad_(False)  # for inference only: nothing of it can be trained
    return model


def is_quantized(model: nn.Module) -> bool:
    """Whether `quantize_int8` was applied (the model holds dynamically quantized modules)."""
    from torch.ao.nn.quantized import dynamic

    return any(isinstance(m, (dynamic.Linear, dynamic.GRU, dynamic.LSTM)) for m in model.modules())

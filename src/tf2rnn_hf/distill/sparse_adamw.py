"""`RowSparseAdamW`: AdamW that moves only the rows a sparse gradient holds (lazy Adam), for the token table.

A batch of 64 texts reads a few thousand of the table's 30,522 rows, but a dense update reads and writes all
11.7M of its parameters three times over (gradient, moments, weights): on a CPU that is about a third of a bf16
step of a one-layer student (docs/experiments.md). With `nn.Embedding(sparse=True)` the gradient holds only the
rows read; this optimizer updates those rows' moments and weights with AdamW's arithmetic and leaves the rest,
moments included, where they were (TensorFlow Addons' LazyAdam, PyTorch's SparseAdam with AdamW's decoupled
weight decay). Dense gradients take `torch.optim.AdamW`'s own path, fused or foreach as configured, except for
the parameters named `lazy_rows`: their dense gradient is applied lazily to its nonzero rows. That is how several
processes train the table: DDP all-reduces its gradient dense (NCCL has no sparse all-reduce), and the rows that
come back nonzero are the rows some process read. `clip_grad_norm_` clips a mix of dense and sparse gradients,
which torch's has no kernel for.
"""

import math
from typing import Callable, Iterable, Optional

import torch


class RowSparseAdamW(torch.optim.AdamW):
    """`torch.optim.AdamW` whose parameters with a sparse (COO, row-indexed) gradient get a lazy update.

    A row that a step's gradient holds follows AdamW exactly (a table whose every row is read each step
    matches `AdamW` to rounding); a row it lacks keeps its weights and moments. Bias correction counts the
    parameter's steps, not the row's, as SparseAdam does. The optimizer state has AdamW's keys
    (`step`, `exp_avg`, `exp_avg_sq`), so checkpoints load into either."""

    def __init__(self, params, *args, lazy_rows: Iterable[torch.Tensor] = (), **kwargs):
        """`lazy_rows`: parameters (2-d) whose dense gradient updates only its nonzero rows, as a sparse one would
        (a read row whose gradient sums to exactly zero is skipped, where the sparse update would decay it)."""
        if kwargs.get("amsgrad") or kwargs.get("maximize") or kwargs.get("capturable") or kwargs.get("differentiable"):
            raise ValueError("RowSparseAdamW supports AdamW's plain update: amsgrad, maximize, capturable and "
                             "differentiable are not implemented for its sparse rows.")
        super().__init__(params, *args, **kwargs)
        self._lazy_rows = {id(p) for p in lazy_rows}  # by identity: tensors compare element-wise
        owned = {id(p) for group in self.param_groups for p in group["params"]}
        if not self._lazy_rows <= owned:
            raise ValueError("lazy_rows names a parameter this optimizer does not update.")

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None):
        """One update: sparse gradients lazily, row by row; then AdamW's own step for the dense ones."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        held = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    grad = p.grad.coalesce()  # repeated rows summed, as a dense gradient would hold them
                    self._sparse_step(group, p, grad.indices()[0], grad.values())
                elif id(p) in self._lazy_rows:
                    rows = p.grad.ne(0).any(dim=1).nonzero().squeeze(1)
                    self._sparse_step(group, p, rows, p.grad.index_select(0, rows))
                else:
                    continue
                held.append((p, p.grad))
                p.grad = None  # AdamW's step skips a parameter without a gradient
        try:
            super().step()
        finally:
            for p, grad in held:
                p.grad = grad
        return loss

    def _sparse_step(self, group: dict, p: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> None:
        """AdamW's update of `rows` (distinct) of `p`, whose gradient there is `values`; the other rows wait."""
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["step"] += 1
        step = float(state["step"])
        beta1, beta2 = group["betas"]
        lr, eps, decay = float(group["lr"]), group["eps"], group["weight_decay"]
        exp_avg = state["exp_avg"].index_select(0, rows).lerp_(values, 1 - beta1)
        exp_avg_sq = state["exp_avg_sq"].index_select(0, rows).mul_(beta2).addcmul_(values, values, value=1 - beta2)
        state["exp_avg"].index_copy_(0, rows, exp_avg)
        state["exp_avg_sq"].index_copy_(0, rows, exp_avg_sq)
        weights = p.index_select(0, rows)
        if decay:
            weights.mul_(1 - lr * decay)
        denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
        weights.addcdiv_(exp_avg, denom, value=-lr / (1 - beta1 ** step))
        p.index_copy_(0, rows, weights)


def clip_grad_norm_(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """`torch.nn.utils.clip_grad_norm_` (2-norm) where some gradients are sparse, which it has no kernel for;
    returns the total norm before clipping."""
    params = [p for p in parameters if p.grad is not None]
    for p in params:
        if p.grad.is_sparse:
            p.grad = p.grad.coalesce()  # a repeated row's entries summed first, or the norm would be too small
    dense = [p for p in params if not p.grad.is_sparse]
    sparse = [p.grad.values() for p in params if p.grad.is_sparse]
    norms = [torch.nn.utils.get_total_norm([p.grad for p in dense])] if dense else []
    total = torch.linalg.vector_norm(torch.stack(norms + [g.norm().to(torch.float32) for g in sparse]))
    if max_norm != float("inf"):
        torch.nn.utils.clip_grads_with_norm_(dense, max_norm, total)
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for values in sparse:
            values.mul_(scale.to(values.dtype))
    return total

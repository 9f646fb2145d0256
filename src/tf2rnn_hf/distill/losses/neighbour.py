"""NeighbourLoss: relational distillation against a fixed bank of teacher embeddings."""

import torch
import torch.nn.functional as F
from torch import nn


def teacher_bank(dataset, size: int, seed: int = 0) -> torch.Tensor:
    """The teacher's final embeddings of up to `size` training rows picked at random ([size, D]): the
    fixed reference set `NeighbourLoss` ranks against (read once; the trajectories already hold them)."""
    pick = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))[:size].tolist()
    rows = dataset.select(pick).with_format("numpy", columns=["trajectory"])  # numpy: not millions of floats
    return F.normalize(torch.stack([torch.as_tensor(r["trajectory"][-1], dtype=torch.float32) for r in rows]), dim=-1)


class NeighbourLoss(nn.Module):
    """Relational distillation against a fixed bank of teacher embeddings: the KL divergence from the
    teacher's softmax over its similarities to the bank (temperature `temperature`) to the student's.
    In-batch texts are rarely near each other; a bank of thousands gives every text real neighbours, and
    the low temperature puts the weight on the nearest, which is what neighbour agreement@10 counts."""

    def __init__(self, bank: torch.Tensor, temperature: float = 0.05):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"The neighbour loss's temperature must be positive, got {temperature}.")
        self.register_buffer("bank", bank, persistent=False)
        self.temperature = temperature

    def forward(self, student_final: torch.Tensor, teacher_final: torch.Tensor) -> torch.Tensor:
        bank = self.bank.to(student_final.device)
        t = F.normalize(teacher_final, dim=-1) @ bank.T
        s = F.normalize(student_final, dim=-1) @ bank.T
        # A text's own bank entry (if drawn) says nothing about its neighbours.
        # (A finite fill: -inf would make 0 * (-inf - -inf) = nan in the KL.)
        own = t > 0.9999
        t, s = t.masked_fill(own, -1e4), s.masked_fill(own, -1e4)
        return F.kl_div(F.log_softmax(s / self.temperature, dim=-1), F.log_softmax(t / self.temperature, dim=-1),
                        reduction="batchmean", log_target=True)

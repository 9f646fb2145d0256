"""SimilarityLoss: the teacher's in-batch similarity structure of final embeddings."""

import torch
from torch import nn


class SimilarityLoss(nn.Module):
    """Match the teacher's in-batch similarity structure of final embeddings (mean squared difference of
    the off-diagonal cosine matrices): neighbour agreement depends on it more than on cosine alone."""

    def forward(self, student_final: torch.Tensor, teacher_final: torch.Tensor) -> torch.Tensor:
        s = student_final @ student_final.T
        t = teacher_final @ teacher_final.T
        off = ~torch.eye(len(s), dtype=torch.bool, device=s.device)
        return (s - t)[off].pow(2).mean() if off.any() else s.sum() * 0

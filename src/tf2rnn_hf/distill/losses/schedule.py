"""LossSchedule: how the losses mix over training progress."""

import dataclasses


@dataclasses.dataclass
class LossSchedule:
    """Weights of the losses over training progress p in [0, 1]: transition alone until
    `transition_until`, then annealed linearly into rollout over `anneal`; scheduled-sampling restarts
    decay from `restart_prob` to 0 over the rollout phase."""

    transition_until: float = 0.0
    anneal: float = 0.0
    restart_prob: float = 0.0
    similarity_weight: float = 0.0
    keystroke_weight: float = 0.0  # the streaming-path loss (needs character-level trajectories)
    neighbour_weight: float = 0.0  # `NeighbourLoss` on final embeddings, next to rollout

    def transition_weight(self, progress: float) -> float:
        if progress < self.transition_until:
            return 1.0
        if self.anneal <= 0:
            return 0.0
        return max(0.0, 1.0 - (progress - self.transition_until) / self.anneal)

    def restart(self, progress: float) -> float:
        span = max(1e-9, 1.0 - self.transition_until)
        return self.restart_prob * max(0.0, 1.0 - (progress - self.transition_until) / span)

    @property
    def uses_transition(self) -> bool:
        return self.transition_until > 0 or self.anneal > 0 or self.restart_prob > 0

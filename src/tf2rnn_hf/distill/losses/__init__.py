"""The distillation losses, one per file (as sentence-transformers' losses/), and the schedule that mixes them.

- `TransitionLoss`: teacher-forced, one step from the teacher's e(t-1) to e(t); no backprop through time.
  Needs a student with `state_lift` (gru/lstm). Relation: the cheap first phase of `RolloutLoss`.
- `RolloutLoss`: free-running over the whole text, a loss at every target step (what inference does); with
  open tokens it may train on a random share of the targets inside a block (`thin_block_middles`).
- `KeystrokeLoss`: keystrokes inside a word, as the streaming encoder runs them; needs character-level
  trajectories (`KeystrokeCollator`).
- `SimilarityLoss`, `NeighbourLoss`: relational terms on final embeddings, beside `RolloutLoss`.
"""

from .distance import DISTANCES, distance, position_weights, weighted_mean
from .keystroke import KeystrokeLoss
from .neighbour import NeighbourLoss, teacher_bank
from .rollout import RolloutLoss, thin_block_middles
from .schedule import LossSchedule
from .similarity import SimilarityLoss
from .transition import TransitionLoss

__all__ = ["DISTANCES", "KeystrokeLoss", "LossSchedule", "NeighbourLoss", "RolloutLoss", "SimilarityLoss",
           "TransitionLoss", "distance", "position_weights", "teacher_bank", "thin_block_middles",
           "weighted_mean"]

"""Distillation: the student built from its teacher, collators, losses, training arguments, the trainer (and
its row-sparse AdamW for the token table), and the job (`recipe.main`) with its presets."""

from .collators import KeystrokeCollator, TrajectoryCollator
from .losses import LossSchedule
from .sparse_adamw import RowSparseAdamW
from .student import TF2RNNForDistillation, build_student
from .trainer import DistillationTrainer
from .training_args import DistillationTrainingArguments

__all__ = ["DistillationTrainer", "DistillationTrainingArguments", "KeystrokeCollator", "LossSchedule",
           "RowSparseAdamW", "TF2RNNForDistillation", "TrajectoryCollator", "build_student"]

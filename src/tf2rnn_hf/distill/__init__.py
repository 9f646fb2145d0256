"""Distillation: the student built from its teacher, collators, losses, training arguments, the trainer,
and the job (`recipe.main`) with its presets."""

from .collators import KeystrokeCollator, TrajectoryCollator
from .losses import LossSchedule
from .student import TF2RNNForDistillation, build_student
from .trainer import DistillationTrainer
from .training_args import DistillationTrainingArguments

__all__ = ["DistillationTrainer", "DistillationTrainingArguments", "KeystrokeCollator", "LossSchedule",
           "TF2RNNForDistillation", "TrajectoryCollator", "build_student"]

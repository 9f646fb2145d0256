"""Saving a student (the one writer of weights, sentence-transformers files and card), its model card,
and push/pull."""

from .modelcard import card_metadata, render_model_card, write_model_card
from .save import save_student, write_card
from .sync import CorruptedDownloadError, pull, push, verify_snapshot

__all__ = ["CorruptedDownloadError", "card_metadata", "pull", "push", "render_model_card", "save_student",
           "verify_snapshot", "write_card", "write_model_card"]

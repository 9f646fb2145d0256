"""Saving a student with everything a user of the Hub expects, in one place: weights, config with
auto_map, custom code and sentence-transformers files (all written by `save_pretrained`), the tokenizer,
and a model card carrying the measured results."""

from pathlib import Path
from typing import Optional, Union

from ..models import TF2RNNModel
from .modelcard import write_model_card


def save_student(model: TF2RNNModel, tokenizer, path: Union[str, Path], results: Optional[dict] = None,
                 repo_id: Optional[str] = None, extra_markdown: Optional[str] = None) -> Path:
    """Save model and tokenizer to `path` and write its card (usage examples name `repo_id`, default
    tf2rnn/<folder name>; `results` from `evaluate_model`; `extra_markdown` follows them)."""
    path = Path(path)
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    write_card(model, path, results, repo_id, extra_markdown)
    return path


def write_card(model: TF2RNNModel, path: Union[str, Path], results: Optional[dict] = None,
               repo_id: Optional[str] = None, extra_markdown: Optional[str] = None) -> Path:
    """(Re)write the card of the student saved at `path`, from `results` (no re-evaluation)."""
    return write_model_card(path, model.config, results, repo_id=repo_id, state_bytes=model.init_state(1).nbytes(),
                            extra_markdown=extra_markdown)

"""The Gradio app of `tf2rnn demo`: a query box whose top-10 matches follow every keystroke, the student's
(streaming, O(1) per keystroke) beside the teacher's (re-encoding the prefix), with their overlap, each
side's update time and the session's keystroke count. As a Hugging Face Space would run it."""

import hashlib
import html
from pathlib import Path
from typing import Optional, Union

import torch

from ..data.teacher import Teacher
from ..models import TF2RNNModel
from .search import Results, SearchSession, build_indexes, demo_texts


def model_key(model: TF2RNNModel) -> str:
    """A hash of the student's weights: its index is rebuilt when they change."""
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


SHARED = ' class="shared" style="font-weight:600"'  # in both top lists


def _ranked(results: Results, side: str, texts) -> str:
    ids = getattr(results, side)
    other = set(results.teacher if side == "student" else results.student)
    items = "".join(f'<li data-id="{i}"{SHARED if i in other else ""}>{html.escape(texts[i])}</li>' for i in ids)
    return f'<ol class="ranked" data-side="{side}">{items}</ol>'


def _status(results: Results) -> str:
    prefix = html.escape(results.text)
    return (f'<div id="status-line" data-prefix="{prefix}" data-keystrokes="{results.keystrokes}">'
            f"keystrokes: <b>{results.keystrokes}</b> · student update <b>{results.student_ms:.2f} ms</b> · "
            f"teacher re-encode <b>{results.teacher_ms:.2f} ms</b> · in both top lists: "
            f"<b>{results.overlap}</b> of {len(results.student)}</div>")


def build_app(model: TF2RNNModel, tokenizer, teacher: Teacher, index: Optional[Union[str, Path]] = None,
              n_texts: int = 10_000, cache_dir: Optional[Union[str, Path]] = None):
    """The Gradio Blocks app over `index` (one text per line), or `n_texts` offline sentences."""
    import gradio as gr

    texts = demo_texts(n_texts, index)
    model.eval()
    student_index, teacher_index = build_indexes(model, tokenizer, teacher, texts, model_key(model), cache_dir)

    def update(text: str, session: Optional[SearchSession]):
        if session is None:
            session = SearchSession(model, tokenizer, teacher, student_index, teacher_index)
        with torch.inference_mode():
            results = session.update(text or "")
        return _status(results), _ranked(results, "student", texts), _ranked(results, "teacher", texts), session

    with gr.Blocks(title="tf2rnn: search as you type") as app:
        gr.Markdown(f"### Search as you type over {len(texts):,} texts\nThe student updates its embedding "
                    "in O(1) per keystroke (a delete pops a saved state); the teacher re-reads the whole prefix. "
                    "Matches in both top-10 lists are marked.")
        query = gr.Textbox(label="Query", placeholder="Type here", elem_id="query", autofocus=True)
        status = gr.HTML(elem_id="status")
        with gr.Row():
            with gr.Column():
                gr.Markdown("**Student** (recurrent, streaming)")
                student = gr.HTML(elem_id="student-results")
            with gr.Column():
                gr.Markdown("**Teacher** (all-MiniLM-L6-v2, re-encoding)")
                teacher_html = gr.HTML(elem_id="teacher-results")
        session = gr.State(None)
        # Every change of the box (typed or deleted; Gradio's `input` missed deletes in Chromium), in order;
        # a burst of keys that arrives while one update runs is one diff of the text, never lost.
        query.change(update, [query, session], [status, student, teacher_html, session], trigger_mode="always_last",
                    show_progress="hidden")
    return app

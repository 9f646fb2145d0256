"""Search as you type, shown to a person: a vector index of offline text (`search`) and a Gradio app that
ranks it at every keystroke with the student's streaming encoder beside the teacher (`app`)."""

from .search import SearchIndex, SearchSession, demo_texts

__all__ = ["SearchIndex", "SearchSession", "demo_texts"]

"""How good a student is: scores, the static baseline, fidelity to the teacher, the suites and report tables."""

from .fidelity import fidelity, fidelity_table, keystroke_fidelity
from .report import format_table, results_markdown
from .suites import ALL_SUITES, SUITES, evaluate_model, run_suites

__all__ = ["ALL_SUITES", "SUITES", "evaluate_model", "fidelity", "fidelity_table", "format_table",
           "keystroke_fidelity", "results_markdown", "run_suites"]

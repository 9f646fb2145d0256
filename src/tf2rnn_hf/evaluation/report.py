"""Markdown tables of evaluation results: one writer for the command line, model cards and benchmarks."""

from typing import Dict


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def format_table(table: Dict[str, Dict[str, float]], title: str = "") -> str:
    """A markdown table: one row per system, one column per metric."""
    columns = []
    for metrics in table.values():
        columns.extend(k for k in metrics if k not in columns)
    lines = [f"### {title}", ""] if title else []
    lines.append("| system | " + " | ".join(columns) + " |")
    lines.append("|---" * (len(columns) + 1) + "|")
    for name, metrics in table.items():
        cells = [_cell(metrics[c]) if c in metrics else "-" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def results_markdown(results: Dict[str, dict]) -> str:
    """One markdown table per suite of `evaluate_model` results, and a line for each skipped suite."""
    parts = []
    for suite, table in results["suites"].items():
        if "skipped" in table:
            parts.append(f"### {suite}\n\nskipped: {table['skipped']}")
            continue
        clean = {k: v for k, v in table.items() if not k.startswith("_")}
        parts.append(format_table(clean, title=suite))
    return "\n\n".join(parts)

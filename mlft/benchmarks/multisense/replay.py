"""Replay stored runs (the authors' `reference/` layout): consistency of T, I, X with T_src per direction."""

from __future__ import annotations

from pathlib import Path

from mlft.benchmarks.multisense import metrics
from mlft.benchmarks.multisense.data import read_run
from mlft.errors import DataError


def consistency_table(reference: Path) -> list[dict]:
    """One row per (task, direction) found: {task, direction, T, I, X} consistencies with T_src."""
    reference = Path(reference)
    if not reference.is_dir():
        raise DataError(f"{reference}: folder not found")
    rows = []
    for task_dir in sorted(p for p in reference.iterdir() if p.is_dir()):
        for direction in sorted(p for p in task_dir.iterdir() if p.is_dir() and "_to_" in p.name):
            base = task_dir / direction.name.split("_to_")[0] / "T_src.jsonl"
            preds = [r["pred"] for r in read_run(base)]
            row = {"task": task_dir.name, "direction": direction.name}
            for cond in ("T", "I", "X"):
                if (direction / f"{cond}.jsonl").is_file():
                    row[cond] = metrics.consistency(preds, [r["pred"] for r in read_run(direction / f"{cond}.jsonl")])
            rows.append(row)
    if not rows:
        raise DataError(f"{reference}: no {{task}}/{{src}}_to_{{tgt}}/ run folders")
    return rows


def table1(reference: Path) -> str:
    lines = ["| task | direction | T | I | X |", "|---|---|---|---|---|"]
    for r in consistency_table(reference):
        cells = " | ".join(f"{r[c]:.4f}" if c in r else "" for c in "TIX")
        lines.append(f"| {r['task']} | {r['direction'].replace('_to_', '→')} | {cells} |")
    return "\n".join(lines)

"""The run directory's curve file: one JSON row per (step, variant, suite, task, language, metric).

Rows of one evaluation pass are appended in a single fsynced write, so a pass is either recorded or not;
`done()` tells the callback and `mlft evaluate-run` which (step, variant) passes to skip on resume. Writers
hold the curve file's lock (`curves_lock`) from the "is it done?" check to the append, so two processes
never evaluate and record the same pass.
"""

from __future__ import annotations

from pathlib import Path

from mlft.io.jsonl import append_jsonl, read_jsonl
from mlft.io.locks import OutputLock

CURVES = "curves.jsonl"
PASSES = "eval_passes.jsonl"  # one row per pass: step, variant, seconds, mode, error
REWARD_CURVES = "rewards.jsonl"  # GRPO: the reward terms per logged step (mlft.training.rollouts)
ROLLOUTS = "rollouts.jsonl"  # GRPO: each step's highest- and lowest-reward rollouts with their terms


def curves_lock(run_dir: str | Path) -> OutputLock:
    return OutputLock(Path(run_dir) / CURVES)


def read_curves(run_dir: str | Path) -> list[dict]:
    return read_jsonl(Path(run_dir) / CURVES)


def read_passes(run_dir: str | Path) -> list[dict]:
    return read_jsonl(Path(run_dir) / PASSES)


def done(run_dir: str | Path) -> set[tuple[int, str]]:
    return {(int(r["step"]), r["variant"]) for r in read_curves(run_dir)}


def append_pass(
    run_dir: str | Path, step: int, variant: str, rows: list[dict], seconds: float, mode: str, error: str | None = None
) -> None:
    run_dir = Path(run_dir)
    with curves_lock(run_dir):
        append_jsonl(run_dir / CURVES, rows)
        append_jsonl(
            run_dir / PASSES,
            [
                {
                    "step": step,
                    "variant": variant,
                    "seconds": round(seconds, 3),
                    "mode": mode,
                    "rows": len(rows),
                    "error": error,
                }
            ],
        )

"""The run directory's curve file: one JSON row per (step, variant, suite, task, language, metric).

Rows of one evaluation pass are appended in a single fsynced write, so a pass is either recorded or not;
`done()` tells the callback and `mlft evaluate-run` which (step, variant) passes to skip on resume.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CURVES = "curves.jsonl"
PASSES = "eval_passes.jsonl"  # one row per pass: step, variant, seconds, mode, error


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line from a crash
    return rows


def _append(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    data = path.read_bytes() if path.is_file() else b""
    if data and not data.endswith(b"\n"):  # repair a torn tail so the block starts on its own line
        with open(path, "r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)
    block = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())


def read_curves(run_dir: str | Path) -> list[dict]:
    return _read_jsonl(Path(run_dir) / CURVES)


def read_passes(run_dir: str | Path) -> list[dict]:
    return _read_jsonl(Path(run_dir) / PASSES)


def done(run_dir: str | Path) -> set[tuple[int, str]]:
    return {(int(r["step"]), r["variant"]) for r in read_curves(run_dir)}


def append_pass(run_dir: str | Path, step: int, variant: str, rows: list[dict], seconds: float,
                mode: str, error: str | None = None) -> None:
    run_dir = Path(run_dir)
    _append(run_dir / CURVES, rows)
    _append(run_dir / PASSES, [{"step": step, "variant": variant, "seconds": round(seconds, 3), "mode": mode,
                                "rows": len(rows), "error": error}])

"""A TrainerCallback that writes each optimizer step's time as the step finishes (one JSON line per step, flushed),
so a run that is killed or times out still leaves every step it took. Shared by measurements/train_speed.py and
measurements/gpu/bench.py.

Each line: {"step", "step_s" (on_step_begin -> on_step_end: forward, backward, optimizer), "wall_s" (since the
previous step's end: the step plus whatever ran between steps: logging, callbacks, saves, evaluation),
"t" (seconds since training began), "num_tokens" (trl's running count, when logged), "peak_alloc_gib" (CUDA)}.
On CUDA every timestamp follows a torch.cuda.synchronize()."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path


def step_times(path: str | Path):
    """The callback (transformers imported here: a benchmark's launcher process need not import it)."""
    import torch
    from transformers import TrainerCallback

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.path = Path(path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fh = None
            self.t0 = self.begin = self.last = None
            self.tokens = None

        def on_train_begin(self, args, state, control, **kw):
            sync()
            self.t0 = self.last = time.perf_counter()
            if state.is_world_process_zero:
                self.fh = open(self.path, "a", encoding="utf-8")

        def on_step_begin(self, args, state, control, **kw):
            sync()
            self.begin = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync()
            now = time.perf_counter()
            row = {
                "step": state.global_step,
                "step_s": round(now - self.begin, 5),
                "wall_s": round(now - self.last, 5),
                "t": round(now - self.t0, 4),
                "num_tokens": self.tokens,
            }
            if torch.cuda.is_available():
                row["peak_alloc_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
            self.last = now
            if self.fh is not None:
                self.fh.write(json.dumps(row) + "\n")
                self.fh.flush()

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "num_tokens" in logs:
                self.tokens = logs["num_tokens"]

        def on_train_end(self, args, state, control, **kw):
            if self.fh is not None:
                self.fh.close()
                self.fh = None

    return StepTimes()


def read_steps(path: str | Path) -> list[dict]:
    p = Path(path)
    return (
        [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()] if p.is_file() else []
    )


def median_step(rows: list[dict], key: str = "step_s", skip: int = 1) -> float | None:
    """Median of `key` over the steps after the first `skip` (warm-up: allocations, compilation, caches)."""
    values = [r[key] for r in rows[skip:]] or [r[key] for r in rows]
    return statistics.median(values) if values else None

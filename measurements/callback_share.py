"""Share of training wall time spent in the eval callback, per run of `mlft demo` (and overall).

    python measurements/callback_share.py [DEMO_DIR]     # default runs/demo; runs `mlft demo` first if missing

Reads each run's `complete` marker (wall time of `mlft train`, eval included) and `eval_passes.jsonl`
(seconds of every eval pass the callback ran in-process; passes copied between runs count 0).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mlft.io.curve_file import read_passes


def main(demo_dir: str = "runs/demo") -> int:
    demo = Path(demo_dir)
    if not (demo / "timings.json").is_file():
        subprocess.run([sys.executable, "-m", "mlft", "demo", "--out", str(demo)], check=True)
    total_wall = total_eval = 0.0
    print(f"{'run':<20}{'train wall s':>14}{'callback s':>12}{'share':>8}  passes")
    for run in sorted(p.parent for p in demo.glob("*/complete")):
        marker = json.loads((run / "complete").read_text())
        passes = [p for p in read_passes(run) if p["mode"] in ("in-process", "separate-process")]
        # few-shot baselines run by the demo after training are not part of the training wall time
        in_training = [p for p in passes if p["variant"] not in ("Q/A template", "1-shot", "5-shot")]
        eval_s = sum(p["seconds"] for p in in_training)
        wall = marker["wall_s"]
        total_wall += wall
        total_eval += eval_s
        print(f"{run.name:<20}{wall:>14.1f}{eval_s:>12.1f}{eval_s / wall:>8.1%}  {len(in_training)}")
    if total_wall:
        print(f"{'all runs':<20}{total_wall:>14.1f}{total_eval:>12.1f}{total_eval / total_wall:>8.1%}")
    timings = json.loads((demo / "timings.json").read_text())
    print(f"whole demo wall time: {timings['wall_s']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))

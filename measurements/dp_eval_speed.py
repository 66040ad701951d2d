"""Data-parallel evaluation: one pass of a suite on the embedded model, by 1 rank and by N ranks (gloo, CPU), in
one run. Prints each pass's wall time, the ratio, and whether both wrote the same completions and score rows.

    python measurements/dp_eval_speed.py                       # lcb_demo, 2 ranks (1 thread each) vs 1 rank (2 threads)
    python measurements/dp_eval_speed.py lcb_quick --ranks 2 --threads 2

The N-rank pass runs as the training callback runs it (mlft.generation.data_parallel: rank 0 coordinates, scores and
writes; the other ranks generate their share of the hf backend's batches).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = r"""
import json, sys, time
from pathlib import Path
import torch.distributed as dist
from mlft.evals.runner import run_suite
from mlft.evals.suite import load_suite
from mlft.generation import data_parallel
from mlft.generation.models import load
from mlft.generation.models import eval_mode
from mlft.generation.target import Target

suite, out = sys.argv[1], Path(sys.argv[2])
overrides = sys.argv[3:]
model, tok = load(None, device="cpu")
multi = "RANK" in __import__("os").environ
if multi:
    dist.init_process_group("gloo")
if not multi or dist.get_rank() == 0:
    t0 = time.perf_counter()
    with data_parallel.coordinate(multi), eval_mode(model) as live:
        result = run_suite(load_suite(suite, overrides), Target(model=live, tokenizer=tok), out, progress=False)
    (out / "wall.json").write_text(json.dumps({"seconds": time.perf_counter() - t0}))
else:
    data_parallel.serve(model, tok)
"""


def _records(out: Path) -> dict:
    recs = {}
    for path in sorted(out.rglob("completions.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            recs[(path.parent.name, r["id"])] = r["completion"]
    return recs


def _rows(out: Path) -> list:
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    return sorted(
        (r["variant"], r["task"], r["language"], r["metric"], r["value"], r.get("low"), r.get("high")) for r in rows
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", nargs="?", default="lcb_demo")
    ap.add_argument("overrides", nargs="*", default=[])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="CPU threads of the 1-rank pass (the N ranks get threads/N each)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mlft-dp-") as tmp:
        tmp = Path(tmp)
        script = tmp / "worker.py"
        script.write_text(WORKER)
        walls = {}
        for label, n in (("1 rank", 1), (f"{args.ranks} ranks", args.ranks)):
            out = tmp / label.replace(" ", "_")
            env = dict(os.environ, OMP_NUM_THREADS=str(max(1, args.threads // n)), PYTHONUNBUFFERED="1")
            cmd = (
                [sys.executable, str(script), args.suite, str(out), *args.overrides]
                if n == 1
                else [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nproc_per_node",
                    str(n),
                    "--master_port",
                    "29631",
                    str(script),
                    args.suite,
                    str(out),
                    *args.overrides,
                ]
            )
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            walls[label] = (json.loads((out / "wall.json").read_text())["seconds"], time.perf_counter() - t0, out)
        (one, one_proc, one_out), (many, many_proc, many_out) = walls.values()
        same_c = _records(one_out) == _records(many_out)
        a, b = _rows(one_out), _rows(many_out)
        # NLL rows are float sums over the logits: another thread count per process changes their last digits
        same_r = [r for r in a if r[3] != "nll"] == [r for r in b if r[3] != "nll"]
        nll = [abs(x[4] - y[4]) for x, y in zip(a, b) if x[3] == "nll" and x[4] is not None and y[4] is not None]
        print(f"suite {args.suite} {' '.join(args.overrides)}: {len(_records(one_out))} completions")
        for label, (w, p, _) in walls.items():
            print(f"  {label:>8}: pass {w:7.1f} s   (process incl. model load {p:7.1f} s)")
        print(
            f"  speed-up of the pass: {one / many:.2f}x with {args.ranks} ranks; same completions: {same_c}; "
            f"same score rows (LPR/WPR/LCPR, guard): {same_r}; NLL rows differ by at most "
            f"{max(nll, default=0.0):.2g}"
        )
    return 0 if same_c and same_r else 1


if __name__ == "__main__":
    sys.exit(main())

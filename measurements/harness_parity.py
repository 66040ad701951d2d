"""Parity of mlft's LCB tasks in lm-evaluation-harness with `mlft score`: run lm_eval, convert its logged samples
with `mlft harness completions`, score them with `mlft score`, print both numbers per language and the mismatches.

    python measurements/harness_parity.py [--tasks lcb_crosslingual] [--limit 6] [--model smollm2-135m-instruct]
    python measurements/harness_parity.py --samples-dir OUT      # an lm_eval --log_samples output folder you have

Measured (SmolLM2-135M-Instruct, --tasks lcb_crosslingual --limit 6, paper decoding, 84 replies, 14 languages):
0 mismatches in LPR / WPR / LCPR per language and in the group rows (LPR 59.52, LCPR 58.80).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mlft.harness import lm_eval_command

REPO = Path(__file__).resolve().parent.parent


def run_lm_eval(tasks: str, limit: int, model: str, out: Path) -> None:
    from mlft.generation.models import resolve

    path = resolve(model).path
    subprocess.run(lm_eval_command(path, tasks, out, limit=limit, batch_size=16), check=True)


def compare(out: Path) -> int:
    results = {}
    for f in out.rglob("results_*.json"):
        results.update(json.loads(f.read_text())["results"])
    samples = sorted(str(p) for p in out.rglob("samples_lcb_*.jsonl"))
    comp = out / "completions.jsonl"
    subprocess.run([sys.executable, "-m", "mlft", "harness", "completions", *samples, "--out", str(comp)], check=True)
    text = subprocess.run(
        [sys.executable, "-m", "mlft", "score", str(comp), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    data = json.loads(text)
    rows = data["rows"] if isinstance(data, dict) else data
    mismatches, n = 0, 0
    print(f"{'task':<24} {'metric':<6} {'lm_eval':>10} {'mlft score':>10}")
    for r in rows:
        if r["source"] != "all":
            continue
        name = f"lcb_{r['task']}" + ("" if r["language"] == "all" else f"_{r['language']}")
        if name not in results:
            continue
        for m in ("lpr", "wpr", "lcpr"):
            a, b = results[name].get(f"{m},none"), r.get(m)
            if a is None and b is None:
                continue
            n += 1
            same = a is not None and b is not None and abs(a - b) < 1e-12
            mismatches += not same
            print(
                f"{name:<24} {m:<6} {a if a is not None else '-':>10.6} {b if b is not None else '-':>10.6}"
                f"{'' if same else '  MISMATCH'}"
            )
    print(f"{n} numbers compared, {mismatches} mismatches ({sum(1 for _ in comp.open())} replies)")
    return 1 if mismatches else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="lcb_crosslingual")
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--samples-dir", help="compare an existing lm_eval output folder instead of running lm_eval")
    args = ap.parse_args()
    if args.samples_dir:
        return compare(Path(args.samples_dir))
    out = Path(tempfile.mkdtemp(prefix="mlft_harness_parity_"))
    run_lm_eval(args.tasks, args.limit, args.model, out)
    return compare(out)


if __name__ == "__main__":
    sys.exit(main())

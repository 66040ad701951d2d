"""The demo's story under several seeds: which claims hold?

Runs `mlft demo --seed S` for each seed (every pass's decoding seed and every run's training seed; resumable), then
reads each run's results.json and prints, per row and task, LPR in each seed, its mean and spread, the gain over
the base row in each seed with its paired p (Holm-adjusted, as the table prints it), and the claim as an estimate:
the mean gain over seeds with its t-interval (`mlft.stats.seed_interval`; "up" / "down" when the interval
excludes 0, else "unclear"). The seed label sets decoding and training together: the interval covers both.

    python measurements/demo_seeds.py --seeds 0 1 2                       # three demos, then the table
    python measurements/demo_seeds.py --seeds 0 1 2 --samples 2 --out runs/demo_seeds
    python measurements/demo_seeds.py --seeds 0 1 2 --no-run              # only the table, from finished runs

Writes OUT/seeds.md and OUT/seeds.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from mlft.stats import seed_interval

METRICS = ("lpr", "coverage", "degeneracy", "validity")


def run_demo(seed: int, out: Path, extra: list[str]) -> Path:
    folder = out / f"seed{seed}"
    cmd = [sys.executable, "-m", "mlft", "demo", "--seed", str(seed), "--out", str(folder), *extra]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return folder / "results.json"


def load(path: Path) -> dict:
    record = json.loads(path.read_text(encoding="utf-8"))
    return {r["label"]: r for r in record["tables"]["mitigation"]["rows"]}


def summarise(per_seed: dict[int, dict]) -> list[dict]:
    seeds = sorted(per_seed)
    first = per_seed[seeds[0]]
    base = next(label for label, r in first.items() if r.get("base"))
    out = []
    for label in first:
        for task in ("monolingual", "crosslingual"):
            for metric in METRICS:
                cells = [per_seed[s].get(label, {}).get("tasks", {}).get(task, {}).get(metric) for s in seeds]
                bases = [per_seed[s][base]["tasks"].get(task, {}).get(metric) for s in seeds]
                if any(c is None for c in cells) or any(b is None for b in bases):
                    continue
                values = [100 * c["value"] for c in cells]
                row = {
                    "row": label,
                    "task": task,
                    "metric": metric,
                    "values": values,
                    "mean": statistics.mean(values),
                    "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "halfwidths": [100 * (c["high"] - c["low"]) / 2 for c in cells],
                }
                if label != base:
                    gains = [v - 100 * b["value"] for v, b in zip(values, bases)]
                    ps = [c.get("p_vs_base") for c in cells]
                    est = seed_interval(gains)
                    row.update(
                        gains=gains,
                        p=ps,
                        gain_mean=est.mean,
                        gain_sd=est.sd,
                        gain_low=est.low,
                        gain_high=est.high,
                        verdict=("up" if est.mean > 0 else "down") if est.excludes_zero() else "unclear",
                    )
                out.append(row)
    return out


def markdown(rows: list[dict], seeds: list[int]) -> str:
    head = [
        "| row | task | metric | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± sd | gain per seed (p) "
        "| mean gain [95 % t-interval] | claim |",
        "|---|---|---|" + "---:|" * len(seeds) + "---:|---|---:|---|",
    ]
    lines = [
        f"# The demo's story over seeds {', '.join(map(str, seeds))}",
        "",
        "LPR and the guard in %, ±h = the pass's 95 % interval half-width; gain = row − base in the same seed, "
        "p = the table's paired test (Holm-adjusted); mean gain over the seeds with its 95 % t-interval "
        f"({len(seeds)} seeds: t with {len(seeds) - 1} degrees of freedom; a seed sets training and decoding "
        "together); claim: up / down = the interval excludes 0, unclear = it holds 0.",
        "",
        *head,
    ]
    for r in rows:
        vals = " | ".join(f"{v:.1f} ±{h:.1f}" for v, h in zip(r["values"], r["halfwidths"]))
        gains = ", ".join(
            f"{g:+.1f} ({p:.3f})" if p is not None else f"{g:+.1f}" for g, p in zip(r.get("gains", []), r.get("p", []))
        )
        gm = f"{r['gain_mean']:+.1f} [{r['gain_low']:+.1f}, {r['gain_high']:+.1f}]" if "gains" in r else ""
        lines.append(
            f"| {r['row']} | {r['task']} | {r['metric']} | {vals} | {r['mean']:.1f} ± {r['sd']:.1f} | "
            f"{gains} | {gm} | {r.get('verdict', 'base')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path("runs/demo_seeds"))
    ap.add_argument("--samples", type=int, help="replies per prompt (mlft demo --samples)")
    ap.add_argument("--no-run", action="store_true", help="only read finished runs")
    args, extra = ap.parse_known_args()
    if args.samples is not None:
        extra += ["--samples", str(args.samples)]
    per_seed = {}
    for s in args.seeds:
        path = args.out / f"seed{s}" / "results.json"
        if not args.no_run:
            path = run_demo(s, args.out, extra)
        per_seed[s] = load(path)
    rows = summarise(per_seed)
    text = markdown(rows, args.seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "seeds.md").write_text(text, encoding="utf-8")
    (args.out / "seeds.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()

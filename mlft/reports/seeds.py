"""The demo's story over training seeds: per row, task and metric each seed's value, and each claim as an estimate.

A seeds results file (`docs/results/demo_seeds.json`, written by measurements/demo_seeds.py) holds, per seed, the
rows of that seed's `mlft demo` mitigation table (`seeds`: {seed: [{label, base, tasks: {task: {metric: cell}}}]},
each cell {value, low, high, p_vs_base} in fractions as in a demo results file; a cell recorded from a printout
holds `half`, the printed half-width, instead of bounds it never printed). From it: each row's gain over the base
row in each seed, and the mean gain over the seeds with its t-interval (`mlft.stats.means.seed_interval`). Three
seeds are three draws: "holds in each seed" is a vote; the interval is the estimate, and a claim is "up" / "down"
only where it excludes 0.
"""

from __future__ import annotations

import statistics

from mlft.constants import TASKS
from mlft.errors import ConfigError
from mlft.reports.task_axis import task_number
from mlft.stats import seed_interval

METRICS = ("lpr", "task", "coverage", "degeneracy", "validity")  # "task": the task axis, where the runs had it


def _cell(row: dict, task: str, metric: str) -> dict | None:
    """A row's cell: the task axis ("task") is a capability column of the row, the rest its task's metrics."""
    if metric == "task":
        return task_number(row, task)
    return row.get("tasks", {}).get(task, {}).get(metric)


def summarise(per_seed: dict[str, dict], metrics: tuple[str, ...] = METRICS) -> list[dict]:
    """One row per (label, task, metric): values and half-widths per seed (%), mean and sd; for rows other than the
    base row the gains per seed, their p, and the mean gain with its 95 % t-interval and verdict."""
    seeds = list(per_seed)
    first = per_seed[seeds[0]]
    base = next(label for label, r in first.items() if r.get("base"))
    out = []
    for label in first:
        for task in TASKS:
            for metric in metrics:
                cells = [_cell(per_seed[s].get(label, {}), task, metric) for s in seeds]
                bases = [_cell(per_seed[s][base], task, metric) for s in seeds]
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
                    "halfwidths": [100 * (c["half"] if "half" in c else (c["high"] - c["low"]) / 2) for c in cells],
                }
                if label != base:
                    gains = [v - 100 * b["value"] for v, b in zip(values, bases)]
                    est = seed_interval(gains)
                    row.update(
                        gains=gains,
                        p=[c.get("p_vs_base") for c in cells],
                        gain_mean=est.mean,
                        gain_sd=est.sd,
                        gain_low=est.low,
                        gain_high=est.high,
                        verdict=("up" if est.mean > 0 else "down") if est.excludes_zero() else "unclear",
                    )
                out.append(row)
    return out


def per_seed_tables(record: dict) -> dict[str, dict]:
    """{seed: {label: row}} of a seeds results file."""
    seeds = record.get("seeds")
    if not seeds:
        raise ConfigError(f"results {record.get('name')!r}: no per-seed tables (`seeds`)")
    return {s: {r["label"]: r for r in rows} for s, rows in seeds.items()}


def estimate_row(record: dict, label: str, task: str, metric: str) -> dict:
    for r in summarise(per_seed_tables(record)):
        if (r["row"], r["task"], r["metric"]) == (label, task, metric):
            if "gains" not in r:
                raise ConfigError(f"results {record.get('name')!r}: {label!r} is the base row (no gain)")
            return r
    raise ConfigError(f"results {record.get('name')!r}: no seeds row {label!r} {task} {metric}")


def estimate(row: dict) -> str:
    """`+16.2 pp [+2.7, +29.6]`: the mean gain over seeds with its 95 % t-interval."""
    return f"{row['gain_mean']:+.1f} pp [{row['gain_low']:+.1f}, {row['gain_high']:+.1f}]"


def markdown(rows: list[dict], seeds: list[str]) -> str:
    """The seeds table (markdown), as docs/results/demo_seeds.md shows it."""
    lines = [
        "| row | task | metric | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± sd | gain per seed (p) "
        "| mean gain [95 % t-interval] | claim |",
        "|---|---|---|" + "---:|" * len(seeds) + "---:|---|---:|---|",
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
    return "\n".join(lines)

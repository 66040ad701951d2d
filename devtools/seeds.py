"""The demo's story over training seeds: per row, task and metric each seed's value, and each claim as an estimate.

A seeds results file (`docs/results/demo_seeds.json`, written by measurements/demo_seeds.py) holds, per seed, the
rows of that seed's `mlft demo` mitigation table (`seeds`: {seed: [{label, base, tasks: {task: {metric: cell}}}]},
each cell {value, low, high, p_vs_base} in fractions as in a demo results file; a cell recorded from a printout
holds `half`, the printed half-width, instead of bounds it never printed). From it: each row's gain over the base
row in each seed, and the mean gain over the seeds with its t-interval (`mlft.stats.means.seed_interval`). Three
seeds are three draws: "holds in each seed" is a vote; the interval is the estimate, and a claim is "up" / "down"
only where it excludes 0.

When every seed's gain is taken against one base pass (the seeds' base rows are the same pass), that pass's own
decoding draw is in every gain and the seeds' sd cannot see it: its variance is added to the interval
(`seed_interval(shared_sd=...)`: its half-width and the seeds' in quadrature). Its sd is measured where the results
file records reruns of the base pass (`base_draw`, written by `measured_draw`: its LPR, WPR, LCPR, coverage,
degeneracy and validity over K = 1 reruns that include the pass itself), bounded otherwise by the base cell's own
interval (prompt sampling and decoding together, so at least the draw's sd). A greedy pass (the task axis) has no
draw: there the problems' own sampling, which every seed shares, is added (`paired_share_sd` of each seed's
discordant problems, recorded by the table, else the most its scores allow), so agreeing seeds keep a width.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist

import numpy as np

from mlft.constants import TASKS
from mlft.errors import ConfigError, DataError
from mlft.reports.task_axis import task_number
from mlft.stats import Outcome, load_compact, paired_share_sd, pass_values, seed_interval

METRICS = ("lpr", "task", "coverage", "degeneracy", "validity")  # "task": the task axis, where the runs had it
RERUN_METRICS = ("lpr", "wpr", "lcpr", "coverage", "degeneracy", "validity")  # what reruns of a pass measure
HOW = {"measured": "measured on reruns", "greedy": "greedy: the problems' sampling", "bound": "bounded by its interval"}


def _cell(row: dict, task: str, metric: str) -> dict | None:
    """A row's cell: the task axis ("task") is a capability column of the row, the rest its task's metrics."""
    if metric == "task":
        return task_number(row, task)
    return row.get("tasks", {}).get(task, {}).get(metric)


def _half(cell: dict) -> float:
    """The cell's half-width: its printed `half`, or half its bounds; NaN where it has neither."""
    if cell.get("half") is None and None in (cell.get("low"), cell.get("high")):
        return float("nan")
    return cell["half"] if cell.get("half") is not None else (cell["high"] - cell["low"]) / 2


def _discordant(base: dict, cell: dict) -> tuple[float, float, int]:
    """A task cell's discordant problems against the base's (`discordant`), else the most its shares allow."""
    n, a, b = cell["n"], base["value"], cell["value"]
    got = cell.get("discordant") or {"up": n * min(b, 1 - a), "down": n * min(a, 1 - b), "n": n}
    return got["up"], got["down"], got["n"]


def shared_base(per_seed: dict[str, dict], base: str) -> bool:
    """Whether every seed's base row is the same pass (one base pass the gains of every seed are taken against)."""
    rows = [(per_seed[s][base].get("tasks"), per_seed[s][base].get("capability")) for s in per_seed]
    return len(rows) > 1 and all(r == rows[0] for r in rows)


def base_sd(base_row: dict, task: str, metric: str, draw: dict | None = None) -> tuple[float, float | None, str]:
    """(sd in pp, its degrees of freedom or None, "measured" / "greedy" / "bound") of a base cell's own decoding
    draw: from `draw` (a results file's `base_draw`) where it measured (task, metric) on reruns, 0 where the pass
    decoded greedily (no draw), else bounded by the cell's interval (half-width / z: the prompt population's sd,
    which holds the decoding draw's)."""
    draw = draw or {}
    if metric in draw.get("greedy", ()):
        return 0.0, None, "greedy"
    got = (draw.get("tasks") or {}).get(task, {}).get(metric)
    if got:
        return float(got["sd"]), float(got["df"]), "measured"
    half = _half(_cell(base_row, task, metric) or {})
    if half != half:  # NaN: no interval
        raise DataError(f"the base row's {task} {metric} has no interval to bound its own draw (no `base_draw` entry)")
    return 100 * half / NormalDist().inv_cdf(0.975), None, "bound"


def greedy_metrics(demo_config: dict) -> list[str]:
    """The metrics whose base pass decodes greedily (a demo config's task axis, `task_suite`, at temperature 0)."""
    decoding = ((demo_config.get("task_suite") or {}).get("settings") or {}).get("decoding") or {}
    return ["task"] if decoding.get("temperature") == 0 else []


def summarise(per_seed: dict[str, dict], metrics: tuple[str, ...] = METRICS, draw: dict | None = None) -> list[dict]:
    """One row per (label, task, metric): values and half-widths per seed (%), mean and sd; for rows other than the
    base row the gains per seed, their p, and the mean gain with its 95 % interval and verdict: the t-interval
    over seeds, with the base pass's own draw added where the seeds share one base pass (`base_sd`; `draw`: the
    results file's `base_draw`)."""
    seeds = list(per_seed)
    first = per_seed[seeds[0]]
    base = next(label for label, r in first.items() if r.get("base"))
    shared = shared_base(per_seed, base)
    out = []
    for label in first:
        for task in TASKS:
            for metric in metrics:
                cells = [_cell(per_seed[s].get(label, {}), task, metric) for s in seeds]
                bases = [_cell(per_seed[s][base], task, metric) for s in seeds]
                pairs = list(zip(bases, cells))
                if any(None in q for q in pairs):
                    continue
                values = [100 * c["value"] for c in cells]
                row = {
                    "row": label,
                    "task": task,
                    "metric": metric,
                    "values": values,
                    "mean": statistics.mean(values),
                    "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "halfwidths": [100 * _half(c) for c in cells],
                }
                if label != base:
                    gains = [100 * c["value"] - 100 * b["value"] for b, c in pairs]
                    b_sd, b_df, b_how = base_sd(first[base], task, metric, draw) if shared else (0.0, None, "")
                    if b_how == "greedy":  # no draw; the problems every seed shares (else agreeing seeds: no width)
                        b_sd = 100 * statistics.mean(paired_share_sd(*_discordant(b, c)) for b, c in pairs)
                    est = seed_interval(gains, shared_sd=b_sd, shared_df=b_df)
                    row.update(gains=gains, p=[c.get("p_vs_base") for c in cells], gain_mean=est.mean)
                    row.update(gain_sd=est.sd, gain_low=est.low, gain_high=est.high, base_sd=b_sd, base_sd_from=b_how)
                    row["verdict"] = ("up" if est.mean > 0 else "down") if est.excludes_zero() else "unclear"
                out.append(row)
    return out


def measured_draw(reruns: Sequence[Outcome], base_row: dict, source: str) -> dict:
    """A results file's `base_draw`: the sd (pp) of each task's official metrics over K = 1 reruns of the base pass
    (outcomes of several replies per prompt; pass j = reply j of every prompt: the same model, suite and
    decoding), with their degrees of freedom. The reruns must include the base pass itself: its LPR on every task
    is one of theirs, else DataError (reruns of another model or suite would measure another draw)."""
    samples = sorted({o.sample for o in reruns})
    if len(samples) < 2:
        raise DataError(f"{source}: {len(samples)} replies per prompt; an sd needs two reruns")
    by_sample: dict[int, list[Outcome]] = {j: [] for j in samples}
    for o in reruns:
        by_sample[o.sample].append(o)
    passes = list(by_sample.values())
    out: dict[str, dict] = {}
    for task in TASKS:
        cell = _cell(base_row, task, "lpr")
        if cell is None:
            continue
        lpr = pass_values(passes, task, "lpr")
        if not np.isclose(lpr, cell["value"], rtol=0, atol=1e-12).any():
            raise DataError(
                f"{source}: the base pass's {task} LPR {cell['value']:.6f} is none of the reruns' "
                f"({', '.join(f'{v:.4f}' for v in lpr[:4])}, ...): they are not reruns of this pass"
            )
        out[task] = {}
        for metric in RERUN_METRICS:
            try:
                values = 100 * np.asarray(pass_values(passes, task, metric), np.float64)
            except KeyError:
                continue
            out[task][metric] = {"sd": float(values.std(ddof=1)), "df": len(values) - 1}
    return {"source": source, "reruns": len(passes), "tasks": out}


def attach_draw(record: dict, reruns: Path | None, greedy: Sequence[str] = ()) -> str:
    """Record in a seeds results file (`base_draw`) its shared base pass's draw: measured on `reruns` (a
    `save_compact` file of K = 1 reruns that hold the pass), none for the `greedy` metrics (`greedy_metrics`);
    says what it did. Without reruns, or where they do not hold the pass, the draw stays bounded by the base cell's
    interval; where the seeds have no shared base pass nothing is added (their sd holds its draws). A reruns file
    that is missing or unreadable is a DataError naming it."""
    per_seed = per_seed_tables(record)
    first = next(iter(per_seed.values()))
    base = next(label for label, r in first.items() if r.get("base"))
    record.pop("base_draw", None)
    if not shared_base(per_seed, base):
        return "each seed has its own base pass: the seeds' sd holds its draw"
    draw: dict = {"greedy": list(greedy)}
    if reruns is None:
        said = "no reruns of the base pass: its draw is bounded by its interval"
    else:
        if not Path(reruns).is_file():
            raise DataError(f"{reruns}: no such reruns file (--base-reruns)")
        outcomes, where = load_compact(reruns)[0], os.path.relpath(reruns)
        try:
            draw.update(measured_draw(outcomes, first[base], str(reruns) if where.startswith("..") else where))
            said = f"the base pass's draw measured on {draw['reruns']} reruns ({draw['source']})"
        except DataError as exc:  # reruns of another pass (another model, suite or decoding): said, then bounded
            said = f"{exc}; the base pass's draw is bounded by its interval"
    record["base_draw"] = draw
    return said + (f"; greedy (no draw): {', '.join(greedy)}" if greedy else "")


def per_seed_tables(record: dict) -> dict[str, dict]:
    """{seed: {label: row}} of a seeds results file."""
    seeds = record.get("seeds")
    if not seeds:
        raise ConfigError(f"results {record.get('name')!r}: no per-seed tables (`seeds`)")
    return {s: {r["label"]: r for r in rows} for s, rows in seeds.items()}


def summarise_record(record: dict) -> list[dict]:  # with the base pass's measured draw, where recorded
    return summarise(per_seed_tables(record), draw=record.get("base_draw"))


def estimate_row(record: dict, label: str, task: str, metric: str) -> dict:
    for r in summarise_record(record):
        if (r["row"], r["task"], r["metric"]) == (label, task, metric):
            if "gains" not in r:
                raise ConfigError(f"results {record.get('name')!r}: {label!r} is the base row (no gain)")
            return r
    raise ConfigError(f"results {record.get('name')!r}: no seeds row {label!r} {task} {metric}")


def estimate(row: dict) -> str:
    """`+16.2 pp [+2.7, +29.6]`: the mean gain over seeds with its 95 % interval."""
    return f"{row['gain_mean']:+.1f} pp [{row['gain_low']:+.1f}, {row['gain_high']:+.1f}]"


def markdown(rows: list[dict], seeds: list[str]) -> str:
    """The seeds table (markdown), as docs/results/demo_seeds.md shows it, and under it what the intervals hold."""
    lines = [
        "| row | task | metric | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± sd | gain per seed (p) "
        "| mean gain [95 % interval] | claim |",
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
    shared = {(r["task"], r["metric"]): (r["base_sd"], r["base_sd_from"]) for r in rows if r.get("base_sd_from")}
    if not shared:
        return "\n".join(lines + ["", "Mean gain: the t-interval over the seeds' gains (each seed its own base pass)."])
    sds = "; ".join(f"{t} {m} {sd:.2f} ({HOW[how]})" for (t, m), (sd, how) in shared.items())
    note = "Mean gain: the t-interval over the seeds' gains, with the variance of the one base pass they share added"
    note += " (its own decoding draw, which the seeds' sd cannot see): the two half-widths in quadrature. That pass's"
    return "\n".join([*lines, "", f"{note} sd, pp: {sds}."])

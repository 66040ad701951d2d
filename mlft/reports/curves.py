"""LPR / WPR / LCPR against training step for several runs and variants: a PNG and a table."""

from __future__ import annotations

from pathlib import Path

from mlft.constants import METRICS, TASKS
from mlft.errors import DataError
from mlft.reports.format import cell, render
from mlft.training.curves import read_curves



def load_runs(run_dirs: list[str | Path]) -> dict[str, list[dict]]:
    """Run label (the folder name, made unique) -> its curve rows."""
    out: dict[str, list[dict]] = {}
    for d in run_dirs:
        d = Path(d)
        rows = read_curves(d)
        if not rows:
            raise DataError(f"{d}: no curve rows (no {d / 'curves.jsonl'}); is it a `mlft train` run directory?")
        label = d.name if d.name not in out else str(d)
        out[label] = rows
    return out


def series(rows: list[dict], variants: list[str] | None = None) -> dict[tuple[str, str, str], list[tuple]]:
    """(variant, task, metric) -> [(step, value)] of the language averages, sorted by step."""
    out: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in rows:
        if r["language"] != "avg" or r["metric"] not in METRICS or r["value"] is None:
            continue
        if variants and r["variant"] not in variants:
            continue
        variant = r["variant"] if r.get("suite_variant") in (None, "default") else f"{r['variant']}:{r['suite_variant']}"
        out.setdefault((variant, r["task"], r["metric"]), {})[int(r["step"])] = float(r["value"])
    return {k: sorted(v.items()) for k, v in out.items()}


def curve_table(runs: dict[str, list[dict]], variants: list[str] | None = None, fmt: str = "table") -> str:
    header = ["run", "variant", "step"] + [f"{t[:5]} {m.upper()}" for t in TASKS for m in METRICS]
    body = []
    for label, rows in runs.items():
        s = series(rows, variants)
        for variant in sorted({k[0] for k in s}, key=lambda v: (v != "model", v)):
            steps = sorted({step for k, pts in s.items() if k[0] == variant for step, _ in pts})
            for step in steps:
                vals = [dict(s.get((variant, t, m), [])).get(step) for t in TASKS for m in METRICS]
                body.append([label, variant, step] + [cell(v) for v in vals])
    return render(header, body, fmt, title="LCB per checkpoint (language averages, %)")


def plot_curves(runs: dict[str, list[dict]], out: str | Path, variants: list[str] | None = None) -> Path:
    """One panel per (task, metric); one line per (run, variant)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(TASKS), len(METRICS), figsize=(13, 7), sharex=True, squeeze=False)
    for label, rows in runs.items():
        s = series(rows, variants)
        for (variant, task, metric), pts in sorted(s.items()):
            if task not in TASKS:
                continue
            ax = axes[TASKS.index(task)][METRICS.index(metric)]
            xs, ys = zip(*pts)
            style = "-o" if variant == "model" else "--s" if len(pts) > 1 else "s"
            ax.plot(xs, [100 * y for y in ys], style, ms=4, label=f"{label} / {variant}")
    for i, task in enumerate(TASKS):
        for j, metric in enumerate(METRICS):
            ax = axes[i][j]
            ax.set_title(f"{task} {metric.upper()}")
            ax.set_ylim(-2, 102)
            ax.grid(alpha=0.3)
            if i == len(TASKS) - 1:
                ax.set_xlabel("training step")
    handles, labels = axes[0][0].get_legend_handles_labels()
    for row in axes:
        for ax in row:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize=8)
    fig.tight_layout(rect=(0, 0.08 + 0.03 * (len(labels) // 4), 1, 1))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

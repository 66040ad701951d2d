"""Tables and plots of a suite's variants side by side (paper Tables 8, 9, 11): from long-format metric rows."""

from __future__ import annotations

from pathlib import Path

from mlft.benchmarks.lcb.traces import trace_metric
from mlft.constants import METRICS
from mlft.format import cell, render
from mlft.io.metric_rows import MetricRow, rows_of


def sweep_tables(rows: list[MetricRow], fmt: str = "markdown") -> list[tuple[str, str]]:
    """Per task and metric: rows = setting (variant), columns = avg + languages. [(name, rendered table)]. `trace any`
    is the share of replies with a reasoning trace."""
    rows = rows_of(rows)
    out = []
    variants = list(dict.fromkeys(r.variant for r in rows))
    # then the reasoning traces' (an lcb suite's trace_<metric> rows, present when a reply held a trace marker)
    shown = [(m, m.upper()) for m in METRICS] + [(trace_metric(m), f"trace {m.upper()}") for m in (*METRICS, "any")]
    for task in dict.fromkeys(r.task for r in rows):
        for metric, name in shown:
            sel = [r for r in rows if r.task == task and r.metric == metric]
            if not sel:
                continue
            langs = sorted({r.language for r in sel if r.language != "avg"})
            val = {(r.variant, r.language): r.value for r in sel}
            body = [[v] + [cell(val.get((v, lang))) for lang in ["avg", *langs]] for v in variants]
            out.append((f"{task}_{metric}", render(["setting", "avg", *langs], body, fmt, f"{task} {name} (%)")))
    return out


def plot_sweep(rows: list[MetricRow], path: Path, title: str) -> Path:
    """One panel per task: LPR/WPR/LCPR (language averages) against the variants."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rows_of(rows)
    variants = list(dict.fromkeys(r.variant for r in rows))
    tasks = list(dict.fromkeys(r.task for r in rows))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for metric in METRICS:
            val = {r.variant: r.value for r in rows if r.task == task and r.metric == metric and r.language == "avg"}
            if val:
                ax.plot(
                    range(len(variants)),
                    [100 * val[v] if v in val else float("nan") for v in variants],
                    marker="o",
                    label=metric.upper(),
                )
        ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right")
        ax.set_title(task)
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

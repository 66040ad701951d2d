"""LPR / WPR / LCPR and the guard (coverage, degeneracy, lexical validity) against training step for several runs:
a PNG with 95 % bands, a per-run language x checkpoint heatmap, and a table.

A run that continues another (DPO on an SFT run's `final/`) is drawn after it on the x-axis: its steps are
offset by the parent run's last step, read from the chain the run recorded (chain.json) or its recipe's model.
Colour = run, line style = variant (solid: the model itself; dashed: few-shot / intervention / quantized).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mlft.constants import GUARD_METRICS, METRICS, TASKS
from mlft.errors import DataError
from mlft.format import cell, render
from mlft.io.curve_file import read_curves

PANELS = (*METRICS, *GUARD_METRICS)
TASK = "task"  # the task axis (suites with `answers: true`): a panel and a column where a pass has it


def load_runs(run_dirs: list[str | Path]) -> dict[str, list[dict]]:
    """Run label (the folder name, made unique) -> its curve rows, with steps offset for continued runs."""
    out: dict[str, list[dict]] = {}
    for d in run_dirs:
        d = Path(d)
        rows = read_curves(d)
        if not rows:
            raise DataError(f"{d}: no curve rows (no {d / 'curves.jsonl'}); is it a `mlft train` run directory?")
        offset = step_offset(d)
        if offset:
            rows = [{**r, "step": int(r["step"]) + offset} for r in rows]
            if not any(int(r["step"]) == offset for r in rows):  # start from where the parent ended
                rows = _parent_rows(d, offset) + rows
        label = d.name if d.name not in out else str(d)
        out[label] = rows
    return out


def _parent_step(model: str | None) -> int:
    """Last step of the run whose output `model` is (`RUN/final`, `RUN/final_adapter`,
    `RUN/checkpoints/checkpoint-N`)."""
    if not model:
        return 0
    path = Path(model)
    if path.name.startswith("checkpoint-") and path.parent.name == "checkpoints":
        run = path.parent.parent
        own = int(path.name.split("-", 1)[1])
    elif path.name in ("final", "final_adapter"):
        run, own = path.parent, None
    else:
        return 0
    marker = run / "complete"
    if own is None:
        if not marker.is_file():
            return 0
        own = int(json.loads(marker.read_text(encoding="utf-8")).get("global_step") or 0)
    return own + step_offset(run)


def step_offset(run_dir: Path) -> int:
    """Steps before this run's step 0: the parent run's last step (recursively), 0 for a run from a base model."""
    chain = Path(run_dir) / "chain.json"
    model = None
    if chain.is_file():
        model = json.loads(chain.read_text(encoding="utf-8")).get("source")
    if model is None and (Path(run_dir) / "recipe.yaml").is_file():
        model = (yaml.safe_load((Path(run_dir) / "recipe.yaml").read_text(encoding="utf-8")) or {}).get("model")
    try:
        return _parent_step(model)
    except (OSError, ValueError):
        return 0


def _parent_run(run_dir: Path) -> Path | None:
    chain = Path(run_dir) / "chain.json"
    model = json.loads(chain.read_text(encoding="utf-8")).get("source") if chain.is_file() else None
    if model is None and (Path(run_dir) / "recipe.yaml").is_file():
        model = (yaml.safe_load((Path(run_dir) / "recipe.yaml").read_text(encoding="utf-8")) or {}).get("model")
    if not model:
        return None
    path = Path(model)
    run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return run if (run / "curves.jsonl").is_file() else None


def _parent_rows(run_dir: Path, offset: int) -> list[dict]:
    """The parent run's `model` rows at the step this run continues from (its step 0, not evaluated again)."""
    parent = _parent_run(run_dir)
    if parent is None:
        return []
    shift = step_offset(parent)
    rows = [
        {**r, "step": int(r["step"]) + shift, "inherited": True} for r in read_curves(parent) if r["variant"] == "model"
    ]
    return [r for r in rows if r["step"] == offset]


def _variant(r: dict) -> str:
    return r["variant"] if r.get("suite_variant") in (None, "default") else f"{r['variant']}:{r['suite_variant']}"


def series(rows: list[dict], variants: list[str] | None = None, language: str = "avg"):
    """(variant, task, metric) -> [(step, value, low, high)] sorted by step."""
    out: dict[tuple[str, str, str], dict[int, tuple]] = {}
    for r in rows:
        if r["language"] != language or r["metric"] not in (*PANELS, TASK) or r["value"] is None:
            continue
        if variants and r["variant"] not in variants:
            continue
        out.setdefault((_variant(r), r["task"], r["metric"]), {})[int(r["step"])] = (
            float(r["value"]),
            r.get("low"),
            r.get("high"),
        )
    return {k: [(s, *v) for s, v in sorted(d.items())] for k, d in out.items()}


def curve_table(runs: dict[str, list[dict]], variants: list[str] | None = None, fmt: str = "table") -> str:
    task = any(k[2] == TASK for rows in runs.values() for k in series(rows, variants))
    header = (
        ["run", "variant", "step"]
        + [f"{t[:5]} {m.upper()}" for t in TASKS for m in METRICS]
        + [f"{t[:5]} cov" for t in TASKS]
        + [f"{t[:5]} valid" for t in TASKS]
        + ([f"{t[:5]} task" for t in TASKS] if task else [])
    )
    body = []
    for label, rows in runs.items():
        s = series(rows, variants)
        for variant in sorted({k[0] for k in s}, key=lambda v: (v != "model", v)):
            steps = sorted({p[0] for k, pts in s.items() if k[0] == variant for p in pts})
            for step in steps:
                get = lambda t, m: next((p[1] for p in s.get((variant, t, m), []) if p[0] == step), None)  # noqa: E731, B023
                vals = (
                    [get(t, m) for t in TASKS for m in METRICS]
                    + [get(t, "coverage") for t in TASKS]
                    + [get(t, "validity") for t in TASKS]
                    + ([get(t, TASK) for t in TASKS] if task else [])
                )
                body.append([label, variant, step] + [cell(v) for v in vals])
    return render(header, body, fmt, title="LCB per checkpoint (language averages, %)")


def plot_curves(runs: dict[str, list[dict]], out: str | Path, variants: list[str] | None = None) -> Path:
    """One panel per (task, metric) with 95 % bands; colour per run, line style per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.get_cmap("tab10").colors
    styles = ["-", "--", ":", "-."]
    all_variants = sorted(
        {k[0] for rows in runs.values() for k in series(rows, variants)}, key=lambda v: (v != "model", v)
    )
    panels = list(PANELS)
    if any(k[2] == TASK for rows in runs.values() for k in series(rows, variants)):
        panels.append(TASK)  # the share of replies that answer the suite's verifiable prompts
    fig, axes = plt.subplots(len(TASKS), len(panels), figsize=(3.3 * len(panels), 6.6), sharex=True, squeeze=False)
    for i, (label, rows) in enumerate(runs.items()):
        for (variant, task, metric), pts in sorted(series(rows, variants).items()):
            if task not in TASKS:
                continue
            ax = axes[TASKS.index(task)][panels.index(metric)]
            xs = [p[0] for p in pts]
            ys = [100 * p[1] for p in pts]
            style = styles[all_variants.index(variant) % len(styles)]
            ax.plot(
                xs,
                ys,
                style,
                marker="o" if variant == "model" else "s",
                ms=3.5,
                color=colours[i % 10],
                label=f"{label} / {variant}",
            )
            if all(p[2] is not None and p[3] is not None for p in pts) and len(pts) > 0:
                ax.fill_between(
                    xs,
                    [100 * p[2] for p in pts],
                    [100 * p[3] for p in pts],
                    color=colours[i % 10],
                    alpha=0.12 if variant == "model" else 0.06,
                    linewidth=0,
                )
    for i, task in enumerate(TASKS):
        for j, metric in enumerate(panels):
            ax = axes[i][j]
            ax.set_title(f"{task} {metric.upper() if metric in METRICS else metric}", fontsize=9)
            ax.set_ylim(-2, 102)
            ax.grid(alpha=0.3)
            if i == len(TASKS) - 1:
                ax.set_xlabel("training step")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    ncol = min(5, max(1, len(labels)))
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8)
    fig.suptitle("LCB per checkpoint (95 % bands; a continued run starts where its parent ended)", fontsize=10)
    fig.tight_layout(rect=(0, 0.05 + 0.03 * ((len(labels) - 1) // ncol), 1, 0.97))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_heatmap(label: str, rows: list[dict], out: str | Path, metric: str = "lpr", variant: str = "model") -> Path:
    """Language x checkpoint heatmap of one run (one panel per task)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sel = [
        r
        for r in rows
        if r["metric"] == metric
        and r["variant"] == variant
        and r["language"] != "avg"
        and r["value"] is not None
        and r.get("suite_variant") in (None, "default")
    ]
    if not sel:
        raise DataError(f"{label}: no per-language {metric} rows for variant {variant!r}")
    tasks = [t for t in TASKS if any(r["task"] == t for r in sel)]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks) + 1, 5.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        cells = [r for r in sel if r["task"] == task]
        langs = sorted({r["language"] for r in cells})
        steps = sorted({int(r["step"]) for r in cells})
        grid = np.full((len(langs), len(steps)), np.nan)
        for r in cells:
            grid[langs.index(r["language"]), steps.index(int(r["step"]))] = 100 * r["value"]
        im = ax.imshow(grid, vmin=0, vmax=100, cmap="RdYlGn", aspect="auto")
        ax.set_xticks(range(len(steps)), steps, fontsize=8)
        ax.set_yticks(range(len(langs)), langs, fontsize=8)
        for (y, x), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(x, y, f"{v:.0f}", ha="center", va="center", fontsize=7)
        ax.set_title(f"{task} {metric.upper()} (%)", fontsize=9)
        ax.set_xlabel("training step")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
    fig.suptitle(f"{label}: {metric.upper()} per language and checkpoint ({variant})", fontsize=10)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def plot_reward_curves(runs: dict[str, list[dict]], out: str | Path) -> Path:
    """GRPO reward curves {label: rows of the run's rewards.jsonl} (mlft.training.rollouts.read_reward_curves): one
    panel per reward term (its mean per logged step) plus the weighted reward and the KL; colour per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    terms = list(dict.fromkeys(t for rows in runs.values() for r in rows for t in r.get("terms", {})))
    panels = [*terms, "reward", "kl"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), 3.0), squeeze=False)
    colours = plt.get_cmap("tab10").colors
    for i, (label, rows) in enumerate(runs.items()):
        for ax, panel in zip(axes[0], panels):
            pts = [
                (r["step"], r["terms"][panel]["mean"] if panel in terms else r.get(panel))
                for r in rows
                if (r.get("terms", {}).get(panel) or {}).get("mean") is not None or r.get(panel) is not None
            ]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, color=colours[i % 10], label=label)
    for ax, panel in zip(axes[0], panels):
        ax.set_title(panel if panel in ("reward", "kl") else f"term: {panel}", fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out

"""Finished (or running) training runs: `mlft.load_run` (one run folder: curves, passes, checkpoints) and
`mlft.load_runs` (several, as the curves figure shows them)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import ClassVar

from mlft.api.results import Result
from mlft.errors import DataError
from mlft.io import curve_file
from mlft.reports.curves import curve_table, plot_curves, plot_heatmap
from mlft.reports.curves import load_runs as curves_of
from mlft.reports.curves import plot_reward_curves as plot_rewards
from mlft.training.rollouts import read_reward_curves


@dataclasses.dataclass(eq=True)
class Run(Result):
    """A `mlft train` run folder: its evaluation curves (one record per step, variant, task, language and metric;
    steps offset for a run that continues another), its evaluation passes, its checkpoints.

    >>> import mlft
    >>> run = mlft.load_run("runs/demo/crosslingual_sft")  # doctest: +SKIP
    >>> print(run.table()); run.plot("curves.png")  # doctest: +SKIP
    """

    KIND: ClassVar[str] = "run"

    run_dir: str
    curves: list[dict]
    passes: list[dict] = dataclasses.field(default_factory=list)
    checkpoints: list[str] = dataclasses.field(default_factory=list)

    @property
    def label(self) -> str:
        """The run's name in tables and plots: its folder's name."""
        return Path(self.run_dir).name

    @property
    def final(self) -> str | None:
        """The final model's folder (final/ or final_adapter/), when the run finished."""
        for name in ("final", "final_adapter"):
            if (Path(self.run_dir) / name).is_dir():
                return str(Path(self.run_dir) / name)
        return None

    @property
    def done(self) -> set[tuple[int, str]]:
        """The (step, variant) evaluation passes recorded (as written: steps not offset)."""

        return curve_file.done(self.run_dir)

    def records(self) -> list[dict]:
        """The curve records: step, variant, suite, task, language, metric, value, low, high, n, ..."""
        return [dict(r) for r in self.curves]

    def table(self, fmt: str = "table") -> str:
        """LCB per checkpoint (language averages, %), as `mlft curves` prints it."""

        return curve_table({self.label: self.curves}, fmt=fmt)

    def plot(self, path: str | Path) -> Path:
        """The curves (one panel per task and metric, interval bands) as a PNG."""

        return plot_curves({self.label: self.curves}, path)

    def heatmap(self, path: str | Path, metric: str = "lpr", variant: str = "model") -> Path:
        """`metric` per language and step as a heatmap PNG."""

        return plot_heatmap(self.label, self.curves, path, metric=metric, variant=variant)

    def reward_curves(self) -> list[dict]:
        """GRPO: the reward terms per logged step (rewards.jsonl); empty for other trainers."""

        return read_reward_curves(self.run_dir)

    def copy_pass(self, into: str | Path, step: int = 0, variant: str = "model") -> Run:
        """Record this run's pass (`step`, `variant`: rows and files) in the run folder `into` too, unless it holds
        one already (e.g. a base model's `step=0` pass shared by every run that starts from it). Returns `into`."""

        dst = Path(into)
        if (step, variant) not in curve_file.done(dst):
            rows = [r for r in curve_file.read_curves(self.run_dir) if r["step"] == step and r["variant"] == variant]
            src = Path(self.run_dir) / "evals" / f"step-{step:06d}" / variant
            if src.is_dir():
                shutil.copytree(src, dst / "evals" / f"step-{step:06d}" / variant, dirs_exist_ok=True)
            dst.mkdir(parents=True, exist_ok=True)
            curve_file.append_pass(dst, step, variant, rows, 0.0, f"copied from {self.run_dir}")
        return load_run(dst)


def load_run(run_dir: str | Path) -> Run:
    """The run folder `run_dir` (`mlft train`'s, or one `mlft.evaluate_checkpoint` wrote): curves, passes and
    checkpoints as they are now.

    >>> import mlft
    >>> mlft.load_run("runs/demo/crosslingual_sft").checkpoints  # doctest: +SKIP
    """

    d = Path(run_dir)
    if not d.is_dir():
        raise DataError(f"{d}: no such run folder")
    curves = next(iter(curves_of([d]).values())) if curve_file.read_curves(d) else []
    ckpt = d / "checkpoints"
    checkpoints = sorted(
        (str(p) for p in ckpt.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.rsplit("-", 1)[-1]),
    )
    return Run(str(d), curves, curve_file.read_passes(d), checkpoints)


@dataclasses.dataclass(eq=True)
class Curves(Result):
    """Several runs' curves as the curves figure shows them (`mlft.load_runs`): {run label: curve records}.

    >>> import mlft
    >>> c = mlft.load_runs(["runs/demo/english_sft", "runs/demo/crosslingual_sft"])  # doctest: +SKIP
    >>> print(c.table()); c.plot("curves.png")  # doctest: +SKIP
    """

    KIND: ClassVar[str] = "curves"

    runs: dict[str, list[dict]]

    def records(self) -> list[dict]:
        """Every run's curve records, each with its run's label (`run`)."""
        return [{"run": label, **r} for label, rows in self.runs.items() for r in rows]

    def table(self, fmt: str = "table", variants: list[str] | None = None) -> str:
        """LCB per checkpoint of every run (language averages, %)."""

        return curve_table(self.runs, variants, fmt)

    def plot(self, path: str | Path, variants: list[str] | None = None) -> Path:
        """One panel per (task, metric) with interval bands; colour per run, line style per variant."""

        return plot_curves(self.runs, path, variants)

    def heatmaps(self, folder: str | Path, metric: str = "lpr", variant: str = "model") -> list[Path]:
        """One heatmap PNG per run, folder/heatmap_<run>.png."""

        return [
            plot_heatmap(label, rows, Path(folder) / f"heatmap_{label}.png", metric=metric, variant=variant)
            for label, rows in self.runs.items()
        ]


def load_runs(run_dirs: list[str | Path]) -> Curves:
    """Several run folders' curves (labels: the folder names, made unique; steps offset for continued runs)."""

    return Curves(curves_of(list(run_dirs)))


def plot_reward_curves(runs: list[str | Path], path: str | Path) -> Path:
    """GRPO runs' reward terms per step as one PNG (`Run.reward_curves`)."""

    return plot_rewards({Path(d).name: load_run(d).reward_curves() for d in runs}, path)

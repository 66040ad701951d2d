"""The spec of the mitigation tables (`mlft show table SPEC.yaml`; the demo writes its tables' specs as table.yaml): the
rows and where their numbers come from, the base row, capability and judge columns, the per-language detail and the
quantization rows; loaded and checked before any number is read (`load_spec`, `check_spec`) and written back as a
user would write it (`spec_record`). Kept apart from what fills the tables (a row's numbers and its tests against the
base row, `mlft.reports.table_rows`) and from their layouts (`mlft.reports.mitigation`), which read a spec and
never change it. A spec:

    title: Mitigation on SmolLM2-135M-Instruct (CPU demo)
    base: base                             # the row every other row is tested against (default: the first)
    rows:                                  # Table 11 rows, any labels, in this order
      - {label: base, run: runs/cpu/english_sft, step: 0}
      - {label: +Q/A template, run: runs/cpu/english_sft, step: 0, variant: Q/A template}
      - {label: +English SFT, run: runs/cpu/english_sft, step: last}
      - {label: +Multilingual SFT, rows_file: elsewhere/scores.jsonl, suite_variant: default}
    quantization:                          # A12: one row per (label, variant)
      - {label: +Multilingual SFT, run: runs/cpu/multilingual_sft, step: last, variants: [model, w8, w4, w8a8]}
    per_language: {task: crosslingual, metric: lpr}   # A18/A19 detail (or a list of such)
    capability:                            # optional capability columns (e.g. an `lm_eval` suite's rows)
      - {task: mlft_polyglot_mc_shared, metric: acc, label: "Facts acc", variant: capability}

A row's numbers come from `run` (a `mlft train` run directory: curves.jsonl) at `step` (an int or `last`) and
`variant` (default `model`), or from `rows_file` (long-format metric rows, e.g. the scores.jsonl of `mlft eval`).
Paths are relative to the spec.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlft.config import from_dict, load_yaml
from mlft.constants import TASKS
from mlft.errors import ConfigError

SIG = 0.05  # the default significance level (1 - TableSpec.confidence)


@dataclass
class RowSpec:
    label: str = field(metadata={"help": "Row label, e.g. '+Multilingual SFT'."})
    run: str | None = field(default=None, metadata={"help": "Run directory (curves.jsonl)."})
    rows_file: str | None = field(default=None, metadata={"help": "JSONL of long-format metric rows instead."})
    step: int | Literal["last"] = field(default="last", metadata={"help": "Training step, or 'last'."})
    variant: str = field(default="model", metadata={"help": "Curve variant (model, a few-shot name, w8...)."})
    suite_variant: str | None = field(
        default=None,
        metadata={"help": "The suite's own variant (e.g. 'Q/A 1-shot' of the fewshot suite); default: any."},
    )
    variants: list[str] = field(
        default_factory=lambda: ["model"],
        metadata={"help": "Quantization table only: the variants to show side by side."},
    )
    capability_rows_file: str | None = field(
        default=None,
        metadata={
            "help": "JSONL of metric rows holding this row's capability columns (e.g. an lm_eval suite's scores.jsonl)."
        },
    )


@dataclass
class Capability:
    task: str = field(metadata={"help": "Task of the metric rows (e.g. a harness task or group name)."})
    metric: str = field(default="acc", metadata={"help": "Metric (e.g. acc, acc_norm, exact_match/strict-match)."})
    label: str | None = field(default=None, metadata={"help": "Column header (default: 'task metric')."})
    variant: str | None = field(
        default="capability",
        metadata={
            "help": "Curve variant holding the rows, for rows read from a run directory; null = the row's own variant "
            "(e.g. the second judge's lpr@langdetect, scored in the same pass)."
        },
    )
    language: str = field(default="avg", metadata={"help": "Language of the rows (lm_eval rows: avg)."})

    @property
    def header(self) -> str:
        return self.label or f"{self.task} {self.metric}"


@dataclass
class PerLanguage:
    task: Literal["monolingual", "crosslingual"] = field(default="crosslingual", metadata={"help": "LCB task."})
    metric: Literal["lpr", "wpr", "lcpr"] = field(default="lpr", metadata={"help": "Metric per language."})


@dataclass
class TableSpec:
    rows: list[RowSpec] = field(metadata={"help": "Table 11 rows in order."})
    title: str = field(default="Language confusion mitigation (paper Table 11 layout)", metadata={"help": "Title."})
    base: str | None = field(default=None, metadata={"help": "Label of the base row (default: the first row)."})
    quantization: list[RowSpec] = field(default_factory=list, metadata={"help": "A12 quantization rows."})
    per_language: list[PerLanguage] = field(
        default_factory=lambda: [PerLanguage("monolingual"), PerLanguage()],
        metadata={"help": "Per-language detail tables (A18/A19)."},
    )
    resamples: int = field(default=4000, metadata={"help": "Bootstrap resamples of the paired tests (seeded)."})
    confidence: float = field(
        default=0.95,
        metadata={"help": "Level of the paired tests' marks (p < 1 - confidence) and of the fluency guard's interval."},
    )
    capability: list[Capability] = field(
        default_factory=list,
        metadata={
            "help": "Capability columns: [{task, metric, label, variant}]; a drop beyond a row's interval is flagged."
        },
    )


def judge_columns(judge: str) -> list[dict]:
    """Spec entries (`capability:`) for a second LID judge's LPR beside fastText's, one per task, read from each
    row's own pass (`lpr@<judge>`, scored with `judge=<judge>` in the suite)."""
    return [
        {
            "task": task,
            "metric": f"lpr@{judge}",
            "variant": None,
            "label": f"{'Mono' if task == 'monolingual' else 'Cross'} LPR ({judge})",
        }
        for task in TASKS
    ]


def load_spec(path: str | Path) -> TableSpec:
    """A table spec file (`mlft show table SPEC.yaml`), validated; relative paths in it are read beside it."""
    path = Path(path)
    return check_spec(from_dict(TableSpec, load_yaml(path), str(path)), str(path), path.parent)


def check_spec(spec: TableSpec, where: str = "table spec", folder: str | Path | None = None) -> TableSpec:
    """Validate a spec, read from a file or built in code: every row names one existing run / rows file (a
    relative path is looked up under the current directory, else under `folder`), the base row exists, and the
    resamples and confidence are sane. Returns `spec` with those paths resolved."""
    folder = Path(folder) if folder is not None else Path.cwd()
    for i, r in enumerate([*spec.rows, *spec.quantization]):
        at = f"{where}: row {i} ({r.label!r})"
        if (r.run is None) == (r.rows_file is None):
            raise ConfigError(f"{at}: give exactly one of run / rows_file")
        for key in ("run", "rows_file", "capability_rows_file"):
            value = getattr(r, key)
            if value is not None:
                full = Path(value) if Path(value).is_absolute() or Path(value).exists() else folder / value
                if not full.exists():
                    raise ConfigError(f"{at}: {key}: not found: {value}")
                setattr(r, key, str(full))
    if spec.base is not None and spec.base not in [r.label for r in spec.rows]:
        raise ConfigError(f"{where}: base: no row labelled {spec.base!r}")
    if spec.resamples < 1000:
        raise ConfigError(f"{where}: resamples: at least 1000 (p-values down to 0.002), got {spec.resamples}")
    if not 0 < spec.confidence < 1:
        raise ConfigError(f"{where}: confidence: must be in (0, 1), got {spec.confidence}")
    return spec


def spec_record(spec: TableSpec) -> dict:
    """The spec as a `mlft show table` file would say it: every field that differs from its default (the demo writes
    its tables' specs as table.yaml, the user's record; `load_spec` reads it back to the same spec)."""
    return _non_default(spec)


def _non_default(obj):
    if dataclasses.is_dataclass(obj):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = dataclasses.MISSING
            if value != default:
                out[f.name] = _non_default(value)
        return out
    if isinstance(obj, list):
        return [_non_default(v) for v in obj]
    return obj

"""The mitigation table (paper Table 11 layout), its per-language detail (A18/A19) and the quantization
table (A12 layout), filled from run directories' curve rows as a small YAML spec says:

    title: Mitigation on SmolLM2-135M-Instruct (CPU demo)
    rows:                                  # Table 11 rows, any labels, in this order
      - {label: base, run: runs/cpu/english_sft, step: 0}
      - {label: +Q/A template, run: runs/cpu/english_sft, step: 0, variant: Q/A template}
      - {label: +English SFT, run: runs/cpu/english_sft, step: last}
      - {label: +Multilingual SFT, rows_file: elsewhere/scores.jsonl, suite_variant: default}
    quantization:                          # A12: one row per (label, variant)
      - {label: +Multilingual SFT, run: runs/cpu/multilingual_sft, step: last, variants: [model, w8, w4, w8a8]}
    per_language: {task: crosslingual, metric: lpr}   # A18/A19 detail (or a list of such)

A row's numbers come from `run` (a `mlft train` run directory: curves.jsonl) at `step` (an int or `last`)
and `variant` (default `model`), or from `rows_file` (any JSONL of long-format metric rows, e.g. the
scores.jsonl written by `mlft eval`). Paths are relative to the spec file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlft.config import from_dict, load_yaml
from mlft.constants import TASKS
from mlft.errors import ConfigError, DataError
from mlft.languages import LANGUAGES
from mlft.reports.format import cell, render
from mlft.training.curves import read_curves



@dataclass
class RowSpec:
    label: str = field(metadata={"help": "Row label, e.g. '+Multilingual SFT'."})
    run: str | None = field(default=None, metadata={"help": "Run directory (curves.jsonl)."})
    rows_file: str | None = field(default=None, metadata={"help": "JSONL of long-format metric rows instead."})
    step: int | Literal["last"] = field(default="last", metadata={"help": "Training step, or 'last'."})
    variant: str = field(default="model", metadata={"help": "Curve variant (model, a few-shot name, w8...)."})
    suite_variant: str | None = field(default=None, metadata={
        "help": "The suite's own variant (e.g. 'Q/A 1-shot' of the fewshot suite); default: any."})
    variants: list[str] = field(default_factory=lambda: ["model"], metadata={
        "help": "Quantization table only: the variants to show side by side."})


@dataclass
class PerLanguage:
    task: Literal["monolingual", "crosslingual"] = field(default="crosslingual", metadata={"help": "LCB task."})
    metric: Literal["lpr", "wpr", "lcpr"] = field(default="lpr", metadata={"help": "Metric per language."})


@dataclass
class TableSpec:
    rows: list[RowSpec] = field(metadata={"help": "Table 11 rows in order."})
    title: str = field(default="Language confusion mitigation (paper Table 11 layout)", metadata={"help": "Title."})
    quantization: list[RowSpec] = field(default_factory=list, metadata={"help": "A12 quantization rows."})
    per_language: list[PerLanguage] = field(default_factory=lambda: [PerLanguage("monolingual"), PerLanguage()],
                                            metadata={"help": "Per-language detail tables (A18/A19)."})


def load_spec(path: str | Path) -> TableSpec:
    path = Path(path)
    spec = from_dict(TableSpec, load_yaml(path), str(path))
    for i, r in enumerate([*spec.rows, *spec.quantization]):
        where = f"{path}: row {i} ({r.label!r})"
        if (r.run is None) == (r.rows_file is None):
            raise ConfigError(f"{where}: give exactly one of run / rows_file")
        for key in ("run", "rows_file"):
            value = getattr(r, key)
            if value is not None:
                full = Path(value) if Path(value).is_absolute() or Path(value).exists() else path.parent / value
                if not full.exists():
                    raise ConfigError(f"{where}: {key}: not found: {value}")
                setattr(r, key, str(full))
    return spec


def _source_rows(r: RowSpec) -> list[dict]:
    if r.rows_file:
        text = Path(r.rows_file).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return read_curves(r.run)


def select(r: RowSpec, variant: str | None = None) -> dict[tuple[str, str, str], float | None]:
    """(task, language, metric) -> value for one table row."""
    rows = _source_rows(r)
    variant = variant or r.variant
    if r.run:
        rows = [x for x in rows if x["variant"] == variant]
        if not rows:
            raise DataError(f"{r.run}: no curve rows for variant {variant!r} (row {r.label!r})")
        step = max(int(x["step"]) for x in rows) if r.step == "last" else r.step
        rows = [x for x in rows if int(x["step"]) == step]
        if not rows:
            raise DataError(f"{r.run}: no curve rows at step {step} for variant {variant!r} (row {r.label!r})")
    if r.suite_variant is not None:
        key = "suite_variant" if r.run else "variant"
        rows = [x for x in rows if x.get(key) == r.suite_variant]
        if not rows:
            raise DataError(f"row {r.label!r}: no rows with suite variant {r.suite_variant!r}")
    return {(x["task"], x["language"], x["metric"]): x["value"] for x in rows}


def table11(spec: TableSpec, fmt: str = "table") -> str:
    header = ["", "Mono LPR", "Mono WPR", "Cross LPR", "Cross WPR", "LCPR (task mean)"]
    body = []
    for r in spec.rows:
        v = select(r)
        lcpr = [v.get((t, "avg", "lcpr")) for t in TASKS]
        lcpr = sum(lcpr) / 2 if None not in lcpr else None
        body.append([r.label] + [cell(v.get((t, "avg", m))) for t in TASKS for m in ("lpr", "wpr")] + [cell(lcpr)])
    return render(header, body, fmt, title=spec.title)


def per_language(spec: TableSpec, detail: PerLanguage, fmt: str = "table") -> str:
    values = [select(r) for r in spec.rows]
    langs = [lang for lang in LANGUAGES if any((detail.task, lang, detail.metric) in v for v in values)]
    header = [""] + langs + ["avg"]
    body = [[r.label] + [cell(v.get((detail.task, lang, detail.metric))) for lang in [*langs, "avg"]]
            for r, v in zip(spec.rows, values)]
    return render(header, body, fmt, title=f"{detail.task} {detail.metric.upper()} per language (A18/A19 layout)")


def quantization_table(spec: TableSpec, fmt: str = "table") -> str:
    header = ["", "variant", "Mono LPR", "Mono WPR", "Cross LPR", "Cross WPR"]
    body = []
    for r in spec.quantization:
        for variant in r.variants:
            v = select(r, variant)
            body.append([r.label, variant] + [cell(v.get((t, "avg", m))) for t in TASKS for m in ("lpr", "wpr")])
    return render(header, body, fmt, title="Quantization (A12 layout)")


def build(spec: TableSpec, fmt: str = "table") -> str:
    parts = [table11(spec, fmt)]
    parts += [per_language(spec, d, fmt) for d in spec.per_language]
    if spec.quantization:
        parts.append(quantization_table(spec, fmt))
    return "\n".join(parts)

"""Mitigation tables (paper Table 11 layout, with intervals, paired tests against the base row and the guard)
from a `TableSpec`: `mlft.mitigation_tables`; the spec's record (`mlft.save_spec`), its capability columns
(`mlft.judge_columns`, `mlft.task_columns`) and a results file of built tables (`mlft.write_results`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import yaml

from mlft.api.results import Result
from mlft.provenance import write_results as write_record
from mlft.reports.mitigation import Table, plot_table
from mlft.reports.mitigation import tables as build_tables
from mlft.reports.mitigation import task_columns as task_entries
from mlft.reports.page import PAGE, write_report_page
from mlft.reports.results import results_extra, table_record
from mlft.reports.table_spec import Capability, check_spec, spec_record
from mlft.reports.table_spec import judge_columns as judge_entries


@dataclasses.dataclass(eq=True)
class MitigationTables(Result):
    """The tables a `TableSpec` builds: the mitigation table (Table 11 layout), its per-language detail (A18/A19)
    and, when asked, the quantization table (A12). Each table is {title, header, body, notes, data}; `records()`
    are the mitigation table's numbers per row; iterating gives the tables as objects with `render(fmt)`.

    >>> import mlft
    >>> spec = mlft.TableSpec([mlft.RowSpec("base", run="runs/demo/base", step=0),
    ...                        mlft.RowSpec("+Cross-lingual SFT", run="runs/demo/crosslingual_sft")])  # doctest: +SKIP
    >>> t = mlft.mitigation_tables(spec); print(t); t.plot("mitigation.png")  # doctest: +SKIP
    """

    KIND: ClassVar[str] = "mitigation_tables"

    tables: list[dict]
    base: str
    confidence: float = 0.95
    resamples: int = 4000

    def built(self) -> list:
        """The tables as mlft.reports.mitigation.Table objects (`render(fmt)`)."""

        return [Table(**t) for t in self.tables]

    def __iter__(self):
        return iter(self.built())

    def __len__(self) -> int:
        return len(self.tables)

    def table(self, fmt: str = "table") -> str:
        """Every table rendered (table, markdown, tsv, csv), notes below each (table, markdown)."""
        return "\n".join(t.render(fmt) for t in self.built())

    def records(self) -> list[dict]:
        """The mitigation table's numbers per row: label, flags, per task {metric: {value, low, high, n, p_vs_base}}."""
        return [dict(r) for r in self.tables[0]["data"]] if self.tables else []

    def plot(self, path: str | Path) -> Path:
        """The mitigation table as a PNG, with its notes below."""

        return plot_table(self.built()[0], path)

    def record(self) -> dict:
        """The mitigation table's numbers as the `tables` entry of a results file (`write_results`)."""

        return table_record(self.built()[0], self.base, self.confidence, self.resamples)


def mitigation_tables(spec) -> MitigationTables:
    """Build the tables of `spec` (a `mlft.TableSpec`, checked: `save_spec`, or read with `mlft show table`)."""

    built = [dataclasses.asdict(t) for t in build_tables(spec)]
    return MitigationTables(built, spec.base or spec.rows[0].label, spec.confidence, spec.resamples)


def save_spec(spec, path: str | Path):
    """Write `spec` as `path` (a table.yaml: the record `mlft show table` rebuilds the tables from; fields left at
    their defaults are left out) and return it checked: every row's run or rows file exists (relative paths are
    read beside `path`), the base row exists."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec_record(spec), sort_keys=False, allow_unicode=True), encoding="utf-8")
    return check_spec(spec, str(path), path.parent)


def judge_columns(judge: str) -> list:
    """Capability columns of a second LID judge's LPR (`lpr@<judge>`), one per task, read from each row's own pass
    (the suite scored with `judge: <judge>`)."""

    return [Capability(**c) for c in judge_entries(judge)]


def task_columns() -> list:
    """Capability columns of the task axis (the share of replies that answer verifiable prompts), one per task."""

    return [Capability(**c) for c in task_entries()]


def write_results(
    folder: str | Path,
    config: dict,
    started_at: float,
    seconds: float,
    name: str | None = None,
    tables: dict[str, MitigationTables] | None = None,
    **more: Any,
) -> Path:
    """`folder/results.json`: `config` (what the numbers depend on), the environment, the wall time and, with
    `name`, the built tables' numbers ({key: MitigationTables}) as the results file of an experiment."""

    extra = None
    if name is not None:
        extra = results_extra(name, {k: t.record() for k, t in (tables or {}).items()}, **more)
    return write_record(Path(folder), config, started_at, seconds, extra)


def report_page(paths: list[str | Path], folder: str | Path) -> Path | None:
    """folder/report.html: every reply of every run, checkpoint and eval folder in `paths` on one page; a problem
    is logged (with the command that rebuilds the page), never raised."""

    return write_report_page([Path(p) for p in paths], Path(folder) / PAGE)

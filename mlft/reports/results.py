"""One machine-readable results file per experiment: what `mlft demo` writes as `runs/demo/results.json`.

A results file is the record `mlft.provenance.write_results` writes everywhere (config, environment with the git
commit, started, wall_s) plus `name`, `schema` and `tables`: {table name: {title, base, confidence, resamples,
rows}}, each row as `mlft.reports.mitigation` computed it — per task (monolingual / crosslingual) LPR, WPR, LCPR and
the guard's coverage, degeneracy, validity and NLL as {value, low, high, n} (fractions), `p_vs_base`
(Holm-adjusted) where tested, the guard's flags, and capability columns by header.

The project renders its own documentation's numbers from such files (`<!-- results:NAME ... -->` blocks): that
machinery is a development tool of the source tree, devtools/ (`python -m devtools.results`), not in the package.
"""

from __future__ import annotations

from mlft.reports.mitigation import Table

SCHEMA = "mlft.results/1"
MAIN_TABLE = "mitigation"


def table_record(table: Table, base: str, confidence: float = 0.95, resamples: int = 4000) -> dict:
    """A built mitigation table's numbers (`Table.data`) as the `tables` entry of a results file."""
    return {
        "title": table.title,
        "base": base,
        "confidence": confidence,
        "resamples": resamples,
        "test": "permutation",  # the p behind `*` (files without the key: the paired bootstrap's p)
        "target": "population",  # what the intervals cover (mlft.stats: prompt sampling and decoding noise)
        "rows": [_around_value(row) for row in table.data],
    }


def _around_value(row: dict) -> dict:
    """A row whose every interval holds its value: metric rows written by earlier passes can carry a bound that
    rounded past it (a high of 1 - 2e-16 at a value of 1; mlft.stats now keeps the value inside)."""
    tasks = {}
    for task, cells in row.get("tasks", {}).items():
        tasks[task] = {}
        for metric, num in cells.items():
            if isinstance(num, dict) and num.get("low") is not None and num.get("value") is not None:
                num = dict(num, low=min(num["low"], num["value"]), high=max(num["high"], num["value"]))
            tasks[task][metric] = num
    return dict(row, tasks=tasks) if "tasks" in row else row


def results_extra(name: str, tables: dict[str, dict], **more) -> dict:
    """The keys a results file adds to `write_results`' record."""
    return {"name": name, "schema": SCHEMA, "tables": tables, **more}

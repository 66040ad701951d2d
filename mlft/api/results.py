"""The typed results of the public API: each renders itself (`table`, `records`, `to_pandas`, `__str__`,
`_repr_markdown_` for notebooks), saves itself as JSON (`save`) and loads back to an equal object (`load`, or
`mlft.load_result` for any of them).

A result holds data only (JSON-native values: its state is what `save` writes), so that a reloaded result renders
the same tables as the live one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

from mlft.benchmarks.lcb.judge import metric_name
from mlft.benchmarks.lcb.scoring import ScoreReport
from mlft.errors import DataError
from mlft.format import render
from mlft.reports.compare import render_compare
from mlft.reports.score_tables import (
    beside_table,
    guard_tables,
    guarded_rows,
    long_table,
    matrix_tables,
    trace_outcome_table,
)

SCHEMA = 1


def plain(value: Any) -> Any:
    """`value` as JSON reads it back (tuples become lists, keys strings): a result's state at construction equals
    its state after `save` and `load`."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class Result:
    """What every result of the public API can do. Subclasses are dataclasses of JSON-native fields and define
    `table(fmt)` and `records()`."""

    KIND: ClassVar[str] = "result"
    FORMATS: ClassVar[tuple[str, ...]] = ("table", "markdown", "tsv", "csv")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            setattr(self, f.name, plain(getattr(self, f.name)))

    def table(self, fmt: str = "table") -> str:
        raise NotImplementedError

    def records(self) -> list[dict]:
        raise NotImplementedError

    def to_pandas(self):
        """The records as a pandas DataFrame (pandas: `pip install mlft[notebook]`)."""
        try:
            import pandas as pd
        except ImportError:
            raise DataError("to_pandas() needs pandas: pip install 'mlft[notebook]' (or pandas)") from None
        return pd.DataFrame(self.records())

    def __str__(self) -> str:
        return self.table()

    def _repr_markdown_(self) -> str:
        return self.table("markdown")

    def state(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def save(self, path: str | Path) -> Path:
        """Write the result as JSON to `path` (`load` reads it back to an equal object); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"mlft_result": self.KIND, "schema": SCHEMA, "data": self.state()}
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path):
        """The result `save` wrote to `path`."""
        record = read_saved(path)
        if record["mlft_result"] != cls.KIND:
            raise DataError(f"{path}: a saved {record['mlft_result']} result, not a {cls.KIND} one")
        return cls(**record["data"])


def read_saved(path: str | Path) -> dict:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a saved mlft result ({exc})") from None
    if not isinstance(record, dict) or "mlft_result" not in record or "data" not in record:
        raise DataError(f"{path}: not a saved mlft result (no mlft_result / data keys)")
    return record


# ---------------------------------------------------------------- score


def _guard_tuple(guard: dict | None):
    """The guard in the form the score tables take: ({(task, model, source, language): row}, flags)."""
    if guard is None:
        return None
    return {tuple(k): row for *k, row in guard["rows"]}, guard["flags"]


def guard_state(guard) -> dict | None:
    """`score_guard`'s (rows, flags) as JSON-native data (`ScoreResult.guard`)."""
    if guard is None:
        return None
    rows, flags = guard
    return {"rows": [[*k, row] for k, row in rows.items()], "flags": flags}


@dataclasses.dataclass(eq=True)
class ScoreResult(Result):
    """LCB scores of completions (`mlft.score`): the official LPR / WPR / acc / LCPR rows per (task, model,
    source, language) with the guard beside them, and with reasoning traces the trace's rows and the split's
    outcomes. `table(fmt)` is what `mlft score --format fmt` prints (fmt: table, markdown, tsv, csv, json).

    >>> import mlft
    >>> r = mlft.score("outputs/command-r.csv")  # doctest: +SKIP
    >>> r.lpr(task="crosslingual")  # doctest: +SKIP
    0.689...
    >>> r.save("scores.json"); mlft.ScoreResult.load("scores.json") == r  # doctest: +SKIP
    True
    """

    KIND: ClassVar[str] = "score"
    FORMATS: ClassVar[tuple[str, ...]] = ("table", "markdown", "tsv", "csv", "json")

    lid_name: str
    options: str
    rows: list[dict]  # the official rows of the answers (the replies themselves when none holds a trace)
    guard: dict | None = None  # {"rows": [[task, model, source, language, row]], "flags": [...]} (`guard_state`)
    judge: str | None = None  # a second LID judge
    judged: list[dict] | None = None  # its rows beside the official LPR
    markers: list[str] | None = None  # [open, close] when some reply holds a trace marker
    outcomes: list[dict] | None = None  # the trace split's outcomes per (task, model, language)
    trace_rows: list[dict] | None = None  # the official rows of the traces
    trace_guard: dict | None = None
    details: list[dict] = dataclasses.field(default_factory=list)  # per reply, with `details=True`

    def _report(self, rows: list[dict]):
        return ScoreReport(rows, self.lid_name, self.options)

    def records(self) -> list[dict]:
        """One dict per (task, model, source, language) row and aggregate (`all`), the guard's columns added."""
        return guarded_rows(self._report(self.rows), _guard_tuple(self.guard))

    def data(self) -> dict:
        """What `mlft score --format json` prints."""
        data = {"lid_model": self.lid_name, "options": self.options, "rows": self.records()}
        if self.guard is not None:
            data["guard_flags"] = self.guard["flags"]
        if self.judged is not None:
            data["judge"] = {"lid_model": self.judge, "rows": self.judged}
        if self.outcomes is not None:
            data["traces"] = {"markers": list(self.markers), "outcomes": self.outcomes, "rows": []}
            if self.trace_rows is not None:
                data["traces"]["rows"] = guarded_rows(self._report(self.trace_rows), _guard_tuple(self.trace_guard))
                if self.trace_guard is not None:
                    data["traces"]["guard_flags"] = self.trace_guard["flags"]
        return data

    def table(self, fmt: str = "table") -> str:
        """The report `mlft score --format fmt` prints: paper-style matrices (table, markdown), one row per group
        and aggregate (tsv, csv), or everything as JSON (json)."""
        if fmt not in self.FORMATS:
            raise DataError(f"ScoreResult.table: fmt must be one of {', '.join(self.FORMATS)}, got {fmt!r}")
        report, guard, traced = self._report(self.rows), _guard_tuple(self.guard), self.outcomes is not None
        trace = self._report(self.trace_rows) if self.trace_rows is not None else None
        trace_guard = _guard_tuple(self.trace_guard)
        if fmt == "json":
            return json.dumps(self.data(), indent=1, ensure_ascii=False) + "\n"
        if fmt in ("tsv", "csv"):
            header, body = long_table(report, guard)
            if self.judged is not None:  # rows in the official report's order
                name = metric_name(self.judge)
                header = header + [name]
                body = [line + ["NA" if j[name] is None else j[name]] for line, j in zip(body, self.judged)]
            if traced:  # one long table: the answer's rows, then the trace's, told apart by `part`
                header, body = ["part", *header], [["answer", *line] for line in body]
                if trace is not None:
                    t_header, t_body = long_table(trace, trace_guard)
                    body += [["trace", *[dict(zip(t_header, x)).get(c, "NA") for c in header[1:]]] for x in t_body]
            return render(header, body, fmt)
        part = "answer" if traced else ""
        text = f"LID model: {self.lid_name} · {self.options}\n\n"
        if traced:
            text += (
                f"Reasoning traces ({self.markers[0]} … {self.markers[1]}): the tables score each reply's answer (the "
                "reply without its trace; a reply without a marker is scored whole), then its trace.\n\n"
            )
        text += matrix_tables(report, fmt, part=part)
        if guard is not None:
            text += "\n" + guard_tables(report, guard, fmt, part=part)
        if self.judged is not None:
            text += "\n" + beside_table(self.judged, self.judge, self.lid_name, fmt)
        if traced:
            text += "\n" + trace_outcome_table(self.outcomes, fmt)
            if trace is not None:
                text += "\n" + matrix_tables(trace, fmt, part="trace")
                if trace_guard is not None:
                    text += "\n" + guard_tables(trace, trace_guard, fmt, part="trace")
        return text

    def value(
        self, metric: str = "lpr", task: str = "crosslingual", language: str = "all", model: str | None = None
    ) -> float | None:
        """One number of the official rows: `metric` (lpr, wpr, acc, lcpr, or a guard column) of `task` in
        `language` (`all`: the language average) over every source, for `model` (default: the only model)."""
        models = list(dict.fromkeys(r["model"] for r in self.rows))
        if model is None and len(models) > 1:
            raise DataError(f"several models scored ({', '.join(models)}): name one with model=")
        model = model or (models[0] if models else None)
        if metric == "lcpr" and language == "all":
            return self._report(self.rows).headline(task, model)["lcpr"]
        for r in self.records():
            if (r["task"], r["model"], r["source"], r["language"]) == (task, model, "all", language):
                return r.get(metric)
        return None

    def lpr(self, task: str = "crosslingual", language: str = "all", model: str | None = None) -> float | None:
        """The official LPR (a fraction) of `task` in `language` (`all`: the average over languages)."""
        return self.value("lpr", task, language, model)

    def wpr(self, task: str = "crosslingual", language: str = "all", model: str | None = None) -> float | None:
        """The official WPR (a fraction) of `task` in `language` (`all`: the average over languages)."""
        return self.value("wpr", task, language, model)

    def lcpr(self, task: str = "crosslingual", model: str | None = None) -> float | None:
        """The official LCPR (a fraction) of `task`: the harmonic mean of LPR and WPR, averaged over languages."""
        return self.value("lcpr", task, "all", model)

    @property
    def flagged(self) -> list[dict]:
        """The guard's flags (a group whose whole interval lies beyond a limit), empty without the guard."""
        return list(self.guard["flags"]) if self.guard else []

    def write_details(self, path: str | Path) -> Path:
        """The per-reply diagnostics (`details=True`) as JSONL: failed lines with predicted label and score."""
        path = Path(path)
        with open(path, "w", encoding="utf-8") as fh:
            for d in self.details:
                fh.write(json.dumps(d, ensure_ascii=False) + "\n")
        return path


# ---------------------------------------------------------------- compare


@dataclasses.dataclass(eq=True)
class Comparison(Result):
    """Paired differences B − A per task and language (`mlft.compare`), with intervals and Holm-adjusted p-values;
    `table(fmt)` is what `mlft compare` prints.

    >>> import mlft
    >>> c = mlft.compare("runs/demo/base@0", "runs/demo/crosslingual_sft", metrics=("lpr",))  # doctest: +SKIP
    >>> [r["diff"] for r in c.records() if r["language"] == "avg"]  # doctest: +SKIP
    """

    KIND: ClassVar[str] = "comparison"
    FORMATS: ClassVar[tuple[str, ...]] = ("table", "markdown", "tsv", "csv", "json")

    a: str  # the sides' labels
    b: str
    rows: list[dict]
    dropped: int = 0  # prompts held by one side only, left out (`intersect=True`)
    shared: int | None = None  # prompts compared on, with `intersect=True`

    def records(self) -> list[dict]:
        """One dict per (task, language, metric): a, b, diff, ci_low, ci_high, p, p_holm, n_pairs, ..."""
        return [dict(r) for r in self.rows]

    def table(self, fmt: str = "table") -> str:
        """What `mlft compare --format fmt` prints: the rows with B − A, interval, p and p (Holm), or JSON."""
        if fmt == "json":
            return json.dumps({"a": self.a, "b": self.b, "rows": self.rows}, indent=2)
        return render_compare(self.rows, self.a, self.b, fmt)

    def diff(self, metric: str = "lpr", task: str = "crosslingual", language: str = "avg") -> dict | None:
        """The row of `metric` in `task` / `language` (`avg`: the official aggregate), or None."""
        return next((r for r in self.rows if (r["metric"], r["task"], r["language"]) == (metric, task, language)), None)

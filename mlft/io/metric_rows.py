"""The one shape of a metric row: what eval kinds return, `scores.jsonl` and `curves.jsonl` hold, and passes,
trackers and reports read.

    row = MetricRow("default", "crosslingual", "de", "lpr", 0.82, low=0.74, high=0.89, n=120)
    row.to_dict()                     # the JSON line (the files keep their format)
    MetricRow.from_dict(json_line)    # any row ever written (unknown keys are kept in `extra`)
    CurveRow.from_dict(curve_line)    # a curves.jsonl row: + step, suite_variant, model

An lm_eval row's harness numbers (`stderr`, its per-document `samples` file) live in `harness` (a `HarnessStats`),
written as the keys `harness: true, stderr, samples` as before. Rows read like their dict too (`row["value"]`,
`row.get("low")`) for code that formats them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlft.errors import DataError


@dataclass
class HarnessStats:
    """What an lm-evaluation-harness metric row adds: the harness's standard error and the samples file."""

    stderr: float | None = None
    samples: str | None = None  # per-document samples (relative to the eval folder / run directory)


@dataclass
class MetricRow:
    variant: str  # the suite's variant ("default", "+gate"...); in curves: the pass's
    task: str
    language: str  # a language code or "avg"
    metric: str
    value: float | None
    low: float | None = None  # the interval (confidence level: the suite's)
    high: float | None = None
    n: int | None = None  # units behind the number (replies, lines, documents)
    suite: str | None = None  # the suite that produced it (scores.jsonl, curves.jsonl)
    outcomes: str | None = None  # per-reply outcomes file of an LCB row (relative)
    harness: HarnessStats | None = None  # lm_eval rows
    extra: dict = field(default_factory=dict)  # keys of another writer, kept as they were

    CORE: ClassVar[tuple[str, ...]] = ("variant", "task", "language", "metric", "value", "low", "high", "n")
    INTERVAL: ClassVar[tuple[str, ...]] = ("low", "high", "n")  # written together (a row with none: without them)
    ALWAYS: ClassVar[tuple[str, ...]] = INTERVAL  # written even when None
    HARNESS_KEYS: ClassVar[tuple[str, ...]] = ("harness", "stderr", "samples")

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"suite": self.suite} if self.suite is not None else {}
        for f in dataclasses.fields(self):
            if f.name in ("harness", "extra") or f.name in out:
                continue
            value = getattr(self, f.name)
            if (
                value is not None
                or f.name in self.CORE[:5]
                or f.name in self.ALWAYS
                and (f.name not in self.INTERVAL or any(getattr(self, k) is not None for k in self.INTERVAL))
            ):
                out[f.name] = value
        if self.harness is not None:
            out.update(harness=True, stderr=self.harness.stderr, samples=self.harness.samples)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> MetricRow:
        if isinstance(data, cls):
            return data
        if isinstance(data, MetricRow):
            data = data.to_dict()
        names = {f.name for f in dataclasses.fields(cls)} - {"harness", "extra"}
        missing = [k for k in ("task", "metric", "value") if k not in data]
        if missing:
            raise DataError(f"metric row without {', '.join(missing)}: {data!r}")
        kw = {k: v for k, v in data.items() if k in names}
        kw.setdefault("variant", "default")
        kw.setdefault("language", "avg")
        harness = HarnessStats(data.get("stderr"), data.get("samples")) if data.get("harness") else None
        extra = {k: v for k, v in data.items() if k not in names and k not in cls.HARNESS_KEYS}
        return cls(**kw, harness=harness, extra=extra)

    coerce = from_dict  # a MetricRow stays itself; a dict is read

    # read like the row's dict (formatting code, older callers)
    def __getitem__(self, key: str):
        d = self.to_dict()
        return d[key]

    def get(self, key: str, default=None):
        return self.to_dict().get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.to_dict()

    def keys(self):
        return self.to_dict().keys()

    def __iter__(self):
        return iter(self.to_dict())


@dataclass
class CurveRow(MetricRow):
    """A curves.jsonl row: one metric of one evaluation pass (`variant`: the pass) at a training step."""

    step: int = 0
    suite_variant: str | None = None  # the suite's own variant
    model: str | None = None  # the checkpoint or base model evaluated

    INTERVAL: ClassVar[tuple[str, ...]] = ()  # curve rows always carry low / high / n
    ALWAYS: ClassVar[tuple[str, ...]] = ("low", "high", "n", "suite", "suite_variant", "outcomes", "model")

    def to_dict(self) -> dict:
        d = super().to_dict()
        head = {
            "step": d.pop("step"),
            "variant": d.pop("variant"),
            "suite": d.pop("suite"),
            "suite_variant": d.pop("suite_variant"),
        }
        return {**head, **d}


def rows_of(rows) -> list[MetricRow]:
    """MetricRows of rows read from any file (dicts) or already typed."""
    return [r if isinstance(r, MetricRow) else (CurveRow if "step" in r else MetricRow).from_dict(r) for r in rows]

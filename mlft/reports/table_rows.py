"""What fills a mitigation table: one row's numbers (`Row`: its metric rows read from a run's curves or a rows
file, `select`), its per-reply outcomes, and its tests against the base row: paired significance per column
(`compare`: Holm-adjusted down each column), the guard's flags and the fluency guard (`_guard`, `_fluency_flags`:
mean reply NLL at most MAX_NLL_INCREASE above the base row's on the same prompts). The spec that names the rows is
`mlft.reports.table_spec`'s; the layouts that print these numbers are `mlft.reports.mitigation`'s.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from mlft.benchmarks.lcb.guard_report import guard_flags
from mlft.benchmarks.lcb.judge import judge_of
from mlft.benchmarks.lcb.traces import is_trace_metric
from mlft.constants import TASKS
from mlft.errors import DataError, MlftError
from mlft.io.curve_file import read_curves
from mlft.io.metric_rows import MetricRow, rows_of
from mlft.reports.table_spec import Capability, RowSpec
from mlft.stats import PairedResult, holm, load_outcomes, paired_test, prompt_means, ratio_interval, unpaired_test


@dataclass
class Row:
    label: str
    values: dict[tuple[str, str, str], MetricRow]  # (task, language, metric) -> the metric row
    outcomes_path: Path | None  # the official per-reply outcomes (resolved)
    root: Path | None = None  # the folder the rows' relative `outcomes` paths start from

    def __post_init__(self):  # rows as written (dicts) are read as MetricRows
        self.values = {k: MetricRow.coerce(v) for k, v in self.values.items()}

    def value(self, task: str, lang: str, metric: str):
        row = self.values.get((task, lang, metric))
        return row.value if row is not None else None

    def outcomes_file(self, key: tuple[str, str, str]) -> Path | None:
        """The per-reply outcomes file behind one metric row (resolved), e.g. a second judge's
        `outcomes.<judge>.jsonl` behind its `lpr@<judge>` row."""
        row = self.values.get(key)
        if row is None or not row.outcomes:
            return None
        return (self.root or Path()) / row.outcomes  # an absolute path stays itself

    def samples_path(self, key: tuple[str, str, str]) -> str | None:
        """The lm-eval per-document samples file of a capability row (resolved)."""
        row = self.values.get(key)
        return row.harness.samples if row is not None and row.harness is not None else None

    def cell(self, task: str, lang: str, metric: str, mark: str = "", percent: bool = True) -> str:
        row = self.values.get((task, lang, metric))
        if row is None or row.value is None:
            return "–"
        scale, digits = (100, 1) if percent else (1, 2)
        text = f"{scale * row.value:.{digits}f}"
        if row.low is not None and row.high is not None:
            text += f" ±{scale * (row.high - row.low) / 2:.{digits}f}"
        return text + mark

    def outcomes(self):
        return load_outcomes(self.outcomes_path) if self.outcomes_path and self.outcomes_path.is_file() else None


def _source_rows(r: RowSpec) -> list[MetricRow]:
    if r.rows_file:
        text = Path(r.rows_file).read_text(encoding="utf-8")
        return rows_of(json.loads(line) for line in text.splitlines() if line.strip())
    return rows_of(read_curves(r.run))


def select(r: RowSpec, variant: str | None = None, capability: list[Capability] | tuple = ()) -> Row:
    """One table row: its metric rows by (task, language, metric) and where its per-reply outcomes are; with
    `capability`, the capability columns' rows too."""
    row = _select(r, variant)
    for cap in capability:
        if cap.variant is None and not r.capability_rows_file:
            continue  # the row's own pass (e.g. a second judge's lpr@<judge>): `_select` holds its rows already
        found = _capability_row(r, cap)
        if found is not None:
            row.values[(cap.task, cap.language, cap.metric)] = found
    return row


def _capability_row(r: RowSpec, cap: Capability) -> MetricRow | None:
    def match(x: MetricRow):
        return x.task == cap.task and x.metric == cap.metric and x.language == cap.language

    if r.capability_rows_file:
        rows = [x for x in _source_rows(RowSpec(r.label, rows_file=r.capability_rows_file)) if match(x)]
        root = Path(r.capability_rows_file).parent
    elif r.run:
        variant = cap.variant if cap.variant is not None else r.variant
        rows = [x for x in rows_of(read_curves(r.run)) if x.variant == variant and match(x)]
        if rows:
            step = max(int(x.step) for x in rows) if r.step == "last" else r.step
            rows = [x for x in rows if int(x.step) == step]
        root = Path(r.run)
    else:
        rows = [x for x in _source_rows(r) if match(x)]
        root = Path(r.rows_file).parent
    if not rows:
        return None
    found = rows[-1]
    root = root.absolute()  # a row's own root (its run) must not prefix a path resolved here (relative specs)
    if found.outcomes:  # resolved against the folder that holds the rows
        found = dataclasses.replace(found, outcomes=str(root / found.outcomes))
    if found.harness is not None and found.harness.samples:  # resolved against the folder that holds the rows
        found = dataclasses.replace(
            found, harness=dataclasses.replace(found.harness, samples=str(root / found.harness.samples))
        )
    return found


def _select(r: RowSpec, variant: str | None = None) -> Row:
    rows = _source_rows(r)
    variant = variant or r.variant
    if r.run:
        rows = [x for x in rows if x.variant == variant]
        if not rows:
            raise DataError(f"{r.run}: no curve rows for variant {variant!r} (row {r.label!r})")
        step = max(int(x.step) for x in rows) if r.step == "last" else r.step
        rows = [x for x in rows if int(x.step) == step]
        if not rows:
            raise DataError(f"{r.run}: no curve rows at step {step} for variant {variant!r} (row {r.label!r})")
    if r.suite_variant is not None:
        key = "suite_variant" if r.run else "variant"
        rows = [x for x in rows if getattr(x, key) == r.suite_variant]
        if not rows:
            raise DataError(f"row {r.label!r}: no rows with suite variant {r.suite_variant!r}")
    root = Path(r.run) if r.run else Path(r.rows_file).parent
    rel = official_outcomes(rows)
    label = r.label if variant == r.variant else f"{r.label} / {variant}"
    return Row(label, {(x.task, x.language, x.metric): x for x in rows}, root / rel if rel else None, root)


def official_outcomes(rows: list[MetricRow]) -> str | None:
    """The (relative) official per-reply outcomes file of a row's metric rows; a second judge's rows name their
    own file (`outcomes.<judge>.jsonl`), and so do the trace part's rows (`trace_<metric>`: `outcomes.trace.jsonl`)."""
    return next(
        (x.outcomes for x in rows if x.outcomes and judge_of(x.metric) is None and not is_trace_metric(x.metric)),
        None,
    )


# ---------------------------------------------------------------- tests against the base row


def _tests(rows: list[Row], base: Row, columns: list[tuple[str, str]], resamples: int) -> dict:
    """{(row label, task, metric): Holm-adjusted p} for every row but the base, paired when the prompts match."""

    base_out = base.outcomes()
    if base_out is None:
        return {}
    out = {}
    for task, metric in columns:
        family = []
        for row in rows:
            if row is base or (outs := row.outcomes()) is None or row.value(task, "avg", metric) is None:
                continue
            res = compare(base_out, outs, metric, task, resamples=resamples)
            if res is not None:
                family.append((row.label, res.p_value))
        for (label, _), q in zip(family, holm([p for _, p in family])):
            out[(label, task, metric)] = q
    return out


def compare(
    base_out, outs, metric: str, task: str, language: str | None = None, *, resamples: int, confidence: float = 0.95
) -> PairedResult | None:
    """A row's outcomes against the base row's (B - A) on one task (and language): the paired permutation test over
    the prompts both answered (a prompt's replies swapped together, `mlft.stats.paired_test`), unpaired when the
    prompts differ; None when neither applies."""
    try:
        return paired_test(base_out, outs, metric, task=task, language=language, n=resamples, confidence=confidence)
    except MlftError:  # not the same prompts: an unpaired comparison
        try:
            return unpaired_test(
                base_out, outs, metric, task=task, language=language, n=resamples, confidence=confidence
            )
        except MlftError:
            return None


MAX_NLL_INCREASE = 0.10  # the fluency guard: a row's mean reply NLL may exceed the base row's by 10 % at most


def _guard(rows: list[Row], base: Row, resamples: int, confidence: float = 0.95) -> dict[str, list[str]]:
    """{row label: [reasons]} for rows whose coverage, degeneracy or lexical validity is worse than the base row's
    beyond chance, or whose mean reply NLL (fluency) is more than MAX_NLL_INCREASE above the base row's on the same
    prompts."""

    base_out = base.outcomes()
    flags = {}
    for row in rows:
        if row is base or base_out is None or (outs := row.outcomes()) is None:
            continue
        found = [
            f"{f.task}: {f.reason}"
            for f in guard_flags(outs, base_out, n=resamples, min_coverage=None, max_degeneracy=None, min_validity=None)
            if f.language == "all"
        ]
        found += _fluency_flags(outs, base_out, resamples, confidence=confidence)
        if found:
            flags[row.label] = found
    return flags


def _fluency_flags(run, base, resamples: int, seed: int = 0, confidence: float = 0.95) -> list[str]:
    """Per task: the ratio of mean reply NLLs (run / base) over the prompts both scored, flagged above
    1 + MAX_NLL_INCREASE, with a paired-bootstrap interval of the ratio (`mlft.stats.ratio_interval`)."""

    out = []
    for task in TASKS:
        a, b = prompt_means(base, task), prompt_means(run, task)  # per prompt (the mean of its replies)
        keys = sorted(a.keys() & b.keys())
        if len(keys) < 2:
            continue
        xa, xb = [a[k] for k in keys], [b[k] for k in keys]
        ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
        if ma <= 0 or mb / ma - 1 <= MAX_NLL_INCREASE:
            continue
        _, lo, hi = ratio_interval(xa, xb, confidence=confidence, n=resamples, seed=seed)
        out.append(
            f"{task}: fluency NLL {mb:.2f} vs base {ma:.2f}: "
            f"{mb / ma - 1:+.1%} [{lo - 1:+.1%}, {hi - 1:+.1%}] (limit +{MAX_NLL_INCREASE:.0%}, "
            f"{len(keys)} paired prompts)"
        )
    return out

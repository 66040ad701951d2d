"""`mlft.score`: LCB scores of completions (official LPR / WPR / acc / LCPR, the guard, reasoning traces, a
second judge), from files, a DataFrame or records. `mlft score FILE...` is this function and `ScoreResult.table`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mlft.api.results import ScoreResult, guard_state
from mlft.benchmarks.lcb.judge import beside_rows, judge_report
from mlft.benchmarks.lcb.metrics import WORD_CHECKS, ScoreOptions
from mlft.benchmarks.lcb.scoring import score_guard, score_traced
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, TraceMarkers, parse_markers
from mlft.completions import completions_from_records, read_completions
from mlft.errors import ConfigError
from mlft.langid import OTHER_LIDS as JUDGES  # the second judges (mlft.benchmarks.lcb.judge.JUDGES)
from mlft.languages import check_language

DEFAULT_TRACE_MARKERS = (DEFAULT_MARKERS.open, DEFAULT_MARKERS.close)


def parse_label_aliases(
    items: Iterable[str] | Mapping[str, Iterable[str]] | None, where: str = "label_aliases"
) -> dict:
    """{language: {extra accepted labels}} from 'LANG=LABEL' texts (the CLI's --label-alias) or a mapping."""

    if not items:
        return {}
    pairs = (
        [(lang, label) for lang, labels in items.items() for label in ([labels] if isinstance(labels, str) else labels)]
        if isinstance(items, Mapping)
        else []
    )
    if not isinstance(items, Mapping):
        for item in items:
            if "=" not in item:
                raise ConfigError(f"{where} {item!r}: expected LANG=LABEL, e.g. id=ms")
            pairs.append(tuple(item.split("=", 1)))
    out: dict[str, set[str]] = {}
    for lang, label in pairs:
        check_language(lang, where)
        out.setdefault(lang, set()).add(label)
    return out


def read_inputs(completions) -> list:
    """Completions from a path, several paths, a pandas DataFrame or records (dicts with at least task, source,
    language, completion; `model` and `id` optional), each validated as the files' rows are."""

    if isinstance(completions, (str, Path)):
        return read_completions(completions)
    if hasattr(completions, "to_dict") and hasattr(completions, "columns"):  # a pandas DataFrame
        return completions_from_records(completions.to_dict("records"), "DataFrame")
    items = list(completions)
    if items and all(isinstance(x, (str, Path)) for x in items):
        out = []
        for f in items:
            out += read_completions(f)
        return out
    return completions_from_records(items, "records")


def markers_of(trace_markers) -> TraceMarkers | None:
    """None (no split), a TraceMarkers, an (open, close) pair or an 'OPEN,CLOSE' text."""
    if trace_markers is None or isinstance(trace_markers, TraceMarkers):
        return trace_markers
    return parse_markers(trace_markers, "trace_markers")


def score(
    completions: str | Path | Sequence,
    *,
    guard: bool = True,
    trace_markers: TraceMarkers | Sequence[str] | str | None = DEFAULT_TRACE_MARKERS,
    lid_model: str | None = None,
    judge: str | None = None,
    words: str | Path | None = None,
    word_check: str = "dictionary",
    label_aliases: Iterable[str] | Mapping | None = None,
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int | None = None,
    details: bool = False,
    progress: bool = False,
) -> ScoreResult:
    """Score LCB completions as the official scorer does, with the guard beside the official numbers.

    `completions`: a completions file (official CSV: id, model, completion, task, source, language; or mlft JSONL),
    several files, a pandas DataFrame or a list of dicts with those columns. `guard`: coverage, degeneracy, lexical
    validity, unknown-line and skipped-reply shares with intervals and flags. `trace_markers`: a reply holding
    them is split into trace and answer (the answer is scored; the trace too); None scores whole replies.
    `lid_model`: fastText `ftz` (bundled, default), `bin` (the paper's lid.176.bin) or a path; NON-OFFICIAL
    py3langid / langdetect. `judge`: a NON-OFFICIAL second judge (py3langid, langdetect) reported beside the
    official LPR. `bootstrap`: N resamples for intervals on LPR / WPR / LCPR (seeded). `word_check` and
    `label_aliases` ('LANG=LABEL' texts or {lang: labels}) are NON-OFFICIAL unless left as they are. `details`:
    keep per-reply diagnostics (`ScoreResult.details`).

    >>> import mlft
    >>> r = mlft.score([{"task": "monolingual", "source": "okapi", "language": "de", "model": "m",
    ...                  "completion": "Das ist eine kurze Antwort auf Deutsch, die lang genug ist."}])
    >>> r.lpr(task="monolingual")
    1.0
    """

    if word_check not in WORD_CHECKS:
        raise ConfigError(f"word_check: one of {', '.join(WORD_CHECKS)}, got {word_check!r}")
    if judge is not None and judge not in JUDGES:
        raise ConfigError(f"judge: one of {', '.join(JUDGES)}, got {judge!r}")
    if judge and lid_model in JUDGES:
        raise ConfigError(
            f"--judge {judge}: the first judge must be a fastText model (--lid ftz|bin|PATH), got --lid {lid_model}"
        )
    options = ScoreOptions(word_check=word_check, label_aliases=parse_label_aliases(label_aliases))
    items = read_inputs(completions)
    markers = markers_of(trace_markers)
    traced = score_traced(
        items,
        markers,
        options=options,
        lid=lid_model,
        words=words,
        detail=details,
        bootstrap=bootstrap,
        seed=seed,
        confidence=confidence,
        workers=workers,
        progress=progress,
        guard=guard,
    )
    report, trace = traced.answer, traced.trace
    answers = traced.split.answers  # the completions themselves when no reply has a marker
    g = t_guard = None
    if guard:
        g = score_guard(answers, report.replies, confidence=confidence, seed=seed, workers=workers)
        if trace is not None:
            t_guard = score_guard(traced.split.traces, trace.replies, confidence=confidence, seed=seed, workers=workers)
    outcomes = traced.outcome_rows(items) if traced.split.any_marker else None
    judged = None
    if judge:
        judged = beside_rows(
            answers, report, judge_report(answers, judge, options, words=words, workers=workers), judge
        )
    detail_rows = []
    if details:
        for d, x in zip(report.details, traced.split.outcomes):
            detail_rows.append({**d, "trace_outcome": x} if outcomes is not None else d)
    return ScoreResult(
        lid_name=report.lid_name,
        options=report.options,
        rows=report.rows,
        guard=guard_state(g),
        judge=judge if judged is not None else None,
        judged=judged,
        markers=[markers.open, markers.close] if outcomes is not None else None,
        outcomes=outcomes,
        trace_rows=trace.rows if (outcomes is not None and trace is not None) else None,
        trace_guard=guard_state(t_guard) if outcomes is not None else None,
        details=detail_rows,
    )

"""Replies with a reasoning trace: split a reply into (trace, answer, outcome) and score the two parts apart.

Reasoning models write their thinking between markers (`<think>…</think>` by default) before the answer, and the
thinking drifts to English or Chinese while the answer stays in the user's language (or the other way round). One
LPR over the whole reply mixes the two; here each part is scored as LCB scores a reply, with the same scorer,
guard and intervals (`scoring.score_traced`: `score_completions` on completions whose text is the part). This module
holds the markers and the split alone (no scorer import): the script gate's `scope` follows the same markers.

Outcomes of a split (`split_reply`):
- `none`: no marker; the answer is the reply, unchanged (so the official numbers of a file without a trace are
  the official numbers, to the bit);
- `closed`: one open marker, then one close marker; the trace is between them, the answer is the text outside;
- `prefilled`: a close marker and no open one: the open marker was in the prompt (chat templates that start the
  trace for the model); the trace is the text before the close marker, the answer the text after it;
- `unclosed`: an open marker never closed (the reply ran out inside its thinking); the trace is the text after the
  marker, the answer the text before it (empty when the reply starts with the marker);
- `malformed`: markers in the wrong order, nested or several; no part can be trusted, so both are empty (the
  reply is left out of both parts' denominators and counted under its outcome).
An empty answer is a reply LCB does not count: the answer's coverage (the guard) shows the replies that lost
their answer to an unclosed or malformed trace.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mlft.completions import Completion
from mlft.errors import ConfigError

NONE, CLOSED, PREFILLED, UNCLOSED, MALFORMED = "none", "closed", "prefilled", "unclosed", "malformed"
OUTCOMES = (NONE, CLOSED, PREFILLED, UNCLOSED, MALFORMED)
HAS_TRACE = (CLOSED, PREFILLED, UNCLOSED)  # the replies the trace part scores
TRACE_PREFIX = "trace_"  # long-format metric rows of the trace part: trace_lpr, trace_coverage, trace_unclosed...
TRACE_OUTCOMES_FILE = "outcomes.trace.jsonl"  # an lcb suite variant's per-reply outcomes of its traces


def trace_metric(metric: str) -> str:
    """The long-format name of a metric of the trace part (`lpr` -> `trace_lpr`) or of an outcome's share."""
    return TRACE_PREFIX + metric


def is_trace_metric(metric: str) -> bool:
    return metric.startswith(TRACE_PREFIX)


@dataclass(frozen=True)
class TraceMarkers:
    open: str = "<think>"
    close: str = "</think>"

    def __post_init__(self):
        if not self.open or not self.close:
            raise ConfigError(f"trace markers {self.open!r}, {self.close!r}: neither marker may be empty")
        if self.open in self.close or self.close in self.open:
            raise ConfigError(
                f"trace markers {self.open!r}, {self.close!r}: one marker inside the other cannot be told apart"
            )

    def spec(self) -> str:
        return f"{self.open},{self.close}"


DEFAULT_MARKERS = TraceMarkers()


def parse_markers(spec: str | Sequence[str] | None, where: str = "trace_markers") -> TraceMarkers | None:
    """Markers from 'OPEN,CLOSE' (or a pair); None, '' or 'none' turns the split off. A malformed spec is a
    ConfigError naming `where`."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "none", "off")):
        return None
    parts = spec.split(",", 1) if isinstance(spec, str) else list(spec)
    if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
        raise ConfigError(f"{where}: expected 'OPEN,CLOSE' (e.g. '<think>,</think>') or 'none', got {spec!r}")
    try:
        return TraceMarkers(parts[0].strip(), parts[1].strip())
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


class TraceSplit(NamedTuple):
    trace: str
    answer: str
    outcome: str


def split_reply(text: str, markers: TraceMarkers = DEFAULT_MARKERS) -> TraceSplit:
    """(trace, answer, outcome) of one reply; see the module's docstring for the outcomes."""
    o, c = markers.open, markers.close
    n_open, n_close = text.count(o), text.count(c)
    if n_open == 0 and n_close == 0:
        return TraceSplit("", text, NONE)
    if n_open == 1 and n_close == 1:
        i, j = text.index(o), text.index(c)
        if i < j:
            return TraceSplit(text[i + len(o) : j], text[:i] + text[j + len(c) :], CLOSED)
        return TraceSplit("", "", MALFORMED)
    if n_open == 0 and n_close == 1:
        j = text.index(c)
        return TraceSplit(text[:j], text[j + len(c) :], PREFILLED)
    if n_open == 1 and n_close == 0:
        i = text.index(o)
        return TraceSplit(text[i + len(o) :], text[:i], UNCLOSED)
    return TraceSplit("", "", MALFORMED)


@dataclass
class SplitCompletions:
    """The parts of completions, in input order: `answers` holds one completion per input (the same object when
    its reply has no marker), `traces` one per reply with a trace (outcome in HAS_TRACE), `outcomes` one per input."""

    answers: list[Completion]
    traces: list[Completion]
    outcomes: list[str]

    @property
    def any_marker(self) -> bool:
        return any(x != NONE for x in self.outcomes)


def split_completions(completions: Sequence[Completion], markers: TraceMarkers | None) -> SplitCompletions:
    if markers is None:
        return SplitCompletions(list(completions), [], [NONE] * len(completions))
    answers, traces, outcomes = [], [], []
    for c in completions:
        s = split_reply(c.completion, markers)
        outcomes.append(s.outcome)
        if s.outcome == NONE:
            answers.append(c)
            continue
        answers.append(dataclasses.replace(c, completion=s.answer, extra={**c.extra, "trace_outcome": s.outcome}))
        if s.outcome in HAS_TRACE:
            traces.append(dataclasses.replace(c, completion=s.trace, extra={**c.extra, "trace_outcome": s.outcome}))
    return SplitCompletions(answers, traces, outcomes)


def outcome_rows(completions: Sequence[Completion], outcomes: Sequence[str]) -> list[dict]:
    """Per (task, model, language), then (task, model, 'all'): {task, model, language, replies, <outcome>: count}
    in first-seen (task, model) order, languages sorted."""
    counts: dict[tuple[str, str, str], Counter] = {}
    for c, x in zip(completions, outcomes):
        for lang in (c.language, "all"):
            counts.setdefault((c.task, c.model, lang), Counter())[x] += 1
    groups = list(dict.fromkeys((c.task, c.model) for c in completions))
    rows = []
    for task, model in groups:
        langs = sorted(k[2] for k in counts if k[:2] == (task, model) and k[2] != "all") + ["all"]
        for lang in langs:
            n = counts[(task, model, lang)]
            rows.append(
                {
                    "task": task,
                    "model": model,
                    "language": lang,
                    "replies": sum(n.values()),
                    **{x: n[x] for x in OUTCOMES},
                }
            )
    return rows

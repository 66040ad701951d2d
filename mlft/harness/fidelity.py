"""Language fidelity for any lm-eval generative task: LPR and the guard's columns beside the task's own metric.

A task's own metric (exact_match, ...) says whether a reply answers; LCB's scorer says whether it answers in the
language asked for. Two pieces, both judged by mlft's official scorer (`mlft.benchmarks.lcb.scoring.analyze_all`:
fastText lid.176, LCB's tokenisation and thresholds, the guard's degeneracy and lexical validity), no second
implementation:

- the filter `mlft_language` (`LanguageFilter`) judges each raw reply against its document's language (the doc field
  `language_key`, "language" by default, or a fixed `language:` for a one-language task such as mgsm_direct_ja)
  and passes the reply on unchanged, as a `JudgedReply` (a `str` carrying its outcome): the task's own metrics
  read the same text. Filters see the documents, metrics do not, so the language is read here. A reasoning
  model's reply is judged on its answer (`part: answer`, the default, as `mlft score`: the text outside
  `<think>…</think>`, or `trace_markers: OPEN,CLOSE`; a reply without a marker is its own answer), on its trace
  (`part: trace`: replies without one are left out) or whole (`part: reply`), split by
  `mlft.benchmarks.lcb.traces.split_reply` (an unclosed or malformed trace leaves an empty answer: coverage);
- the metrics `lpr`, `wpr`, `lcpr`, `coverage`, `degeneracy`, `validity` read that outcome; their aggregation is
  LCB's official one (`mlft.stats.intervals`: per language, then the unweighted mean over languages), so a
  one-language task gets the plain shares. When the language comes from the documents each metric also reports
  per language (`lpr_ja`, ...). WPR / LCPR cover the six non-Latin LCB languages only (as LCB), `validity` the
  languages wordfreq has a lexicon for; a reply without a counted line (< 5 tokens on every line) is left out of
  LPR and lowers `coverage`, as in LCB.

A reply the filter did not judge (a filter pipeline without `mlft_language`, e.g. the answer-extracting one of a
gsm8k-style task) gives these metrics nothing: they report on the pipeline that judged, and only there. lm-eval
computes every metric on every pipeline, so the task's own metric is also reported on the judging pipeline (on the
unextracted reply): read it from its own pipeline.

Use: `!function mlft.harness.fidelity.LanguageFilter` (filter) and `!function mlft.harness.fidelity.lpr` (metric)
in a task YAML work with the `lm_eval` command as is (lm-eval imports the module, which also registers the names);
the registered names (`function: mlft_language`, `metric: lpr`) work once this module is imported (Python API, or
a YAML naming one of its `!function`s anywhere: lm-eval parses the whole file before it builds the task). Example:
tests/data/lm_eval_fidelity/; docs/measuring.md.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable

import lm_eval.api.metrics  # noqa: F401  (lm-eval's own metrics first: its registry loads them only while empty)
from lm_eval.api.filter import Filter
from lm_eval.api.registry import (
    aggregation_registry,
    filter_registry,
    metric_registry,
    register_aggregation,
    register_filter,
    register_metric,
)

from mlft.benchmarks.lcb.metrics import ScoreOptions
from mlft.benchmarks.lcb.scoring import analyze_all, load_resources, outcomes_from
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, HAS_TRACE, NONE, parse_markers, split_reply
from mlft.completions import Completion
from mlft.config import check_choice
from mlft.errors import ConfigError, DataError
from mlft.languages import NON_LATIN, check_scorable
from mlft.stats import Outcome, intervals

FILTER = "mlft_language"
OPTIONS = ("language_key", "language", "part", "trace_markers")
MARKERS = DEFAULT_MARKERS.spec()  # "<think>,</think>"; "none" judges every reply whole
PARTS = ("answer", "trace", "reply")  # a reply's part the filter judges (mlft.benchmarks.lcb.traces)
METRICS = ("lpr", "wpr", "lcpr", "coverage", "degeneracy", "validity")
LOWER_IS_BETTER = {"degeneracy"}
TASK = SOURCE = "lm_eval"  # one (task, source) stratum: the languages are the strata
log = logging.getLogger(__name__)


class JudgedReply(str):
    """A reply as the task's metrics read it (the same text), with mlft's verdict on its language (`outcome`: an
    `mlft.stats.Outcome` as a dict) and whether the language came from the document (`per_language`)."""

    outcome: dict | None
    per_language: bool

    def __new__(cls, text: str = "", outcome: dict | None = None, per_language: bool = False):
        self = super().__new__(cls, text)
        self.outcome, self.per_language = outcome, per_language
        return self


@functools.lru_cache(maxsize=1)
def _resources():
    return load_resources(None, None)


class LanguageFilter(Filter):
    """lm-eval filter `mlft_language`: judge each reply's language against its document's; pass the text on."""

    def __init__(
        self,
        language_key: str = "language",
        language: str | None = None,
        part: str = "answer",
        trace_markers: str | list[str] | None = MARKERS,
        **kwargs,
    ) -> None:
        if kwargs:
            raise ConfigError(
                f"filter {FILTER}: unknown option(s) {', '.join(sorted(kwargs))}; valid: {', '.join(OPTIONS)}"
            )
        self.language_key = language_key
        self.language = None if language is None else check_scorable(str(language), f"filter {FILTER}: language")
        self.part = check_choice(part, PARTS, "part", f"filter {FILTER}")
        self.markers = parse_markers(trace_markers, f"filter {FILTER}: trace_markers")
        if self.part == "trace" and self.markers is None:
            raise ConfigError(f"filter {FILTER}: part: trace needs trace_markers (e.g. '<think>,</think>')")

    def judged_text(self, reply: str) -> tuple[str | None, str]:
        """(the text judged, the reply's trace outcome): the part asked for; None for `trace` of a reply without
        one (left out of the trace's metrics, as `mlft score` leaves it out of the trace part)."""
        if self.part == "reply" or self.markers is None:
            return reply, NONE
        split = split_reply(reply, self.markers)
        if self.part == "answer":
            return split.answer, split.outcome
        return (split.trace if split.outcome in HAS_TRACE else None), split.outcome

    def document_language(self, doc: dict, index: int) -> str:
        if self.language is not None:
            return self.language
        where = f"filter {FILTER}: document {index}"
        if not isinstance(doc, dict) or self.language_key not in doc:
            fields = ", ".join(map(str, doc)) if isinstance(doc, dict) else type(doc).__name__
            raise DataError(
                f"{where} has no field {self.language_key!r} (its fields: {fields}); set the filter's language_key "
                f"to the field naming the language the reply should be in, or language: for a fixed one"
            )
        try:
            return check_scorable(str(doc[self.language_key]), f"{where}: field {self.language_key!r}")
        except ConfigError as exc:
            raise DataError(str(exc)) from None

    def apply(self, resps: Iterable, docs: list[dict]) -> list:
        resps = list(resps)
        langs = [self.document_language(doc, i) for i, doc in enumerate(docs)]
        # one reply or a list of them per document (before or after take_first)
        flat = [(i, r) for i, rs in enumerate(resps) for r in (rs if isinstance(rs, (list, tuple)) else [rs])]
        texts = ["" if r is None else str(r) for _, r in flat]
        parts = [self.judged_text(t) for t in texts]
        scored = [k for k, (text, _) in enumerate(parts) if text is not None]
        lid, words = _resources()
        items = [(parts[k][0], langs[flat[k][0]]) for k in scored]
        comps = [
            Completion(str(flat[k][0]), "lm-eval", TASK, SOURCE, lang, text) for k, (text, lang) in zip(scored, items)
        ]
        outcomes = dict(zip(scored, outcomes_from(comps, analyze_all(items, lid, words, ScoreOptions(), guard=True))))
        judged = []
        for k, (t, (_, trace)) in enumerate(zip(texts, parts)):
            o = outcomes[k].to_dict() if k in outcomes else {"language": langs[flat[k][0]], "left_out": True}
            judged.append(JudgedReply(t, {**o, "trace": trace}, self.language is None))
        out, k = [], 0
        for rs in resps:
            n = len(rs) if isinstance(rs, (list, tuple)) else 1
            out.append(judged[k : k + n] if isinstance(rs, (list, tuple)) else judged[k])
            k += n
        return out


def aggregate(items: list[dict]) -> dict[str, float]:
    """{metric: value} of judged replies: LCB's official aggregation (mlft.stats), over all their languages."""
    if not items:
        return {}
    outs = [Outcome.from_dict(x, "lm-eval outcome") for x in items]
    return {m: e.value for m, e in intervals(outs, n=1, seed=0)[(TASK, "all", "all")].items()}


_warned: set[str] = set()


def _applies(name: str, outcome: dict) -> bool:
    """WPR / LCPR: the non-Latin LCB languages (as LCB); validity: the languages with a lexicon."""
    if name in ("wpr", "lcpr"):
        return outcome["language"] in NON_LATIN
    return name != "validity" or outcome["validity"] is not None


def _metric(name: str):
    def metric(references=None, predictions=None, **_kwargs) -> dict:
        reply = predictions[0] if predictions else None
        if not isinstance(reply, JudgedReply) or reply.outcome is None:
            if name not in _warned:
                _warned.add(name)
                log.info("metric %s: a reply the %s filter did not judge (another pipeline): left out", name, FILTER)
            return {}
        o = reply.outcome
        if o.get("left_out") or not _applies(name, o):
            return {}
        return {name: o, f"{name}_{o['language']}": o} if reply.per_language else {name: o}

    metric.__name__ = metric.__qualname__ = name
    return metric


def _agg(name: str):
    def agg(items: list[dict]) -> float:
        value = aggregate(items).get(name)
        return float("nan") if value is None else value

    agg.__name__ = agg.__qualname__ = f"mlft_{name}"
    return agg


lpr, wpr, lcpr, coverage, degeneracy, validity = (_metric(m) for m in METRICS)
agg_lpr, agg_wpr, agg_lcpr, agg_coverage, agg_degeneracy, agg_validity = (_agg(m) for m in METRICS)


def register() -> None:
    """Register the filter, metrics and aggregations under their names in lm-eval's registries (idempotent: a name
    another package registered first is left as it is, and its use in a task is that package's)."""
    if FILTER not in filter_registry:
        register_filter(FILTER)(LanguageFilter)
    for name in METRICS:
        fn, agg = globals()[name], globals()[f"agg_{name}"]
        if agg.__name__ not in aggregation_registry:
            register_aggregation(agg.__name__)(agg)
        if name not in metric_registry:
            register_metric(metric=name, higher_is_better=name not in LOWER_IS_BETTER, aggregation=agg.__name__)(fn)


register()

"""Score completions: LPR / WPR / acc per (task, model, source, language), the official aggregation
((source, all), (all, lang), (all, all); unweighted means), LCPR as the paper defines it, optional per-reply
details and seeded confidence intervals (computed by mlft.stats, the one statistics module); replies with a reasoning
trace scored as their answer and their trace apart (`score_traced`, the split in `traces.py`)."""

from __future__ import annotations

import functools
import gc
import multiprocessing as mp
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlft.benchmarks.lcb.fetch import WORDS, locate
from mlft.benchmarks.lcb.guard import degenerate_flags, lexical_validity, lexicon_of
from mlft.benchmarks.lcb.guard_report import LIMITS, guard_rows, limit_flags
from mlft.benchmarks.lcb.metrics import (
    GroupCounts,
    ReplyResult,
    ScoreOptions,
    analyze_tokenized,
    group_metrics,
    load_english_words,
    tokenized,
)
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, SplitCompletions, TraceMarkers, outcome_rows, split_completions
from mlft.completions import Completion
from mlft.errors import DataError
from mlft.langid import OTHER_LIDS, LanguageIdentifier, OtherIdentifier
from mlft.languages import NON_LATIN
from mlft.stats import Outcome, intervals

PARALLEL_MIN_REPLIES = 3000  # below this, forking costs more than it saves
_WORKER: dict = {}


def _collector_paused(fn):
    """`fn` with Python's cycle collector paused (and restored after): scoring allocates millions of short-lived
    containers (tokens, lines, words), all freed by reference counting, and each of the collector's passes would
    rescan the long-lived heap (completions, token and word caches): 15-20 % of the scorer's time on the released
    outputs. Forked workers inherit the pause."""

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


def harmonic(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def lcpr_of(by_lang: dict[str, dict]) -> float | None:
    """Paper Table A5: per-language harmonic mean of LPR and WPR, averaged over the non-Latin languages present."""
    values = [harmonic(m["lpr"], m["wpr"]) for lang, m in by_lang.items() if lang in NON_LATIN]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def aggregate(groups: dict[tuple[str, str], dict]) -> dict[tuple[str, str], dict]:
    """Official aggregation of {(source, lang): {acc, lpr, wpr}} into the (source, all), (all, lang) and
    (all, all) rows (means skip missing WPR)."""
    per_source, per_lang = defaultdict(list), defaultdict(list)
    for (source, lang), m in groups.items():
        per_source[source].append(m)
        per_lang[lang].append(m)
    avg = lambda ms: {k: _mean([m[k] for m in ms]) for k in ("acc", "lpr", "wpr")}  # noqa: E731
    out = dict(groups)
    out.update({(s, "all"): avg(ms) for s, ms in per_source.items()})
    lang_rows = {("all", lang): avg(ms) for lang, ms in per_lang.items()}
    out.update(lang_rows)
    out[("all", "all")] = avg(list(lang_rows.values()))
    return out


@dataclass
class ScoreReport:
    rows: list[dict]
    lid_name: str
    options: str
    details: list[dict] = field(default_factory=list)
    replies: list = field(default_factory=list)  # ReplyResult per completion, in input order

    def _rows(self, task: str, model: str) -> list[dict]:
        return [r for r in self.rows if r["task"] == task and r["model"] == model]

    def by_language(self, task: str, model: str) -> dict[str, dict]:
        return {
            r["language"]: {"lpr": r["lpr"], "wpr": r["wpr"], "lcpr": harmonic(r["lpr"], r["wpr"])}
            for r in self._rows(task, model)
            if r["source"] == "all" and r["language"] != "all"
        }

    def headline(self, task: str, model: str) -> dict:
        top = next(r for r in self._rows(task, model) if r["source"] == "all" and r["language"] == "all")
        return {"lpr": top["lpr"], "wpr": top["wpr"], "lcpr": lcpr_of(self.by_language(task, model))}

    def groups(self) -> list[tuple[str, str]]:
        """(task, model) pairs in first-seen order."""
        return list(dict.fromkeys((r["task"], r["model"]) for r in self.rows))


def _analyze(
    items: Sequence[tuple[str, str]],
    predict,
    words: frozenset[str],
    options: ScoreOptions,
    detail: bool,
    guard: bool,
    progress: bool = False,
) -> list[ReplyResult]:
    """Each (text, lang) tokenised once (`metrics.tokenized`) for the official analysis and, with `guard`, the
    guard's per-reply part (`ReplyResult.guard`: degeneracy of all texts at once, lexical validity)."""
    from tqdm.auto import tqdm

    out, validity = [], []
    for text, lang in tqdm(items, desc="scoring", unit="reply", disable=not progress):
        reply = tokenized(text, lang)
        out.append(analyze_tokenized(reply, lang, predict, words, options, detail))
        if guard:
            validity.append(lexical_validity(text, lang, reply))
    if guard:
        for r, d, v in zip(out, degenerate_flags([t for t, _ in items]), validity):
            r.guard = (d, v)
    return out


def _analyze_chunk(chunk: list[tuple[str, str]], detail: bool, guard: bool = False) -> list[ReplyResult]:
    w = _WORKER
    return _analyze(chunk, w["predict"], w["words"], w["options"], detail, guard)


def _cores() -> int:
    """The cores this process may run on: the forked workers' default number."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _language_chunks(items: Sequence[tuple[str, str]], workers: int) -> list[list[int]]:
    """The forked workers' tasks: each language's replies in one task (a language larger than half a worker's
    share in near-equal parts), largest first. A language's tokeniser (jieba, MeCab), lexicon and judged words are
    then loaded and met in one worker, in parallel with the other languages', not in every worker (chunks of
    the language-sorted input went to the workers in turn: every worker met nearly every language)."""
    by_lang: dict[str, list[int]] = {}
    for i, (_, lang) in enumerate(items):
        by_lang.setdefault(lang, []).append(i)
    cap = max(200, -(-len(items) // (2 * workers)))
    chunks = []
    for idx in by_lang.values():
        size = -(-len(idx) // -(-len(idx) // cap))  # near-equal parts of at most `cap`
        chunks += [idx[j : j + size] for j in range(0, len(idx), size)]
    return sorted(chunks, key=len, reverse=True)  # largest first: the last tasks are short


def analyze_all(
    items: list[tuple[str, str]],
    lid: LanguageIdentifier,
    words: frozenset[str],
    options: ScoreOptions,
    detail: bool = False,
    workers: int | None = None,
    progress: bool = False,
    guard: bool = False,
) -> list[ReplyResult]:
    """Analyze (text, lang) pairs; forks `workers` processes (default: all cores) for large inputs. `guard` adds
    the guard's per-reply part to each result (in the same workers, from the same tokens)."""
    from tqdm.auto import tqdm

    workers = workers or _cores()
    if workers <= 1 or len(items) < PARALLEL_MIN_REPLIES:
        return _analyze(items, lid.predict, words, options, detail, guard, progress)
    chunks = _language_chunks(items, workers)
    if guard:  # English's lexicon loads before forking (every Latin-script language's words are checked against it)
        lexicon_of("en")
    _WORKER.update(predict=lid.predict, words=words, options=options)  # inherited by forked workers
    results: list[ReplyResult | None] = [None] * len(items)
    ctx = mp.get_context("fork")
    with ctx.Pool(workers) as pool, tqdm(total=len(items), desc="scoring", unit="reply", disable=not progress) as bar:
        jobs = [(idx, pool.apply_async(_analyze_chunk, ([items[i] for i in idx], detail, guard))) for idx in chunks]
        for idx, job in jobs:
            for i, r in zip(idx, job.get()):
                results[i] = r
            bar.update(len(idx))
    return results  # type: ignore[return-value]


def load_resources(lid: str | LanguageIdentifier | None = None, words: str | Path | None = None):
    if isinstance(lid, (LanguageIdentifier, OtherIdentifier)):
        identifier = lid
    else:
        identifier = OtherIdentifier(lid) if lid in OTHER_LIDS else LanguageIdentifier.from_spec(lid)
    return identifier, load_english_words(locate(WORDS, words))


@_collector_paused
def score_completions(
    completions: list[Completion],
    options: ScoreOptions | None = None,
    *,
    lid: str | LanguageIdentifier | None = None,
    words: str | Path | None = None,
    detail: bool = False,
    bootstrap: int = 0,
    seed: int = 0,
    workers: int | None = None,
    progress: bool = False,
    confidence: float = 0.95,
    guard: bool = False,
) -> ScoreReport:
    """Score completions by the official rules. `bootstrap` > 0 adds intervals at `confidence` for LPR / WPR /
    LCPR on every row (`mlft.stats.intervals`: stratified bootstrap for aggregates, Wilson for a single
    (source, language) group), seeded; per model, as `mlft eval` computes them per variant. `guard` computes the
    guard's per-reply part (degeneracy, lexical validity) in the scoring workers (`score_guard` then reuses it)."""
    options = options or ScoreOptions()
    identifier, word_set = load_resources(lid, words)
    results = analyze_all(
        [(c.completion, c.language) for c in completions],
        identifier,
        word_set,
        options,
        detail,
        workers,
        progress,
        guard or bool(bootstrap),
    )
    # group in first-seen (task, model) order; groups sorted by (source, language) like the official script
    by_group: dict[tuple, dict[tuple, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, c in enumerate(completions):
        by_group[(c.task, c.model)][(c.source, c.language)].append(i)
    ci: dict = {}
    if bootstrap:
        by_model: dict[str, list[int]] = defaultdict(list)
        for i, c in enumerate(completions):
            by_model[c.model].append(i)
        for model, idx in by_model.items():
            for (task, source, lang), cols in _intervals(
                completions, results, idx, bootstrap, seed, confidence
            ).items():
                ci[(task, model, source, lang)] = cols
    rows = []
    for (task, model), groups in by_group.items():
        counts = {}
        for key in sorted(groups):
            group = GroupCounts()
            for i in groups[key]:
                group.add(results[i])
            counts[key] = group
        metrics = aggregate({k: group_metrics(group, k[1]) for k, group in counts.items()})
        for (source, lang), m in metrics.items():
            row = {"task": task, "model": model, "source": source, "language": lang, **m}
            row["lcpr"] = harmonic(m["lpr"], m["wpr"]) if lang != "all" else None
            if (source, lang) in counts:
                row.update(counts[(source, lang)].counts())
            if ci:
                row.update(ci[(task, model, source, lang)])
            rows.append(row)
    for r in rows:
        if r["source"] == "all" and r["language"] == "all":
            tm = [
                x
                for x in rows
                if x["task"] == r["task"]
                and x["model"] == r["model"]
                and x["source"] == "all"
                and x["language"] != "all"
            ]
            r["lcpr"] = lcpr_of({x["language"]: x for x in tm})
    details = _details(completions, results) if detail else []
    described = options.describe()
    if not isinstance(identifier, LanguageIdentifier):  # not a fastText model: not the official scorer
        described = (
            described.replace("official LCB scorer behaviour", "NON-OFFICIAL options:").rstrip(":")
            + f"{';' if 'options:' in described else ''} language ID by {identifier.name}"
        )
    return ScoreReport(rows, identifier.name, described, details, results)


def _details(completions: list[Completion], results: list[ReplyResult]) -> list[dict]:
    out = []
    for c, r in zip(completions, results):
        out.append(
            {
                "id": c.id,
                "task": c.task,
                "model": c.model,
                "source": c.source,
                "language": c.language,
                "counted": r.counted,
                "line_error": r.line_error,
                "word_error": r.word_error,
                "acc": r.acc,
                "lines": [{"text": t, "label": lab, "score": s, "ok": ok} for t, lab, s, ok in r.lines],
                "failed_lines": [t for t, _, _, ok in r.lines if not ok],
                "english_words": r.english_words,
            }
        )
    return out


def outcomes_from(
    completions: Sequence,
    results: Sequence,
    *,
    degenerate: Sequence[bool] | None = None,
    nll: Sequence[float | None] | None = None,
    validity: Sequence[float | None] | None = None,
) -> list[Outcome]:
    """Outcomes of scored completions (`mlft.completions.Completion` + `metrics.ReplyResult`, same order).
    `degenerate` defaults to `guard.is_degenerate` (`guard.degenerate_flags`) and `validity` to
    `guard.lexical_validity` of each
    completion's text (None for a language without a lexicon)."""
    if len(completions) != len(results):
        raise DataError(f"{len(completions)} completions but {len(results)} scored replies")
    scored = all(getattr(r, "guard", None) is not None for r in results)  # computed by the scorer
    if degenerate is None:
        degenerate = [r.guard[0] for r in results] if scored else degenerate_flags([c.completion for c in completions])
    if validity is None:
        validity = (
            [r.guard[1] for r in results]
            if scored
            else [lexical_validity(c.completion, c.language) for c in completions]
        )
    nll = list(nll) if nll is not None else [None] * len(completions)
    if not len(degenerate) == len(nll) == len(validity) == len(completions):
        raise DataError("degenerate / nll / validity must have one value per completion")
    return [
        Outcome(
            str(c.id),
            c.task,
            c.source,
            c.language,
            bool(r.counted),
            bool(r.line_error),
            bool(r.word_error),
            bool(d),
            None if x is None else float(x),
            None if v is None else float(v),
            getattr(r, "n_lines", None),
            getattr(r, "n_unknown", None),
            _sample(c),
        )
        for c, r, d, x, v in zip(completions, results, degenerate, nll, validity)
    ]


def _sample(completion) -> int:
    """Which of its prompt's replies a completion is (mlft JSONL `sample`; 0 without it)."""
    extra = getattr(completion, "extra", None) or {}
    return int(extra.get("sample") or 0)


@_collector_paused
def score_guard(
    completions: Sequence,
    replies: Sequence,
    *,
    confidence: float = 0.95,
    n: int = 2000,
    seed: int = 0,
    workers: int | None = None,
) -> tuple[dict[tuple[str, str, str, str], dict], list[dict]]:
    """The guard of `mlft score`: per (task, model, source, language) row of the official report (aggregates
    with "all") its guard row (`guard_rows`), and the limit flags of the (task, model, language) rows as
    dicts {task, model, language, metric, value, ci_low, ci_high, reason}. `completions` are
    `mlft.completions.Completion`s, `replies` their `metrics.ReplyResult`s (same order). Models are independent
    (each its own seeded intervals): with several models and a large input they run in `workers` forked processes
    (default: all cores), with the same numbers as one process."""
    by_model: dict[str, list[int]] = {}
    for i, c in enumerate(completions):
        by_model.setdefault(c.model, []).append(i)
    workers = workers or _cores()
    _WORKER.update(guard_input=(completions, replies, confidence, n, seed))  # inherited by forked workers
    try:
        if workers <= 1 or len(by_model) < 2 or len(completions) < PARALLEL_MIN_REPLIES:
            done = [_model_guard(idx) for idx in by_model.values()]
        else:
            with mp.get_context("fork").Pool(min(workers, len(by_model))) as pool:
                done = pool.map(_model_guard, list(by_model.values()), chunksize=1)
    finally:
        _WORKER.pop("guard_input", None)
    rows, flags = {}, []
    for model, (model_rows, model_flags) in zip(by_model, done):
        for r in model_rows:
            rows[(r["task"], model, r["source"], r["language"])] = r
        flags += [dict(f, model=model) for f in model_flags]
    return rows, flags


def _model_guard(idx: list[int]) -> tuple[list[dict], list[dict]]:
    """One model's guard rows and limit flags (`score_guard`), from the input the parent left in `_WORKER`."""
    completions, replies, confidence, n, seed = _WORKER["guard_input"]
    outcomes = outcomes_from([completions[i] for i in idx], [replies[i] for i in idx])
    model_rows = guard_rows(outcomes, confidence=confidence, n=n, seed=seed, sources=True)
    flags = [
        {
            "task": f.task,
            "model": None,
            "language": f.language,
            "metric": f.metric,
            "value": f.value,
            "ci_low": f.ci_low,
            "ci_high": f.ci_high,
            "reason": f.reason,
        }
        for f in limit_flags([r for r in model_rows if r["source"] == "all"], **LIMITS)
    ]
    return model_rows, flags


def _intervals(
    completions: list[Completion], results: list[ReplyResult], idx: list[int], n: int, seed: int, confidence: float
) -> dict:
    """{(task, source, lang): {lpr_ci_low, ..., lcpr_ci_high}} of one model's replies: the intervals of
    `mlft.stats` (the same numbers `mlft eval` reports for the same replies, seed and resamples)."""
    comps = [completions[i] for i in idx]
    # the same outcomes as `mlft eval` (validity included: the bootstrap's draws depend on the reply categories)
    outcomes = outcomes_from(comps, [results[i] for i in idx])
    out = {}
    for key, ms in intervals(outcomes, confidence=confidence, n=n, seed=seed).items():
        cols = {}
        for m in ("lpr", "wpr", "lcpr"):
            est = ms.get(m)
            cols[f"{m}_ci_low"], cols[f"{m}_ci_high"] = (est.low, est.high) if est else (None, None)
        out[key] = cols
    return out


@dataclass
class TracedScore:
    """`answer`: the official report of the answers (the replies themselves when none has a marker); `trace`: the
    report of the traces (None when no reply has a trace); `split`: the parts and outcomes."""

    answer: ScoreReport
    trace: ScoreReport | None
    split: SplitCompletions
    markers: TraceMarkers | None

    def outcome_rows(self, completions: Sequence[Completion]) -> list[dict]:
        """The split's outcomes counted per (task, model, language) (`traces.outcome_rows`)."""
        return outcome_rows(completions, self.split.outcomes)


def score_traced(
    completions: Sequence[Completion], markers: TraceMarkers | None = DEFAULT_MARKERS, **kwargs
) -> TracedScore:
    """Reasoning traces (`traces`): `score_completions` of the answers and, when some reply has a trace, of the
    traces (same options, seed, guard and intervals). Without a marker in any reply the answers are the completions
    themselves, scored once, exactly as `score_completions(completions)`."""
    split = split_completions(completions, markers)
    if not split.any_marker:
        return TracedScore(score_completions(list(completions), **kwargs), None, split, markers)
    answer = score_completions(split.answers, **kwargs)
    trace = score_completions(split.traces, **kwargs) if split.traces else None
    return TracedScore(answer, trace, split, markers)

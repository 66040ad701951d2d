"""The `lcb` eval kind: generate completions for LCB prompts (resumably), score LPR / WPR / LCPR, report.

Suite keys (top level of an `eval/*.yaml` with `kind: lcb`, the default): which prompts (tasks, sources,
languages, per_group sample), how to generate (decoding, prompting, interventions, batch_size), and
`variants`: rows of a sweep, each overriding decoding / prompting keys or replacing the interventions.

Per variant the run folder gets `<variant>/completions.jsonl` (+ `completions.csv`, the official format);
`token_stats: true` adds `confusion.md` (paper Table 7). Rows: `MetricRow`s (variant, task, language, metric,
value, interval, outcomes file). The suite keys, their validation and the prompts they select are
`mlft.evals.lcb_options`'; this module runs a suite and scores it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

from mlft.benchmarks.answers import extract_number, is_correct
from mlft.benchmarks.extraction import extraction_correct
from mlft.benchmarks.lcb.confusion import analyze, confusion_table
from mlft.benchmarks.lcb.fluency import reply_nll
from mlft.benchmarks.lcb.judge import judge_report, metric_name
from mlft.benchmarks.lcb.scoring import outcomes_from, score_completions
from mlft.benchmarks.lcb.traces import (
    HAS_TRACE,
    OUTCOMES,
    TRACE_OUTCOMES_FILE,
    parse_markers,
    split_completions,
    trace_metric,
)
from mlft.completions import Completion, write_official_csv
from mlft.constants import GUARD_METRICS
from mlft.errors import ConfigError
from mlft.evals.lcb_options import LcbOptions, Run, answer_key, distractor_key, runs, select_prompts, validate
from mlft.evals.registry import EvalKind, KindOutput
from mlft.evals.runner import progress_desc
from mlft.generation.decoding import Decoding
from mlft.generation.runner import generate_completions
from mlft.io.jsonl import read_jsonl, write_jsonl
from mlft.io.metric_rows import MetricRow
from mlft.langid import LanguageIdentifier
from mlft.reports.mitigation import variant_table
from mlft.reports.sweeps import plot_sweep, sweep_tables
from mlft.stats import (
    intervals,
    mean_interval,
    prompt_means,
    save_outcomes,
    unknown_share_intervals,
    wilson,
)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", name).strip("_") or "default"


GUARD = GUARD_METRICS


def metric_rows(variant: str, outcomes, confidence: float, resamples: int, seed: int = 0) -> list[MetricRow]:
    """Long-format rows of one variant: LPR / WPR / LCPR and the guard (coverage, degeneracy, lexical validity,
    fluency NLL) per task and language ('avg' = the task average), each with its interval (`low`, `high`) and
    `n` replies, and the LID detail: `unknown` (share of counted lines labelled unknown; reply-cluster bootstrap
    interval, `n` = counted lines) and `skipped` (share of replies LCB leaves out = 1 - coverage). Point values are the
    official scorer's, bit for bit."""

    rows = []
    detail = unknown_share_intervals(outcomes, confidence=confidence, seed=seed)
    for (task, source, lang), ms in intervals(outcomes, confidence=confidence, n=resamples, seed=seed).items():
        if source != "all":
            continue
        language = "avg" if lang == "all" else lang
        for metric in ("lpr", "wpr", "lcpr", *GUARD):
            if metric in ms:
                est = ms[metric]
                rows.append(MetricRow(variant, task, language, metric, est.value, est.low, est.high, est.n))
        cov = ms["coverage"]
        rows.append(MetricRow(variant, task, language, "skipped", 1 - cov.value, 1 - cov.high, 1 - cov.low, cov.n))
        unknown = detail.get((task, source, lang), {})
        if unknown.get("unknown") is not None:
            rows.append(
                MetricRow(
                    variant,
                    task,
                    language,
                    "unknown",
                    unknown["unknown"],
                    unknown["unknown_ci_low"],
                    unknown["unknown_ci_high"],
                    unknown["lines"],
                )
            )
    rows += nll_rows(variant, outcomes, confidence)
    return rows


def nll_rows(variant: str, outcomes, confidence: float) -> list[MetricRow]:
    """Mean reply NLL per task and language (and the task's unweighted language mean) with a normal interval
    (`mlft.stats.mean_interval`)."""
    from statistics import mean

    by: dict[tuple[str, str], list[float]] = {}
    for task in dict.fromkeys(o.task for o in outcomes):  # one value per prompt (the mean of its replies)
        for (_, lang, _), x in prompt_means(outcomes, task).items():
            by.setdefault((task, lang), []).append(x)
    rows = []
    for task in dict.fromkeys(t for t, _ in by):
        means = []
        for (t, lang), xs in sorted(by.items()):
            if t != task:
                continue
            m, low, high = mean_interval(xs, confidence)
            means.append(m)
            rows.append(MetricRow(variant, task, lang, "nll", m, low, high, len(xs)))
        rows.append(
            MetricRow(
                variant,
                task,
                "avg",
                "nll",
                mean(means),
                None,
                None,
                sum(len(xs) for (t, _), xs in by.items() if t == task),
            )
        )
    return rows


def reply_nlls(ctx, o: LcbOptions, records: list[dict]) -> list[float | None]:
    """Fluency proxy of each record's reply (None when off or without local weights)."""
    if o.fluency == "generation":
        return [r.get("nll") for r in records]
    model, tok = ctx.fluency_model(o.fluency)
    if model is None:
        return [None] * len(records)

    prompts = [r.get("messages") if r.get("messages") is not None else r.get("input_text") for r in records]
    # left padding: the replies end together, so only the last max-reply-length logits are computed (right padding
    # kept logits from the shortest prompt on: ~15 GB of logits for 256 rows of a 49k vocabulary)
    return reply_nll(
        model,
        tok,
        prompts,
        [r["completion"] for r in records],
        batch_size=min(32, max(8, o.batch_size)),
        padding_side="left",
    )


def generate_run(ctx, o: LcbOptions, r: Run, prompts, path: Path, desc: str | None = None) -> list[dict]:
    """Generate (resumably) the completions of one variant into `path`: the suite's generation step, also the whole
    of `mlft generate` (the kind with scoring off)."""
    backend = ctx.backend(batch_size=o.batch_size, token_stats=o.token_stats, interventions=r.interventions)
    return generate_completions(
        prompts,
        backend,
        r.decoding,
        r.prompting,
        path,
        ctx.model_name,
        ctx.progress,
        desc=desc or "generate",
        interventions=r.interventions,
        samples=replies_per_prompt(o, r.decoding),
    )


def replies_per_prompt(o: LcbOptions, decoding: Decoding) -> int:
    """`samples` under sampled decoding; 1 under greedy or beam search, which gives the same reply every time (a
    suite with `samples: 2` run with temperature 0 generates one reply per prompt)."""
    return o.samples if decoding.sampling and decoding.num_beams == 1 else 1


def run(suite, ctx) -> KindOutput:
    o: LcbOptions = suite.options
    where = suite.source_file or suite.name
    resolved = runs(o, where)
    for r in resolved:
        ctx.check_interventions(r.interventions, f"{where}: variant {r.name!r}")
    prompts = select_prompts(o)
    rows, all_records, files, seconds = [], [], [], {}
    for r in resolved:
        vdir = ctx.out_dir / slug(r.name)
        before = _done(vdir / "completions.jsonl")
        started = time.perf_counter()
        records = generate_run(ctx, o, r, prompts, vdir / "completions.jsonl", progress_desc(suite.name, r.name))
        spent = _timing(vdir, time.perf_counter() - started, len(records) - before)
        if spent:
            seconds[r.name] = spent
        if not records:
            raise ConfigError(
                f"{where}: variant {r.name!r}: no completions to score (every prompt failed; see "
                f"{vdir / 'completions.jsonl'})"
            )
        write_official_csv(records, vdir / "completions.csv")
        completions = [
            Completion(
                x["id"],
                r.name,
                x["task"],
                x["source"],
                x["language"],
                x["completion"],
                {"sample": x.get("sample") or 0},
            )
            for x in records
        ]
        split = split_completions(completions, parse_markers(o.trace_markers))
        completions = split.answers  # the replies themselves when none holds a trace marker
        report = score_completions(completions)
        outcomes = outcomes_from(completions, report.replies, nll=reply_nlls(ctx, o, records))
        save_outcomes(vdir / "outcomes.jsonl", outcomes)
        rows += [
            dataclasses.replace(row, outcomes=f"{slug(r.name)}/outcomes.jsonl")
            for row in metric_rows(r.name, outcomes, o.confidence, o.resamples)
        ]
        files += [vdir / "completions.jsonl", vdir / "completions.csv", vdir / "outcomes.jsonl"]
        if o.answers:
            rows += task_rows(r.name, records, answer_key(o, where), o, vdir, distractor_key(o, where))
            files.append(vdir / TASK_FILE)
        if o.judge:
            rows += judge_rows(r.name, completions, outcomes, o, vdir)
            files.append(vdir / judge_file(o.judge))
        if split.any_marker:
            rows += trace_rows(r.name, split, o, vdir)
            if split.traces:
                files.append(vdir / TRACE_OUTCOMES_FILE)
        all_records += records
    tables = sweep_tables(rows)
    text = "\n".join(t for _, t in tables)
    if len(resolved) > 1:  # the variants as mitigations: intervals, paired tests against the first, the guard
        table = variant_table(
            rows, ctx.out_dir, [r.name for r in resolved], seconds, suite.name, o.judge, task=o.answers
        )
        text = table.render("markdown") + "\n" + text
        tables = [("mitigation", table.render("csv")), *tables]
    if o.token_stats:
        table = confusion_table(
            analyze(all_records, LanguageIdentifier.from_spec(None)), title="Confusion points (paper Table 7 layout)"
        )
        (ctx.out_dir / "confusion.md").write_text(table, encoding="utf-8")
        files.append(ctx.out_dir / "confusion.md")
        text += "\n" + table
    if len(resolved) > 1:
        files.append(plot_sweep(rows, ctx.out_dir / "sweep.png", suite.name))
    return KindOutput(rows, text, [t for t in tables if t[0] == "mitigation"] + sweep_tables(rows, "csv"), files)


def trace_rows(variant: str, split, o: LcbOptions, vdir) -> list[MetricRow]:
    """The trace part of a variant's replies: `trace_<metric>` rows (LPR, WPR, LCPR and the guard, with the
    intervals of the official rows; per-reply outcomes in `<variant>/outcomes.trace.jsonl` for the paired tests) and
    `trace_<outcome>` rows: the share of replies per split outcome, per task and language (Wilson intervals)."""
    rows = []
    if split.traces:
        scored = score_completions(split.traces)
        outcomes = outcomes_from(split.traces, scored.replies)
        save_outcomes(vdir / TRACE_OUTCOMES_FILE, outcomes)
        rows += [
            dataclasses.replace(row, metric=trace_metric(row.metric), outcomes=f"{slug(variant)}/{TRACE_OUTCOMES_FILE}")
            for row in metric_rows(variant, outcomes, o.confidence, o.resamples)
            if row.metric != "nll"
        ]
    counts: dict[tuple[str, str], list[str]] = {}
    for c, x in zip(split.answers, split.outcomes):
        for lang in (c.language, "avg"):
            counts.setdefault((c.task, lang), []).append(x)
    for (task, lang), xs in counts.items():
        for x in (*OUTCOMES, "any"):
            k = sum(y in HAS_TRACE for y in xs) if x == "any" else xs.count(x)
            low, high = wilson(k, len(xs), o.confidence)
            rows.append(MetricRow(variant, task, lang, trace_metric(x), k / len(xs), float(low), float(high), len(xs)))
    return rows


TASK_FILE = "task.jsonl"


def task_rows(
    variant: str, records: list[dict], key: dict[str, float], o: LcbOptions, vdir, distractors: dict | None = None
) -> list[MetricRow]:
    """The task metric of one variant: per task and language (and `avg`, all the task's replies pooled) the share
    of replies whose stated answer is the prompt's (`mlft.benchmarks.answers.is_correct`: every result it states),
    with a Wilson interval (`mlft.stats.wilson`); each reply's verdict goes to `<variant>/task.jsonl` (id, sample,
    language, task, answer, extracted, correct). A prompt with `distractors` (extractive, mlft.data.extraction) is
    answered when the reply states the answer and none of them (mlft.benchmarks.extraction), wherever it states it."""
    verdicts = []
    distractors = distractors or {}
    for x in records:
        reply, answer = x["completion"] or "", key[x["id"]]
        got = extract_number(reply, x["language"], x.get("prompt"))
        if x["id"] in distractors:
            correct = extraction_correct(reply, answer, distractors[x["id"]])
        else:
            correct = is_correct(reply, answer, x["language"], x.get("prompt"))
        verdicts.append(
            {
                "id": x["id"],
                "sample": x.get("sample") or 0,
                "task": x["task"],
                "language": x["language"],
                "answer": answer,
                "extracted": got,
                "correct": correct,
            }
        )
    write_jsonl(vdir / TASK_FILE, verdicts)
    groups: dict[tuple[str, str], list[bool]] = {}
    for v in verdicts:
        groups.setdefault((v["task"], v["language"]), []).append(v["correct"])
        groups.setdefault((v["task"], "avg"), []).append(v["correct"])
    rows = []
    for (task, lang), flags in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "avg", kv[0][1])):
        low, high = wilson(sum(flags), len(flags), o.confidence)
        rows.append(
            MetricRow(
                variant,
                task,
                lang,
                "task",
                sum(flags) / len(flags),
                float(low),
                float(high),
                len(flags),
                outcomes=f"{slug(variant)}/{TASK_FILE}",
            )
        )
    return rows


def judge_file(judge: str) -> str:
    return f"outcomes.{judge}.jsonl"


def judge_rows(variant: str, completions, outcomes, o: LcbOptions, vdir) -> list[MetricRow]:
    """The second judge's LPR rows (metric `lpr@<judge>`, per task and language with intervals): the variant's
    replies scored again with `o.judge` labelling the lines; its per-reply outcomes (the official ones with the
    judge's line errors) go to `<variant>/outcomes.<judge>.jsonl` for the paired tests."""

    judged = judge_report(completions, o.judge)
    mine = [
        dataclasses.replace(
            x, line_error=j.line_error, word_error=j.word_error, unknown_lines=j.n_unknown if j.counted else None
        )
        for x, j in zip(outcomes, judged.replies)
    ]
    save_outcomes(vdir / judge_file(o.judge), mine)
    rows = []
    for (task, source, lang), ms in intervals(mine, confidence=o.confidence, n=o.resamples).items():
        if source == "all":
            est = ms["lpr"]
            rows.append(
                MetricRow(
                    variant,
                    task,
                    "avg" if lang == "all" else lang,
                    metric_name(o.judge),
                    est.value,
                    est.low,
                    est.high,
                    est.n,
                    outcomes=f"{slug(variant)}/{judge_file(o.judge)}",
                )
            )
    return rows


def _timing(vdir, seconds: float, generated: int) -> float | None:
    """Seconds per generated prompt of a variant, summed over the sessions that generated it (kept in
    timing.json beside its completions, so a resumed variant keeps its cost); None when none was timed."""
    path = vdir / "timing.json"
    try:
        spent = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        total, count = float(spent.get("seconds", 0.0)), int(spent.get("prompts", 0))
    except (ValueError, TypeError, AttributeError):
        total, count = 0.0, 0  # unreadable: start again (only the cost column depends on it)
    if generated > 0:
        total, count = total + seconds, count + generated
        path.write_text(json.dumps({"seconds": round(total, 3), "prompts": count}) + "\n", encoding="utf-8")
    return total / count if count else None


def _done(path) -> int:
    return sum(1 for r in read_jsonl(path) if not r.get("error"))


KIND = EvalKind("lcb", LcbOptions, validate, run, description="generate LCB completions, score LPR / WPR / LCPR")

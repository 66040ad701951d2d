"""The guard's rows and flags beside the official numbers: coverage, degeneracy and lexical validity per task and
language with intervals (mlft.stats), the LID detail (unknown / skipped), and flags against a base run or limits.

The per-reply checks these aggregate (is_degenerate, lexical_validity) are in `mlft.benchmarks.lcb.guard`; see its
docstring for the rules and their calibration.

`guard_flags` flags a (task, language) row whose coverage is lower, or degeneracy higher, than a base run's
beyond chance (paired permutation test when both runs hold the same ids for the task, else independent resamples;
Holm over the task's rows x 2 measures), and a row whose whole interval lies beyond an absolute limit
(defaults: coverage below 80 %, degeneracy above 5 %; None turns a limit off). On the paper's outputs the
limits fire only for the base models and llama-3-instruct's cross-lingual ko/ja/zh (no strong model's
language row has coverage under 90 %). The validity limit (below 80 %) fires wherever a model answers in
another language (English words never count for another language): on the paper's outputs for Llama 2 / 3,
Mistral Large and Mixtral (monolingual 55-75 % valid), Command R's cross-lingual rows and the base models'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mlft.constants import GUARD_METRICS
from mlft.errors import ConfigError
from mlft.stats import Outcome, holm, intervals, paired_test, unknown_share_intervals, unpaired_test

LID_DETAIL = ("unknown", "skipped")  # the metric's silent failure modes (intervals, no flags)


def guard_rows(
    outcomes: Sequence[Outcome], *, confidence: float = 0.95, n: int = 10000, seed: int = 0, sources: bool = False
) -> list[dict]:
    """Per (task, language) and (task, all): coverage, degeneracy and lexical validity (where measured) with
    intervals, LPR for context, and the LID detail: `unknown` (share of counted lines labelled unknown) and
    `skipped` (share of replies LCB leaves out = 1 - coverage). `sources=True` adds the (source, language)
    rows (key `source`; "all" for the aggregates)."""
    rows = []
    detail = unknown_share_intervals(outcomes, confidence=confidence, seed=seed)
    for (task, source, lang), ms in intervals(outcomes, confidence=confidence, n=n, seed=seed).items():
        if source != "all" and not sources:
            continue
        row = {"task": task, **({"source": source} if sources else {}), "language": lang, "n": ms["coverage"].n}
        for m in (*GUARD_METRICS, "lpr"):
            if m in ms:
                row.update(ms[m].columns(m))
            elif m == "validity":
                row.update({"validity": None, "validity_ci_low": None, "validity_ci_high": None})
        cov = ms["coverage"]
        row.update({"skipped": 1 - cov.value, "skipped_ci_low": 1 - cov.high, "skipped_ci_high": 1 - cov.low})
        row.update(
            detail.get(
                (task, source, lang),
                {"unknown": None, "unknown_ci_low": None, "unknown_ci_high": None, "lines": 0, "unknown_lines": 0},
            )
        )
        rows.append(row)
    return rows


@dataclass(frozen=True)
class GuardFlag:
    task: str
    language: str  # a language or "all"
    metric: str  # "coverage" | "degeneracy" | "validity"
    value: float
    ci_low: float  # interval of the value (limit flags) or of the difference (base flags)
    ci_high: float
    reason: str  # one line for a report
    base: float | None = None
    diff: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    paired: bool | None = None


def _worse(metric: str, diff: float) -> bool:
    return diff < 0 if metric in ("coverage", "validity") else diff > 0


LIMITS = {"min_coverage": 0.8, "max_degeneracy": 0.05, "min_validity": 0.8}


def limit_flags(
    rows: Sequence[dict],
    *,
    min_coverage: float | None = 0.8,
    max_degeneracy: float | None = 0.05,
    min_validity: float | None = 0.8,
) -> list[GuardFlag]:
    """Guard rows (`guard_rows`) whose whole interval lies below min_coverage / above max_degeneracy / below
    min_validity (None turns a limit off)."""
    flags = []
    for row in rows:
        for metric, limit in (("coverage", min_coverage), ("degeneracy", max_degeneracy), ("validity", min_validity)):
            if limit is None or row.get(metric) is None:
                continue
            lo, hi = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
            if lo > limit if metric == "degeneracy" else hi < limit:
                side = "above" if metric == "degeneracy" else "below"
                where = f"{row['source']}/" if row.get("source", "all") != "all" else ""
                flags.append(
                    GuardFlag(
                        row["task"],
                        where + row["language"],
                        metric,
                        row[metric],
                        lo,
                        hi,
                        f"{metric} {row[metric]:.1%} [{lo:.1%}, {hi:.1%}] is {side} {limit:.0%}",
                    )
                )
    return flags


def guard_flags(
    run: Sequence[Outcome],
    base: Sequence[Outcome] | None = None,
    *,
    confidence: float = 0.95,
    n: int = 10000,
    seed: int = 0,
    min_diff: float = 0.0,
    min_coverage: float | None = 0.8,
    max_degeneracy: float | None = 0.05,
    min_validity: float | None = 0.8,
) -> list[GuardFlag]:
    """Rows of `run` whose coverage, degeneracy or lexical validity is worse than `base`'s (Holm-adjusted
    p < 1 - confidence, |diff| >= min_diff; paired on ids when both runs hold the same ids for the task), or
    whose whole interval lies below min_coverage / above max_degeneracy / below min_validity (None turns a
    limit off). Validity is tested where both runs measured it."""
    alpha = 1 - confidence
    flags = limit_flags(
        guard_rows(run, confidence=confidence, n=n, seed=seed),
        min_coverage=min_coverage,
        max_degeneracy=max_degeneracy,
        min_validity=min_validity,
    )
    if base is None:
        return flags
    for task in sorted({o.task for o in run} & {o.task for o in base}):
        ra, rb = [o for o in base if o.task == task], [o for o in run if o.task == task]
        paired = sorted((o.source, o.language, o.id) for o in ra) == sorted((o.source, o.language, o.id) for o in rb)
        langs = sorted({o.language for o in ra} & {o.language for o in rb})
        measured = {o.language for o in ra if o.validity is not None} & {
            o.language for o in rb if o.validity is not None
        }
        cells = [
            (lang, metric)
            for lang in [None, *langs]
            for metric in GUARD_METRICS
            if metric != "validity" or (measured if lang is None else lang in measured)
        ]
        family = len(cells)
        if family * 2 / (n + 1) >= alpha:  # the smallest bootstrap p, Holm-adjusted, could never pass
            raise ConfigError(
                f"{n} resamples cannot show significance over {family} Holm-adjusted tests; "
                f"use n >= {math.ceil(2 * family / alpha)}"
            )
        tests = []
        for lang, metric in cells:
            kw = {"task": task, "language": lang, "n": n, "seed": seed, "confidence": confidence}
            tests.append(paired_test(ra, rb, metric, **kw) if paired else unpaired_test(ra, rb, metric, **kw))
        for res, q in zip(tests, holm([t.p_value for t in tests])):
            if q < alpha and _worse(res.metric, res.diff) and abs(res.diff) >= min_diff:
                flags.append(
                    GuardFlag(
                        task,
                        res.language,
                        res.metric,
                        res.b,
                        res.ci_low,
                        res.ci_high,
                        f"{res.metric} {res.b:.1%} vs base {res.a:.1%}: {res.diff:+.1%} "
                        f"[{res.ci_low:+.1%}, {res.ci_high:+.1%}], p={res.p_value:.2g} (Holm {q:.2g}, "
                        f"{'paired' if paired else 'unpaired'})",
                        base=res.a,
                        diff=res.diff,
                        p_value=res.p_value,
                        p_adjusted=q,
                        paired=paired,
                    )
                )
    return flags

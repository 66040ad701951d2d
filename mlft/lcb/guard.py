"""Guard against scores that degenerate output can buy: coverage and degeneracy, with intervals and flags.

LPR and WPR leave out every reply without a counted line (>= 5 tokens), so `itititit`, a run of quotes or an empty
reply scores 100 %. The official numbers stay untouched; the guard reports next to them, per task and
language (official unweighted aggregation, intervals from `mlft.lcb.stats`):
- coverage: share of replies with >= 1 counted line (they enter LPR's denominator);
- degeneracy: share of replies `is_degenerate` flags.

A reply is degenerate (`degeneracy_reason` says which rule fired, first match wins) when
1. `empty`: nothing but whitespace;
2. `no-words`: no letter or digit (only punctuation, symbols, emoji: a run of quotes, `, . , .`, fences);
3. `repeated-chars`: tandem repeats of a character unit (period <= 24 characters, >= 3 consecutive copies,
   >= 6 characters long) cover >= 50 % of the whitespace-collapsed text (`itititit`, `1. 1. 1.`, `哈哈哈哈`,
   a U+FFFD run, a short line looped);
4. `repeated-tokens`: tandem repeats of a token n-gram (n <= 64 tokens, >= 3 consecutive copies, >= 4
   tokens long) cover >= 50 % of the tokens (a word or a sentence looped, punctuation varying). Tokens:
   lowercased words once punctuation and symbols become spaces; every Han / kana character is a token (CJK
   has no spaces and its characters carry words, so "the same word repeated" is the same character run);
5. `repeated-lines`: lines that occur >= 3 times, or a block of lines repeated back to back, hold >= 50 % of
   the characters of the lines with a letter or digit (a paragraph looped twice within 100 tokens).
Tuned on the paper's 65,816 released completions (~1 ms a reply): the base models command-r-base and
command-r-plus-base get 26 % and 24 % flagged (prompt echoes, loops), llama-3-instruct 1.8 % (its stripped
non-Latin output: 23 % of cross-lingual ko), llama-2-instruct and mistral-8x7b 0.1 % (U+FFFD runs, empty
replies), gpt-4-turbo, gpt-3.5-turbo, command-r, command-r-plus and mistral-large none. Not flagged: a poem's
refrain (lines repeated, not back to back), a title repeated in the first sentence, tables, lists, code,
short answers ("No, no, no.", "42") -- see tests/test_lcb_guard.py.

`guard_flags` flags a (task, language) row whose coverage is lower, or degeneracy higher, than a base run's
beyond chance (paired bootstrap when both runs hold the same ids for the task, else independent resamples;
Holm over the task's rows x 2 measures), and a row whose whole interval lies beyond an absolute limit
(defaults: coverage below 80 %, degeneracy above 5 %; None turns a limit off). On the paper's outputs the
limits fire only for the base models and llama-3-instruct's cross-lingual ko/ja/zh (no strong model's
language row has coverage under 90 %).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mlft.errors import ConfigError
from mlft.lcb.stats import Outcome, holm, intervals, paired_test, unpaired_test

SHARE = 0.5  # a rule fires when its repeats cover at least this share of the text
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_WS = re.compile(r"\s+")


@functools.cache
def _punct_to_space() -> dict[int, str]:
    """Unicode punctuation (P*) and symbols (S*) of the BMP and SMP (emoji) -> space."""
    return {cp: " " for cp in range(0x20000) if unicodedata.category(chr(cp))[0] in "PS"}


def tandem_cover(seq: np.ndarray, max_period: int, min_copies: int, min_len: int) -> np.ndarray:
    """Boolean mask of the items of `seq` inside a tandem repeat: a run where seq[i] == seq[i + p] holds for
    >= (min_copies - 1) * p consecutive i (so >= min_copies copies of a p-unit), at least min_len items long,
    for any period p <= max_period. All periods at once: O(len(seq) * max_period), vectorised."""
    n = len(seq)
    periods = min(max_period, n // min_copies)
    if periods < 1:
        return np.zeros(n, bool)
    padded = np.concatenate([seq, np.full(periods, -1, np.int64)])
    win = np.lib.stride_tricks.sliding_window_view(padded, periods + 1)[:n]
    eq = np.zeros((periods, n + 2), np.int8)
    eq[:, 1:-1] = (win[:, 1:] == win[:, :1]).T  # eq[p - 1, i + 1] = seq[i] == seq[i + p]
    edge = np.diff(eq, axis=1)
    _, start = np.nonzero(edge == 1)
    row, end = np.nonzero(edge == -1)  # row-major: runs pair up in order
    p = row + 1
    span = end - start + p  # items covered by the periodic run
    keep = (span >= min_copies * p) & (span >= min_len)
    delta = np.bincount(start[keep], minlength=n + 1) - np.bincount(np.minimum(end[keep] + p[keep], n),
                                                                     minlength=n + 1)
    return np.cumsum(delta[:n]) > 0


def _ids(items: list[str]) -> np.ndarray:
    table: dict[str, int] = {}
    return np.array([table.setdefault(x, len(table)) for x in items], np.int64)


def degeneracy_reason(text: str) -> str | None:
    """Which rule marks `text` degenerate (module docstring), or None for a normal reply."""
    text = text.strip()
    if not text:
        return "empty"
    clean = text.translate(_punct_to_space()).lower()
    tokens = _TOKEN.findall(clean)
    if not tokens:
        return "no-words"
    chars = np.frombuffer(_WS.sub(" ", text).encode("utf-32-le"), np.uint32).astype(np.int64)
    if tandem_cover(chars, 24, 3, 6).mean() >= SHARE:
        return "repeated-chars"
    seq = _ids(tokens)
    if 3 * len(set(tokens)) <= 2 * len(tokens) and tandem_cover(seq, 64, 3, 4).mean() >= SHARE:
        return "repeated-tokens"  # (a tandem covering half the tokens needs half of them to be repeats)
    lines = [s for s in (_WS.sub(" ", x).strip() for x in clean.split("\n")) if s]
    if len(lines) >= 2:
        sizes = np.array([len(s) for s in lines])
        counts = Counter(lines)
        looped = tandem_cover(_ids(lines), 16, 2, 2) | np.array([counts[s] >= 3 for s in lines])
        if sizes[looped].sum() >= SHARE * sizes.sum():
            return "repeated-lines"
    return None


def is_degenerate(text: str) -> bool:
    return degeneracy_reason(text) is not None


# ---------------------------------------------------------------- rows and flags

GUARD_METRICS = ("coverage", "degeneracy")


def guard_rows(outcomes: Sequence[Outcome], *, confidence: float = 0.95, n: int = 10000,
               seed: int = 0) -> list[dict]:
    """Per (task, language) and (task, all): coverage and degeneracy with intervals, LPR for context."""
    rows = []
    for (task, source, lang), ms in intervals(outcomes, confidence=confidence, n=n, seed=seed).items():
        if source != "all":
            continue
        row = {"task": task, "language": lang, "n": ms["coverage"].n}
        for m in (*GUARD_METRICS, "lpr"):
            row.update(ms[m].columns(m))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class GuardFlag:
    task: str
    language: str          # a language or "all"
    metric: str            # "coverage" | "degeneracy"
    value: float
    ci_low: float          # interval of the value (limit flags) or of the difference (base flags)
    ci_high: float
    reason: str            # one line for a report
    base: float | None = None
    diff: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    paired: bool | None = None


def _worse(metric: str, diff: float) -> bool:
    return diff < 0 if metric == "coverage" else diff > 0


def guard_flags(run: Sequence[Outcome], base: Sequence[Outcome] | None = None, *, confidence: float = 0.95,
                n: int = 10000, seed: int = 0, min_diff: float = 0.0, min_coverage: float | None = 0.8,
                max_degeneracy: float | None = 0.05) -> list[GuardFlag]:
    """Rows of `run` whose coverage or degeneracy is worse than `base`'s (Holm-adjusted p < 1 - confidence,
    |diff| >= min_diff; paired on ids when both runs hold the same ids for the task), or whose whole interval
    lies below min_coverage / above max_degeneracy (None turns a limit off)."""
    alpha = 1 - confidence
    flags = []
    for row in guard_rows(run, confidence=confidence, n=n, seed=seed):
        for metric, limit in (("coverage", min_coverage), ("degeneracy", max_degeneracy)):
            lo, hi = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
            if limit is not None and (hi < limit if metric == "coverage" else lo > limit):
                side = "below" if metric == "coverage" else "above"
                flags.append(GuardFlag(row["task"], row["language"], metric, row[metric], lo, hi,
                                       f"{metric} {row[metric]:.1%} [{lo:.1%}, {hi:.1%}] is {side} {limit:.0%}"))
    if base is None:
        return flags
    for task in sorted({o.task for o in run} & {o.task for o in base}):
        ra, rb = [o for o in base if o.task == task], [o for o in run if o.task == task]
        paired = sorted((o.source, o.language, o.id) for o in ra) == sorted((o.source, o.language, o.id) for o in rb)
        langs = sorted({o.language for o in ra} & {o.language for o in rb})
        family = 2 * (1 + len(langs))
        if family * 2 / (n + 1) >= alpha:  # the smallest bootstrap p, Holm-adjusted, could never pass
            raise ConfigError(f"{n} resamples cannot show significance over {family} Holm-adjusted tests; "
                              f"use n >= {math.ceil(2 * family / alpha)}")
        tests = []
        for lang in [None, *langs]:
            for metric in GUARD_METRICS:
                kw = dict(task=task, language=lang, n=n, seed=seed, confidence=confidence)
                res = paired_test(ra, rb, metric, **kw) if paired else unpaired_test(ra, rb, metric, **kw)
                tests.append(res)
        for res, q in zip(tests, holm([t.p_value for t in tests])):
            if q < alpha and _worse(res.metric, res.diff) and abs(res.diff) >= min_diff:
                flags.append(GuardFlag(
                    task, res.language, res.metric, res.b, res.ci_low, res.ci_high,
                    f"{res.metric} {res.b:.1%} vs base {res.a:.1%}: {res.diff:+.1%} "
                    f"[{res.ci_low:+.1%}, {res.ci_high:+.1%}], p={res.p_value:.2g} (Holm {q:.2g}, "
                    f"{'paired' if paired else 'unpaired'})",
                    base=res.a, diff=res.diff, p_value=res.p_value, p_adjusted=q, paired=paired))
    return flags

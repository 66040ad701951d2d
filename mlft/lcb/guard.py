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

Lexical validity (`lexical_validity`) sees word salad in the right script, which LPR counts as a success and
the rules above miss (`文章のラクティ`, `نشرط الإصلية`): the share of a reply's words that are words of the target
language. Words: the official scorer's normalisation and tokenisation in the target language (jieba for zh,
fugashi/unidic-lite for ja, whitespace else), over every line (short lines too), keeping tokens with a letter.
A word is known when the wordfreq lexicon of the language holds it with Zipf frequency >= `WORD_ZIPF` (1 in
10 million words; the lists' long tail holds fragments such as `الأص`), after wordfreq's own normalisation
(casefolding, Arabic diacritics...). wordfreq segments zh (jieba), ja and ko (MeCab) into shorter units than the
scorer's tokens, so there a word is also known when it splits into lexicon entries: zh, any number, a single
character (also as a whole token) only when frequent on its own (Zipf >= `SINGLE_CHAR_ZIPF`); ja and ko, at
most three (stem + particles / endings), a one-character piece only when frequent (Zipf >= `PIECE_ZIPF`), and
never a ja word with katakana (loanwords stand whole in the lexicon). zh/ja/ko words weigh by their
characters. A reply without a word scores 0; a language without a lexicon scores None (`lexicon_languages` /
`languages_without_lexicon`: 45 of lid.176's labels have one). A reply is lexically valid when its validity is
> `VALID_SHARE` (most of its words are known); the guard's `validity` is the share of valid replies, aggregated
like coverage (over all replies), flagged below 80 % (`limit_flags`) or below a base run beyond chance.
Calibration (benchmarks/lexical_validity.py): 99.1-99.7 % of the released replies of GPT-4/3.5, Command R(+)
and Mistral Large are valid, 94.3-94.5 % of the base models'; hand-written salad in 10 languages scores <= 0.44,
real sentences >= 0.9. It cannot see salad made of real words (`la la la`: the degeneracy rule's job), common-
character zh salad, or a reply in a language whose lexicon shares its words (English terms are in most lists).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mlft.constants import VALID_SHARE
from mlft.errors import ConfigError
from mlft.lcb.langid import LanguageIdentifier
from mlft.lcb.metrics import normalize
from mlft.lcb.stats import Outcome, holm, intervals, paired_test, unpaired_test
from mlft.lcb.tokenize import tokenize

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


_CELLS = 1 << 25  # (item, period) cells of one vectorised pass (memory: a byte each)


def _joined(seqs: list[np.ndarray], gap: int) -> tuple[np.ndarray, np.ndarray]:
    """`seqs` joined with `gap` unique negative sentinels after each (a sentinel equals nothing, so no repeat of
    period <= gap crosses a border), and the start of each sequence."""
    sizes = np.array([len(x) for x in seqs], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes + gap)[:-1]])
    out = -2 - np.arange(int(sizes.sum()) + gap * len(seqs), dtype=np.int64)  # sentinels everywhere ...
    for s, x in zip(starts, seqs):
        out[s:s + len(x)] = x  # ... but where the sequences go
    return out, starts


def _tandem_fires(seqs: list[np.ndarray], max_period: int, min_copies: int, min_len: int) -> list[bool]:
    """For each sequence: do its tandem repeats (`tandem_cover`) cover >= SHARE of it? Exact, and fast on many
    sequences. A kept run of period p is a row of L >= m_p = max((min_copies - 1) p, min_len - p) equal
    comparisons (seq[i] == seq[i + p]) and covers L + p items; with k_p the largest power of two <= m_p it
    holds L - k_p + 1 rows of k_p equal comparisons, and L + p <= (L - k_p + 1)(k_p + p). One vectorised pass
    over all sequences (doubling: rows of 1, 2, 4, ... equal comparisons) bounds each sequence's cover from
    above by (k_p + p) per such row; only a sequence the bound cannot clear gets `tandem_cover` itself."""
    fires = [False] * len(seqs)
    if not seqs:
        return fires
    periods = np.arange(1, max_period + 1)
    need = np.maximum((min_copies - 1) * periods, min_len - periods)
    k_of = 2 ** np.floor(np.log2(np.maximum(need, 1))).astype(np.int64)
    if np.any(np.diff(k_of) < 0):  # the passes below take the periods in order of k_p
        return [bool(tandem_cover(x, max_period, min_copies, min_len).mean() >= SHARE) for x in seqs]
    per_pass = max(1, _CELLS // max_period)
    i = 0
    while i < len(seqs):
        j, size = i, 0
        while j < len(seqs) and (j == i or size + len(seqs[j]) + max_period <= per_pass):
            size += len(seqs[j]) + max_period
            j += 1
        joined, starts = _joined(seqs[i:j], max_period)
        n = len(joined)
        run = np.zeros((max_period, n), bool)  # run[p - 1, r]: joined[r + t] == joined[r + t + p] for t < k
        for p in range(1, max_period + 1):
            np.equal(joined[:-p], joined[p:], out=run[p - 1, :-p])
        bound = np.zeros(j - i)
        lo, k = 0, 1  # periods lo + 1 ... are left; k_p grows with p
        while True:
            hi = lo + int((k_of[lo:] == k).sum())
            if hi > lo:
                hits = run[:hi - lo]
                at = np.flatnonzero(hits.any(0))
                if len(at):
                    owner = np.searchsorted(starts, at, "right") - 1
                    np.add.at(bound, owner, (k_of[lo:hi] + periods[lo:hi]) @ hits[:, at])
                run, lo = run[hi - lo:], hi
            if lo == max_period:
                break
            run = run[:, :-k] & run[:, k:]  # rows of 2k equal comparisons
            k *= 2
        for t in range(i, j):
            if bound[t - i] >= SHARE * len(seqs[t]):  # cannot rule it out: the exact cover
                fires[t] = bool(tandem_cover(seqs[t], max_period, min_copies, min_len).mean() >= SHARE)
        i = j
    return fires


def degeneracy_reasons(texts: Sequence[str]) -> list[str | None]:
    """`degeneracy_reason` of many texts at once (the tandem repeats of all of them in a few vectorised passes)."""
    reasons: list[str | None] = [None] * len(texts)
    table = _punct_to_space()
    ids: dict[str, int] = {}
    counter = itertools.count()
    chars, char_at, toks, tok_at, line_seqs, line_at = [], [], [], [], [], []
    for k, text in enumerate(texts):
        text = text.strip()
        if not text:
            reasons[k] = "empty"
            continue
        clean = text.translate(table).lower()
        tokens = _TOKEN.findall(clean)
        if not tokens:
            reasons[k] = "no-words"
            continue
        chars.append(np.frombuffer(_WS.sub(" ", text).encode("utf-32-le"), np.uint32).astype(np.int64))
        char_at.append(k)
        if 3 * len(set(tokens)) <= 2 * len(tokens):  # a tandem covering half the tokens needs half to be repeats
            toks.append(np.fromiter(map(ids.setdefault, tokens, counter), np.int64, len(tokens)))
            tok_at.append(k)
        lines = [s for s in (" ".join(x.split()) for x in clean.split("\n")) if s]  # = _WS.sub(" ", x).strip()
        if len(lines) >= 2:
            line_seqs.append(np.fromiter(map(ids.setdefault, lines, counter), np.int64, len(lines)))
            line_at.append((k, lines))
    char_hit = {k for k, hit in zip(char_at, _tandem_fires(chars, 24, 3, 6)) if hit}
    tok_hit = {k for k, hit in zip(tok_at, _tandem_fires(toks, 64, 3, 4)) if hit}
    for k in char_at:
        if k in char_hit:
            reasons[k] = "repeated-chars"
        elif k in tok_hit:
            reasons[k] = "repeated-tokens"
    for (k, lines), looped in zip(line_at, _batch_cover_masks(line_seqs, 16, 2, 2)):
        if reasons[k] is not None:
            continue
        sizes = np.array([len(s) for s in lines])
        counts = Counter(lines)
        looped = looped | np.array([counts[s] >= 3 for s in lines])
        if sizes[looped].sum() >= SHARE * sizes.sum():
            reasons[k] = "repeated-lines"
    return reasons


def _batch_cover_masks(seqs: list[np.ndarray], max_period: int, min_copies: int, min_len: int) -> list[np.ndarray]:
    """`tandem_cover` masks of many short sequences in one vectorised pass (joined as `_joined` does)."""
    if not seqs:
        return []
    joined, starts = _joined(seqs, max_period)
    mask = tandem_cover(joined, max_period, min_copies, min_len)
    return [mask[s:s + len(seq)] for s, seq in zip(starts, seqs)]


def degeneracy_reason(text: str) -> str | None:
    """Which rule marks `text` degenerate (module docstring), or None for a normal reply."""
    return degeneracy_reasons([text])[0]


def is_degenerate(text: str) -> bool:
    return degeneracy_reason(text) is not None


def degenerate_flags(texts: Sequence[str]) -> list[bool]:
    """`is_degenerate` of many texts at once."""
    return [r is not None for r in degeneracy_reasons(texts)]


# ---------------------------------------------------------------- lexical validity

SINGLE_CHAR_ZIPF = 3.5   # zh: a single character is a known word on its own only this frequent
WORD_ZIPF = 2.0          # a whole word is known from this frequency on (wordfreq's long tail holds fragments)
PIECE_ZIPF = 5.0         # ja/ko: a one-character piece (particle, ending, stem) must be this frequent
_SEGMENTED = ("zh", "ja", "ko")  # wordfreq's lists hold segmentation units here: compounds split into entries
_BY_CHARS = ("zh", "ja", "ko")  # words weigh by their characters (short segmentation units)
_WORDFREQ_CODE = {"tl": "fil", "no": "nb", "hr": "sh", "bs": "sh", "sr": "sh"}  # LID label -> wordfreq code
_MAX_PIECE = 8
_OWN_TOKENIZER = ("zh", "ja")  # `tokenize` splits these by jieba / MeCab, every other language on whitespace
_KATAKANA = re.compile("[\u30a0-\u30ff\uff66-\uff9f]")


@functools.cache
def _wordfreq_code(lang: str) -> str | None:
    import wordfreq

    code = _WORDFREQ_CODE.get(lang, lang)
    return code if code in wordfreq.available_languages(wordlist="best") else None


def lexicon_languages(labels=None) -> list[str]:
    """Languages (LID labels; default: the fastText model's) with a wordfreq lexicon."""
    if labels is None:
        labels = LanguageIdentifier.cached().labels
    return sorted(x for x in labels if _wordfreq_code(x))


def languages_without_lexicon(labels=None) -> list[str]:
    """Languages (LID labels; default: the fastText model's) that lexical validity cannot judge."""
    if labels is None:
        labels = LanguageIdentifier.cached().labels
    return sorted(x for x in labels if not _wordfreq_code(x))


@functools.cache
def _lexicon(lang: str) -> dict[str, float] | None:
    code = _wordfreq_code(lang)
    if code is None:
        return None
    import wordfreq

    return wordfreq.get_frequency_dict(code, wordlist="best")


@functools.lru_cache(maxsize=1 << 18)
def is_known_word(word: str, lang: str) -> bool:
    """`word` (a token with a letter) is a word of `lang`'s lexicon, or (zh/ja/ko) splits into entries."""
    from wordfreq.preprocess import preprocess_text

    lexicon = _lexicon(lang)
    key = preprocess_text(word, _wordfreq_code(lang))
    if lang == "zh" and len(key) == 1:
        return lexicon.get(key, 0.0) >= 10 ** (SINGLE_CHAR_ZIPF - 9)
    if not key:
        return False
    word_floor = 10 ** (WORD_ZIPF - 9)
    if lexicon.get(key, 0.0) >= word_floor:
        return True
    if lang not in _SEGMENTED or (lang == "ja" and _KATAKANA.search(key)):
        return False  # ja: katakana loanwords stand whole in the lexicon
    floor = 10 ** ((SINGLE_CHAR_ZIPF if lang == "zh" else PIECE_ZIPF) - 9)
    most = len(key) if lang == "zh" else 3  # ja/ko: stem + at most two particles / endings
    pieces = [0] + [most + 1] * len(key)  # fewest pieces that reach position i
    for i in range(len(key)):
        if pieces[i] < most:
            for j in range(i + 1, min(len(key), i + _MAX_PIECE) + 1):
                f = lexicon.get(key[i:j], 0.0)
                if f >= (floor if j - i == 1 else word_floor):
                    pieces[j] = min(pieces[j], pieces[i] + 1)
    return pieces[-1] <= most


def reply_words(text: str, lang: str) -> list[str]:
    """The reply's words as the official scorer tokenises them in `lang` (every line), edge symbols stripped."""

    words = []
    for line in normalize(text).split("\n"):
        for tok in tokenize(line, lang):
            word = tok.strip().translate(_punct_to_space()).strip()
            if any(c.isalpha() for c in word):
                words.extend(word.split())
    return words


def lexical_validity(text: str, lang: str) -> float | None:
    """Share of the reply's words that are words of `lang` (zh/ja/ko: weighted by characters); 0 without a
    word; None when `lang` has no lexicon."""
    if _lexicon(lang) is None:
        return None
    if lang in _OWN_TOKENIZER:
        words = [w for w in reply_words(text, lang) if any(map(str.isalpha, w))]
    else:  # whitespace tokens: the words of the whole reply at once are the words of its lines' tokens
        words = [w for w in normalize(text).translate(_punct_to_space()).split() if any(map(str.isalpha, w))]
    if not words:
        return 0.0
    known = map(is_known_word, words, itertools.repeat(lang))
    if lang in _BY_CHARS:  # weighed by characters
        return sum(len(w) for w, k in zip(words, known) if k) / sum(map(len, words))
    return sum(known) / len(words)


def lexicon_of(lang: str) -> dict[str, float] | None:
    """The wordfreq lexicon lexical validity reads for `lang` (loaded once per process; None without one)."""
    return _lexicon(lang)


def is_lexically_valid(text: str, lang: str) -> bool | None:
    v = lexical_validity(text, lang)
    return None if v is None else v > VALID_SHARE


# ---------------------------------------------------------------- rows and flags

from mlft.constants import GUARD_METRICS  # noqa: E402  (coverage, degeneracy, validity)

LID_DETAIL = ("unknown", "skipped")  # the metric's silent failure modes (intervals, no flags)


def lid_detail(outcomes: Sequence[Outcome], *, confidence: float = 0.95, n: int = 2000,
               seed: int = 0) -> dict[tuple[str, str, str], dict]:
    """{(task, source, language): {"unknown", "unknown_ci_low", "unknown_ci_high", "lines", "unknown_lines"}}:
    the share of counted lines fastText labels "unknown" (score <= threshold), pooled over the lines of a
    (source, language) group and aggregated the official unweighted way ((source, all), (all, language),
    (all, all)); None without counted lines (or for outcomes written before the count existed).

    Interval: lines cluster in replies (a salad reply has many unknown lines), so replies - not lines - are
    resampled, within each (source, language) stratum with n_s - 1 draws as `mlft.lcb.stats.intervals` does;
    each resample's ratio of pooled counts is aggregated like the point value; percentile interval."""
    from mlft.lcb.stats import _check_confidence

    _check_confidence(confidence, n)
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence
    groups: dict[tuple[str, str, str], list[tuple[int, int]]] = {}
    for o in outcomes:
        g = groups.setdefault((o.task, o.source, o.language), [])
        if o.lines is not None:
            g.append((o.lines, o.unknown_lines or 0))
    point: dict[tuple[str, str, str], float | None] = {}
    boot: dict[tuple[str, str, str], np.ndarray] = {}
    counts: dict[tuple[str, str, str], tuple[int, int]] = {}
    for key in sorted(groups):
        pairs = np.array(groups[key], dtype=np.float64).reshape(-1, 2)
        lines, unknown = pairs.sum(0) if len(pairs) else (0.0, 0.0)
        counts[key] = (int(lines), int(unknown))
        point[key] = unknown / lines if lines else None
        if len(pairs):
            idx = rng.integers(0, len(pairs), size=(n, max(1, len(pairs) - 1)))
            drawn = pairs[idx].sum(1)  # (n, 2)
            with np.errstate(invalid="ignore", divide="ignore"):
                boot[key] = np.where(drawn[:, 0] > 0, drawn[:, 1] / np.maximum(drawn[:, 0], 1), np.nan)
        else:
            boot[key] = np.full(n, np.nan)

    def row(keys: list, value: float | None, draws: np.ndarray) -> dict:
        lo = hi = None
        if value is not None and np.isfinite(draws).any():
            lo, hi = (float(q) for q in np.nanquantile(draws, [alpha / 2, 1 - alpha / 2]))
        return {"unknown": value, "unknown_ci_low": lo, "unknown_ci_high": hi,
                "lines": sum(counts[k][0] for k in keys), "unknown_lines": sum(counts[k][1] for k in keys)}

    def avg(keys: list, values: dict, draws: dict) -> tuple[float | None, np.ndarray]:
        known = [k for k in keys if values[k] is not None]
        if not known:
            return None, np.full(n, np.nan)
        # resamples where a group lost all its lines average over the others (as the point value skips None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no lines in any group: NaN
            return sum(values[k] for k in known) / len(known), np.nanmean(np.stack([draws[k] for k in known]), 0)

    out = {key: row([key], point[key], boot[key]) for key in groups}
    for task in sorted({k[0] for k in groups}):
        keys = sorted(k for k in groups if k[0] == task)
        for source in sorted({k[1] for k in keys}):
            sub = [k for k in keys if k[1] == source]
            out[(task, source, "all")] = row(sub, *avg(sub, point, boot))
        lang_point, lang_boot = {}, {}
        for lang in sorted({k[2] for k in keys}):
            sub = [k for k in keys if k[2] == lang]
            lang_point[lang], lang_boot[lang] = avg(sub, point, boot)
            out[(task, "all", lang)] = row(sub, lang_point[lang], lang_boot[lang])
        out[(task, "all", "all")] = row(keys, *avg(sorted(lang_point), lang_point, lang_boot))
    return out


def guard_rows(outcomes: Sequence[Outcome], *, confidence: float = 0.95, n: int = 10000, seed: int = 0,
               sources: bool = False) -> list[dict]:
    """Per (task, language) and (task, all): coverage, degeneracy and lexical validity (where measured) with
    intervals, LPR for context, and the LID detail: `unknown` (share of counted lines labelled unknown) and
    `skipped` (share of replies LCB leaves out = 1 - coverage). `sources=True` adds the (source, language)
    rows (key `source`; "all" for the aggregates)."""
    rows = []
    detail = lid_detail(outcomes, confidence=confidence, seed=seed)
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
        row.update(detail.get((task, source, lang), {"unknown": None, "unknown_ci_low": None, "unknown_ci_high": None,
                                                     "lines": 0, "unknown_lines": 0}))
        rows.append(row)
    return rows


@dataclass(frozen=True)
class GuardFlag:
    task: str
    language: str          # a language or "all"
    metric: str            # "coverage" | "degeneracy" | "validity"
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
    return diff < 0 if metric in ("coverage", "validity") else diff > 0


LIMITS = {"min_coverage": 0.8, "max_degeneracy": 0.05, "min_validity": 0.8}


def limit_flags(rows: Sequence[dict], *, min_coverage: float | None = 0.8, max_degeneracy: float | None = 0.05,
                min_validity: float | None = 0.8) -> list[GuardFlag]:
    """Guard rows (`guard_rows`) whose whole interval lies below min_coverage / above max_degeneracy / below
    min_validity (None turns a limit off)."""
    flags = []
    for row in rows:
        for metric, limit in (("coverage", min_coverage), ("degeneracy", max_degeneracy),
                              ("validity", min_validity)):
            if limit is None or row.get(metric) is None:
                continue
            lo, hi = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
            if lo > limit if metric == "degeneracy" else hi < limit:
                side = "above" if metric == "degeneracy" else "below"
                where = f"{row['source']}/" if row.get("source", "all") != "all" else ""
                flags.append(GuardFlag(row["task"], where + row["language"], metric, row[metric], lo, hi,
                                       f"{metric} {row[metric]:.1%} [{lo:.1%}, {hi:.1%}] is {side} {limit:.0%}"))
    return flags


def guard_flags(run: Sequence[Outcome], base: Sequence[Outcome] | None = None, *, confidence: float = 0.95,
                n: int = 10000, seed: int = 0, min_diff: float = 0.0, min_coverage: float | None = 0.8,
                max_degeneracy: float | None = 0.05, min_validity: float | None = 0.8) -> list[GuardFlag]:
    """Rows of `run` whose coverage, degeneracy or lexical validity is worse than `base`'s (Holm-adjusted
    p < 1 - confidence, |diff| >= min_diff; paired on ids when both runs hold the same ids for the task), or
    whose whole interval lies below min_coverage / above max_degeneracy / below min_validity (None turns a
    limit off). Validity is tested where both runs measured it."""
    alpha = 1 - confidence
    flags = limit_flags(guard_rows(run, confidence=confidence, n=n, seed=seed), min_coverage=min_coverage,
                        max_degeneracy=max_degeneracy, min_validity=min_validity)
    if base is None:
        return flags
    for task in sorted({o.task for o in run} & {o.task for o in base}):
        ra, rb = [o for o in base if o.task == task], [o for o in run if o.task == task]
        paired = sorted((o.source, o.language, o.id) for o in ra) == sorted((o.source, o.language, o.id) for o in rb)
        langs = sorted({o.language for o in ra} & {o.language for o in rb})
        measured = {o.language for o in ra if o.validity is not None} & {o.language for o in rb
                                                                         if o.validity is not None}
        cells = [(lang, metric) for lang in [None, *langs] for metric in GUARD_METRICS
                 if metric != "validity" or (measured if lang is None else lang in measured)]
        family = len(cells)
        if family * 2 / (n + 1) >= alpha:  # the smallest bootstrap p, Holm-adjusted, could never pass
            raise ConfigError(f"{n} resamples cannot show significance over {family} Holm-adjusted tests; "
                              f"use n >= {math.ceil(2 * family / alpha)}")
        tests = []
        for lang, metric in cells:
            kw = dict(task=task, language=lang, n=n, seed=seed, confidence=confidence)
            tests.append(paired_test(ra, rb, metric, **kw) if paired else unpaired_test(ra, rb, metric, **kw))
        for res, q in zip(tests, holm([t.p_value for t in tests])):
            if q < alpha and _worse(res.metric, res.diff) and abs(res.diff) >= min_diff:
                flags.append(GuardFlag(
                    task, res.language, res.metric, res.b, res.ci_low, res.ci_high,
                    f"{res.metric} {res.b:.1%} vs base {res.a:.1%}: {res.diff:+.1%} "
                    f"[{res.ci_low:+.1%}, {res.ci_high:+.1%}], p={res.p_value:.2g} (Holm {q:.2g}, "
                    f"{'paired' if paired else 'unpaired'})",
                    base=res.a, diff=res.diff, p_value=res.p_value, p_adjusted=q, paired=paired))
    return flags

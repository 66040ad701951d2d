"""Guard against scores that degenerate output can buy: the per-reply checks (degeneracy, lexical validity).

LPR and WPR leave out every reply without a counted line (>= 5 tokens), so `itititit`, a run of quotes or an empty
reply scores 100 %. The official numbers stay untouched; the guard reports next to them, per task and
language (official unweighted aggregation, intervals from `mlft.stats`):
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

The rows, intervals and flags that aggregate these checks per task and language are in
`mlft.benchmarks.lcb.guard_report`.

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
import re
import unicodedata
from collections import Counter

import numpy as np

from mlft.benchmarks.lcb.metrics import normalize
from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.constants import VALID_SHARE
from mlft.langid import LanguageIdentifier

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


# ---------------------------------------------------------------- lexical validity

SINGLE_CHAR_ZIPF = 3.5   # zh: a single character is a known word on its own only this frequent
WORD_ZIPF = 2.0          # a whole word is known from this frequency on (wordfreq's long tail holds fragments)
PIECE_ZIPF = 5.0         # ja/ko: a one-character piece (particle, ending, stem) must be this frequent
_SEGMENTED = ("zh", "ja", "ko")  # wordfreq's lists hold segmentation units here: compounds split into entries
_BY_CHARS = ("zh", "ja", "ko")  # words weigh by their characters (short segmentation units)
_WORDFREQ_CODE = {"tl": "fil", "no": "nb", "hr": "sh", "bs": "sh", "sr": "sh"}  # LID label -> wordfreq code
_MAX_PIECE = 8
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
    words = [w for w in reply_words(text, lang) if any(c.isalpha() for c in w)]
    if not words:
        return 0.0
    weights = [len(w) if lang in _BY_CHARS else 1 for w in words]
    known = sum(wt for w, wt in zip(words, weights) if is_known_word(w, lang))
    return known / sum(weights)


def is_lexically_valid(text: str, lang: str) -> bool | None:
    v = lexical_validity(text, lang)
    return None if v is None else v > VALID_SHARE

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
   the characters of the lines with a letter or digit (a paragraph looped twice within 100 tokens);
6. `repeated-pairs`: a reply of >= 6 tokens (as rule 4) whose tokens lie >= 50 % in units of one or two tokens
   doubled back to back (`Le le la la de de et et`, `a a b b c c`): salad of real words that lexical validity
   passes and rules 3-5 (>= 3 copies) miss. Natural reduplication (`anak-anak`, `常常`, `very very`) covers far less
   of a reply: 10 of the 65,816 released replies fire it (0 of the strong models'; loops such as `CRM, CRM.`).
Tuned on the paper's 65,816 released completions (~1 ms a reply): the base models command-r-base and
command-r-plus-base get 26 % and 24 % flagged (prompt echoes, loops), llama-3-instruct 1.8 % (its stripped
non-Latin output: 23 % of cross-lingual ko), llama-2-instruct and mistral-8x7b 0.1 % (U+FFFD runs, empty
replies), gpt-4-turbo, gpt-3.5-turbo, command-r, command-r-plus and mistral-large none. Not flagged: a poem's
refrain (lines repeated, not back to back), a title repeated in the first sentence, tables, lists, code,
short answers ("No, no, no.", "42") -- see tests/test_lcb_guard.py.

The rows, intervals and flags that aggregate these checks per task and language are in
`mlft.benchmarks.lcb.guard_report`; the stricter view of the same checks that RL reward terms read (invisible
characters, look-alike letters, templates, loop tails) is `mlft.benchmarks.lcb.reward_view`.

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
characters. A word counts only when it is not English (`counts_for`): every lexicon holds English words (`the`,
`would`, `weather`), so an English reply used to score 1.0 in all 14 other LCB languages. For a target with a
script of its own (ar, hi, ja, ko, ru, zh) a word counts only with a letter in that script; for the others (Latin
script, and any language but English) a word counts unless English's lexicon holds it `ENGLISH_MARGIN` Zipf (10x)
above the target's (`la`, `a`, `in` (de), `park` (fr) stay words of their language). A reply without a word
scores 0; a language without a lexicon scores None (`lexicon_languages` / `languages_without_lexicon`: 45 of
lid.176's labels have one). A reply is lexically valid when its validity is > `VALID_SHARE` (most of its words
count); the guard's `validity` is the share of valid replies, aggregated like coverage (over all replies), flagged
below 80 % (`limit_flags`) or below a base run beyond chance. So validity is low both for salad and for a reply
in the wrong language (English, or English words in a CJK reply).
Calibration (measurements/lexical_validity.py, the paper's released replies): valid mono / cross, GPT-4 Turbo
99.9 / 91.5 %, GPT-3.5 Turbo 99.7 / 91.4, Command R+ 100 / 95.7, Command R 99.9 / 77.8, Mistral Large 74.9 /
62.3, Mixtral 74.2 / 69.4, Llama 3 56.2 / 60.8, Llama 2 55.3 / 42.7, the base models 86-91 / 1-2 (before the
English rule: 94-100 % for every model). Of the replies the English rule made invalid, 98-99 % have a line LCB
judges in another language (the replies answer in English); 8-43 per model pass LCB (Mixtral 132: English
words inside ko/ja/zh replies). Hand-written salad in 10 languages scores <= 0.44, real sentences >= 0.9. It
cannot see salad made of real words (`la la la`: the degeneracy rule's job) or common-character zh salad.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np

from mlft.benchmarks.lcb.metrics import Tokenized, normalize, tokenized
from mlft.constants import VALID_SHARE
from mlft.langid import LanguageIdentifier
from mlft.languages import SCRIPT_RANGES

SHARE = 0.5  # a rule fires when its repeats cover at least this share of the text
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")


@functools.cache
def _punct_to_space() -> dict[int, str]:
    """Unicode punctuation (P*) and symbols (S*) of the BMP and SMP (emoji) -> space."""
    return {cp: " " for cp in range(0x20000) if unicodedata.category(chr(cp))[0] in "PS"}


@functools.cache
def _is_punct() -> np.ndarray:
    """`_punct_to_space`'s code points as a look-up table over all of Unicode."""
    table = np.zeros(0x110000, bool)
    table[list(_punct_to_space())] = True
    return table


_NUMPY_FROM = 64  # shorter texts: str.translate's per-call cost is below numpy's


def _punct_spaced(text: str) -> str:
    """`text.translate(_punct_to_space())`: every punctuation mark and symbol a space. str.translate looks each
    non-ASCII character up in the dict (a reply in Arabic, Hindi or Chinese: ~60 us), so a long non-ASCII text
    goes through one numpy look-up of its code points instead (5x faster; the same string)."""
    if len(text) < _NUMPY_FROM or text.isascii():  # CPython caches an ASCII text's look-ups
        return text.translate(_punct_to_space())
    try:
        codes = np.frombuffer(text.encode("utf-32-le"), np.uint32).copy()
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\\ud800")
        return text.translate(_punct_to_space())
    codes[_is_punct()[codes]] = 32
    return codes.tobytes().decode("utf-32-le")


def _rule_tokens(clean: str) -> list[str]:
    """Rule 4's tokens of a text already lowercased with punctuation and symbols as spaces (`_punct_spaced`):
    every Han / kana character one token, else runs of non-space. Without a Han / kana character that is
    `str.split()` (the same runs: regex `\\s` is `str.isspace`), 10x cheaper than the regex."""
    return _TOKEN.findall(clean) if _CJK_CHAR.search(clean) else clean.split()


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
    delta = np.bincount(start[keep], minlength=n + 1) - np.bincount(np.minimum(end[keep] + p[keep], n), minlength=n + 1)
    return np.cumsum(delta[:n]) > 0


def _ids(items: list[str]) -> np.ndarray:
    table: dict[str, int] = {}
    return np.array([table.setdefault(x, len(table)) for x in items], np.int64)


_CELLS = 1 << 25  # (item, period) cells of one vectorised pass (memory: a byte each)


def _joined(seqs: list[np.ndarray], gap: int) -> tuple[np.ndarray, np.ndarray]:
    """`seqs` joined with `gap` unique negative sentinels after each (a sentinel equals nothing, so no repeat of
    period <= gap crosses a border), and the start of each sequence. 32-bit when the sentinels fit (code points and
    ids always do): the comparisons that follow read half the memory."""
    sizes = np.array([len(x) for x in seqs], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes + gap)[:-1]])
    total = int(sizes.sum()) + gap * len(seqs)
    out = -2 - np.arange(total, dtype=np.int32 if total < 2**31 - 2 else np.int64)  # sentinels everywhere ...
    for s, x in zip(starts, seqs):
        out[s : s + len(x)] = x  # ... but where the sequences go
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
                hits = run[: hi - lo]
                at = np.flatnonzero(hits.any(0))
                if len(at):
                    owner = np.searchsorted(starts, at, "right") - 1
                    bound += np.bincount(owner, (k_of[lo:hi] + periods[lo:hi]) @ hits[:, at], j - i)
                run, lo = run[hi - lo :], hi
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
    ids: dict[str, int] = {}
    counter = itertools.count()
    chars, char_at, toks, tok_at, line_seqs, line_at, pairs = [], [], [], [], [], [], set()
    for k, text in enumerate(texts):  # keeps little per text: every container kept costs the collector later
        text = text.strip()
        if not text:
            reasons[k] = "empty"
            continue
        clean = _punct_spaced(text).lower()
        tokens = _rule_tokens(clean)
        if not tokens:
            reasons[k] = "no-words"
            continue
        chars.append(np.frombuffer(" ".join(text.split()).encode("utf-32-le"), np.uint32).astype(np.int32))
        char_at.append(k)  # (whitespace runs as one space)
        distinct = len(set(tokens))
        if 3 * distinct <= 2 * len(tokens):  # a tandem covering half the tokens needs half to be repeats
            toks.append(np.fromiter(map(ids.setdefault, tokens, counter), np.int64, len(tokens)))
            tok_at.append(k)
        if _pairs_fire(tokens, distinct):  # the last rule: applied below, where no other fired
            pairs.add(k)
        lines = list(filter(None, map(" ".join, map(str.split, clean.split("\n")))))  # whitespace runs: 1 space
        if len(set(lines)) < len(lines):  # the lines rule needs a line twice (a repeat, or one of >= 3 copies)
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
    for k in pairs:
        if reasons[k] is None:
            reasons[k] = "repeated-pairs"
    return reasons


PAIR_MIN_TOKENS = 6  # `repeated-pairs` judges replies of at least this many tokens


def _pairs_fire(tokens: list[str], distinct: int) -> bool:
    """Do units of 1-2 tokens doubled back to back (`a a`, `a b a b`) cover >= SHARE of the tokens (`distinct`
    of them different)? Every covered token has an equal one 1 or 2 places away inside the cover, so the cover C
    holds at most |C| / 2 different tokens, and the reply at most n - |C| / 2 <= (1 - SHARE / 2) n."""
    n = len(tokens)
    if n < PAIR_MIN_TOKENS or distinct > (1 - SHARE / 2) * n:
        return False
    equal = sum(map(operator.eq, tokens, tokens[1:])) + sum(map(operator.eq, tokens, tokens[2:]))
    if 2 * equal < SHARE * n:  # each equality covers at most 2 tokens
        return False
    return bool(tandem_cover(_ids(tokens), 2, 2, 2).mean() >= SHARE)


def _batch_cover_masks(seqs: list[np.ndarray], max_period: int, min_copies: int, min_len: int) -> list[np.ndarray]:
    """`tandem_cover` masks of many short sequences in one vectorised pass (joined as `_joined` does)."""
    if not seqs:
        return []
    joined, starts = _joined(seqs, max_period)
    mask = tandem_cover(joined, max_period, min_copies, min_len)
    return [mask[s : s + len(seq)] for s, seq in zip(starts, seqs)]


def degeneracy_reason(text: str) -> str | None:
    """Which rule marks `text` degenerate (module docstring), or None for a normal reply."""
    return degeneracy_reasons([text])[0]


def is_degenerate(text: str) -> bool:
    return degeneracy_reason(text) is not None


def degenerate_flags(texts: Sequence[str]) -> list[bool]:
    """`is_degenerate` of many texts at once."""
    return [r is not None for r in degeneracy_reasons(texts)]


# ---------------------------------------------------------------- lexical validity

SINGLE_CHAR_ZIPF = 3.5  # zh: a single character is a known word on its own only this frequent
WORD_ZIPF = 2.0  # a whole word is known from this frequency on (wordfreq's long tail holds fragments)
PIECE_ZIPF = 5.0  # ja/ko: a one-character piece (particle, ending, stem) must be this frequent
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
    """wordfreq's frequency dict of `lang` (`get_frequency_dict`) down to Zipf `WORD_ZIPF`: no rule reads a rarer
    word (every floor is at least as high, and an English word rarer than a known word of the target stays below
    it either way), and the long tail is most of the entries (4.2 M -> 1.4 M for LCB's 15 languages)."""
    code = _wordfreq_code(lang)
    if code is None:
        return None
    import wordfreq

    floor = 10 ** (WORD_ZIPF - 9)
    out: dict[str, float] = {}
    for index, bucket in enumerate(wordfreq.get_frequency_list(code, wordlist="best")):  # most frequent first
        freq = wordfreq.cB_to_freq(-index)
        if freq < floor:
            break
        out.update(dict.fromkeys(bucket, freq))
    return out


@functools.lru_cache(maxsize=1 << 18)
def is_known_word(word: str, lang: str) -> bool:
    """`word` (a token with a letter) is a word of `lang`'s lexicon, or (zh/ja/ko) splits into entries."""
    from wordfreq.preprocess import preprocess_text

    return _is_known_key(preprocess_text(word, _wordfreq_code(lang)), lang)


def _is_known_key(key: str, lang: str) -> bool:
    """`is_known_word` of a word already preprocessed the wordfreq way for `lang`."""
    lexicon = _lexicon(lang)
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


ENGLISH_MARGIN = 1.0  # Latin-script targets: a word is English when English uses it >= 10 ** this times as often


JUDGED_MAX = 1 << 18  # pieces remembered per language (`_piece_kinds`); the table starts again beyond


def counts_for(word: str, lang: str) -> bool:
    """`word` counts for `lang`: a known word of `lang` (`is_known_word`) that is not English. For a target with a
    script of its own (`mlft.languages.SCRIPT_RANGES`: ar, hi, ja, ko, ru, zh) the word must have a letter in that
    script; for the others (Latin-script targets, and any language but English) English's lexicon must not hold
    it `ENGLISH_MARGIN` Zipf or more above the target's (`the`, `would`, `weather` are in every lexicon; `la`, `a`,
    `in` (de), `park` (fr) stay words of their languages). Remembered per language with lexical validity's
    verdicts (`_piece_kinds`); a piece without a letter is judged afresh (no caller asks for one)."""
    kind = _piece_kinds(lang).get(word)
    if kind is None:
        kind = _piece_kind(word, lang)
    return kind == _COUNTED if kind != _NOT_A_WORD else _counts_for(word, lang)


def _counts_for(word: str, lang: str) -> bool:
    from wordfreq.preprocess import preprocess_text

    key = preprocess_text(word, _wordfreq_code(lang))
    if not _is_known_key(key, lang):
        return False
    if lang == "en":
        return True
    if lang in SCRIPT_RANGES:
        return _script_letter(lang).search(word) is not None
    english = _lexicon("en").get(preprocess_text(word, "en"), 0.0)
    return english < _lexicon(lang).get(key, 0.0) * 10**ENGLISH_MARGIN


@functools.cache
def _script_letter(lang: str) -> re.Pattern:
    """A letter (`str.isalpha`) of `lang`'s own script (`SCRIPT_RANGES`), as one character class."""
    letters = sorted({cp for lo, hi in SCRIPT_RANGES[lang] for cp in range(lo, hi + 1) if chr(cp).isalpha()})
    spans = [[letters[0], letters[0]]]
    for cp in letters[1:]:
        if cp == spans[-1][1] + 1:
            spans[-1][1] = cp
        else:
            spans.append([cp, cp])
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in spans) + "]")


def _pieces(text: str, lang: str, reply: Tokenized | None) -> list[str]:
    """The reply's tokens as the official scorer makes them in `lang` (every line; `reply`: the reply's
    `metrics.tokenized` when the caller has it), punctuation and symbols turned into spaces, split on whitespace.
    Whitespace tokens: the pieces of the whole normalised text are the same."""
    if lang in _OWN_TOKENIZER:
        joined = " ".join(itertools.chain.from_iterable((reply or tokenized(text, lang)).tokens))
    else:
        joined = reply.text if reply else normalize(text)
    return _punct_spaced(joined).split()


def _has_letter(piece: str) -> bool:
    return piece.isalpha() or any(map(str.isalpha, piece))


def reply_words(text: str, lang: str, reply: Tokenized | None = None) -> list[str]:
    """The reply's words: the pieces of its tokens (`_pieces`) with a letter."""
    return [w for w in _pieces(text, lang, reply) if _has_letter(w)]


_NOT_A_WORD, _WORD, _COUNTED = 0, 1, 2  # what a piece is to lexical validity (`_piece_kinds`)


@functools.cache
def _piece_kinds(lang: str) -> dict[str, int]:
    """What each piece `lexical_validity` or `counts_for` has met in `lang` in this process is: `_NOT_A_WORD` (no
    letter), `_WORD` (a word that does not count), `_COUNTED` (`counts_for`). One look-up per distinct piece answers
    both questions (a letter? counts?); a new piece is judged once (`_piece_kind`). A dict keyed by the piece alone:
    a look-up is a third of an `lru_cache` hit's, and a reply's words are looked up by the million."""
    return {}


def _piece_kind(piece: str, lang: str) -> int:
    kinds = _piece_kinds(lang)
    if len(kinds) >= JUDGED_MAX:
        kinds.clear()
    kind = kinds[piece] = (_COUNTED if _counts_for(piece, lang) else _WORD) if _has_letter(piece) else _NOT_A_WORD
    return kind


def lexical_validity(text: str, lang: str, reply: Tokenized | None = None) -> float | None:
    """Share of the reply's words (`reply_words`) that are words of `lang` (zh/ja/ko: weighted by characters); 0
    without a word; None when `lang` has no lexicon. `reply`: the reply's `metrics.tokenized`, when at hand.
    Each distinct piece is looked up once (`_piece_kinds`) and the shares are sums of whole numbers, in C."""
    if _lexicon(lang) is None:
        return None
    counts = Counter(_pieces(text, lang, reply))  # each piece once
    kinds = list(map(_piece_kinds(lang).get, counts))
    if None in kinds:  # a piece not met before
        kinds = [_piece_kind(w, lang) if k is None else k for w, k in zip(counts, kinds)]
    weights = list(map(operator.mul, map(len, counts), counts.values())) if lang in _BY_CHARS else counts.values()
    words = sum(itertools.compress(weights, kinds))  # _NOT_A_WORD is 0
    if not words:
        return 0.0
    return sum(itertools.compress(weights, map(_COUNTED.__eq__, kinds))) / words


def lexicon_of(lang: str) -> dict[str, float] | None:
    """The wordfreq lexicon lexical validity reads for `lang` (`_lexicon`; loaded once per process; None without
    one)."""
    return _lexicon(lang)


def is_lexically_valid(text: str, lang: str) -> bool | None:
    v = lexical_validity(text, lang)
    return None if v is None else v > VALID_SHARE

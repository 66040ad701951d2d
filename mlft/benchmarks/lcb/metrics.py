"""Per-reply analysis and group metrics, matching the official LCB `compute_metrics.py` by default.

Official behaviour (quirks included): cut at the first "\\nQ:", strip, delete ASCII punctuation, "—" -> " ",
delete "،"; lines = split("\\n"); tokens in the expected language; a line counts with >= 5 tokens; a reply
with no counted line is left out of every denominator; fastText top-1 label kept if score > 0.3 (else
"unknown"); WPR (non-Latin languages only) fails a line-clean reply if any stripped token is in the English
word set (case-sensitive); LPR/WPR/acc of an empty group are 1.0; WPR's denominator is max(1, .).

Options the paper describes but the script lacks (off by default, labelled in every report):
- `word_check="latin"`: a token is an English word if it is made of Latin letters only (no character of the
  language's own script) — the paper's script check; `"latin+dictionary"` requires both.
- `label_aliases`: extra labels accepted for a language (e.g. {"id": {"ms"}}) for LID models that confuse
  neighbours.
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.constants import LID_THRESHOLD, MIN_TOKENS
from mlft.languages import NON_LATIN, SCRIPT_RANGES

WORD_CHECKS = ("dictionary", "latin", "latin+dictionary")
# the official `str.translate(str.maketrans("", "", string.punctuation))`, as a regex: the same text, but a
# dict-mapped translate looks every character of a non-ASCII text up in the dict (5x slower)
_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")


def normalize(text: str) -> str:
    text = text.split("\nQ:")[0].strip()
    text = _PUNCT.sub("", text)
    return text.replace("—", " ").replace("،", "")


def load_english_words(path: str | Path) -> frozenset[str]:
    """The official rule: lines of the list, stripped, kept if lowercase and longer than 3 characters."""
    with open(path, encoding="utf-8") as fh:
        words = (line.strip() for line in fh)
        return frozenset(w for w in words if w.islower() and len(w) > 3)


@dataclass(frozen=True)
class ScoreOptions:
    word_check: str = "dictionary"
    label_aliases: dict = field(default_factory=dict)  # lang -> set of extra accepted labels
    min_tokens: int = MIN_TOKENS
    threshold: float = LID_THRESHOLD

    @property
    def is_official(self) -> bool:
        return (
            self.word_check == "dictionary"
            and not self.label_aliases
            and self.min_tokens == MIN_TOKENS
            and self.threshold == LID_THRESHOLD
        )

    def describe(self) -> str:
        if self.is_official:
            return "official LCB scorer behaviour"
        parts = []
        if self.word_check != "dictionary":
            parts.append(f"word check: {self.word_check}")
        if self.label_aliases:
            parts.append(
                "label aliases: "
                + ", ".join(f"{k}={'/'.join(sorted(v))}" for k, v in sorted(self.label_aliases.items()))
            )
        if self.min_tokens != MIN_TOKENS:
            parts.append(f"min tokens: {self.min_tokens}")
        if self.threshold != LID_THRESHOLD:
            parts.append(f"LID threshold: {self.threshold}")
        return "NON-OFFICIAL options: " + "; ".join(parts)


@dataclass
class ReplyResult:
    """Why a reply passed or failed. `counted` False = left out of every denominator."""

    counted: bool
    n_lines: int = 0  # counted lines (>= min_tokens tokens)
    n_wrong: int = 0  # counted lines in another language (or "unknown")
    n_unknown: int = 0  # counted lines labelled "unknown" (LID score <= threshold; mlft's LID detail)
    word_error: bool = False
    lines: list = field(default_factory=list)  # [(text, label, score, ok)] of counted lines
    english_words: list = field(default_factory=list)  # tokens that failed the word check
    guard: tuple | None = None  # (degenerate, lexical validity) when the scorer computed the guard's per-reply part

    @property
    def line_error(self) -> bool:
        return self.n_wrong > 0

    @property
    def acc(self) -> float:
        return 1 - self.n_wrong / self.n_lines if self.n_lines else 1.0


def _in_script(ch: str, lang: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in SCRIPT_RANGES[lang])


def _is_latin_word(token: str, lang: str) -> bool:
    letters = [c for c in token if c.isalpha()]
    return (
        bool(letters)
        and all(c.isascii() or "\u00c0" <= c <= "\u024f" for c in letters)
        and not any(_in_script(c, lang) for c in token)
    )


def _english_tokens(line_tokens: list[list[str]], lang: str, words: frozenset[str], check: str) -> list[str]:
    if lang not in SCRIPT_RANGES:
        check = "dictionary"  # script checks only make sense for non-Latin languages
    stripped = (tok.strip() for tokens in line_tokens for tok in tokens)
    if check == "dictionary":
        return [t for t in stripped if t in words]
    if check == "latin":
        return [t for t in stripped if _is_latin_word(t, lang)]
    return [t for t in stripped if _is_latin_word(t, lang) and t.lower() in words]


class Tokenized(NamedTuple):
    """A reply as the official scorer reads it: the normalised text, its lines and each line's tokens in the
    expected language. Made once per reply (`tokenized`) and read by the scorer and the guard's lexical validity."""

    text: str
    lines: list[str]
    tokens: list[list[str]]


def tokenized(text: str, lang: str) -> Tokenized:
    norm = normalize(text)
    lines = norm.split("\n")
    return Tokenized(norm, lines, [tokenize(line, lang) for line in lines])


def analyze_reply(
    text: str, lang: str, lid, words: frozenset[str], options: ScoreOptions = ScoreOptions(), detail: bool = False
) -> ReplyResult:
    return analyze_tokenized(tokenized(text, lang), lang, lid.predict, words, options, detail)


def analyze_tokenized(
    reply: Tokenized,
    lang: str,
    predict: Callable[[str], tuple[str, float]],
    words: frozenset[str],
    options: ScoreOptions = ScoreOptions(),
    detail: bool = False,
) -> ReplyResult:
    """`analyze_reply` of a reply already tokenised; `predict(line) -> (label, score)` labels a counted line."""
    kept = [(line, toks) for line, toks in zip(reply.lines, reply.tokens) if len(toks) >= options.min_tokens]
    if not kept:
        return ReplyResult(counted=False)
    accepted = {lang} | set(options.label_aliases.get(lang, ()))
    n_wrong = n_unknown = 0
    details = []
    for line, _ in kept:
        label, score = predict(line)
        if score <= options.threshold:
            label = "unknown"
            n_unknown += 1
        ok = label in accepted
        n_wrong += not ok
        if detail:
            details.append((line, label, round(score, 4), ok))
    result = ReplyResult(counted=True, n_lines=len(kept), n_wrong=n_wrong, n_unknown=n_unknown, lines=details)
    if not result.line_error:  # counted for every language (as the official script); WPR reported for non-Latin only
        kept_tokens = [toks for _, toks in kept]
        if detail or options.word_check != "dictionary":
            found = _english_tokens(kept_tokens, lang, words, options.word_check)
            result.word_error = bool(found)
            if detail:
                result.english_words = found
        else:  # the official check, without the words: is any stripped token in the set (a set operation, in C)
            result.word_error = not words.isdisjoint(map(str.strip, itertools.chain.from_iterable(kept_tokens)))
    return result


def line_verdict(r: ReplyResult) -> bool:
    """The per-reply LPR verdict: True when the reply is counted and every counted line is in the expected
    language. A reply without a counted line is False here -- LCB leaves it out of LPR's denominator instead
    (`counted`), which a reward must not copy (an empty reply would score as well as a clean one)."""
    return r.counted and not r.line_error


def word_verdict(r: ReplyResult) -> bool:
    """The per-reply WPR verdict: counted, line-clean and without an English word (the official word check).
    WPR's denominator holds the line-clean counted replies only; False here for the others."""
    return line_verdict(r) and not r.word_error


@dataclass
class GroupCounts:
    n_responses: int = 0
    n_scored: int = 0
    n_line_err: int = 0
    n_word_err: int = 0
    n_lines_scored: int = 0
    n_lines_wrong: int = 0
    acc_sum: float = 0.0

    def add(self, r: ReplyResult) -> None:
        self.n_responses += 1
        if r.counted:
            self.n_scored += 1
            self.n_line_err += not line_verdict(r)
            self.n_word_err += line_verdict(r) and not word_verdict(r)
            self.n_lines_scored += r.n_lines
            self.n_lines_wrong += r.n_wrong
            self.acc_sum += r.acc  # summed in reply order, as the official script does

    def counts(self) -> dict:
        return {k: v for k, v in vars(self).items() if k != "acc_sum"}


def group_metrics(c: GroupCounts, lang: str) -> dict:
    """lpr / wpr / acc of one (source, language) group, exactly as the official script computes them."""
    out = {
        "acc": c.acc_sum / c.n_scored if c.n_scored else 1.0,
        "lpr": 1 - c.n_line_err / max(1, c.n_scored),
        "wpr": None,
    }
    if lang in NON_LATIN:
        out["wpr"] = 1 - c.n_word_err / max(1, c.n_scored - c.n_line_err)
    return out

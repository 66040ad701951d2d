"""Text units shared by decontamination and token statistics.

A "unit" is a word (a run of letters, digits and combining marks) or, in scripts written without spaces
(Chinese ideographs, Japanese kana), a single character — so n-gram overlap and word counts work the same
way in all 15 LCB languages.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

# Han ideographs (incl. extension A and compatibility forms), hiragana, katakana: one unit per character.
_CHAR_UNIT_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


def _is_char_unit(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CHAR_UNIT_RANGES)


@lru_cache(maxsize=1)
def _units_patterns() -> tuple[re.Pattern, re.Pattern]:
    """One CJK/kana character, or a run of the other letters, digits and combining marks (Unicode categories L, N,
    M of this Python's unicodedata): the character loop of `_units_by_char` as one regex, the same units
    (tests/test_data_decontaminate.py). Two of them: for text within the Basic Multilingual Plane (re compiles that
    class to a bitmap: ~10x faster than the loop on LCB's prompts) and for any text (a class with code points above
    U+FFFF is a list of ranges re scans one by one). Built once per process (~0.3 s)."""
    ranges: list[list[int]] = []
    bounds = sorted(_CHAR_UNIT_RANGES)
    gaps = zip([0] + [hi + 1 for _, hi in bounds], [lo for lo, _ in bounds] + [sys.maxunicode + 1])
    category = unicodedata.category
    for start, stop in gaps:  # the code points outside the CJK/kana ranges
        for cp in range(start, stop):
            if category(chr(cp))[0] in "LNM":
                if ranges and ranges[-1][1] == cp - 1:
                    ranges[-1][1] = cp
                else:
                    ranges.append([cp, cp])

    def char_class(spans) -> str:
        return "".join(f"\\U{lo:08x}" + (f"-\\U{hi:08x}" if hi > lo else "") for lo, hi in spans)

    cjk = char_class(_CHAR_UNIT_RANGES)
    bmp = [(lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF]
    return re.compile(f"[{cjk}]|[{char_class(bmp)}]+"), re.compile(f"[{cjk}]|[{char_class(ranges)}]+")


def units(text: str) -> list[str]:
    """Words and single CJK/kana characters of the NFKC, case-folded text (punctuation dropped)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    bmp, full = _units_patterns()
    return (bmp if not text or max(text) <= "\uffff" else full).findall(text)


def _units_by_char(text: str) -> list[str]:
    """`units` one character at a time: the definition the regex of `_units_pattern` is checked against."""
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    word: list[str] = []
    for ch in text:
        if _is_char_unit(ch):
            if word:
                out.append("".join(word))
                word = []
            out.append(ch)
        elif unicodedata.category(ch)[0] in "LNM":
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def normalize_text(text: str) -> str:
    """The key for exact-match checks: units joined by single spaces."""
    return " ".join(units(text))

"""Text units shared by decontamination and token statistics.

A "unit" is a word (a run of letters, digits and combining marks) or, in scripts written without spaces
(Chinese ideographs, Japanese kana), a single character — so n-gram overlap and word counts work the same
way in all 15 LCB languages.
"""

from __future__ import annotations

import unicodedata

# Han ideographs (incl. extension A and compatibility forms), hiragana, katakana: one unit per character.
_CHAR_UNIT_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


def _is_char_unit(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CHAR_UNIT_RANGES)


def units(text: str) -> list[str]:
    """Words and single CJK/kana characters of the NFKC, case-folded text (punctuation dropped)."""
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

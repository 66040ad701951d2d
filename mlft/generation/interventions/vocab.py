"""What each vocabulary token is made of: the scripts of its letters, computed once per tokenizer and cached.

A token's bytes come from the tokenizer's own vocabulary (byte-level BPE such as GPT-2 / SmolLM2 / Llama 3:
the byte-to-unicode alphabet is undone; SentencePiece: `▁` is a space and `<0xNN>` a single byte). Complete
characters are classified by their Unicode name (LATIN, CYRILLIC, ARABIC, DEVANAGARI, HANGUL, HIRAGANA /
KATAKANA = kana, CJK = han, ...); digits, punctuation, symbols, whitespace and combining marks carry no script.
A byte-level piece that is only part of a character (most non-Latin text of an English-centric vocabulary is
built from such pieces) is classified by the UTF-8 lead byte it starts (and the next byte, where that
decides): 0xD0-0xD4 Cyrillic, 0xD8-0xDB Arabic, 0xE0 0xA4/0xA5 Devanagari, 0xE3 0x81-0x83 kana, 0xE4-0xE9 han,
0xEA 0xB0+ / 0xEB-0xED Hangul, 0xC2-0xC9 / 0xE1 0xB8-0xBB Latin (e.g. é, ế), ...; pieces that cannot be placed
(lone continuation bytes, 4-byte leads) are `fragment`s. Special tokens (EOS, chat markers) are `special`.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

# LCB languages -> the scripts their text is written in
LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    "ar": frozenset({"arabic"}),
    "hi": frozenset({"devanagari"}),
    "ja": frozenset({"kana", "han"}),
    "ko": frozenset({"hangul"}),
    "ru": frozenset({"cyrillic"}),
    "zh": frozenset({"han"}),
    **{lang: frozenset({"latin"}) for lang in ("de", "en", "es", "fr", "id", "it", "pt", "tr", "vi")},
    # a few more languages a prompt file may hold
    "bg": frozenset({"cyrillic"}),
    "uk": frozenset({"cyrillic"}),
    "sr": frozenset({"cyrillic"}),
    "fa": frozenset({"arabic"}),
    "ur": frozenset({"arabic"}),
    "mr": frozenset({"devanagari"}),
    "ne": frozenset({"devanagari"}),
    "el": frozenset({"greek"}),
    "he": frozenset({"hebrew"}),
    "th": frozenset({"thai"}),
    "bn": frozenset({"bengali"}),
    "as": frozenset({"bengali"}),
    **{
        lang: frozenset({"latin"})
        for lang in (
            "nl",
            "pl",
            "cs",
            "sk",
            "sv",
            "da",
            "no",
            "fi",
            "hu",
            "ro",
            "ca",
            "hr",
            "sl",
            "et",
            "lv",
            "lt",
            "ms",
            "sw",
        )
    },
}
NO_SCRIPT = frozenset({"fragment", "special"})

_NAME_SCRIPTS = {
    "LATIN": "latin",
    "FULLWIDTH LATIN": "latin",
    "CYRILLIC": "cyrillic",
    "ARABIC": "arabic",
    "DEVANAGARI": "devanagari",
    "HANGUL": "hangul",
    "HIRAGANA": "kana",
    "KATAKANA": "kana",
    "HALFWIDTH KATAKANA": "kana",
    "CJK": "han",
    "GREEK": "greek",
    "HEBREW": "hebrew",
    "THAI": "thai",
    "BENGALI": "bengali",
}


def char_script(ch: str) -> str | None:
    """The script of a letter (None for digits, punctuation, symbols, spaces, marks)."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    for prefix in ("FULLWIDTH LATIN", "HALFWIDTH KATAKANA"):
        if name.startswith(prefix):
            return _NAME_SCRIPTS[prefix]
    return _NAME_SCRIPTS.get(name.split(" ", 1)[0], "other")


def _lead_script(lead: int, nxt: int | None) -> str:
    """Script of the character an incomplete UTF-8 sequence starting with `lead` (then `nxt`) will become."""
    if 0xC2 <= lead <= 0xC9:
        return "latin"  # U+0080-U+027F: Latin-1 supplement, Latin extended-A/B
    if lead in (0xCA, 0xCB, 0xCC, 0xCD):
        return "fragment"  # IPA, modifier letters, combining marks
    if lead in (0xCE, 0xCF):
        return "greek"
    if 0xD0 <= lead <= 0xD4:
        return "cyrillic"
    if lead == 0xD7:
        return "hebrew"
    if 0xD8 <= lead <= 0xDB:
        return "arabic"
    if nxt is None:
        return "fragment"  # a 3/4-byte lead alone: not yet placeable
    if lead == 0xE0:
        return {
            0xA4: "devanagari",
            0xA5: "devanagari",
            0xA6: "bengali",
            0xA7: "bengali",
            0xA2: "arabic",
            0xB8: "thai",
            0xB9: "thai",
        }.get(nxt, "other")
    if lead == 0xE1:
        if 0xB8 <= nxt <= 0xBB:
            return "latin"  # U+1E00-U+1EFF: Latin extended additional (Vietnamese)
        return "hangul" if 0x84 <= nxt <= 0x87 else "other"
    if lead == 0xE2:
        return "fragment"  # punctuation, symbols, arrows, CJK radicals
    if lead == 0xE3:
        if 0x81 <= nxt <= 0x83:
            return "kana"
        if 0x84 <= nxt <= 0x86:
            return "hangul"
        return "han" if nxt >= 0x90 else "fragment"
    if 0xE4 <= lead <= 0xE9:
        return "han"
    if lead == 0xEA:
        return "hangul" if nxt >= 0xB0 else "other"
    if lead in (0xEB, 0xEC, 0xED):
        return "hangul"
    if lead == 0xEF:
        return "han" if nxt in (0xA4, 0xA5, 0xA6, 0xA7, 0xA8, 0xA9, 0xAA, 0xAB) else "fragment"
    return "fragment"


def _utf8_len(lead: int) -> int:
    return 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1


def byte_scripts(raw: bytes) -> frozenset[str]:
    """Scripts of the letters in `raw` (complete characters and incomplete lead sequences); `fragment` for
    continuation bytes that start a token."""
    out: set[str] = set()
    i = 0
    while i < len(raw):
        b = raw[i]
        if 0x80 <= b < 0xC0:  # a continuation byte without its lead: the rest of a character begun earlier
            out.add("fragment")
            i += 1
            continue
        n = _utf8_len(b)
        if i + n <= len(raw):
            try:
                ch = raw[i : i + n].decode("utf-8")
            except UnicodeDecodeError:
                out.add("fragment")
                i += 1
                continue
            s = char_script(ch)
            if s:
                out.add(s)
            i += n
        else:  # incomplete sequence at the end of the token
            out.add(_lead_script(b, raw[i + 1] if i + 1 < len(raw) else None))
            break
    return frozenset(out)


def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-to-unicode alphabet (byte-level BPE vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(tokenizer) -> list[bytes | None]:
    """Raw bytes of every token id (None for special tokens)."""
    size = len(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    specials = set(tokenizer.all_special_ids) | {i for i, t in enumerate(pieces) if t is None}
    decoder = _byte_decoder()
    sample = [p for p in pieces[:5000] if p]
    byte_level = sum(all(c in decoder for c in p) for p in sample) >= 0.95 * len(sample)
    out: list[bytes | None] = []
    for i, p in enumerate(pieces):
        if i in specials or p is None:
            out.append(None)
        elif byte_level and all(c in decoder for c in p):
            out.append(bytes(decoder[c] for c in p))
        elif p.startswith("<0x") and p.endswith(">") and len(p) == 6:
            out.append(bytes([int(p[3:5], 16)]))
        else:
            out.append(p.replace("▁", " ").encode("utf-8"))
    return out


@dataclass(frozen=True)
class VocabIndex:
    """Per token: its scripts (frozenset; {"special"} for special tokens) and its text (None if not text)."""

    scripts: tuple[frozenset[str], ...]
    texts: tuple[str | None, ...]

    def allowed(self, scripts: frozenset[str]) -> list[bool]:
        """Tokens a reply written in `scripts` may use: no letter of another script (specials, digits,
        punctuation, whitespace and unplaceable fragments always pass)."""
        return [s <= (scripts | NO_SCRIPT) for s in self.scripts]


_CACHE: dict[tuple, VocabIndex] = {}


def vocab_index(tokenizer) -> VocabIndex:
    """The index of `tokenizer`'s vocabulary, built once per tokenizer (name and size) per process."""
    key = (getattr(tokenizer, "name_or_path", ""), len(tokenizer), type(tokenizer).__name__)
    if key not in _CACHE:
        raws = token_bytes(tokenizer)
        scripts = tuple(frozenset({"special"}) if r is None else byte_scripts(r) for r in raws)
        texts = tuple(None if r is None else r.decode("utf-8", errors="ignore") for r in raws)
        _CACHE[key] = VocabIndex(scripts, texts)
    return _CACHE[key]


@lru_cache(maxsize=64)
def language_scripts(language: str | None) -> frozenset[str] | None:
    return LANGUAGE_SCRIPTS.get(language or "")

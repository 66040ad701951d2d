"""The 15 LCB languages and the facts the metrics need about them."""

from __future__ import annotations

from mlft.config import check_choice, did_you_mean
from mlft.errors import ConfigError
from mlft.langid import LanguageIdentifier

# ISO 639-1 code -> English name (as used in the cross-lingual "Reply in X." instructions).
LANGUAGES: dict[str, str] = {
    "ar": "Arabic",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "hi": "Hindi",
    "id": "Indonesian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "pt": "Portuguese",
    "ru": "Russian",
    "tr": "Turkish",
    "vi": "Vietnamese",
    "zh": "Chinese",
}

# WPR is only defined for non-Latin-script languages (the official scorer's list); LCPR averages over these.
NON_LATIN: tuple[str, ...] = ("ar", "hi", "ja", "ko", "ru", "zh")

# Unicode ranges of each non-Latin language's script(s): used by the optional Latin-script WPR check.
SCRIPT_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "ar": ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "hi": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
    "ja": (
        (0x3040, 0x309F),
        (0x30A0, 0x30FF),
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0xFF66, 0xFF9F),
        (0x3000, 0x303F),
        (0xFF00, 0xFFEF),
    ),
    "ko": ((0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3130, 0x318F), (0x4E00, 0x9FFF), (0x3000, 0x303F)),
    "ru": ((0x0400, 0x04FF), (0x0500, 0x052F)),
    "zh": (
        (0x4E00, 0x9FFF),
        (0x3400, 0x4DBF),
        (0x20000, 0x2A6DF),
        (0xF900, 0xFAFF),
        (0x3000, 0x303F),
        (0xFF00, 0xFFEF),
    ),
}


def check_language(code: str, where: str = "language") -> str:
    """Return `code` if it is an LCB language, else raise a ConfigError listing the valid ones."""

    return check_choice(code, LANGUAGES, "language", where)


def language_name(code: str) -> str:
    return LANGUAGES[check_language(code)]


def lid_labels() -> frozenset[str]:
    """Every language the configured fastText LID model can name (176 for lid.176): scorable languages."""

    return LanguageIdentifier.cached(None).labels


def check_scorable(code: str, where: str = "language") -> str:
    """`code` if LCB scores it: one of the 15 LCB languages, or any other language the LID model knows (scored
    by the official rules: LPR by line-level LID; WPR stays defined for the six non-Latin LCB languages only)."""
    if code in LANGUAGES or code in lid_labels():
        return code

    raise ConfigError(
        f"{where}: language {code!r} is unknown to the language-ID model "
        f"({len(lid_labels())} languages){did_you_mean(str(code), lid_labels())}; use its ISO 639 code "
        f"as fastText names it (e.g. bg, cs, fi, sw); valid: {', '.join(sorted(lid_labels()))}"
    )

"""Map the language labels datasets use (ISO 639-1/639-3 codes, regional tags, English names) to LCB codes."""

from __future__ import annotations

from mlft.languages import LANGUAGES

# ISO 639-3 / 639-2 codes and common aliases (Arabic varieties as in the Aya dataset; "cn" as in some hubs).
_ALIASES = {
    "ara": "ar",
    "arb": "ar",
    "ary": "ar",
    "ars": "ar",
    "arz": "ar",
    "acq": "ar",
    "ajp": "ar",
    "apc": "ar",
    "deu": "de",
    "ger": "de",
    "eng": "en",
    "spa": "es",
    "fra": "fr",
    "fre": "fr",
    "hin": "hi",
    "ind": "id",
    "ita": "it",
    "jpn": "ja",
    "kor": "ko",
    "por": "pt",
    "rus": "ru",
    "tur": "tr",
    "vie": "vi",
    "zho": "zh",
    "chi": "zh",
    "cmn": "zh",
    "cn": "zh",
    "standard arabic": "ar",
    "modern standard arabic": "ar",
    "simplified chinese": "zh",
    "mandarin chinese": "zh",
    "mandarin": "zh",
    "brazilian portuguese": "pt",
}
_NAMES = {name.lower(): code for code, name in LANGUAGES.items()}


def to_lcb_code(label, extra: dict[str, str] | None = None) -> str | None:
    """The LCB code for a dataset's language label, or None when it is not one of the 15 languages.

    `extra` (the mix's `language_map`) is consulted first, verbatim."""
    if label is None:
        return None
    label = str(label).strip()
    if extra and label in extra:
        return extra[label]
    low = label.lower()
    for key in (low, low.replace("_", "-").split("-")[0]):
        if key in LANGUAGES:
            return key
        if key in _ALIASES:
            return _ALIASES[key]
        if key in _NAMES:
            return _NAMES[key]
    return None

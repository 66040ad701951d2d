"""Cross-lingual instructions: an English request plus "Reply in <language>." (as in LCB's cross-lingual task)."""

from __future__ import annotations

import random

from mlft.languages import language_name

PHRASINGS = ("Reply in {language}.", "Please respond in {language}.", "Answer in {language}.",
             "Write your answer in {language}.")


def crosslingual_prompt(instruction: str, language: str, key: str) -> str:
    """`instruction` with a reply-language request before or after it; the choice is seeded by `key`."""
    rng = random.Random(f"crosslingual/{key}/{language}")
    request = rng.choice(PHRASINGS).format(language=language_name(language))
    return f"{request} {instruction}" if rng.random() < 0.5 else f"{instruction} {request}"

"""Cross-lingual prompts: an instruction in language A plus a request, also in A, for a reply in X != A.

Training prompts use mlft's own phrasings (mlft.data.phrasings, disjoint from LCB's eight templates) at a
seeded place (start / middle / end). `lcb_style_prompt` builds evaluation prompts the way LCB does (English
instruction, one of LCB's templates with the English language name), for held-out items only.
"""

from __future__ import annotations

import random

from mlft.data.phrasings import LCB_TEMPLATES, training_request_prompt
from mlft.languages import language_name

LCB_LOCATIONS = ("Start", "Middle", "End")  # the `location` values of LCB's cross-lingual test sets
_LCB_REQUESTS = {
    "in {language_requested}": "In {language}, please.",
    "written in {language_requested}": "Your output should be written in {language}.",
    "using {language_requested}": "Reply using {language}.",
}


def crosslingual_prompt(
    instruction: str, target: str, key: str, instruction_language: str = "en", context: str | None = None
) -> str:
    """`instruction` (written in `instruction_language`, with an optional input `context`) with a training
    request for a reply in `target`."""
    return training_request_prompt(instruction, instruction_language, target, key, context)


def pick_instruction_language(key: str, target: str, choices) -> str:
    """A seeded choice among `choices` other than `target`: the instruction language of row `key`."""
    options = sorted(set(choices) - {target})
    return random.Random(f"instruction-language/{key}/{target}").choice(options)


def lcb_request(template: str, target: str) -> str:
    """LCB's `template` as a request sentence for `target` ("reply in {language_requested}" -> "Reply in Korean.")."""
    if template not in LCB_TEMPLATES:
        raise ValueError(f"not an LCB template: {template!r}")
    text = _LCB_REQUESTS.get(template) or template.replace("{language_requested}", "{language}") + "."
    text = text.format(language=language_name(target))
    return text[0].upper() + text[1:]


def lcb_style_prompt(
    instruction: str, target: str, template: str, location: str, followup: str = "Keep it short."
) -> str:
    """An English `instruction` with LCB's request `template` for `target` at LCB `location`."""
    req = lcb_request(template, target)
    if location == "Start":
        return f"{req} {instruction}"
    if location == "End":
        return f"{instruction} {req}"
    if location == "Middle":
        return f"{instruction} {req} {followup}"
    raise ValueError(f"unknown location {location!r}; valid: {', '.join(LCB_LOCATIONS)}")

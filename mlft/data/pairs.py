"""Preference pairs built from parallel data (a mitigation the LCB paper does not have).

Language-targeted: chosen = the reply in the requested language, rejected = the same content in another
language (English by default) — the model learns to prefer the right language, not different content.
Cross-lingual: the prompt is an instruction in language A plus a request (in A) for a reply in X; chosen =
the reply in X, rejected = the same content in A, the language a confused model falls back to.
English pairs (the English-only counterpart) prefer the reply to the question over the reply to another
question, so they carry no language signal at all.
"""

from __future__ import annotations

import random

from mlft.data.crosslingual import crosslingual_prompt


def pair(prompt: str, chosen: str, rejected: str) -> dict:
    """A conversational preference row: one user turn, one assistant turn each side."""
    return {
        "prompt": [{"role": "user", "content": prompt}],
        "chosen": [{"role": "assistant", "content": chosen}],
        "rejected": [{"role": "assistant", "content": rejected}],
    }


def targeted_pair(item: dict, language: str, rejected_language: str = "en") -> dict:
    """Prompt in `language`; chosen in `language`, rejected the same reply in `rejected_language`."""
    own = item["langs"][language]
    return pair(own["instruction"], own["response"], item["langs"][rejected_language]["response"])


def crosslingual_pair(item: dict, language: str, instruction_language: str = "en") -> dict:
    """Prompt in `instruction_language` asking for `language`; chosen in `language`, rejected the same reply
    in `instruction_language`."""
    source = item["langs"][instruction_language]
    prompt = crosslingual_prompt(source["instruction"], language, item["key"], instruction_language)
    return pair(prompt, item["langs"][language]["response"], source["response"])


def english_pairs(items: list[dict], seed: int = 0) -> list[dict]:
    """For each English item {"id", "instruction", "response"}: chosen its own reply, rejected the reply of
    another (seeded) item."""
    rng = random.Random(f"english_pairs/{seed}")
    out = []
    for k, item in enumerate(items):
        other = items[(k + rng.randrange(1, len(items))) % len(items)]
        out.append({"id": item["id"], **pair(item["instruction"], item["response"], other["response"])})
    return out

"""Preference pairs built from parallel data (a mitigation the LCB paper does not have).

Language-targeted: chosen = the reply in the requested language, rejected = the same content in another
language (English by default) — the model learns to prefer the right language, not different content.
English pairs (the English-only counterpart) prefer the reply to the question over the reply to another
question, so they carry no language signal at all.
"""

from __future__ import annotations

import random

from mlft.data.crosslingual import crosslingual_prompt


def _pair(prompt: str, chosen: str, rejected: str) -> dict:
    return {"prompt": [{"role": "user", "content": prompt}],
            "chosen": [{"role": "assistant", "content": chosen}],
            "rejected": [{"role": "assistant", "content": rejected}]}


def targeted_pair(item: dict, language: str, rejected_language: str = "en") -> dict:
    """Prompt in `language`; chosen in `language`, rejected the same reply in `rejected_language`."""
    own = item["langs"][language]
    return _pair(own["instruction"], own["response"], item["langs"][rejected_language]["response"])


def crosslingual_pair(item: dict, language: str, rejected_language: str = "en") -> dict:
    """English prompt asking for `language`; chosen in `language`, rejected in `rejected_language`."""
    prompt = crosslingual_prompt(item["langs"]["en"]["instruction"], language, item["key"])
    return _pair(prompt, item["langs"][language]["response"], item["langs"][rejected_language]["response"])


def english_pairs(items: list[dict], seed: int = 0) -> list[dict]:
    """For each English item {"id", "instruction", "response"}: chosen its own reply, rejected the reply of
    another (seeded) item."""
    rng = random.Random(f"english_pairs/{seed}")
    out = []
    for k, item in enumerate(items):
        other = items[(k + rng.randrange(1, len(items))) % len(items)]
        out.append({"id": item["id"], **_pair(item["instruction"], item["response"], other["response"])})
    return out

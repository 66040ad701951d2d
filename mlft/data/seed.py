"""The project's own seed data (mlft/resources/seed/), written by hand for offline runs.

parallel.jsonl   one line per instruction: {"item", "category", "<lang>": [instruction, response], ...}
                 for all 15 LCB languages (the same request and reply in each language)
english.jsonl    English-only items {"id", "category", "instruction", "response"} (the English counterpart
                 is these plus the English side of parallel.jsonl)

SEED_SETS names what a mix can take from them (`type: seed`, `path: <set>`); every row carries an `id`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from mlft.data.crosslingual import crosslingual_prompt
from mlft.data.pairs import crosslingual_pair, english_pairs, targeted_pair
from mlft.errors import DataError
from mlft.languages import LANGUAGES

SEED_DIR = Path(__file__).resolve().parent.parent / "resources" / "seed"
ALL = tuple(sorted(LANGUAGES))
NON_ENGLISH = tuple(x for x in ALL if x != "en")


def _read_jsonl(name: str) -> list[dict]:
    path = SEED_DIR / name
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the seed data ({exc}); reinstall mlft") from None
    out = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{n}: invalid JSON ({exc})") from None
    return out


@lru_cache(maxsize=1)
def parallel_items() -> tuple[dict, ...]:
    """{"key", "category", "langs": {lang: {"instruction", "response"}}} for every parallel item.

    (Never "id" next to language codes: "id" is the code of Indonesian.)"""
    items = []
    for raw in _read_jsonl("parallel.jsonl"):
        missing = [lang for lang in ALL if lang not in raw]
        if missing:
            raise DataError(f"{SEED_DIR / 'parallel.jsonl'}: item {raw.get('item')!r} lacks {', '.join(missing)}")
        langs = {lang: {"instruction": raw[lang][0], "response": raw[lang][1]} for lang in ALL}
        items.append({"key": raw["item"], "category": raw["category"], "langs": langs})
    return tuple(items)


@lru_cache(maxsize=1)
def english_items() -> tuple[dict, ...]:
    """The English counterpart: the English side of the parallel items, then the English-only items."""
    own = [{"id": it["key"], "category": it["category"], **it["langs"]["en"]} for it in parallel_items()]
    return tuple(own + _read_jsonl("english.jsonl"))


def _chat(instruction: str, response: str) -> dict:
    return {"messages": [{"role": "user", "content": instruction}, {"role": "assistant", "content": response}]}


def _parallel_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **_chat(**it["langs"][lang])} for it in parallel_items()]


def _english_rows(lang: str) -> list[dict]:
    return [{"id": it["id"], **_chat(it["instruction"], it["response"])} for it in english_items()]


def _crosslingual_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **_chat(crosslingual_prompt(it["langs"]["en"]["instruction"], lang, it["key"]),
                                      it["langs"][lang]["response"])} for it in parallel_items()]


def _targeted_pair_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **targeted_pair(it, lang)} for it in parallel_items()]


def _crosslingual_pair_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **crosslingual_pair(it, lang)} for it in parallel_items()]


def _english_pair_rows(lang: str) -> list[dict]:
    return english_pairs(list(english_items()))


@dataclass(frozen=True)
class SeedSet:
    kind: str  # "sft" or "dpo"
    languages: tuple[str, ...]
    rows: Callable[[str], list[dict]]  # language -> normalised rows, each with an "id"
    description: str


SEED_SETS: dict[str, SeedSet] = {
    "parallel": SeedSet("sft", ALL, _parallel_rows, "instruction and reply in the same language, 15 languages"),
    "english": SeedSet("sft", ("en",), _english_rows, "English-only counterpart (parallel English + extra items)"),
    "crosslingual": SeedSet("sft", NON_ENGLISH, _crosslingual_rows,
                            "English instruction + 'Reply in X.' -> reply in X"),
    "targeted_pairs": SeedSet("dpo", NON_ENGLISH, _targeted_pair_rows,
                              "prompt in X; chosen reply in X, rejected the same reply in English"),
    "crosslingual_pairs": SeedSet("dpo", NON_ENGLISH, _crosslingual_pair_rows,
                                  "English prompt + 'Reply in X.'; chosen reply in X, rejected in English"),
    "english_pairs": SeedSet("dpo", ("en",), _english_pair_rows,
                             "English prompt; chosen its reply, rejected the reply to another prompt"),
}

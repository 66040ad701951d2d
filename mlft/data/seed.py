"""The project's own seed data (mlft/resources/seed/), written by hand for offline runs.

parallel.jsonl   one line per instruction: {"item", "category", "<lang>": [instruction, response], ...}
                 for all 15 LCB languages (the same request and reply in each language)
english.jsonl    English-only items {"id", "category", "instruction", "response"} (the English counterpart
                 is these plus the English side of the training part of parallel.jsonl)
heldout.txt      keys of the parallel items held out of every training set (an evaluation set for
                 mlft.data.heldout); `training_items()` are the others

SEED_SETS names what a mix can take from them (`type: seed`, `path: <set>`); every row carries an `id`.
Cross-lingual sets ask for the reply language with mlft's training phrasings (mlft.data.phrasings), never
with LCB's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mlft.data.arithmetic import seed_rows as arithmetic_rows
from mlft.data.crosslingual import crosslingual_prompt, pick_instruction_language
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
    held = heldout_keys()
    unknown = sorted(held - {it["key"] for it in items})
    if unknown:
        raise DataError(f"{SEED_DIR / 'heldout.txt'}: not parallel items: {', '.join(unknown)}")
    return tuple({**it, "heldout": it["key"] in held} for it in items)


@lru_cache(maxsize=1)
def heldout_keys() -> frozenset[str]:
    """Keys of the held-out parallel items (heldout.txt: one per line, `#` comments)."""
    path = SEED_DIR / "heldout.txt"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the held-out list ({exc}); reinstall mlft") from None
    return frozenset(line.split("#")[0].strip() for line in lines if line.split("#")[0].strip())


def training_items() -> tuple[dict, ...]:
    """The parallel items every training seed set is built from (the held-out ones excluded)."""
    return tuple(it for it in parallel_items() if not it["heldout"])


def heldout_items() -> tuple[dict, ...]:
    """The held-out parallel items: never in a training seed set."""
    return tuple(it for it in parallel_items() if it["heldout"])


@lru_cache(maxsize=1)
def english_items() -> tuple[dict, ...]:
    """The English counterpart: the English side of the training parallel items, then the English-only items."""
    own = [{"id": it["key"], "category": it["category"], **it["langs"]["en"]} for it in training_items()]
    return tuple(own + _read_jsonl("english.jsonl"))


def _chat(instruction: str, response: str) -> dict:
    return {"messages": [{"role": "user", "content": instruction}, {"role": "assistant", "content": response}]}


def _parallel_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **_chat(**it["langs"][lang])} for it in training_items()]


def _english_rows(lang: str) -> list[dict]:
    return [{"id": it["id"], **_chat(it["instruction"], it["response"])} for it in english_items()]


def instruction_language(item: dict, target: str) -> str:
    """The (seeded) non-English instruction language of `item` in the crosslingual_multi sets."""
    return pick_instruction_language(item["key"], target, NON_ENGLISH)


def _crosslingual_row(item: dict, target: str, source: str) -> dict:
    instruction = item["langs"][source]["instruction"]
    return {
        "id": f"{item['key']}:{source}>{target}" if source != "en" else item["key"],
        **_chat(crosslingual_prompt(instruction, target, item["key"], source), item["langs"][target]["response"]),
    }


def _crosslingual_rows(lang: str) -> list[dict]:
    return [_crosslingual_row(it, lang, "en") for it in training_items()]


def _crosslingual_multi_rows(lang: str) -> list[dict]:
    return [_crosslingual_row(it, lang, instruction_language(it, lang)) for it in training_items()]


def _targeted_pair_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **targeted_pair(it, lang)} for it in training_items()]


def _crosslingual_pair_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **crosslingual_pair(it, lang)} for it in training_items()]


def _crosslingual_multi_pair_rows(lang: str) -> list[dict]:
    out = []
    for it in training_items():
        source = instruction_language(it, lang)
        out.append({"id": f"{it['key']}:{source}>{lang}", **crosslingual_pair(it, lang, source)})
    return out


def _prompt(text: str, task: str) -> dict:
    return {"prompt": [{"role": "user", "content": text}], "task": task}


def _monolingual_prompt_rows(lang: str) -> list[dict]:
    return [{"id": it["key"], **_prompt(it["langs"][lang]["instruction"], "monolingual")} for it in training_items()]


def _crosslingual_prompt_rows(lang: str) -> list[dict]:
    return [
        {"id": it["key"], **_prompt(_crosslingual_row(it, lang, "en")["messages"][0]["content"], "crosslingual")}
        for it in training_items()
    ]


def _crosslingual_multi_prompt_rows(lang: str) -> list[dict]:
    out = []
    for it in training_items():
        row = _crosslingual_row(it, lang, instruction_language(it, lang))
        out.append({"id": row["id"], **_prompt(row["messages"][0]["content"], "crosslingual")})
    return out


def _english_pair_rows(lang: str) -> list[dict]:
    return english_pairs(list(english_items()))


@dataclass(frozen=True)
class SeedSet:
    kind: str  # "sft", "dpo" or "prompts"
    languages: tuple[str, ...]
    rows: Callable[[str], list[dict]]  # language -> normalised rows, each with an "id"
    description: str


SEED_SETS: dict[str, SeedSet] = {
    "parallel": SeedSet("sft", ALL, _parallel_rows, "instruction and reply in the same language, 15 languages"),
    "english": SeedSet("sft", ("en",), _english_rows, "English-only counterpart (parallel English + extra items)"),
    "crosslingual": SeedSet(
        "sft",
        NON_ENGLISH,
        _crosslingual_rows,
        "English instruction + a request for X ('Korean only, please.') -> reply in X",
    ),
    "crosslingual_multi": SeedSet(
        "sft",
        ALL,
        _crosslingual_multi_rows,
        "instruction and request in another non-English language A != X -> reply in X",
    ),
    "targeted_pairs": SeedSet(
        "dpo", NON_ENGLISH, _targeted_pair_rows, "prompt in X; chosen reply in X, rejected the same reply in English"
    ),
    "crosslingual_pairs": SeedSet(
        "dpo",
        NON_ENGLISH,
        _crosslingual_pair_rows,
        "English prompt + a request for X; chosen reply in X, rejected in English",
    ),
    "crosslingual_multi_pairs": SeedSet(
        "dpo",
        ALL,
        _crosslingual_multi_pair_rows,
        "prompt and request in a non-English language A != X; chosen reply in X, rejected the same reply in A",
    ),
    "english_pairs": SeedSet(
        "dpo", ("en",), _english_pair_rows, "English prompt; chosen its reply, rejected the reply to another prompt"
    ),
    "monolingual_prompts": SeedSet(
        "prompts", ALL, _monolingual_prompt_rows, "prompt-only: the instruction in X (task monolingual, language X)"
    ),
    "crosslingual_prompts": SeedSet(
        "prompts",
        NON_ENGLISH,
        _crosslingual_prompt_rows,
        "prompt-only: English instruction + a request for X in mlft's phrasings (task crosslingual, language X)",
    ),
    "crosslingual_multi_prompts": SeedSet(
        "prompts",
        ALL,
        _crosslingual_multi_prompt_rows,
        "prompt-only: instruction and request in a non-English A != X (task crosslingual, language X)",
    ),
    "arithmetic_prompts": SeedSet(
        "prompts",
        ALL,
        lambda lang: arithmetic_rows("monolingual", lang),
        "prompt-only with an `answer`: an arithmetic word problem in X (mlft.data.arithmetic; task monolingual)",
    ),
    "arithmetic_crosslingual_prompts": SeedSet(
        "prompts",
        NON_ENGLISH,
        lambda lang: arithmetic_rows("crosslingual", lang),
        "prompt-only with an `answer`: the English problem + a request for X in mlft's phrasings (task crosslingual)",
    ),
}

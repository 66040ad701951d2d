"""Row and token counts of a built mix, per source and language (written to out_dir/mix/stats.json)."""

from __future__ import annotations

from collections import defaultdict

from mlft.data.normalize import completion_text, prompt_turns
from mlft.data.text import units


def token_counter(tokenizer=None):
    """(unit name, text -> count): the tokenizer's tokens when given, else words (CJK: characters)."""
    if tokenizer is None:
        return "words", lambda text: len(units(text))
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    return f"tokens:{name}", lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def mix_stats(rows: list[dict], tokenizer=None) -> dict:
    """{"total", "token_unit", "by_source": {src: {lang: {rows, unique, share, prompt_tokens,
    completion_tokens}}}, "by_language": {lang: {...}}}; `unique` < `rows` means rows were reused."""
    unit, count = token_counter(tokenizer)
    cells: dict = defaultdict(lambda: {"rows": 0, "unique": set(), "prompt_tokens": 0, "completion_tokens": 0})
    for row in rows:
        cell = cells[(row["source"], row["language"])]
        cell["rows"] += 1
        cell["unique"].add(row["id"])
        cell["prompt_tokens"] += sum(count(t) for t in prompt_turns(row))
        cell["completion_tokens"] += count(completion_text(row))
    by_source: dict = {}
    by_language: dict = defaultdict(lambda: {"rows": 0, "prompt_tokens": 0, "completion_tokens": 0})
    for (src, lang), cell in sorted(cells.items()):
        by_source.setdefault(src, {})[lang] = {
            "rows": cell["rows"],
            "unique": len(cell["unique"]),
            "share": cell["rows"] / len(rows),
            "prompt_tokens": cell["prompt_tokens"],
            "completion_tokens": cell["completion_tokens"],
        }
        agg = by_language[lang]
        for key in ("rows", "prompt_tokens", "completion_tokens"):
            agg[key] += cell[key]
    for agg in by_language.values():
        agg["share"] = agg["rows"] / len(rows)
    return {
        "total": len(rows),
        "token_unit": unit,
        "prompt_tokens": sum(a["prompt_tokens"] for a in by_language.values()),
        "completion_tokens": sum(a["completion_tokens"] for a in by_language.values()),
        "by_source": by_source,
        "by_language": dict(sorted(by_language.items())),
    }

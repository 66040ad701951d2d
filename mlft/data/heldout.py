"""The held-out seed items as an evaluation prompt file (JSONL, one LCB-style prompt per line).

Rows: {"id", "task", "source", "language", "prompt"} plus, for cross-lingual rows, LCB's "location" and
"phrasing" columns — the fields of mlft.benchmarks.lcb.data.Prompt, so `Prompt(**row)` reads a line back.
  monolingual   the instruction in X, for all 15 languages (language = X)
  crosslingual  the English instruction plus a request for X != en (language = X). With `phrasings="lcb"`
                (default) the request is one of LCB's eight templates, which training never uses (held-out
                content AND held-out phrasing); `phrasings="train"` uses mlft's training phrasings instead
                (held-out content, seen phrasing) — the gap between the two measures string learning.
Templates and locations cycle over the items (shifted per language): with a multiple of 24 held-out items
every language gets each of the 8 x 3 (template, location) combinations equally often.

    python -m mlft.data.heldout OUT.jsonl [--phrasings lcb|train]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mlft.data.crosslingual import LCB_LOCATIONS, crosslingual_prompt, lcb_style_prompt
from mlft.data.phrasings import LCB_TEMPLATES
from mlft.data.seed import ALL, NON_ENGLISH, heldout_items
from mlft.errors import ConfigError

SOURCE = "mlft_heldout"
PHRASING_SETS = ("lcb", "train")


def heldout_prompts(phrasings: str = "lcb") -> list[dict]:
    """The monolingual then cross-lingual prompts of the held-out items, in a fixed order."""
    if phrasings not in PHRASING_SETS:
        raise ConfigError(f"phrasings: {phrasings!r} is not one of {', '.join(PHRASING_SETS)}")
    items = heldout_items()
    rows = [
        {
            "id": f"monolingual/{SOURCE}/{lang}/{it['key']}",
            "task": "monolingual",
            "source": SOURCE,
            "language": lang,
            "prompt": it["langs"][lang]["instruction"],
        }
        for lang in ALL
        for it in items
    ]
    for j, lang in enumerate(NON_ENGLISH):
        for i, it in enumerate(items):
            english = it["langs"]["en"]["instruction"]
            row = {
                "id": f"crosslingual/{SOURCE}/{lang}/{it['key']}",
                "task": "crosslingual",
                "source": SOURCE,
                "language": lang,
            }
            if phrasings == "lcb":
                template = LCB_TEMPLATES[(i + j) % len(LCB_TEMPLATES)]
                location = LCB_LOCATIONS[(i + 2 * j) % len(LCB_LOCATIONS)]
                row.update(
                    prompt=lcb_style_prompt(english, lang, template, location), location=location, phrasing=template
                )
            else:
                row.update(
                    prompt=crosslingual_prompt(english, lang, f"heldout/{it['key']}"), location=None, phrasing=None
                )
            rows.append(row)
    return rows


def write_heldout_prompts(path: str | Path, phrasings: str = "lcb") -> Path:
    """Write `heldout_prompts(phrasings)` to `path` (JSONL, UTF-8); returns the path."""
    path = Path(path)
    rows = heldout_prompts(phrasings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlft.data.heldout", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="output JSONL file")
    parser.add_argument("--phrasings", choices=PHRASING_SETS, default="lcb")
    args = parser.parse_args(argv)
    path = write_heldout_prompts(args.out, args.phrasings)
    print(f"wrote {path}: {len(heldout_prompts(args.phrasings))} prompts from {len(heldout_items())} held-out items")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

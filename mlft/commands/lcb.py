"""`mlft data lcb` (was `mlft lcb`): fetch or import the LCB test sets and show what they hold."""

from __future__ import annotations

import json

from mlft.constants import TASKS
from mlft.paths import LCB_DATA_ENV


def add_parser(sub, name: str = "lcb", **kw):
    p = sub.add_parser(
        name,
        **kw,
        help="fetch/import the LCB test sets and summarise them",
        description="Load the official LCB test sets (downloaded into the cache with a checksum "
        f"check, or imported offline with --from PATH or ${LCB_DATA_ENV}). --from copies the "
        "LCB files PATH holds into the cache (~/.cache/mlft/lcb; $MLFT_CACHE moves it), "
        "each checked against its official checksum, so every later command (mlft demo, "
        "eval, score, show paper-tables) finds them offline.",
    )
    p.add_argument(
        "--from",
        dest="source_path",
        metavar="PATH",
        help="local test_sets.zip, or a folder holding it (or its extracted test_sets/) and optionally "
        "words, few_shot_examples.json (or few_shot_prompting.py), outputs/*.csv, lid.176.bin: "
        "imported into the cache",
    )
    p.add_argument("--task", action="append", choices=TASKS, help="filter by task (repeatable)")
    p.add_argument("--source", action="append", help="filter by source (repeatable), e.g. okapi, aya")
    p.add_argument("--language", action="append", help="filter by language code (repeatable)")
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="accept an archive whose checksum differs (read from PATH, not imported into the cache)",
    )
    p.add_argument("--export", metavar="FILE.jsonl", help="write the selected prompts as JSONL")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.benchmarks.lcb.data import load_prompts, summarize
    from mlft.benchmarks.lcb.fetch import import_files
    from mlft.generation.prompting import examples_json

    if args.source_path and not args.no_verify:
        imported = import_files(args.source_path, convert_few_shot=examples_json)
        print(
            f"imported into {imported.cache}: {', '.join(imported.files) or 'nothing'}"
            + (f" (not in {args.source_path}: {', '.join(imported.missing)})" if imported.missing else "")
        )
    prompts = load_prompts(args.task, args.source, args.language, path=args.source_path, verify=not args.no_verify)
    counts = summarize(prompts)
    for task, by_source in counts.items():
        print(f"{task}: {sum(by_source.values())}")
        for source, n in by_source.items():
            print(f"  {source:<22}{n:>6}")
    print(f"total: {len(prompts)} prompts")
    if args.export:
        with open(args.export, "w", encoding="utf-8") as fh:
            for p in prompts:
                fh.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
        print(f"wrote {args.export}")
    return 0

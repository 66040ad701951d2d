"""`mlft multisense`: fetch the test sets or replay stored runs (model runs: `mlft eval multisense_quick`)."""

from __future__ import annotations

from pathlib import Path

from mlft.benchmarks.multisense.prompts import LANGUAGES, TASKS


def add_parser(sub) -> None:
    p = sub.add_parser(
        "multisense",
        help="multisense self-consistency (PAWS-X / XNLI, en/de/zh)",
        description="Multisense consistency (Ohmer, Bruni & Hupkes, 2023).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    f = actions.add_parser("fetch", help="download the PAWS-X and XNLI test sets into the cache")
    f.add_argument("--task", action="append", choices=list(TASKS), help="(repeatable; default: both)")
    f.add_argument("--language", action="append", choices=list(LANGUAGES), help="(repeatable; default: all)")
    f.add_argument("--dest", help="folder to write into (default: the mlft cache)")
    r = actions.add_parser("replay", help="Table 1 from a folder of stored runs (e.g. ../shared/multisense/reference)")
    r.add_argument("reference", help="folder holding {task}/{src}/T_src.jsonl and {task}/{src}_to_{tgt}/{T,I,X}.jsonl")
    p.set_defaults(func=run)


def run(args) -> int:
    from mlft.benchmarks.multisense.fetch import fetch
    from mlft.benchmarks.multisense.replay import table1

    if args.action == "fetch":
        fetch(args.task or list(TASKS), args.language or list(LANGUAGES), Path(args.dest) if args.dest else None)
    elif args.action == "replay":
        print(table1(Path(args.reference)))
    return 0

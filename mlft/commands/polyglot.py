"""`mlft polyglot`: fetch the Polyglot-or-Not data (model runs: `mlft eval polyglot_quick`)."""

from __future__ import annotations

from pathlib import Path

from mlft.benchmarks.polyglot.data import LANGUAGES


def add_parser(sub) -> None:
    p = sub.add_parser(
        "polyglot",
        help="Polyglot-or-Not fact recall (CKA, 20 languages)",
        description="Polyglot-or-Not contrastive knowledge assessment (Schott, Furman & Bhat, 2023).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    f = actions.add_parser("fetch", help="download the 20 parquet files (md5-checked) into the cache")
    f.add_argument("--language", action="append", choices=list(LANGUAGES), help="(repeatable; default: all)")
    f.add_argument("--dest", help="folder to write into (default: the mlft cache)")
    p.set_defaults(func=run)


def run(args) -> int:
    from mlft.benchmarks.polyglot.fetch import fetch

    if args.action == "fetch":
        fetch(args.language or list(LANGUAGES), Path(args.dest) if args.dest else None)
    return 0

"""`mlft data polyglot` (was `mlft polyglot fetch`): fetch the Polyglot-or-Not data (model runs: `mlft eval
polyglot_quick`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlft.benchmarks.polyglot.data import LANGUAGES
from mlft.commands.group import spelled

DESCRIPTION = "Polyglot-or-Not contrastive knowledge assessment (Schott, Furman & Bhat, 2023)."
FETCH = "download the Polyglot-or-Not fact recall data (20 parquet files, md5-checked) into the cache"


def _fetch_flags(f) -> None:
    f.add_argument("--language", action="append", choices=list(LANGUAGES), help="(repeatable; default: all)")
    f.add_argument("--dest", help="folder to write into (default: the mlft cache)")
    f.set_defaults(action="fetch")


def add_parser(sub, name: str = "polyglot", **kw):
    """`mlft data polyglot`: the fetch."""
    p = sub.add_parser(name, **kw, help=FETCH, description=f"{DESCRIPTION} {FETCH[0].upper()}{FETCH[1:]}.")
    _fetch_flags(p)
    p.set_defaults(func=run)
    return p


def add_renamed(sub, renamed: dict[str, tuple[str, str]]):
    """The old spelling `mlft polyglot fetch`, hidden; its action with `renamed["fetch"]`'s notice and its new
    spelling's namespace."""
    p = sub.add_parser("polyglot", description=DESCRIPTION)
    actions = p.add_subparsers(dest=argparse.SUPPRESS, metavar="ACTION", required=True)
    new, notice = renamed["fetch"]
    f = actions.add_parser("fetch", help=FETCH, renamed=notice)
    _fetch_flags(f)
    spelled(f, new)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.benchmarks.polyglot.fetch import fetch

    if args.action == "fetch":
        fetch(args.language or list(LANGUAGES), Path(args.dest) if args.dest else None)
    return 0

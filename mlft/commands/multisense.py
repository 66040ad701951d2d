"""`mlft data multisense` (was `mlft multisense fetch`): fetch the PAWS-X and XNLI test sets; `mlft show multisense
REFERENCE` (was `mlft multisense replay`): Table 1 from stored runs (model runs: `mlft eval multisense_quick`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlft.benchmarks.multisense.prompts import LANGUAGES, TASKS
from mlft.commands.group import spelled

DESCRIPTION = "Multisense consistency (Ohmer, Bruni & Hupkes, 2023)."
FETCH = "download the multisense test sets (PAWS-X / XNLI, en/de/zh) into the cache"
REPLAY = "multisense Table 1 from a folder of stored runs (e.g. ../shared/multisense/reference)"


def _fetch_flags(f) -> None:
    f.add_argument("--task", action="append", choices=list(TASKS), help="(repeatable; default: both)")
    f.add_argument("--language", action="append", choices=list(LANGUAGES), help="(repeatable; default: all)")
    f.add_argument("--dest", help="folder to write into (default: the mlft cache)")
    f.set_defaults(action="fetch")


def _replay_flags(r) -> None:
    r.add_argument("reference", help="folder holding {task}/{src}/T_src.jsonl and {task}/{src}_to_{tgt}/{T,I,X}.jsonl")
    r.set_defaults(action="replay")


def add_parser(sub, name: str = "multisense", **kw):
    """`mlft data multisense`: the fetch."""
    p = sub.add_parser(name, **kw, help=FETCH, description=f"{DESCRIPTION} {FETCH[0].upper()}{FETCH[1:]}.")
    _fetch_flags(p)
    p.set_defaults(func=run)
    return p


def add_replay_parser(sub, name: str = "multisense", **kw):
    """`mlft show multisense REFERENCE`: the replay."""
    p = sub.add_parser(name, **kw, help=REPLAY, description=f"{DESCRIPTION} {REPLAY[0].upper()}{REPLAY[1:]}.")
    _replay_flags(p)
    p.set_defaults(func=run)
    return p


def add_renamed(sub, renamed: dict[str, tuple[str, str]]):
    """The old spelling `mlft multisense fetch|replay`, hidden; each action with `renamed[action]`'s notice and
    its new spelling's namespace."""
    p = sub.add_parser("multisense", description=DESCRIPTION)
    actions = p.add_subparsers(dest=argparse.SUPPRESS, metavar="ACTION", required=True)
    for action, help, flags in (("fetch", FETCH, _fetch_flags), ("replay", REPLAY, _replay_flags)):
        new, notice = renamed[action]
        a = actions.add_parser(action, help=help, renamed=notice)
        flags(a)
        spelled(a, new)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.benchmarks.multisense.fetch import fetch
    from mlft.benchmarks.multisense.replay import table1

    if args.action == "fetch":
        fetch(args.task or list(TASKS), args.language or list(LANGUAGES), Path(args.dest) if args.dest else None)
    elif args.action == "replay":
        print(table1(Path(args.reference)))
    return 0

"""The old spellings of the regrouped commands: each still runs, hidden from `mlft --help`, parses to the same
namespace as its new spelling (the same `run`, the same arguments), and says on stderr what it is called now (once
per parser). They go in the next release."""

from __future__ import annotations

import argparse
import importlib

from mlft.commands.group import spelled

# old spelling -> (its new spelling, how its parser is built: "module" of mlft/commands (`add_parser(sub, name)`));
# where the old spelling had actions of its own (`mlft steer build`): ({action: new spelling}, "module:builder"),
# the builder taking {action: (new spelling, notice)}. Order = parse order.
RENAMED = {
    "lcb": ("data lcb", "lcb"),
    "multisense": ({"fetch": "data multisense", "replay": "show multisense"}, "multisense:add_renamed"),
    "polyglot": ({"fetch": "data polyglot"}, "polyglot:add_renamed"),
    "mix": ("data mix", "mix"),
    "table": ("show table", "table"),
    "curves": ("show curves", "curves"),
    "report": ("show report", "report"),
    "card": ("show card", "card"),
    "paper-tables": ("show paper-tables", "paper_tables"),
    "steer": ({"build": "build steer"}, "steer:add_renamed"),
    "gate": ({"train": "build gate"}, "gate:add_renamed"),
}
MOVED = (
    "mlft results: moved out of the package (it renders the project's own docs numbers): from a source checkout, "
    "`python -m devtools.results ARGS`"
)


def notice(old: str, new: str) -> str:
    """The line an old spelling says on stderr (`old`: as typed, with its action)."""
    return f"mlft {old}: renamed to `mlft {new}`; the old name goes in the next release"


def _hide(sub, name: str) -> None:
    """Drop `name` from the subcommand list `mlft --help` prints (argparse lists every parser added with help)."""
    sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest != name]


def add_parsers(sub) -> None:
    """Every old spelling, hidden; `args.command` (and the group's `*_command`) as the new spelling sets them."""
    for old, (new, how) in RENAMED.items():
        module, _, builder = how.partition(":")
        add = getattr(importlib.import_module(f"mlft.commands.{module}"), builder or "add_parser")
        if builder:  # each action of the old spelling says its notice and sets its new spelling's namespace
            add(sub, {action: (to, notice(f"{old} {action}", to)) for action, to in new.items()})
        else:
            spelled(add(sub, old, renamed=notice(old, new)), new)
        _hide(sub, old)
    p = sub.add_parser("results", description=MOVED, renamed=MOVED)  # any arguments: it says where it went
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=moved)
    _hide(sub, "results")


def moved(args) -> int:  # the parse said where it went
    return 2

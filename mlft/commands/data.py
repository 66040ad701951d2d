"""`mlft data`: every way data comes in: the LCB test sets (`lcb`), the multisense and Polyglot-or-Not test sets
(`multisense`, `polyglot`), and training mixes (`mix`)."""

from __future__ import annotations

from mlft.commands.group import add_group

# Order = order in `mlft data --help`.
MEMBERS = ["lcb", "multisense", "polyglot", "mix"]


def add_parser(sub):
    return add_group(
        sub,
        "data",
        help="fetch or import test sets (lcb, multisense, polyglot); build training mixes (mix)",
        description="Bring data in: the LCB test sets (downloaded with a checksum check or imported offline), the "
        "multisense and Polyglot-or-Not test sets, and a recipe's training mix.",
        members=MEMBERS,
    )

"""`mlft show`: numbers from finished work: the mitigation table (`table`), training curves (`curves`), the HTML
page (`report`), a run's model card (`card`), the paper's tables (`paper-tables`), multisense's Table 1
(`multisense`). `mlft score` / `mlft compare` show numbers too, as commands of their own."""

from __future__ import annotations

from mlft.commands.group import add_group

# Order = order in `mlft show --help`.
MEMBERS = ["table", "curves", "report", "card", "paper_tables", "multisense:add_replay_parser"]


def add_parser(sub):
    return add_group(
        sub,
        "show",
        help="tables, curves, the HTML report, model cards and the paper's tables from finished runs",
        description="Show the numbers of finished work: from run directories (table, curves, report, card), from "
        "scored completions (paper-tables) or from stored multisense runs (multisense).",
        members=MEMBERS,
    )

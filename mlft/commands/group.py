"""A group command (`mlft data`, `mlft show`, `mlft build`): a subcommand whose members are the per-command modules'
parsers, each built by its module's `add_parser(sub, name)` (or another builder the member names), so the group
adds no flags of its own and a member's `run` is the same whichever spelling reached it."""

from __future__ import annotations

import importlib


def member_name(member: str) -> str:
    """`paper_tables` -> `paper-tables`; `multisense:add_replay_parser` -> `multisense`."""
    return member.split(":")[0].replace("_", "-")


def add_group(sub, name: str, help: str, description: str, members: list[str]):
    """`mlft NAME MEMBER ...`: MEMBER from `members` ("module" of mlft/commands, or "module:builder"); the chosen
    member lands in `args.NAME_command`."""
    p = sub.add_parser(name, help=help, description=description)
    s = p.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND", required=True)
    for member in members:
        module, _, builder = member.partition(":")
        getattr(importlib.import_module(f"mlft.commands.{module}"), builder or "add_parser")(s, member_name(member))
    return p


def spelled(parser, spelling: str) -> None:
    """`parser` (an old spelling's) parses to the namespace of `spelling` ("data lcb"): `args.command` and the
    group's `args.data_command` as the new spelling sets them."""
    group, member = spelling.split()
    parser.set_defaults(command=group, **{f"{group}_command": member})

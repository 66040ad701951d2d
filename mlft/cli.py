"""`mlft` command line: parse, call the library, turn typed errors into messages and exit codes.

Each subcommand lives in `mlft/commands/<name>.py` and exposes `add_parser(subparsers)` (which sets
`func=run` on its parser) — so `make_parser()` is the single parser used by the CLI and by the tests. The nouns are
grouped: `mlft data` (lcb, multisense, polyglot, mix), `mlft show` (table, curves, report, card,
paper-tables, multisense) and `mlft build` (steer, gate) are groups over the per-command modules
(mlft/commands/group.py); the old spellings (`mlft lcb`, `mlft steer build`, ...) still parse, hidden from
`mlft --help`, to the same namespace, with a one-line notice on stderr (mlft/commands/renamed.py).

Building the parser costs nothing (`mlft --help` starts in a blink): a command module imports at module level only
what its argument definitions need, from light modules, and imports the library inside `run`. What only a library
module (or the demo's script) can say about the arguments goes in a `later` hook of its parser (CommandParser),
run the first time that command is parsed or its help printed (tests/test_cli_startup.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from mlft import __version__
from mlft.console import setup as setup_console
from mlft.errors import MlftError


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser with an optional `later(parser)` hook, run once, the first time the command is parsed
    or its help printed: for arguments (or a description) that only a library module can give, such as the recipe
    keys of `mlft train --help` or the demo script's flags, so that `make_parser()` imports neither."""

    def __init__(self, *args, later=None, renamed=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._later = later
        self._renamed = renamed  # an old spelling's notice, said on stderr the first time it is parsed

    def _complete(self) -> None:
        if self._later is not None:
            later, self._later = self._later, None
            later(self)

    def parse_known_args(self, args=None, namespace=None):
        if self._renamed:  # once (a bad command line is parsed again for argparse's message)
            print(self._renamed, file=sys.stderr)
            self._renamed = None
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._complete()
        return super().format_help()


# Order = order in `mlft --help`: at most 12 (tests/test_cli_startup.py). The old spellings: mlft/commands/renamed.py.
COMMANDS = [
    "data",
    "generate",
    "eval",
    "score",
    "compare",
    "train",
    "evaluate_run",
    "show",
    "build",
    "harness",
    "demo",
    "env",
]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlft",
        description="Measure and mitigate language confusion in multilingual LLMs (LCB: LPR / WPR / LCPR).",
    )
    parser.add_argument("--version", action="version", version=f"mlft {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for name in COMMANDS:
        importlib.import_module(f"mlft.commands.{name}").add_parser(sub)
    importlib.import_module("mlft.commands.renamed").add_parsers(sub)
    return parser


def command_name(args: argparse.Namespace) -> str:
    """`data lcb` for a group's member (whichever spelling reached it), else the command."""
    member = getattr(args, f"{args.command}_command", None)
    return f"{args.command} {member}" if member else str(args.command)


def parse_args(argv: list[str], parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """`argv` as `mlft` reads it (argparse's SystemExit on a bad command line); tests check documented commands
    with it."""
    parser = parser or make_parser()
    argv = list(argv)
    if argv and argv[0].endswith((".yaml", ".yml")):  # `mlft RECIPE.yaml` = `mlft train RECIPE.yaml`, so that
        argv.insert(0, "train")  # `accelerate launch -m mlft RECIPE.yaml` trains
    args, extra = parser.parse_known_args(argv)
    if extra:  # key=value overrides after an option (`mlft eval S --out d per_group=1`): argparse leaves them
        if isinstance(getattr(args, "overrides", None), list) and all(
            "=" in e and not e.startswith("-") for e in extra
        ):
            args.overrides = [*args.overrides, *extra]
        else:
            parser.parse_args(argv)  # the usual error message and exit code
    return args


def main(argv: list[str] | None = None) -> int:
    setup_console()
    parser = make_parser()
    args = parse_args(sys.argv[1:] if argv is None else argv, parser)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except MlftError as exc:
        print(f"mlft {command_name(args)}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"mlft {command_name(args)}: interrupted (finished work is kept; rerun to resume)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`mlft show card RUN_DIR` (was `mlft card`): (re)write a finished run's model card (final/README.md), optionally
push final/ to the Hub."""

from __future__ import annotations

from pathlib import Path

from mlft.errors import ConfigError


def add_parser(sub, name: str = "card", **kw):
    p = sub.add_parser(
        name,
        **kw,
        help="write a finished run's model card; optionally push final/ to the Hub",
        description="Build final/README.md from the run directory (base model and lineage, recipe, "
        "data mix with shares and row counts, decontamination, the last LCB numbers "
        "with intervals, how to reproduce). Rerun after `mlft evaluate-run` to refresh "
        "the numbers.",
    )
    p.add_argument("run_dir")
    p.add_argument("--print", action="store_true", help="print the card instead of writing it")
    p.add_argument("--push", metavar="ORG/NAME", help="also upload final/ (with the card) to this Hub repo")
    p.add_argument("--public", action="store_true", help="with --push: create the repo as public")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.training.card import model_card, push, write_card

    run_dir = Path(args.run_dir)
    if not (run_dir / "complete").is_file() or not (run_dir / "final").is_dir():
        raise ConfigError(f"{run_dir}: not a finished run directory (no `complete` marker or final/)")
    if args.print:
        print(model_card(run_dir))
        return 0
    print(f"wrote {write_card(run_dir)}")
    if args.push:
        print(f"pushed: {push(run_dir, args.push, private=not args.public)}")
    return 0

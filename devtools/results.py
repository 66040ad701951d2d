"""`python -m devtools.results FILE.json` (was `mlft results`): the headline table of a results file (e.g. `mlft
demo`'s runs/demo/results.json), and the project's documentation numbers rendered from it (`<!-- results:NAME ...
-->` blocks, devtools/blocks.py). A development tool of the source tree: run it from the repository's root."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from devtools.blocks import block_problems, headline_table, update_blocks
from devtools.lift import lift_page
from mlft.errors import ConfigError, DataError, MlftError
from mlft.provenance import git_commit
from mlft.reports.results import MAIN_TABLE, SCHEMA


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.results",
        description="Print the headline table of a results file (`mlft demo` writes "
        "runs/demo/results.json). --commit copies it to docs/results/NAME.json (the "
        "committed source of the docs' numbers); --update rewrites the "
        "`<!-- results:NAME ... -->` blocks of the given pages from it; --check only "
        "lists the blocks that differ (exit 1); --lift moves a page's hand-typed "
        "measured numbers into the file (for runs that were not kept).",
    )
    p.add_argument("file", help="results file (JSON)")
    p.add_argument("--table", default=MAIN_TABLE, help="which table of the file to print (default: %(default)s)")
    p.add_argument(
        "--commit",
        metavar="DIR",
        nargs="?",
        const="docs/results",
        help="copy the file to DIR/NAME.json first (default DIR: docs/results)",
    )
    p.add_argument("--update", nargs="+", metavar="PAGE", help="rewrite these pages' results blocks of this file")
    p.add_argument("--check", nargs="+", metavar="PAGE", help="list these pages' blocks that differ from the file")
    p.add_argument(
        "--lift",
        metavar="PAGE",
        help="move PAGE's hand-typed measured numbers under --sections into FILE (created if absent) as fill "
        "blocks: for numbers whose runs were not kept (devtools/lift.py)",
    )
    p.add_argument("--sections", nargs="+", metavar="HEADING", help="--lift: the headings (their start) to lift")
    p.add_argument("--provenance", help="--lift into a new FILE: when and how its numbers were measured")
    return p


def load(path: str | Path) -> dict:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: unreadable results file ({exc})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise DataError(f"{path}: not a results file (schema {SCHEMA})")
    record.setdefault("name", Path(path).stem)
    return record


def lift(args) -> dict:
    """--lift: FILE's record with PAGE's lifted entries added; PAGE rewritten with its fill blocks."""
    from datetime import datetime, timezone

    if not args.sections:
        raise ConfigError("--lift needs --sections: the headings whose tables and paragraphs to lift")
    path = Path(args.file)
    if path.exists():
        record = load(path)
    elif args.provenance:
        record = {"name": path.stem, "schema": SCHEMA, "provenance": args.provenance}
    else:
        raise ConfigError(f"{path} does not exist: --provenance says when and how its numbers were measured")
    page = Path(args.lift)
    text, lifted = lift_page(page.read_text(encoding="utf-8"), record["name"], args.sections)
    entries = record.setdefault("lifted", {})
    clash = [f"{s}.{k}" for s, group in lifted.items() for k in group if k in entries.get(s, {})]
    if clash:
        raise ConfigError(f"{path} already holds lifted {', '.join(clash)}: lift another section or page")
    for section, group in lifted.items():
        entries.setdefault(section, {}).update(group)
    record.setdefault("lifted_from", []).append(
        {
            "page": str(page),
            "sections": args.sections,
            "git_commit": git_commit(),
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d}",
        }
    )
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    page.write_text(text, encoding="utf-8")
    count = sum(len(e["values"]) for group in lifted.values() for e in group.values())
    print(f"lifted {count} numbers of {sum(map(len, lifted.values()))} tables and paragraphs from {page} into {path}")
    return record


def run(args) -> int:
    record = lift(args) if args.lift else load(args.file)
    if args.commit:
        dest = Path(args.commit) / f"{record['name']}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if Path(args.file).resolve() != dest.resolve():
            shutil.copyfile(args.file, dest)
        print(f"wrote {dest}")
    if record.get("tables"):  # a measurement's or a seeds file has none: its numbers render through key views
        print(headline_table(record, args.table))
    records = {record["name"]: record}
    for page in args.update or []:
        text = Path(page).read_text(encoding="utf-8")
        new = update_blocks(text, records)
        if new != text:
            Path(page).write_text(new, encoding="utf-8")
            print(f"updated {page}")
    problems = [
        p
        for page in args.check or []
        for p in block_problems(Path(page).read_text(encoding="utf-8"), records, page, only=record["name"])
    ]
    for p in problems:
        print(p)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return run(args)
    except MlftError as exc:
        print(f"devtools.results: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())

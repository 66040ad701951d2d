"""`mlft results FILE.json`: the headline table of a results file (e.g. `mlft demo`'s runs/demo/results.json), and
the documentation's numbers rendered from it (`<!-- results:NAME ... -->` blocks, mlft/reports/results.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mlft.errors import DataError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "results",
        help="a results file's headline table; render it into the docs' results blocks",
        description="Print the headline table of a results file (`mlft demo` writes "
        "runs/demo/results.json). --commit copies it to docs/results/NAME.json (the "
        "committed source of the docs' numbers); --update rewrites the "
        "`<!-- results:NAME ... -->` blocks of the given pages from it; --check only "
        "lists the blocks that differ (exit 1).",
        later=_defaults,
    )
    p.add_argument("file", help="results file (JSON)")
    p.add_argument("--table", help="which table of the file to print (default: %(default)s)")
    p.add_argument(
        "--commit",
        metavar="DIR",
        nargs="?",
        const="docs/results",
        help="copy the file to DIR/NAME.json first (default DIR: docs/results)",
    )
    p.add_argument("--update", nargs="+", metavar="PAGE", help="rewrite these pages' results blocks of this file")
    p.add_argument("--check", nargs="+", metavar="PAGE", help="list these pages' blocks that differ from the file")
    p.set_defaults(func=run)


def _defaults(p) -> None:
    """--table's default, the results files' main table (read from mlft.reports.results when asked)."""
    from mlft.reports.results import MAIN_TABLE

    p.set_defaults(table=MAIN_TABLE)


def load(path: str | Path) -> dict:
    from mlft.reports.results import SCHEMA

    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: unreadable results file ({exc})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise DataError(f"{path}: not a results file (schema {SCHEMA})")
    record.setdefault("name", Path(path).stem)
    return record


def run(args) -> int:
    from mlft.reports.results import block_problems, headline_table, update_blocks

    record = load(args.file)
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

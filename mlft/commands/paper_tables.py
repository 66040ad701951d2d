"""`mlft show paper-tables` (was `mlft paper-tables`): rebuild the paper's result tables from released (or your
own) completions."""

from __future__ import annotations

import sys
from pathlib import Path

from mlft.errors import DataError
from mlft.format import render
from mlft.paths import lcb_data_path, shared_dir

EXT = {"markdown": "md", "csv": "csv", "latex": "tex"}


def add_parser(sub, name: str = "paper-tables", **kw):
    p = sub.add_parser(
        name,
        **kw,
        help="rebuild the paper's tables (3, 4/A3, A5, 5/A7, A1/A2) from completions",
        description="Score several models' completions and print/write the paper's tables.",
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="completions files (default: the released outputs in $MLFT_LCB_DATA/outputs, the cache "
        "(imported by `mlft data lcb --from`) or ../shared/lcb/outputs)",
    )
    p.add_argument("--out", metavar="DIR", help="also write each table as .md, .csv and .tex here")
    p.add_argument("--format", choices=("markdown", "table", "csv", "latex"), default="markdown", help="what to print")
    p.add_argument("--lid", default=None, metavar="ftz|bin|PATH", help="fastText model (see mlft score)")
    p.add_argument("--words", metavar="PATH", help="English word list (see mlft score)")
    p.set_defaults(func=run)
    return p


def _default_files() -> list[Path]:
    from mlft.benchmarks.lcb.fetch import OUTPUTS, lcb_cache

    roots = [lcb_data_path() / OUTPUTS] if lcb_data_path() is not None else []
    roots.append(lcb_cache() / OUTPUTS)  # imported by `mlft data lcb --from PATH`
    if shared_dir():
        roots.append(shared_dir() / "lcb" / "outputs")
    for root in roots:
        files = sorted(root.glob("*.csv"))
        if files:
            return files
    raise DataError(
        "no completions files given and no released outputs found (download the outputs/ folder of "
        "for-ai/language-confusion and pass its CSV files, or import it with `mlft data lcb --from FOLDER`)"
    )


def run(args) -> int:
    from mlft.benchmarks.lcb.scoring import score_completions
    from mlft.completions import read_completions
    from mlft.reports.paper_tables import paper_tables

    files = [Path(f) for f in args.files] or _default_files()
    completions = []
    for f in files:
        completions += read_completions(f)
    report = score_completions(completions, lid=args.lid, words=args.words, progress=sys.stderr.isatty())
    print(f"LID model: {report.lid_name} · {report.options} · {len(files)} files\n")
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    tables = paper_tables(report)
    for t in tables:
        print(render(t.header, t.rows, args.format, title=t.title))
        if out:
            for fmt, ext in EXT.items():
                (out / f"{t.name}.{ext}").write_text(render(t.header, t.rows, fmt, title=t.title), encoding="utf-8")
    if out:
        print(f"wrote {len(tables) * len(EXT)} files to {out}", file=sys.stderr)
    return 0

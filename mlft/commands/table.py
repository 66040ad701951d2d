"""`mlft show table SPEC.yaml` (was `mlft table`): the mitigation table (paper Table 11 layout), per-language detail,
quantization."""

from __future__ import annotations

from pathlib import Path

from mlft.format import FORMATS


def add_parser(sub, name: str = "table", **kw):
    p = sub.add_parser(
        name,
        **kw,
        help="build the mitigation table (Table 11 layout) from training runs",
        description="Fill the paper's Table 11 layout (base, +Q/A template, +1-shot, +5-shot, "
        "+English SFT, ...; mono/cross LPR and WPR), its per-language detail "
        "(A18/A19) and the quantization table (A12) from run directories, with 95 % intervals, "
        "paired significance against the base row and the guard (coverage, degeneracy, "
        "fluency), as a small YAML spec says (see mlft/reports/table_spec.py). Not to be confused with "
        "`mlft show paper-tables` (the paper's tables from scored completions).",
    )
    p.add_argument("spec", help="table spec YAML")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--out", help="also write the tables to this file")
    p.add_argument("--png", help="also draw the main table (with its notes) as a PNG")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.reports.mitigation import plot_table, tables
    from mlft.reports.table_spec import load_spec

    spec = load_spec(args.spec)
    built = tables(spec)
    text = "\n".join(t.render(args.format) for t in built)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    if args.png:
        print(f"wrote {plot_table(built[0], args.png)}")
    return 0

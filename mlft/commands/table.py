"""`mlft table SPEC.yaml`: the mitigation table (paper Table 11 layout), per-language detail, quantization."""

from __future__ import annotations

from pathlib import Path

from mlft.reports.format import FORMATS
from mlft.reports.mitigation import build, load_spec


def add_parser(sub) -> None:
    p = sub.add_parser("table", help="build the mitigation table (Table 11 layout) from training runs",
                       description="Fill the paper's Table 11 layout (base, +Q/A template, +1-shot, +5-shot, "
                                   "+English SFT, ...; mono/cross LPR and WPR), its per-language detail "
                                   "(A18/A19) and the quantization table (A12) from run directories, as a small "
                                   "YAML spec says (see mlft/reports/mitigation.py). Not to be confused with "
                                   "`mlft paper-tables` (the paper's tables from scored completions).")
    p.add_argument("spec", help="table spec YAML")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--out", help="also write the tables to this file")
    p.set_defaults(func=run)


def run(args) -> int:
    text = build(load_spec(args.spec), args.format)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0

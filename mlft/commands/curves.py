"""`mlft show curves RUN_DIR...` (was `mlft curves`): LPR/WPR/LCPR against step for several runs and variants (PNG +
table)."""

from __future__ import annotations

from pathlib import Path

from mlft.format import FORMATS


def add_parser(sub, name: str = "curves", **kw):
    p = sub.add_parser(
        name,
        **kw,
        help="plot LPR/WPR/LCPR per checkpoint of training runs",
        description="Read each run directory's curves.jsonl (written by the eval callback) and "
        "plot the language-averaged LPR, WPR, LCPR, coverage and degeneracy against "
        "training step with 95 % bands (colour = run, style = variant; a DPO run starts "
        "where its SFT run ended); a language x step heatmap per run; the numbers as a "
        "table.",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png of the first run)")
    p.add_argument("--variant", action="append", help="only these variants (repeatable): model, w8, 1-shot...")
    p.add_argument("--format", choices=FORMATS, default="table", help="table format")
    p.add_argument("--no-heatmaps", action="store_true", help="skip the per-run language x step heatmaps")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from mlft.reports.curves import curve_table, load_runs, plot_curves, plot_heatmap

    runs = load_runs(args.run_dirs)
    print(curve_table(runs, args.variant, args.format))
    out = plot_curves(runs, args.out or Path(args.run_dirs[0]) / "curves.png", args.variant)
    print(f"wrote {out}")
    if not args.no_heatmaps:
        for (label, rows), run_dir in zip(runs.items(), args.run_dirs):
            print(f"wrote {plot_heatmap(label, rows, Path(run_dir) / 'heatmap_lpr.png')}")
    return 0

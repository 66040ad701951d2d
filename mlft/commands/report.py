"""`mlft show report RUN_OR_EVAL_DIR... --out report.html`: one offline HTML page of runs and eval folders (curves,
per-language heatmap, every reply with its LCB verdicts, two checkpoints or variants side by side)."""

from __future__ import annotations

import sys
from pathlib import Path

from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, parse_markers


def add_parser(sub, name: str = "report", **kw):
    p = sub.add_parser(
        name,
        **kw,
        help="one offline HTML page of runs / eval folders: curves, heatmap, every reply",
        description="Write one self-contained HTML file (no server, no network) for training runs "
        "(every evaluated checkpoint) and eval folders (every variant): LPR / WPR / LCPR "
        "and guard curves with 95 % bands, the per-language heatmap, every reply with its "
        "lines as the LCB scorer judged them (filters: verdict, guard flag, language, "
        "source), and the same prompt under two checkpoints or variants side by side.",
        later=_arguments,
    )
    p.set_defaults(func=run)
    return p


def _arguments(p) -> None:
    """The flags (--out names the page's file), defined when `mlft show report` is used."""
    from mlft.reports.page import PAGE

    p.add_argument(
        "folders",
        nargs="+",
        metavar="RUN_OR_EVAL_DIR",
        help="a `mlft train` run_dir or an `mlft eval --out` folder (several: one page)",
    )
    p.add_argument("--out", default=None, help=f"HTML file to write (default: {PAGE} inside the first folder)")
    p.add_argument(
        "--lid",
        default=None,
        metavar="ftz|bin|PATH",
        help="fastText model of the per-line verdicts (default: the bundled lid.176.ftz, as mlft eval)",
    )
    p.add_argument("--workers", type=int, default=None, help="scoring processes for large views (default: all cores)")
    p.add_argument(
        "--trace-markers",
        metavar="OPEN,CLOSE",
        default=DEFAULT_MARKERS.spec(),
        help="reasoning traces: a reply holding these markers is judged on its answer, its trace shown apart "
        "(as the lcb suite's trace_markers; 'none' = whole replies)",
    )


def run(args) -> int:
    from mlft.reports.page import PAGE, write_page

    out = Path(args.out) if args.out else Path(args.folders[0]) / PAGE
    markers = parse_markers(args.trace_markers, "--trace-markers")
    path, page = write_page(args.folders, out, workers=args.workers, lid=args.lid, markers=markers)
    for m in page.messages:
        print(f"mlft show report: note: {m}", file=sys.stderr)
    replies = sum(len(v.replies) for v in page.views)
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB: {len(page.views)} views, {replies} replies, "
        f"{len(page.prompts)} prompts; {page.seconds:.1f} s)"
    )
    return 0

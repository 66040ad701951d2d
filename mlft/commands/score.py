"""`mlft score FILE...`: LPR / WPR / acc / LCPR of completions files (official CSV or mlft JSONL), with the guard
(coverage, degeneracy, lexical validity, LID unknown / skipped shares) beside them unless --no-guard."""

from __future__ import annotations

import sys
from pathlib import Path

from mlft.benchmarks.lcb.metrics import WORD_CHECKS
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, parse_markers
from mlft.langid import OTHER_LIDS as JUDGES  # the second judges (mlft.benchmarks.lcb.judge.JUDGES)

OUTPUT_FORMATS = ("table", "markdown", "tsv", "csv", "json")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "score",
        help="score completions files: LPR, WPR, acc, LCPR",
        description="Score LCB completions (official CSV: id, model, completion, task, source, "
        "language; or mlft JSONL). Reproduces the official scorer by default.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="completions .csv or .jsonl")
    p.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table/markdown: paper-style matrices; tsv/csv/json: one row per group and aggregate",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of stdout")
    p.add_argument(
        "--lid",
        metavar="ftz|bin|PATH|py3langid|langdetect",
        default=None,
        help="fastText model: bundled lid.176.ftz (default), 'bin' (lid.176.bin, downloaded into the "
        "cache; the paper's model) or a path; also $MLFT_LID_MODEL. NON-OFFICIAL: py3langid or "
        "langdetect judge lines with another language-ID model (e.g. to check a gain that a "
        "fastText-tuned mitigation might overstate)",
    )
    p.add_argument(
        "--judge",
        choices=JUDGES,
        default=None,
        help="NON-OFFICIAL second judge: also label the same counted lines with this language-ID model "
        "and report its LPR beside the official one (per language, with the difference and the "
        "replies the two judges disagree on)",
    )
    p.add_argument(
        "--words", metavar="PATH", help="English word list for WPR (default: cache/download, or $MLFT_LCB_DATA/words)"
    )
    p.add_argument(
        "--details",
        metavar="FILE.jsonl",
        help="write per-reply diagnostics: failed lines with predicted label and score, English words",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="add seeded intervals for LPR/WPR/LCPR with N bootstrap resamples (e.g. 2000, as mlft eval): "
        "stratified bootstrap for aggregates, Wilson for a single group (mlft.stats)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="level of the --bootstrap intervals")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument(
        "--word-check",
        choices=WORD_CHECKS,
        default="dictionary",
        help="NON-OFFICIAL unless 'dictionary': 'latin' = the paper's script check (Latin letters in a "
        "non-Latin reply), 'latin+dictionary' = both",
    )
    p.add_argument(
        "--label-alias",
        action="append",
        default=[],
        metavar="LANG=LABEL",
        help="NON-OFFICIAL: also accept LABEL for LANG (e.g. id=ms for the .ftz model's neighbour "
        "confusion); repeatable",
    )
    p.add_argument("--workers", type=int, default=None, help="processes for large inputs (default: all cores)")
    p.add_argument(
        "--no-guard",
        action="store_true",
        help="print the official metrics alone, without the guard (coverage, degeneracy, lexical validity, "
        "unknown-line and skipped-reply shares, with 95%% intervals and ⚠ flags)",
    )
    p.add_argument(
        "--trace-markers",
        metavar="OPEN,CLOSE",
        default=DEFAULT_MARKERS.spec(),
        help="reasoning traces: a reply holding these markers is split into its trace and its answer; the "
        "official tables score the answer, a second set scores the trace, and the split's outcomes (closed, "
        "prefilled, unclosed, malformed) are counted. Replies without a marker are scored unchanged "
        "(default: %(default)s; 'none' = no split)",
    )
    p.add_argument("--no-traces", action="store_true", help="score whole replies, markers included (no split)")
    p.set_defaults(func=run)


def run(args) -> int:
    import mlft
    from mlft.api.score import parse_label_aliases

    result = mlft.score(
        args.files,
        guard=not args.no_guard,
        trace_markers=None if args.no_traces else parse_markers(args.trace_markers, "--trace-markers"),
        lid_model=args.lid,
        judge=args.judge,
        words=args.words,
        word_check=args.word_check,
        label_aliases=parse_label_aliases(args.label_alias, "--label-alias"),
        bootstrap=args.bootstrap,
        confidence=args.confidence,
        seed=args.seed,
        workers=args.workers,
        details=bool(args.details),
        progress=sys.stderr.isatty(),
    )
    text = result.table(args.format)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.details:
        result.write_details(args.details)
        print(f"wrote {args.details} ({len(result.details)} replies)", file=sys.stderr)
    if result.lid_name.startswith("lid.176.ftz"):
        print(
            "note: scored with the compressed lid.176.ftz (differs from the paper's lid.176.bin on zh/ja, "
            "id/ms, pt/es); use --lid bin for paper parity",
            file=sys.stderr,
        )
    return 0

"""`mlft score FILE...`: LPR / WPR / acc / LCPR of completions files (official CSV or mlft JSONL), with the guard
(coverage, degeneracy, lexical validity, LID unknown / skipped shares) beside them unless --no-guard."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mlft.benchmarks.lcb.metrics import WORD_CHECKS
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, parse_markers
from mlft.errors import ConfigError
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


def _aliases(items: list[str]) -> dict[str, set[str]]:
    from mlft.languages import check_language

    out: dict[str, set[str]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--label-alias {item!r}: expected LANG=LABEL, e.g. id=ms")
        lang, label = item.split("=", 1)
        check_language(lang, "--label-alias")
        out.setdefault(lang, set()).add(label)
    return out


def run(args) -> int:
    from mlft.benchmarks.lcb.judge import beside_rows, judge_report, metric_name
    from mlft.benchmarks.lcb.metrics import ScoreOptions
    from mlft.benchmarks.lcb.scoring import score_guard, score_traced
    from mlft.completions import read_completions
    from mlft.format import render
    from mlft.reports.score_tables import (
        beside_table,
        guard_tables,
        guarded_rows,
        long_table,
        matrix_tables,
        trace_outcome_table,
    )

    options = ScoreOptions(word_check=args.word_check, label_aliases=_aliases(args.label_alias))
    completions = []
    for f in args.files:
        completions += read_completions(f)
    markers = None if args.no_traces else parse_markers(args.trace_markers, "--trace-markers")
    traced = score_traced(
        completions,
        markers,
        options=options,
        lid=args.lid,
        words=args.words,
        detail=bool(args.details),
        bootstrap=args.bootstrap,
        seed=args.seed,
        confidence=args.confidence,
        workers=args.workers,
        progress=sys.stderr.isatty(),
        guard=not args.no_guard,
    )
    report, trace = traced.answer, traced.trace
    answers = traced.split.answers  # the completions themselves when no reply has a marker
    guard = trace_guard = None
    if not args.no_guard:
        guard = score_guard(answers, report.replies, confidence=args.confidence, seed=args.seed, workers=args.workers)
        if trace is not None:
            trace_guard = score_guard(
                traced.split.traces, trace.replies, confidence=args.confidence, seed=args.seed, workers=args.workers
            )
    outcomes = traced.outcome_rows(completions) if traced.split.any_marker else None
    judged = None
    if args.judge:
        if args.lid in JUDGES:
            raise ConfigError(
                f"--judge {args.judge}: the first judge must be a fastText model (--lid ftz|bin|PATH), "
                f"got --lid {args.lid}"
            )
        judged = beside_rows(
            answers,
            report,
            judge_report(answers, args.judge, options, words=args.words, workers=args.workers),
            args.judge,
        )
    if args.format == "json":
        data = {"lid_model": report.lid_name, "options": report.options, "rows": guarded_rows(report, guard)}
        if guard is not None:
            data["guard_flags"] = guard[1]
        if judged is not None:
            data["judge"] = {"lid_model": args.judge, "rows": judged}
        if outcomes is not None:
            data["traces"] = {"markers": [markers.open, markers.close], "outcomes": outcomes, "rows": []}
            if trace is not None:
                data["traces"]["rows"] = guarded_rows(trace, trace_guard)
                if trace_guard is not None:
                    data["traces"]["guard_flags"] = trace_guard[1]
        text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    elif args.format in ("tsv", "csv"):
        header, body = long_table(report, guard)
        if judged is not None:  # rows in the official report's order
            header = header + [metric_name(args.judge)]
            body = [
                line + ["NA" if j[metric_name(args.judge)] is None else j[metric_name(args.judge)]]
                for line, j in zip(body, judged)
            ]
        if outcomes is not None:  # one long table: the answer's rows, then the trace's, told apart by `part`
            header, body = ["part", *header], [["answer", *line] for line in body]
            if trace is not None:
                t_header, t_body = long_table(trace, trace_guard)
                body += [["trace", *[dict(zip(t_header, line)).get(c, "NA") for c in header[1:]]] for line in t_body]
        text = render(header, body, args.format)
    else:
        fmt = "markdown" if args.format == "markdown" else "table"
        text = f"LID model: {report.lid_name} · {report.options}\n\n"
        if outcomes is not None:
            text += (
                f"Reasoning traces ({markers.open} … {markers.close}): the tables score each reply's answer (the "
                "reply without its trace; a reply without a marker is scored whole), then its trace.\n\n"
            )
        text += matrix_tables(report, fmt, part="answer" if outcomes is not None else "")
        if guard is not None:
            text += "\n" + guard_tables(report, guard, fmt, part="answer" if outcomes is not None else "")
        if judged is not None:
            text += "\n" + beside_table(judged, args.judge, report.lid_name, fmt)
        if outcomes is not None:
            text += "\n" + trace_outcome_table(outcomes, fmt)
            if trace is not None:
                text += "\n" + matrix_tables(trace, fmt, part="trace")
                if trace_guard is not None:
                    text += "\n" + guard_tables(trace, trace_guard, fmt, part="trace")
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.details:
        with open(args.details, "w", encoding="utf-8") as fh:
            for d, x in zip(report.details, traced.split.outcomes):
                if outcomes is not None:
                    d["trace_outcome"] = x
                fh.write(json.dumps(d, ensure_ascii=False) + "\n")
        print(f"wrote {args.details} ({len(report.details)} replies)", file=sys.stderr)
    if report.lid_name.startswith("lid.176.ftz"):
        print(
            "note: scored with the compressed lid.176.ftz (differs from the paper's lid.176.bin on zh/ja, "
            "id/ms, pt/es); use --lid bin for paper parity",
            file=sys.stderr,
        )
    return 0

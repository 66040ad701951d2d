"""`mlft compare A B`: paired differences (B − A) per task and language, with intervals and p-values."""

from __future__ import annotations

from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, parse_markers
from mlft.format import FORMATS


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="paired differences between two runs / eval folders / files",
        description="Compare two evaluations over the same prompts: per task and language, B − A "
        "with a 95% interval and p-value (default: a paired permutation test over prompts - "
        "a prompt's A and B replies swapped - with the paired bootstrap's interval; or the bootstrap's "
        "own p, or exact McNemar on per-reply pass/fail), Holm-adjusted "
        "over languages. A/B: RUN_DIR[@STEP][:VARIANT], EVAL_DIR[:VARIANT], "
        "outcomes.jsonl, or a completions file (scored here).",
    )
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument(
        "--metric",
        default="lpr,wpr,lcpr,coverage,degeneracy,validity,task,extraction",
        help="comma-separated: lpr, wpr, lcpr, coverage, degeneracy, validity (lexical validity: "
        "skipped where either side lacks it), task (the share of replies that answer verifiable prompts, "
        "`answers: true` suites: always the paired permutation test; skipped where either side lacks task.jsonl; "
        "a significant drop is flagged ⚠), extraction (the same for eval/task_axis.yaml's extractive questions)",
    )
    p.add_argument(
        "--method",
        choices=("permutation", "bootstrap", "mcnemar"),
        default="permutation",
        help="p-value: permutation (exact level under 'same model'; the interval is the bootstrap's), "
        "bootstrap, or mcnemar",
    )
    p.add_argument("--resamples", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--intersect",
        action="store_true",
        help="compare on the prompts both sides hold (otherwise differing prompt sets are an error)",
    )
    p.add_argument(
        "--part",
        choices=("answer", "trace"),  # mlft.reports.compare.PARTS (not imported: the parser stays light)
        default="answer",
        help="reasoning traces: compare the answers (default; a reply without a trace is its own answer) or the "
        "traces (eval folders: outcomes.trace.jsonl; completions files: split with --trace-markers)",
    )
    p.add_argument(
        "--trace-markers",
        metavar="OPEN,CLOSE",
        default=DEFAULT_MARKERS.spec(),
        help="the trace markers of completions files (default: %(default)s; 'none' = whole replies)",
    )
    p.add_argument("--format", choices=[*FORMATS, "json"], default="table")
    p.set_defaults(func=run)


def run(args) -> int:
    import mlft

    result = mlft.compare(
        args.a,
        args.b,
        args.metric,
        method=args.method,
        resamples=args.resamples,
        seed=args.seed,
        intersect=args.intersect,
        part=args.part,
        trace_markers=parse_markers(args.trace_markers, "--trace-markers"),
    )
    if result.dropped:
        print(f"comparing on {result.shared} shared prompts ({result.dropped} held by one side only left out)")
    print(result.table(args.format))
    return 0

"""`mlft generate`: LCB completions from any model/backend into mlft's JSONL (resumable), optional CSV export."""

from __future__ import annotations

from pathlib import Path

from mlft.constants import TASKS
from mlft.generation.cli_flags import add_generation_flags, add_model_args


def add_parser(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="generate LCB completions (JSONL, resumable)",
        description="Generate completions for LCB prompts. Re-running the same command resumes: "
        "only missing (or failed) prompts are generated.",
        later=add_model_args,  # backend option flags come from each backend's class (hf's imports torch)
    )
    p.add_argument("--out", required=True, metavar="FILE.jsonl", help="completions file (appended, resumable)")
    p.add_argument("--csv", metavar="FILE.csv", help="also export the official CSV (id, model, completion, ...)")
    p.add_argument("--task", action="append", choices=TASKS, help="filter by task (repeatable)")
    p.add_argument("--source", action="append", help="filter by source (repeatable)")
    p.add_argument("--language", action="append", help="filter by language code (repeatable)")
    p.add_argument("--per-group", type=int, help="seeded sample of at most N prompts per task/source/language")
    p.add_argument("--seed", type=int, default=0, help="sample seed")
    p.add_argument("--data", help="LCB test_sets.zip or folder (default: $MLFT_LCB_DATA / cache / download)")
    p.add_argument(
        "--prompts",
        metavar="FILE",
        help="your own prompts instead of LCB: JSONL or CSV with id, prompt, "
        "language[, task, source]; any language the LID model knows",
    )
    p.add_argument(
        "--intervention",
        action="append",
        metavar="YAML",
        help="an inference-time intervention, e.g. '{name: ban_tokens, strings: [Sure]}' (repeatable)",
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--token-stats", action="store_true", help="hf: record per-token entropy and nucleus size")
    add_generation_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from mlft.config import from_dict
    from mlft.evals import lcb
    from mlft.generation.backends import check_interventions
    from mlft.generation.cli_flags import generation_settings, parse_interventions
    from mlft.generation.target import Target
    from mlft.io.locks import OutputLock

    target = Target.from_args(args)  # what generates: --backend, --model, the backend's option flags
    opts = from_dict(
        lcb.LcbOptions,
        {
            "tasks": args.task or list(TASKS),
            "sources": args.source,
            "languages": args.language,
            "per_group": args.per_group,
            "seed": args.seed,
            "data": args.data,
            "prompts": args.prompts,
            "batch_size": args.batch_size,
            "token_stats": args.token_stats,
            "interventions": parse_interventions(args.intervention),
            **generation_settings(args),
        },
        "command line",
    )
    lcb.validate(opts, "command line")
    (run_,) = lcb.runs(opts, "command line")
    check_interventions(target.backend, run_.interventions, "--intervention")
    OutputLock(args.out).check()  # a second writer of the same file is refused before anything loads
    return _generate(args, opts, run_, target)


def _generate(args, opts, run_, target) -> int:
    """The eval runner's pipeline for one run: the target's models (backend, model transforms, saved weights)."""
    from mlft.completions import write_official_csv
    from mlft.evals import lcb
    from mlft.evals.runner import EvalContext
    from mlft.generation.runner import failed_count

    with target.open() as models:
        ctx = EvalContext(Path(args.out).parent, target, not args.no_progress, models)
        if target.capabilities.weights:  # cheapest first: the model reference, then the data, then the weights
            target.check()
            prompts = lcb.select_prompts(opts)
        else:  # the server answers first (key, reachability; the backend is kept for the run), then the data
            ctx.backend(opts.batch_size, opts.token_stats, run_.interventions)
            prompts = lcb.select_prompts(opts)
        records = lcb.generate_run(ctx, opts, run_, prompts, Path(args.out))  # the lcb kind, scoring off
    failed = failed_count(args.out)
    print(
        f"{args.out}: {len(records)}/{len(prompts)} completions"
        + (f", {failed} failed (rerun to retry)" if failed else "")
    )
    if args.csv:
        write_official_csv(records, Path(args.csv))
        print(f"wrote {args.csv}")
    return 1 if failed else 0

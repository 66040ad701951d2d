"""`mlft eval SUITE`: run an eval suite (generate + score + report, or another kind) with any backend it allows."""

from __future__ import annotations

from pathlib import Path

from mlft.evals.suite import available_suites
from mlft.generation.cli_flags import add_generation_flags, add_model_args


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="run an eval suite: generate, score, report (tables, plot)",
        description="Run an eval suite (" + ", ".join(available_suites()) + ", or a .yaml path). "
        "Resumable: re-running reuses finished completions.",
        later=add_model_args,  # backend option flags come from each backend's class (hf's imports torch)
    )
    p.add_argument("suite", help="suite name in eval/ or path to a suite YAML")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="suite overrides, e.g. per_group=1 decoding.max_new_tokens=20 languages=[de,zh]",
    )
    p.add_argument("--out", default=None, help="output folder (default runs/eval/<suite>/<model>)")
    p.add_argument(
        "--prompts",
        metavar="FILE",
        help="lcb suites: your own prompt file instead of LCB (same as the override prompts=FILE)",
    )
    p.add_argument("--format", default="markdown", choices=["markdown", "csv"], help="printed table format")
    add_generation_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import mlft
    from mlft.generation.cli_flags import generation_settings

    result = mlft.evaluate(
        mlft.Target.from_args(args),  # what is evaluated: --backend, --model, the backend's option flags
        args.suite,
        overrides=args.overrides,
        settings=generation_settings(args),  # the flags win over the suite and its KEY=VALUE
        prompts=args.prompts,
        out=args.out,
        progress=not args.no_progress,
        report_page=False,  # written after the report is printed
    )
    if args.format == "csv":
        for f in map(Path, result.files):
            if f.suffix == ".csv" and f.name.startswith("table_"):
                print(f"# {f.name}\n{f.read_text(encoding='utf-8')}")
    else:
        print(result.report)
    print(f"{result.suite}: {len(result.rows)} metric rows in {result.seconds:.1f} s -> {result.out}")
    for f in map(Path, result.files):
        if f.suffix == ".png":
            print(f"plot: {f}")
    if result.kind == "lcb":
        result.write_page()
    return 0

"""`mlft harness`: mlft's tasks for lm-evaluation-harness (path, task list) and its logged LCB samples as mlft
completions (to score with `mlft score`, compare with `mlft compare`)."""

from __future__ import annotations

from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser(
        "harness",
        help="mlft's LCB / capability tasks for lm-evaluation-harness",
        description="lm-evaluation-harness integration: `lm_eval --include_path $(mlft harness path) "
        "--tasks lcb --apply_chat_template ...` runs LCB scored by mlft's official scorer; "
        "suites of kind `lm_eval` run harness tasks inside mlft.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("path", help="print the folder to give lm_eval as --include_path")
    t = actions.add_parser("tasks", help="list mlft's harness tasks and groups")
    t.add_argument("--prefix", default="", help="only names starting with this")
    c = actions.add_parser("completions", help="lm-eval's --log_samples files of LCB tasks -> mlft completions JSONL")
    c.add_argument("samples", nargs="+", metavar="SAMPLES.jsonl", help="samples_lcb_*.jsonl files")
    c.add_argument("--out", required=True, help="completions JSONL to write (score it with `mlft score`)")
    c.add_argument("--model", default="lm-eval", help="model name for the records (default: lm-eval)")
    p.set_defaults(func=run)


def run(args) -> int:
    from mlft.harness import task_manager, tasks_dir
    from mlft.harness.lcb_task import samples_to_completions
    from mlft.io.jsonl import write_jsonl

    if args.action == "path":
        print(tasks_dir())
    elif args.action == "tasks":
        tm = task_manager((), include_defaults=False)
        for name in tm.all_tasks:
            if name.startswith(args.prefix):
                kind = "group" if name in tm.all_groups else "task"
                print(f"{name}\t{kind}")
    elif args.action == "completions":
        records = samples_to_completions(args.samples, args.model)
        write_jsonl(Path(args.out), records)
        print(f"{len(records)} completions -> {args.out}")
    return 0

"""`mlft generate`: LCB completions from any model/backend into mlft's JSONL (resumable), optional CSV export."""

from __future__ import annotations

from pathlib import Path

from mlft.config import from_dict
from mlft.evaluate import prepare
from mlft.completions import write_official_csv
from mlft.generation.backends import BACKENDS, check_backend
from mlft.generation.models import DEFAULT_MODEL
from mlft.generation.runner import failed_count, generate_completions
from mlft.generation.suites import EvalSuite, validate_suite
from mlft.lcb.data import TASKS


def add_backend_args(p) -> None:
    """Model and backend options shared by `mlft generate` and `mlft eval`."""
    p.add_argument("--model", default=None, help="embedded name (default smollm2-135m-instruct), a local folder or "
                   "a hub id; with --backend openai: the served model name")
    p.add_argument("--backend", default="hf", help=f"one of {', '.join(BACKENDS)} (default hf)")
    p.add_argument("--dtype", default="auto", help="hf: auto | float32 | bfloat16 | float16")
    p.add_argument("--device", default=None, help="hf: torch device (cpu, cuda, cuda:1...)")
    p.add_argument("--base-url", default=None, help="openai: endpoint, e.g. http://host:8000/v1 ($OPENAI_BASE_URL)")
    p.add_argument("--api-key", default=None, help="openai: API key (default: the --api-key-env variable)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="openai: variable holding the key")
    p.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight at most")
    p.add_argument("--timeout", type=float, default=60.0, help="openai: seconds per request")
    p.add_argument("--max-retries", type=int, default=5, help="openai: retries on timeout/429/5xx")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def backend_options(args) -> dict:
    if args.backend == "openai":
        return {"base_url": args.base_url, "api_key": args.api_key, "api_key_env": args.api_key_env,
                "concurrency": args.concurrency, "timeout": args.timeout, "max_retries": args.max_retries}
    return {"dtype": args.dtype, "device": args.device}


def add_parser(sub) -> None:
    p = sub.add_parser("generate", help="generate LCB completions (JSONL, resumable)",
                       description="Generate completions for LCB prompts. Re-running the same command resumes: "
                                   "only missing (or failed) prompts are generated.")
    p.add_argument("--out", required=True, metavar="FILE.jsonl", help="completions file (appended, resumable)")
    p.add_argument("--csv", metavar="FILE.csv", help="also export the official CSV (id, model, completion, ...)")
    p.add_argument("--task", action="append", choices=TASKS, help="filter by task (repeatable)")
    p.add_argument("--source", action="append", help="filter by source (repeatable)")
    p.add_argument("--language", action="append", help="filter by language code (repeatable)")
    p.add_argument("--per-group", type=int, help="seeded sample of at most N prompts per task/source/language")
    p.add_argument("--seed", type=int, default=0, help="sample seed")
    p.add_argument("--data", help="LCB test_sets.zip or folder (default: $MLFT_LCB_DATA / cache / download)")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--temperature", type=float, default=0.3, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=0.75, help="nucleus: smallest set with cumulative prob >= p")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--num-beams", type=int, default=1)
    p.add_argument("--decoding-seed", type=int, default=0)
    p.add_argument("--prompting", default="chat", help="chat | qa (the paper's Q/A template) | raw")
    p.add_argument("--shots", type=int, default=0, help="few-shot demonstrations (0-5)")
    p.add_argument("--system-prompt", default=None, help="chat: system message")
    p.add_argument("--examples", default=None, help="few_shot_examples.json path")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--token-stats", action="store_true", help="hf: record per-token entropy and nucleus size")
    add_backend_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    suite = from_dict(EvalSuite, {
        "name": "generate", "tasks": args.task or list(TASKS), "sources": args.source, "languages": args.language,
        "per_group": args.per_group, "seed": args.seed, "data": args.data, "batch_size": args.batch_size,
        "token_stats": args.token_stats,
        "decoding": {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "top_p": args.top_p,
                     "top_k": args.top_k, "num_beams": args.num_beams, "seed": args.decoding_seed},
        "prompting": {"mode": args.prompting, "shots": args.shots, "system_prompt": args.system_prompt,
                      "examples": args.examples},
    }, "command line")
    validate_suite(suite, "command line")
    check_backend(args.backend, "--backend")
    model_ref = args.model or (DEFAULT_MODEL if args.backend == "hf" else None)
    prompts, backend = prepare(suite, args.backend, model_ref=model_ref, options=backend_options(args))
    records = generate_completions(prompts, backend, suite.decoding, suite.prompting, args.out, model_ref,
                                   progress=not args.no_progress)
    failed = failed_count(args.out)
    print(f"{args.out}: {len(records)}/{len(prompts)} completions"
          + (f", {failed} failed (rerun to retry)" if failed else ""))
    if args.csv:
        write_official_csv(records, Path(args.csv))
        print(f"wrote {args.csv}")
    return 1 if failed else 0

"""`mlft generate`: LCB completions from any model/backend into mlft's JSONL (resumable), optional CSV export."""

from __future__ import annotations

from pathlib import Path

import yaml

from mlft.completions import write_official_csv
from mlft.config import from_dict
from mlft.constants import TASKS
from mlft.errors import ConfigError
from mlft.evals import lcb
from mlft.generation.backends import BACKENDS, add_backend_flags, check_backend, check_interventions, \
    create_backend, options_from_args
from mlft.generation.models import DEFAULT_MODEL
from mlft.generation.runner import failed_count, generate_completions
from mlft.io.locks import OutputLock


def add_model_args(p) -> None:
    """Model and backend options shared by `mlft generate` and `mlft eval`."""
    p.add_argument("--model", default=None, help="embedded name (default smollm2-135m-instruct), a local folder or "
                   "a hub id; with --backend openai: the served model name")
    p.add_argument("--backend", default="hf", help=f"one of {', '.join(BACKENDS)} (default hf)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_backend_flags(p)


def parse_interventions(values: list[str] | None) -> list[dict]:
    """`--intervention '{name: ban_tokens, strings: [Sure]}'` (YAML) or a bare name."""
    out = []
    for v in values or []:
        try:
            spec = yaml.safe_load(v)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--intervention {v!r}: not YAML ({exc})") from None
        out.append({"name": spec} if isinstance(spec, str) else spec)
    return out


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
    p.add_argument("--prompts", metavar="FILE", help="your own prompts instead of LCB: JSONL or CSV with id, prompt, "
                   "language[, task, source]; any language the LID model knows")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--temperature", type=float, default=0.3, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=0.75, help="nucleus: smallest set with cumulative prob >= p")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--num-beams", type=int, default=1)
    p.add_argument("--decoding-seed", default="0", help="sampling seed; 'none' = unseeded (openai: no seed sent)")
    p.add_argument("--prompting", default="chat", help="chat | qa (the paper's Q/A template) | raw")
    p.add_argument("--shots", type=int, default=0, help="few-shot demonstrations (0-5)")
    p.add_argument("--system-prompt", default=None, help="chat: system message")
    p.add_argument("--examples", default=None, help="few_shot_examples.json path")
    p.add_argument("--intervention", action="append", metavar="YAML",
                   help="an inference-time intervention, e.g. '{name: ban_tokens, strings: [Sure]}' (repeatable)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--token-stats", action="store_true", help="hf: record per-token entropy and nucleus size")
    add_model_args(p)
    p.set_defaults(func=run)


def _seed(value: str) -> int | None:
    if str(value).lower() in ("none", "null"):
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"--decoding-seed: expected an integer or 'none', got {value!r}") from None


def run(args) -> int:
    check_backend(args.backend, "--backend")
    opts = from_dict(lcb.LcbOptions, {
        "tasks": args.task or list(TASKS), "sources": args.source, "languages": args.language,
        "per_group": args.per_group, "seed": args.seed, "data": args.data, "prompts": args.prompts,
        "batch_size": args.batch_size,
        "token_stats": args.token_stats, "interventions": parse_interventions(args.intervention),
        "decoding": {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "top_p": args.top_p,
                     "top_k": args.top_k, "num_beams": args.num_beams, "seed": _seed(args.decoding_seed)},
        "prompting": {"mode": args.prompting, "shots": args.shots, "system_prompt": args.system_prompt,
                      "examples": args.examples},
    }, "command line")
    lcb.validate(opts, "command line")
    (run_,) = lcb.runs(opts, "command line")
    check_interventions(args.backend, run_.interventions, "--intervention")
    model_ref = args.model or (DEFAULT_MODEL if args.backend in ("hf", "vllm") else None)
    backend_opts = options_from_args(args.backend, args)
    OutputLock(args.out).check()  # a second writer of the same file is refused before anything loads
    return _generate(args, opts, run_, model_ref, backend_opts)


def _generate(args, opts, run_, model_ref, backend_opts) -> int:
    if args.backend in ("hf", "vllm"):  # cheapest first: the model reference, then the data, then the weights
        from mlft.generation.models import resolve

        resolve(model_ref)
        prompts = lcb.select_prompts(opts)
        backend = create_backend(args.backend, backend_opts, model_ref=model_ref, batch_size=opts.batch_size,
                                 token_stats=opts.token_stats)
    else:  # the server answers first (key, reachability), then the data
        backend = create_backend(args.backend, backend_opts, model_ref=model_ref, batch_size=opts.batch_size,
                                 token_stats=opts.token_stats)
        prompts = lcb.select_prompts(opts)
    transforms = [iv for iv in run_.interventions if "transform" in iv.needs]
    if transforms:
        backend = backend.transformed(transforms)
    try:
        records = generate_completions(prompts, backend, run_.decoding, run_.prompting, args.out, model_ref,
                                       progress=not args.no_progress, interventions=run_.interventions)
    finally:
        backend.close()
    failed = failed_count(args.out)
    print(f"{args.out}: {len(records)}/{len(prompts)} completions"
          + (f", {failed} failed (rerun to retry)" if failed else ""))
    if args.csv:
        write_official_csv(records, Path(args.csv))
        print(f"wrote {args.csv}")
    return 1 if failed else 0

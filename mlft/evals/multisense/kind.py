"""The `multisense` eval kind: options, validation (before any model is loaded) and the run.

    kind: multisense
    tasks: [pawsx, xnli]
    source: en
    targets: [de, zh]
    sample: 100            # items per task (seeded; the same rows in every language); null = all

The model is asked through any chat-capable generation backend (hf, or a served model via openai).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlft.benchmarks.multisense.data import check_language, check_task, test_file
from mlft.benchmarks.multisense.prompts import SYSTEM_MESSAGE, chat
from mlft.config import from_dict
from mlft.errors import ConfigError
from mlft.evals.multisense import pipeline
from mlft.evals.registry import EvalKind, KindOutput
from mlft.generation.decoding import Decoding
from mlft.generation.requests import Request
from mlft.io.metric_rows import rows_of


@dataclass
class MultisenseOptions:
    tasks: list[str] = field(default_factory=lambda: ["pawsx", "xnli"], metadata={"help": "pawsx and/or xnli"})
    source: str = field(default="en", metadata={"help": "language of the T_src run (en, de or zh)"})
    targets: list[str] = field(
        default_factory=lambda: ["de", "zh"],
        metadata={"help": "languages the model translates the task into (each gives a direction source->target)"},
    )
    conditions: list[str] = field(
        default_factory=lambda: list(pipeline.CONDITIONS),
        metadata={"help": "T (data + instruction translated), I (instruction only), X (data only)"},
    )
    sample: int | None = field(
        default=100,
        metadata={"help": "items per task, a seeded sample shared by all languages; null = the whole test set"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the item sample and of sampling"})
    max_new_tokens: int = field(default=256, metadata={"help": "answer length limit (paper: 256)"})
    translation_max_new_tokens: int = field(
        default=256, metadata={"help": "translation length limit (paper: 2048; sentences need far less)"}
    )
    temperature: float = field(default=0.25, metadata={"help": "sampling temperature (paper: 0.25); 0 = greedy"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus top-p (paper: 1.0 = off)"})
    batch_size: int = field(default=16, metadata={"help": "chat requests per generate call"})
    bleu: bool = field(default=True, metadata={"help": "BLEU of the self-translations against the human test set"})
    data_dir: str | None = field(
        default=None,
        metadata={"help": "folder with {task}/test-{lang}.tsv (null: $MLFT_MULTISENSE_DATA, the cache, ../shared)"},
    )


def parse_options(options: dict, where: str) -> MultisenseOptions:
    """Options from a mapping, validated (for programmatic use; suites go through the suite loader)."""
    opts = from_dict(MultisenseOptions, options or {}, where)
    validate(opts, where)
    return opts


def validate(opts: MultisenseOptions, where: str) -> None:
    if not opts.tasks:
        raise ConfigError(f"{where}.tasks: give at least one task")
    for i, t in enumerate(opts.tasks):
        check_task(t, f"{where}.tasks[{i}]")
    check_language(opts.source, f"{where}.source")
    for i, lang in enumerate(opts.targets):
        check_language(lang, f"{where}.targets[{i}]")
        if lang == opts.source:
            raise ConfigError(f"{where}.targets[{i}]: {lang!r} is the source language")
    for i, c in enumerate(opts.conditions):
        if c not in pipeline.CONDITIONS:
            raise ConfigError(f"{where}.conditions[{i}]: unknown condition {c!r}; valid: T, I, X")
    for name in ("max_new_tokens", "translation_max_new_tokens", "batch_size"):
        if getattr(opts, name) < 1:
            raise ConfigError(f"{where}.{name}: must be >= 1, got {getattr(opts, name)}")
    if opts.sample is not None and opts.sample < 1:
        raise ConfigError(f"{where}.sample: must be >= 1 or null, got {opts.sample}")
    if opts.temperature < 0 or not 0 < opts.top_p <= 1:
        raise ConfigError(f"{where}: temperature must be >= 0 and top_p in (0, 1]")
    for t in opts.tasks:  # data present? (fail before loading a model)
        for lang in [opts.source, *(opts.targets if opts.bleu else [])]:
            path = test_file(t, lang, opts.data_dir)
            if not path.is_file():
                raise ConfigError(
                    f"{where}: {path} not found (fetch the test sets with `mlft data multisense`, or set data_dir)"
                )


def make_chat_fn(backend, opts: MultisenseOptions) -> pipeline.ChatFn:
    """Chat generation with the paper's system message and decoding, through any generation backend."""

    def chat_fn(ids: list[str], texts: list[str], max_new_tokens: int) -> list[str | None]:
        decoding = Decoding(
            max_new_tokens=max_new_tokens, temperature=opts.temperature, top_p=opts.top_p, seed=opts.seed
        )
        results = {
            r.id: r for r in backend.generate([Request(i, messages=chat(t)) for i, t in zip(ids, texts)], decoding)
        }
        return [None if results[i].error else results[i].completion for i in ids]

    return chat_fn


def evaluate(
    opts: MultisenseOptions, *, chat_fn: pipeline.ChatFn, model_name: str, out_dir: Path, progress: bool = True
) -> list[dict]:
    """The whole multisense evaluation with `chat_fn`; rows {variant, task, language, metric, value}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "model": str(model_name),
        "system": SYSTEM_MESSAGE,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "seed": opts.seed,
        "max_new_tokens": opts.max_new_tokens,
        "translation_max_new_tokens": opts.translation_max_new_tokens,
    }
    cache = pipeline.GenerationCache(out_dir / "generations.jsonl", settings)
    plan = pipeline.Plan(
        opts.tasks,
        opts.source,
        opts.targets,
        opts.conditions,
        opts.sample,
        opts.seed,
        opts.max_new_tokens,
        opts.translation_max_new_tokens,
        opts.data_dir,
        opts.bleu,
    )
    rows: list[dict] = []
    items: list[dict] = []
    for task in opts.tasks:
        rows += pipeline.run_task(
            task, plan, chat_fn, cache, chunk=4 * opts.batch_size, progress=progress, items_out=items
        )
    rows += pipeline.average_rows(rows)
    with open(out_dir / "items.jsonl", "w", encoding="utf-8") as fh:
        for rec in items:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    (out_dir / "options.json").write_text(json.dumps(asdict(opts), indent=2), encoding="utf-8")
    pipeline.write_report(rows, out_dir / "multisense.md")
    return rows


def run(suite, ctx) -> KindOutput:
    opts: MultisenseOptions = suite.options
    chat_fn = make_chat_fn(ctx.backend(batch_size=opts.batch_size), opts)
    rows = evaluate(opts, chat_fn=chat_fn, model_name=ctx.model_name, out_dir=ctx.out_dir, progress=ctx.progress)
    out = ctx.out_dir
    return KindOutput(
        rows_of(rows),
        (out / "multisense.md").read_text(encoding="utf-8"),
        files=[out / "generations.jsonl", out / "items.jsonl", out / "multisense.md"],
    )


KIND = EvalKind(
    "multisense",
    MultisenseOptions,
    validate,
    run,
    needs=("chat",),
    description="multisense self-consistency: the model translates the task itself, then answers",
)

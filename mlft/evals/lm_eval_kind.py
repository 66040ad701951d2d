"""The `lm_eval` eval kind: lm-evaluation-harness tasks inside an mlft suite, on the model mlft already holds.

    kind: lm_eval
    tasks: [mlft_polyglot_mc_de, arc_easy]      # any harness task / group / tag name
    include_path: [my_tasks/]                   # folders of your own task YAMLs (mlft's are always included)
    num_fewshot: null                           # the tasks' own default
    limit: 100                                  # documents per task (a fraction < 1 = a share)

The model: on `hf` the live model object and its tokenizer are wrapped in lm-eval's `HFLM` (a training
callback's model, or the one the suite loaded: never loaded twice); on `openai` lm-eval's API models talk to the
same server (`api: chat` -> local-chat-completions, generation tasks only; `api: completions` ->
local-completions, which also scores log-likelihoods and needs `tokenizer`).

Every metric of every task and group becomes an mlft metric row {variant, task, language: avg, metric, value,
low, high, n, stderr, harness: true, samples}: task = the harness name, metric = the harness metric
(`metric/filter` when the filter is not `none`), the interval value ± z·stderr (the harness's standard error;
none when it reports N/A). The per-document samples land in `samples/<task or group>.jsonl` (paired
comparisons between runs: `mlft.harness.samples.paired_samples_test`, Table 11's capability columns). Task names are checked
(TaskManager) before any model loads.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Literal

from mlft.errors import ConfigError
from mlft.evals.registry import EvalKind, KindOutput
from mlft.generation.backends import backend_options
from mlft.harness import check_tasks, require_lm_eval


@dataclass
class LmEvalOptions:
    tasks: list[str] = field(default_factory=list, metadata={
        "help": "lm-eval task, group or tag names (mlft's own: `mlft harness tasks`)"})
    include_path: list[str] = field(default_factory=list, metadata={
        "help": "folders of task YAMLs of your own (mlft's harness tasks are always included)"})
    num_fewshot: int | None = field(default=None, metadata={"help": "few-shot examples (null: each task's default)"})
    limit: float | None = field(default=None, metadata={
        "help": "documents per task (>= 1: a count; < 1: a share); null = all"})
    batch_size: int = field(default=8, metadata={"help": "requests per model call (hf) / per API batch"})
    max_length: int | None = field(default=None, metadata={
        "help": "context length lm-eval assumes (hf; null: the model config's)"})
    apply_chat_template: bool = field(default=False, metadata={
        "help": "wrap prompts in the tokenizer's chat template (chat models; lm-eval's --apply_chat_template)"})
    fewshot_as_multiturn: bool = field(default=True, metadata={
        "help": "with the chat template: few-shot examples as conversation turns"})
    system_instruction: str | None = field(default=None, metadata={"help": "system prompt (lm-eval's)"})
    gen_kwargs: dict = field(default_factory=dict, metadata={
        "help": "generation settings overriding the generation tasks' own (e.g. {max_gen_toks: 64})"})
    metadata: dict = field(default_factory=dict, metadata={
        "help": "task metadata (lm-eval's --metadata), e.g. {lcb_data: path} for mlft's LCB tasks"})
    bootstrap_iters: int = field(default=1000, metadata={
        "help": "bootstrap resamples for the stderr of non-mean metrics (0 = no stderr)"})
    seed: int = field(default=1234, metadata={"help": "python / numpy / torch / few-shot seeds"})
    confidence: float = field(default=0.95, metadata={"help": "level of the intervals (value ± z·stderr)"})
    log_samples: bool = field(default=True, metadata={"help": "write per-document samples to samples/<task>.jsonl"})
    api: Literal["chat", "completions"] = field(default="chat", metadata={
        "help": "openai backend: the chat endpoint (generation tasks only) or the completions endpoint "
                "(also log-likelihood tasks; needs `tokenizer`)"})
    tokenizer: str | None = field(default=None, metadata={
        "help": "openai backend with api=completions: the hub id / folder of the served model's tokenizer"})


def validate(o: LmEvalOptions, where: str) -> None:
    if o.limit is not None and o.limit <= 0:
        raise ConfigError(f"{where}: limit: must be > 0 or null, got {o.limit}")
    if o.num_fewshot is not None and o.num_fewshot < 0:
        raise ConfigError(f"{where}: num_fewshot: must be >= 0 or null, got {o.num_fewshot}")
    if o.batch_size < 1 or o.bootstrap_iters < 0 or not 0 < o.confidence < 1:
        raise ConfigError(f"{where}: batch_size >= 1, bootstrap_iters >= 0 and 0 < confidence < 1 please")
    require_lm_eval()
    check_tasks(o.tasks, o.include_path, f"{where}: tasks")


def _task_manager(o: LmEvalOptions):
    return check_tasks(o.tasks, o.include_path, "tasks", o.metadata)


def make_lm(o: LmEvalOptions, ctx):
    """lm-eval's model over what the suite runs on (the live hf model, or the served model)."""
    if ctx.backend_name == "hf":
        from lm_eval.models.huggingface import HFLM

        model, tok = ctx.local_model()
        return HFLM(pretrained=model, tokenizer=tok, batch_size=o.batch_size, max_length=o.max_length)
    if ctx.backend_name == "openai":
        return _api_lm(o, ctx)
    raise ConfigError(f"lm_eval suites run on hf or openai, not {ctx.backend_name}")


def _api_lm(o: LmEvalOptions, ctx):
    import os

    from lm_eval.api.registry import get_model

    opts = backend_options("openai", ctx.backend_options)
    if not ctx.model_ref:
        raise ConfigError("openai backend: --model names the served model; none given")
    base = (opts.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
    key = opts.api_key or os.environ.get(opts.api_key_env)
    if not key:
        raise ConfigError(f"openai backend: no API key: pass --api-key or set ${opts.api_key_env}")
    name = "local-chat-completions" if o.api == "chat" else "local-completions"
    cls = get_model(name)
    keyed = type(f"Mlft{cls.__name__}", (cls,), {"api_key": property(lambda self: key)})  # never via the env
    kwargs = {"model": ctx.model_ref, "base_url": f"{base}/{'chat/completions' if o.api == 'chat' else 'completions'}",
              "num_concurrent": opts.concurrency, "max_retries": opts.max_retries, "timeout": int(opts.timeout),
              "batch_size": 1 if o.api == "chat" else o.batch_size}
    if o.api == "chat":
        kwargs["tokenizer_backend"] = None
    else:
        if not o.tokenizer:
            raise ConfigError("lm_eval suite on the openai backend with api=completions: set `tokenizer` (the "
                              "served model's hub id or folder)")
        kwargs["tokenizer"] = o.tokenizer
    return keyed(**kwargs)


def _check_outputs(tm, o: LmEvalOptions, ctx) -> None:
    """Chat endpoints only generate: refuse log-likelihood tasks up front."""
    if ctx.backend_name != "openai" or o.api != "chat":
        return
    loaded = tm.load(list(o.tasks))
    bad = [n for n, t in loaded["tasks"].items() if t.OUTPUT_TYPE != "generate_until"]
    if bad:
        raise ConfigError(f"lm_eval suite: {', '.join(bad)} score log-likelihoods, which a chat endpoint cannot; "
                          "set api=completions (and tokenizer) or use the hf backend")


def result_rows(results: dict, confidence: float = 0.95, variant: str = "default") -> list[dict]:
    """mlft metric rows from lm-eval's results dict (tasks and groups)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n_samples = results.get("n-samples", {})
    rows = []
    entries = {**results.get("results", {}), **results.get("groups", {})}
    for task, metrics in entries.items():
        n = (n_samples.get(task) or {}).get("effective")
        if n is None:
            n = metrics.get("sample_len")
        for key, value in metrics.items():
            if "," not in key or "_stderr," in key:
                continue
            metric, filt = key.split(",", 1)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(float(value)):
                continue
            stderr = metrics.get(f"{metric}_stderr,{filt}")
            stderr = float(stderr) if isinstance(stderr, (int, float)) and not math.isnan(float(stderr)) else None
            low, high = (value - z * stderr, value + z * stderr) if stderr is not None else (None, None)
            rows.append({"variant": variant, "task": task, "language": "avg",
                         "metric": metric if filt == "none" else f"{metric}/{filt}", "value": float(value),
                         "low": low, "high": high, "n": n, "stderr": stderr, "harness": True})
    return rows


def _report(rows: list[dict], versions: str) -> str:
    lines = [f"lm-evaluation-harness {versions}; ± = half-width of the interval value ± z·stderr (harness stderr).",
             "", "| task | metric | value | n |", "|---|---|---:|---:|"]
    for r in rows:
        half = f" ±{(r['high'] - r['low']) / 2:.4f}" if r["low"] is not None else ""
        n = "" if r["n"] is None else r["n"]
        lines.append(f"| {r['task']} | {r['metric']} | {r['value']:.4f}{half} | {n} |")
    return "\n".join(lines) + "\n"


def _leaves(name: str, groups: dict[str, list[str]]) -> list[str]:
    return [leaf for child in groups[name] for leaf in _leaves(child, groups)] if name in groups else [name]


def _write_samples(results: dict, rows: list[dict], sdir: Path) -> list[Path]:
    """samples/<task>.jsonl per task (each record with its `task`), and per group the records of its tasks; the
    rows of each task / group name their file."""
    from lm_eval.utils import handle_non_serializable

    sdir.mkdir(parents=True, exist_ok=True)
    by_task = {t: [{**s, "task": t} for s in samples] for t, samples in (results.get("samples") or {}).items()}
    groups = results.get("group_subtasks") or {}
    files = []
    for name in [*by_task, *[g for g in groups if g not in by_task]]:
        records = [x for leaf in _leaves(name, groups) for x in by_task.get(leaf, [])]
        if not records:
            continue
        path = sdir / f"{name}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for x in records:
                fh.write(json.dumps(x, default=handle_non_serializable, ensure_ascii=False) + "\n")
        files.append(path)
        for r in rows:
            if r["task"] == name:
                r["samples"] = str(Path("samples") / path.name)
    return files


@contextmanager
def _global_rng_kept():
    import random

    import numpy as np
    import torch

    state = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
             torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    try:
        yield
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
        torch.set_rng_state(state[2])
        if state[3] is not None:
            torch.cuda.set_rng_state_all(state[3])


def _evaluate(lm_eval, lm, o: LmEvalOptions, tm):
    return lm_eval.simple_evaluate(
        model=lm, tasks=list(o.tasks), num_fewshot=o.num_fewshot, batch_size=o.batch_size,
        limit=(int(o.limit) if o.limit is not None and o.limit >= 1 else o.limit), bootstrap_iters=o.bootstrap_iters,
        log_samples=o.log_samples, task_manager=tm, apply_chat_template=o.apply_chat_template,
        fewshot_as_multiturn=o.fewshot_as_multiturn, system_instruction=o.system_instruction,
        gen_kwargs=dict(o.gen_kwargs) or None, random_seed=o.seed, numpy_random_seed=o.seed,
        torch_random_seed=o.seed, fewshot_random_seed=o.seed)


def run(suite, ctx) -> KindOutput:
    import lm_eval
    from lm_eval.utils import handle_non_serializable

    o: LmEvalOptions = suite.options
    tm = _task_manager(o)
    _check_outputs(tm, o, ctx)
    lm = make_lm(o, ctx)
    with _global_rng_kept():  # lm-eval reseeds python / numpy / torch: a training run must not notice
        results = _evaluate(lm_eval, lm, o, tm)
    if results is None:  # not rank 0
        return KindOutput([])
    rows = result_rows(results, o.confidence)
    files = []
    if o.log_samples:
        files += _write_samples(results, rows, ctx.out_dir / "samples")
    summary = {k: results.get(k) for k in ("results", "groups", "configs", "versions", "n-shot", "n-samples")}
    (ctx.out_dir / "lm_eval_results.json").write_text(
        json.dumps(summary, default=handle_non_serializable, indent=1, ensure_ascii=False), encoding="utf-8")
    files.append(ctx.out_dir / "lm_eval_results.json")
    version = getattr(lm_eval, "__version__", "")
    table = "task,metric,value,low,high,n\n" + "".join(
        f"{r['task']},{r['metric']},{r['value']},{'' if r['low'] is None else r['low']},"
        f"{'' if r['high'] is None else r['high']},{'' if r['n'] is None else r['n']}\n" for r in rows)
    return KindOutput(rows, _report(rows, version), [("lm_eval", table)], files)


KIND = EvalKind("lm_eval", LmEvalOptions, validate, run, backends=("hf", "openai"),
                description="lm-evaluation-harness tasks (capability checks, mlft's LCB tasks) on the same model")

"""The `lm_eval` eval kind: lm-evaluation-harness tasks inside an mlft suite, on the model mlft already holds.

    kind: lm_eval
    tasks: [mlft_polyglot_mc_de, arc_easy]      # any harness task / group / tag name
    include_path: [my_tasks/]                   # folders of your own task YAMLs (mlft's are always included)
    num_fewshot: null                           # the tasks' own default
    limit: 100                                  # documents per task (a fraction < 1 = a share)

The model (`make_lm`, by what the backend can do): a backend that holds weights has its model object and
tokenizer wrapped in lm-eval's `HFLM` (a training callback's live model, or the one the suite loaded: never
loaded twice); a backend with its own lm-eval model uses it (openai: lm-eval's API models on the same server,
`api: chat` -> local-chat-completions, generation tasks only; `api: completions` -> local-completions, which
also scores log-likelihoods and needs `tokenizer`); any other backend runs the generation tasks through its
`generate` (`backend_lm`).

Every metric of every task and group becomes an mlft metric row {variant, task, language: avg, metric, value,
low, high, n, stderr, harness: true, samples}: task = the harness name, metric = the harness metric
(`metric/filter` when the filter is not `none`), the interval value ± z·stderr (the harness's standard error;
none when it reports N/A). The per-document samples land in `samples/<task or group>.jsonl` (paired
comparisons between runs: `mlft.harness.samples.paired_samples_test`, Table 11's capability columns). Task names are
checked
(TaskManager) before any model loads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Literal

from mlft.errors import ConfigError
from mlft.evals.registry import EvalKind, KindOutput
from mlft.generation.backends import able, backend_class, backend_options
from mlft.generation.decoding import Decoding
from mlft.generation.requests import Request
from mlft.generation.rng import preserved_rng
from mlft.harness import check_tasks, require_lm_eval
from mlft.io.metric_rows import HarnessStats, MetricRow


@dataclass
class LmEvalOptions:
    tasks: list[str] = field(
        default_factory=list, metadata={"help": "lm-eval task, group or tag names (mlft's own: `mlft harness tasks`)"}
    )
    include_path: list[str] = field(
        default_factory=list,
        metadata={"help": "folders of task YAMLs of your own (mlft's harness tasks are always included)"},
    )
    num_fewshot: int | None = field(default=None, metadata={"help": "few-shot examples (null: each task's default)"})
    limit: float | None = field(
        default=None, metadata={"help": "documents per task (>= 1: a count; < 1: a share); null = all"}
    )
    batch_size: int = field(default=8, metadata={"help": "requests per model call (hf) / per API batch"})
    max_length: int | None = field(
        default=None, metadata={"help": "context length lm-eval assumes (hf; null: the model config's)"}
    )
    apply_chat_template: bool = field(
        default=False,
        metadata={
            "help": "wrap prompts in the tokenizer's chat template (chat models; lm-eval's --apply_chat_template)"
        },
    )
    fewshot_as_multiturn: bool = field(
        default=True, metadata={"help": "with the chat template: few-shot examples as conversation turns"}
    )
    system_instruction: str | None = field(default=None, metadata={"help": "system prompt (lm-eval's)"})
    gen_kwargs: dict = field(
        default_factory=dict,
        metadata={"help": "generation settings overriding the generation tasks' own (e.g. {max_gen_toks: 64})"},
    )
    metadata: dict = field(
        default_factory=dict,
        metadata={"help": "task metadata (lm-eval's --metadata), e.g. {lcb_data: path} for mlft's LCB tasks"},
    )
    bootstrap_iters: int = field(
        default=1000, metadata={"help": "bootstrap resamples for the stderr of non-mean metrics (0 = no stderr)"}
    )
    seed: int = field(default=1234, metadata={"help": "python / numpy / torch / few-shot seeds"})
    confidence: float = field(default=0.95, metadata={"help": "level of the intervals (value ± z·stderr)"})
    log_samples: bool = field(default=True, metadata={"help": "write per-document samples to samples/<task>.jsonl"})
    api: Literal["chat", "completions"] = field(
        default="chat",
        metadata={
            "help": "openai backend: the chat endpoint (generation tasks only) or the completions endpoint "
            "(also log-likelihood tasks; needs `tokenizer`)"
        },
    )
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "openai backend with api=completions: the hub id / folder of the served model's tokenizer"},
    )


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
    """lm-eval's model over what the suite runs on: a backend holding weights -> lm-eval's `HFLM` over its model
    (the live one, or the one the suite loaded: never loaded twice); a backend with its own lm-eval model (e.g.
    openai's API models) -> that; any other backend -> `BackendLM`, its generation tasks through `generate`."""
    if ctx.capabilities.weights:
        from lm_eval.models.huggingface import HFLM

        model, tok = ctx.local_model()
        return HFLM(pretrained=model, tokenizer=tok, batch_size=o.batch_size, max_length=o.max_length)
    cls = backend_class(ctx.backend_name)
    if hasattr(cls, "lm_eval_model"):
        opts = backend_options(ctx.backend_name, ctx.backend_options, f"{ctx.backend_name} backend options")
        return cls.lm_eval_model(opts, model_ref=ctx.model_ref, lm_options=o)
    return backend_lm(ctx.backend(batch_size=o.batch_size), o, chat=ctx.capabilities.chat)


def generation_only(o: LmEvalOptions, ctx) -> bool:
    """Whether the suite's model can only generate (no log-likelihood scores)."""
    if ctx.capabilities.weights:
        return False
    cls = backend_class(ctx.backend_name)
    if hasattr(cls, "lm_eval_model"):
        return bool(getattr(cls, "lm_eval_generation_only", lambda _: False)(o))
    return True


def _check_outputs(tm, o: LmEvalOptions, ctx) -> None:
    """A model that only generates (a chat endpoint, a backend without weights): refuse log-likelihood tasks up
    front."""
    if not generation_only(o, ctx):
        return
    loaded = tm.load(list(o.tasks))
    bad = [n for n, t in loaded["tasks"].items() if t.OUTPUT_TYPE != "generate_until"]
    if bad:
        hint = (
            "set api=completions (and tokenizer) or "
            if hasattr(backend_class(ctx.backend_name), "lm_eval_model")
            else ""
        )
        able_ = ", ".join(able(lambda c: c.weights))
        raise ConfigError(
            f"lm_eval suite: {', '.join(bad)} score log-likelihoods, which the {ctx.backend_name} "
            f"backend cannot; {hint}use a backend that holds weights ({able_})"
        )


_CHAT = "\x00mlft-chat:"  # a chat prompt handed through lm-eval as text (BackendLM.apply_chat_template)


def backend_lm(backend, o: LmEvalOptions, chat: bool = False):
    """An lm-eval model over any mlft generation backend: generation tasks (`generate_until`) become backend
    Requests (chat messages with `apply_chat_template` on a chat backend, else raw text); `until` strings cut the
    reply, `max_gen_toks` / `temperature` / `do_sample` set the decoding. Log-likelihood tasks are refused."""
    from lm_eval.api.model import LM

    class BackendLM(LM):
        def __init__(self):
            super().__init__()
            self.backend = backend

        @property
        def tokenizer_name(self) -> str:
            return f"mlft-{backend.name}"

        def chat_template(self, chat_template=False) -> str:
            return f"mlft-{backend.name}" if chat else ""

        def apply_chat_template(self, chat_history, add_generation_prompt=True) -> str:
            if not chat:
                raise ConfigError(
                    f"lm_eval suite: the {backend.name} backend takes no chat messages; set apply_chat_template: false"
                )
            return _CHAT + json.dumps(list(chat_history), ensure_ascii=False)

        def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
            out = []
            for i, inst in enumerate(requests):
                context, kw = inst.args
                kw = dict(kw or {})
                until = kw.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                temperature = float(kw.get("temperature", 0.0)) if kw.get("do_sample", False) else 0.0
                decoding = Decoding(
                    max_new_tokens=int(kw.get("max_gen_toks", 256)), temperature=temperature, top_p=1.0, seed=o.seed
                )
                if context.startswith(_CHAT):
                    req = Request(str(i), messages=json.loads(context[len(_CHAT) :]))
                else:
                    req = Request(str(i), text=context)
                result = next(iter(backend.generate([req], decoding)))
                if result.error:
                    raise RuntimeError(f"lm_eval suite: the {backend.name} backend failed: {result.error}")
                text = result.completion
                for stop in until:
                    if stop and stop in text:
                        text = text[: text.index(stop)]
                out.append(text)
            return out

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            raise ConfigError(f"lm_eval suite: the {backend.name} backend scores no log-likelihoods")

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            raise ConfigError(f"lm_eval suite: the {backend.name} backend scores no log-likelihoods")

    return BackendLM()


def result_rows(results: dict, confidence: float = 0.95, variant: str = "default") -> list[MetricRow]:
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
            rows.append(
                MetricRow(
                    variant,
                    task,
                    "avg",
                    metric if filt == "none" else f"{metric}/{filt}",
                    float(value),
                    low,
                    high,
                    n,
                    harness=HarnessStats(stderr),
                )
            )
    return rows


def _report(rows: list[MetricRow], versions: str) -> str:
    lines = [
        f"lm-evaluation-harness {versions}; ± = half-width of the interval value ± z·stderr (harness stderr).",
        "",
        "| task | metric | value | n |",
        "|---|---|---:|---:|",
    ]
    for r in rows:
        half = f" ±{(r.high - r.low) / 2:.4f}" if r.low is not None else ""
        n = "" if r.n is None else r.n
        lines.append(f"| {r.task} | {r.metric} | {r.value:.4f}{half} | {n} |")
    return "\n".join(lines) + "\n"


def _leaves(name: str, groups: dict[str, list[str]]) -> list[str]:
    return [leaf for child in groups[name] for leaf in _leaves(child, groups)] if name in groups else [name]


def _write_samples(results: dict, rows: list[MetricRow], sdir: Path) -> list[Path]:
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
            if r.task == name:
                r.harness.samples = str(Path("samples") / path.name)
    return files


def _evaluate(lm_eval, lm, o: LmEvalOptions, tm):
    return lm_eval.simple_evaluate(
        model=lm,
        tasks=list(o.tasks),
        num_fewshot=o.num_fewshot,
        batch_size=o.batch_size,
        limit=(int(o.limit) if o.limit is not None and o.limit >= 1 else o.limit),
        bootstrap_iters=o.bootstrap_iters,
        log_samples=o.log_samples,
        task_manager=tm,
        apply_chat_template=o.apply_chat_template,
        fewshot_as_multiturn=o.fewshot_as_multiturn,
        system_instruction=o.system_instruction,
        gen_kwargs=dict(o.gen_kwargs) or None,
        random_seed=o.seed,
        numpy_random_seed=o.seed,
        torch_random_seed=o.seed,
        fewshot_random_seed=o.seed,
    )


def run(suite, ctx) -> KindOutput:
    import lm_eval
    from lm_eval.utils import handle_non_serializable

    o: LmEvalOptions = suite.options
    tm = _task_manager(o)
    _check_outputs(tm, o, ctx)
    lm = make_lm(o, ctx)
    with preserved_rng():  # lm-eval reseeds python / numpy / torch: a training run must not notice
        results = _evaluate(lm_eval, lm, o, tm)
    if results is None:  # not rank 0
        return KindOutput([])
    rows = result_rows(results, o.confidence)
    files = []
    if o.log_samples:
        files += _write_samples(results, rows, ctx.out_dir / "samples")
    summary = {k: results.get(k) for k in ("results", "groups", "configs", "versions", "n-shot", "n-samples")}
    (ctx.out_dir / "lm_eval_results.json").write_text(
        json.dumps(summary, default=handle_non_serializable, indent=1, ensure_ascii=False), encoding="utf-8"
    )
    files.append(ctx.out_dir / "lm_eval_results.json")
    version = getattr(lm_eval, "__version__", "")
    table = "task,metric,value,low,high,n\n" + "".join(
        f"{r.task},{r.metric},{r.value},{'' if r.low is None else r.low},"
        f"{'' if r.high is None else r.high},{'' if r.n is None else r.n}\n"
        for r in rows
    )
    return KindOutput(rows, _report(rows, version), [("lm_eval", table)], files)


KIND = EvalKind(
    "lm_eval",
    LmEvalOptions,
    validate,
    run,
    description="lm-evaluation-harness tasks (capability checks, mlft's LCB tasks) on the same model",
)

"""The training callback's *passes*: evaluate one training step's model with the recipe's evaluation block and
record curve rows.

A pass = (variant name, suite, overrides, interventions): the plain model ("model"), a few-shot prompting
baseline, an intervention variant (e.g. "+script gate"), or a quantized variant ("w8": the `quantize`
intervention). Used in-process by the eval callback (the live model) and by `mlft evaluate-run` (a saved
checkpoint, or the recipe's base model for step 0). Each (step, variant) pass is recorded once: the curve
file's lock is held from the "already done?" check to the append.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mlft.config import deep_merge
from mlft.console import get_logger
from mlft.constants import FEWSHOT_BASELINES, METRICS
from mlft.errors import ConfigError
from mlft.evals import runner
from mlft.evals.registry import get_kind
from mlft.evals.suite import EvalSuite, load_suite, suite_path
from mlft.generation.backends import DEFAULT_BACKEND, option_names
from mlft.generation.interventions.quantize import Scheme
from mlft.generation.target import Target, reads_saved_weights
from mlft.io import curve_file
from mlft.io.metric_rows import CurveRow, HarnessStats, MetricRow, rows_of
from mlft.paths import lcb_data_path

log = get_logger(__name__)


@dataclass
class PassVariant:
    """One extra evaluation pass of each checkpoint: a few-shot prompting baseline, an intervention..."""

    variant: str = field(metadata={"help": "Name of the variant in curves.jsonl (e.g. '1-shot', '+script gate')."})
    suite: str | None = field(
        default=None, metadata={"help": "Suite name or path; null = the evaluation suite (with its suite_overrides)."}
    )
    overrides: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Settings of the suite, a mapping (e.g. {prompting: {shots: 1}})."}
    )
    interventions: list[dict] = field(
        default_factory=list,
        metadata={"help": "Inference-time interventions [{name: ..., <options>}] added to the suite's."},
    )


PromptVariant = PassVariant  # the name before interventions existed


@dataclass
class EvaluationOptions:
    enabled: bool = field(default=True, metadata={"help": "Run the eval callback at all."})
    suite: str = field(
        default="lcb_quick",
        metadata={"help": "Eval suite run at train start and after every checkpoint (name in eval/ or a path)."},
    )
    suite_overrides: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "Settings of the suite, a mapping (e.g. {judge: langdetect}), laid over the suite file (validated "
            "by the suite loader)."
        },
    )
    at_start: bool = field(default=True, metadata={"help": "Evaluate the starting model (step 0 baseline)."})
    every_steps: int | None = field(
        default=None,
        metadata={
            "help": "Evaluate every N steps: sets save_strategy=steps and save_steps=N (evaluation follows "
            "checkpoints)."
        },
    )
    variants: list[PassVariant] = field(
        default_factory=list,
        metadata={"help": "Extra passes at every evaluation: [{variant, suite, overrides, interventions}]."},
    )
    fewshot: bool = field(default=False, metadata={"help": "Also run the few-shot prompting variants below."})
    fewshot_variants: list[PassVariant] = field(
        default_factory=list,
        metadata={
            "help": "Few-shot baselines: [{variant, suite, overrides}], run when `fewshot: true`; empty = the paper's "
            "Q/A template, 1-shot and 5-shot (mlft.constants.FEWSHOT_BASELINES)."
        },
    )
    quantized: list[Scheme] = field(
        default_factory=list,
        metadata={
            "help": "Quantized variants of each saved checkpoint (the `quantize` intervention): w8/w4 (bitsandbytes), "
            "w8a8 (torchao int8 dynamic)."
        },
    )
    quantized_at: Literal["all", "ends"] = field(
        default="ends",
        metadata={
            "help": "Which steps get the quantized variants: 'ends' (the step-0 baseline and the last step) or 'all'."
        },
    )
    in_process: Literal["auto", "always", "never"] = field(
        default="auto",
        metadata={
            "help": "Generate with the live model on rank 0 ('auto': yes unless ZeRO-3/FSDP shards the weights; "
            "then the saved checkpoint is evaluated in a separate process)."
        },
    )
    data_parallel: bool = field(
        default=True,
        metadata={
            "help": "With several ranks and replicated weights (DDP, ZeRO-1/2), every rank generates its share of an "
            "in-process pass and rank 0 gathers, scores and writes once (the same completions as one rank)."
        },
    )
    log_to_trainer: bool = field(
        default=True,
        metadata={"help": "Log headline LPR/WPR/LCPR through the trainer's report_to (TensorBoard, W&B...)."},
    )
    timeout_s: int = field(
        default=3600,
        metadata={
            "help": "Limit for one separate-process evaluation; the training job's process-group timeout is raised "
            "above it (the other ranks wait for the evaluation in a collective)."
        },
    )
    backend: str = field(
        default=DEFAULT_BACKEND,
        metadata={
            "help": "Generation backend of the passes: any registered backend that takes the live model (e.g. 'hf': "
            "in-process) or loads saved checkpoints (e.g. 'vllm': the *saved* checkpoint in a separate "
            "`mlft evaluate-run` process, on rank 0's GPU after the training process frees its cache; LoRA "
            "checkpoints merged). Quantized variants run on a backend that can transform a model (hf)."
        },
    )
    backend_options: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "Options of the backend (e.g. {gpu_memory_utilization: 0.3, max_model_len: 4096}); with vllm "
            "during "
            "training, gpu_memory_utilization is also capped to the GPU memory the training process leaves free."
        },
    )


@dataclass(frozen=True)
class EvalPass:
    variant: str  # "model", a few-shot / intervention variant name, or w8 / w4 / w8a8
    suite: str
    settings: dict  # laid over the suite file (load_suite's `settings`)
    interventions: tuple = ()  # intervention specs ({name, <options>}) added to the suite's
    at_ends_only: bool = False  # quantized variants: only at step 0 and the last step by default

    @property
    def needs_saved_weights(self) -> bool:
        """Whether an intervention of this pass reads the checkpoint's saved weights itself (e.g. quantize)."""
        return reads_saved_weights(self.interventions)


@dataclass(frozen=True)
class Step:
    """One step's evaluation: its number, whether it is an end (the step-0 baseline or the last step: quantized
    variants run there unless quantized_at=all), and how its passes run (recorded in curves.jsonl: in-process,
    data-parallel, separate-process, baseline)."""

    number: int
    is_end: bool = True
    mode: str = "in-process"


def passes_for(ev: EvaluationOptions) -> list[EvalPass]:
    own = ev.suite_overrides
    out = [EvalPass("model", ev.suite, copy.deepcopy(own))]
    variants = list(ev.variants) + (list(ev.fewshot_variants) if ev.fewshot else [])
    for v in variants:
        settings = copy.deepcopy(v.overrides) if v.suite else deep_merge(copy.deepcopy(own), v.overrides)
        out.append(EvalPass(v.variant, v.suite or ev.suite, settings, tuple(v.interventions)))
    if ev.fewshot and not ev.fewshot_variants:  # default: the paper's Q/A template, 1-shot and 5-shot
        out += [
            EvalPass(name, ev.suite, deep_merge(copy.deepcopy(own), copy.deepcopy(settings)))
            for name, settings in FEWSHOT_BASELINES
        ]
    out += [
        EvalPass(
            q,
            ev.suite,
            copy.deepcopy(own),
            ({"name": "quantize", "scheme": q},),
            at_ends_only=ev.quantized_at == "ends",
        )
        for q in ev.quantized
    ]
    return out


RUN_CHAT_TEMPLATE = (
    "chat_template.jinja"  # the template a run trained with, in its run directory (= train.CHAT_TEMPLATE)
)


def evaluation_target(
    ev: EvaluationOptions, run_dir: Path | None = None, backend: str | None = None, options: dict | None = None
) -> Target:
    """The one place a run's evaluation target is built (no model yet: `Target.with_model` per step): the
    recipe's backend and `evaluation.backend_options` (when `backend` is the recipe's), then the run's chat
    template (`run_dir`: for a backend that takes one), then the caller's `options` (e.g. --device / the
    callback's placement); each layer typed and validated as the backend's Options."""
    backend = backend or ev.backend
    target = Target(backend, ev.backend_options if backend == ev.backend else {})
    if run_dir is not None:
        target = target.with_options(backend_settings(run_dir, backend, {}))
    return target.with_options(options or {})


def backend_settings(run_dir: Path, backend: str, options: dict) -> dict:
    """`options` plus the run's chat template, for a backend that takes a chat template option (a base model
    without one is evaluated at step 0 with the template the run trained with, as the in-process pass does)."""
    template = Path(run_dir) / RUN_CHAT_TEMPLATE
    if "chat_template" in option_names(backend) and template.is_file():
        options = {"chat_template": str(template), **options}
    return options


def checkpoint_step(path: str | Path) -> int | None:
    m = re.fullmatch(r"checkpoint-(\d+)", Path(path).name)
    return int(m.group(1)) if m else None


_SUITES: dict[str, EvalSuite] = {}  # pass suites of this process, built once (recipe validation, then each pass)


def load_pass_suite(p: EvalPass) -> EvalSuite:
    """The pass's suite with its overrides; the pass's interventions are appended to the suite's own. Loaded and
    validated once per process (recipe validation builds every pass's suite; each checkpoint's pass reuses it: a
    copy, so a run never changes it); the suite file's change time is part of the key."""
    path = suite_path(p.suite)
    key = json.dumps(
        [str(path.resolve()), path.stat().st_mtime_ns, p.settings, p.interventions, lcb_data_path()],
        sort_keys=True,
        default=str,
    )
    if key not in _SUITES:
        _SUITES[key] = _build_pass_suite(p)
    return copy.deepcopy(_SUITES[key])


def _build_pass_suite(p: EvalPass) -> EvalSuite:
    suite = load_suite(p.suite, settings=p.settings)
    if p.interventions:
        opts = suite.options
        if not hasattr(opts, "interventions"):
            raise ConfigError(f"evaluation pass {p.variant!r}: suite {p.suite!r} ({suite.kind}) takes no interventions")
        opts.interventions = [*opts.interventions, *p.interventions]
        for v in getattr(opts, "variants", []):
            if v.interventions is not None:
                v.interventions = [*v.interventions, *p.interventions]
        get_kind(suite.kind).validate(opts, f"evaluation pass {p.variant!r}")
    return suite


def run_pass(p: EvalPass, run_dir: Path, step: int, target: Target, *, progress: bool = True) -> list[CurveRow]:
    """Run one pass on `target` (the step's: its checkpoint and, in training, the live model) and return its
    curve rows (not yet recorded). Where the pass's model comes from is the target's to say (`Target.for_pass`:
    the live model, the saved weights, or a backend that can quantize them)."""
    view = target.for_pass(p.interventions)
    if view is None:
        raise ConfigError(f"evaluation pass {p.variant!r}: nothing to evaluate (no saved weights to load)")
    suite = load_pass_suite(p)
    out_dir = run_dir / "evals" / f"step-{step:06d}" / p.variant
    result = runner.run_suite(suite, view, out_dir, progress=progress)
    rel = out_dir.relative_to(run_dir)
    return [curve_row(r, step, p, rel, view.model_ref) for r in result.rows]


def curve_row(r: MetricRow, step: int, p: EvalPass, rel: Path, model_ref: str | None) -> CurveRow:
    """The curve row of a suite's metric row: the pass as its variant, its files relative to the run directory
    (an lm_eval row keeps its stderr and per-document samples file: paired comparisons)."""
    harness = None
    if r.harness is not None:
        harness = HarnessStats(r.harness.stderr, str(rel / r.harness.samples) if r.harness.samples else None)
    return CurveRow(
        p.variant,
        r.task,
        r.language,
        r.metric,
        r.value,
        r.low,
        r.high,
        r.n,
        suite=r.suite or p.suite,
        outcomes=str(rel / r.outcomes) if r.outcomes else None,
        harness=harness,
        step=step,
        suite_variant=r.variant,
        model=model_ref,
    )


def evaluate_step(
    run_dir: Path, ev: EvaluationOptions, step: int | Step, target: Target, *, progress: bool = True
) -> list[CurveRow]:
    """Run every pass of `ev` not yet recorded for `step` on `target`; record and return the new rows.

    `target`: the step's model (`evaluation_target(...).with_model(...)`): its `model_ref` is the saved checkpoint
    or base model (passes that need saved weights -- quantized variants -- always load it; the others load it
    when there is no live model); a pass with nothing to run on is skipped (`Target.for_pass`). `step`: its
    number, or a `Step` saying whether it is an end and how it runs."""
    step = step if isinstance(step, Step) else Step(step)
    new_rows = []
    for p in passes_for(ev):
        if p.at_ends_only and not step.is_end:
            continue
        if target.for_pass(p.interventions) is None:
            continue
        with curve_file.curves_lock(run_dir):
            if (step.number, p.variant) in curve_file.done(run_dir):
                continue
            t0 = time.time()
            rows = rows_of(run_pass(p, run_dir, step.number, target, progress=progress))
            curve_file.append_pass(
                run_dir, step.number, p.variant, [r.to_dict() for r in rows], time.time() - t0, step.mode
            )
        log.info("[mlft eval] step %s %s: %s (%.1f s)", step.number, p.variant, headline_text(rows), time.time() - t0)
        new_rows += rows
    return new_rows


def headline(rows: list[MetricRow | dict]) -> dict[str, float]:
    """{"variant/task/metric": value} for the language-averaged LPR/WPR/LCPR rows."""
    out = {}
    for r in rows_of(rows):
        if r.language == "avg" and r.metric in METRICS and r.value is not None:
            out[f"{r.variant}/{r.task}/{r.metric}"] = float(r.value)
    return out


def headline_text(rows: list[MetricRow | dict]) -> str:
    parts = sorted(
        f"{r.task}/{r.metric}={r.value:.3f}"
        for r in rows_of(rows)
        if r.language == "avg" and r.metric in METRICS and r.value is not None
    )
    return ", ".join(parts) or f"{len(rows)} rows"

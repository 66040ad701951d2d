"""The training callback's *passes*: evaluate one training step's model with the recipe's evaluation block and
record curve rows.

A pass = (variant name, suite, overrides, interventions): the plain model ("model"), a few-shot prompting
baseline, an intervention variant (e.g. "+script gate"), or a quantized variant ("w8": the `quantize`
intervention). Used in-process by the eval callback (the live model) and by `mlft evaluate-run` (a saved
checkpoint, or the recipe's base model for step 0). Each (step, variant) pass is recorded once: the curve
file's lock is held from the "already done?" check to the append.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlft.console import get_logger
from mlft.constants import FEWSHOT_BASELINES, METRICS
from mlft.errors import ConfigError
from mlft.evals import runner
from mlft.evals.registry import get_kind
from mlft.evals.suite import load_suite
from mlft.generation.interventions import REGISTRY as INTERVENTIONS
from mlft.generation.models import eval_mode
from mlft.io import curve_file

if TYPE_CHECKING:  # the recipe imports this module (its validation builds the passes)
    from mlft.training.recipe import EvaluationOptions


log = get_logger(__name__)


@dataclass(frozen=True)
class EvalPass:
    variant: str                          # "model", a few-shot / intervention variant name, or w8 / w4 / w8a8
    suite: str
    overrides: tuple[str, ...]
    interventions: tuple = ()             # intervention specs ({name, <options>}) added to the suite's
    at_ends_only: bool = False            # quantized variants: only at step 0 and the last step by default

    @property
    def needs_saved_weights(self) -> bool:
        """Whether an intervention of this pass reads the checkpoint's saved weights itself (e.g. quantize)."""
        return any(INTERVENTIONS.load(i["name"]).from_saved_weights for i in self.interventions)


def passes_for(ev: EvaluationOptions) -> list[EvalPass]:
    out = [EvalPass("model", ev.suite, tuple(ev.suite_overrides))]
    variants = list(ev.variants) + (list(ev.fewshot_variants) if ev.fewshot else [])
    for v in variants:
        overrides = tuple(v.overrides) if v.suite else tuple(ev.suite_overrides) + tuple(v.overrides)
        out.append(EvalPass(v.variant, v.suite or ev.suite, overrides, tuple(v.interventions)))
    if ev.fewshot and not ev.fewshot_variants:  # default: the paper's Q/A template, 1-shot and 5-shot
        out += [EvalPass(name, ev.suite, tuple(ev.suite_overrides) + overrides)
                for name, overrides in FEWSHOT_BASELINES]
    out += [EvalPass(q, ev.suite, tuple(ev.suite_overrides), ({"name": "quantize", "scheme": q},),
                     at_ends_only=ev.quantized_at == "ends") for q in ev.quantized]
    return out


def checkpoint_step(path: str | Path) -> int | None:
    m = re.fullmatch(r"checkpoint-(\d+)", Path(path).name)
    return int(m.group(1)) if m else None


def load_pass_suite(p: EvalPass):
    """The pass's suite with its overrides; the pass's interventions are appended to the suite's own."""

    suite = load_suite(p.suite, list(p.overrides))
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


def run_pass(p: EvalPass, run_dir: Path, step: int, *, model=None, tokenizer=None, model_ref: str | None = None,
             progress: bool = True, merge_lora: bool = True, backend: str = "hf",
             backend_options: dict | None = None) -> list[dict]:
    """Run one pass and return its curve rows (not yet recorded). `backend`, `backend_options`: for a model
    loaded from `model_ref` (device, dtype, chat template). A backend other than hf generates from the saved
    weights (`model_ref`), never the live model; quantized variants always run on hf."""

    suite = load_pass_suite(p)
    out_dir = run_dir / "evals" / f"step-{step:06d}" / p.variant
    if p.needs_saved_weights and backend != "hf":  # quantized variants always run on hf
        backend, backend_options = "hf", None
    if model is not None and not p.needs_saved_weights and backend == "hf":
        with eval_mode(model, merge_lora) as live:
            result = runner.run_suite(suite, model=live, tokenizer=tokenizer, model_ref=model_ref, out_dir=out_dir,
                               progress=progress)
    else:
        result = runner.run_suite(suite, model_ref=model_ref, out_dir=out_dir, progress=progress, backend=backend,
                           backend_options=backend_options)
    rel = out_dir.relative_to(run_dir)
    return [{"step": step, "variant": p.variant, "suite": r.get("suite", p.suite),
             "suite_variant": r.get("variant"), "task": r["task"], "language": r["language"],
             "metric": r["metric"], "value": r["value"], "low": r.get("low"), "high": r.get("high"),
             "n": r.get("n"), "outcomes": str(rel / r["outcomes"]) if r.get("outcomes") else None,
             "model": model_ref, **_harness_keys(r, rel)} for r in result.rows]


def _harness_keys(r: dict, rel: Path) -> dict:
    """An lm_eval suite's rows keep their stderr and per-document samples file (paired comparisons)."""
    if not r.get("harness"):
        return {}
    return {"harness": True, "stderr": r.get("stderr"),
            "samples": str(rel / r["samples"]) if r.get("samples") else None}


def evaluate_step(run_dir: Path, ev: EvaluationOptions, step: int, *, model=None, tokenizer=None,
                  model_ref: str | None = None, is_end: bool = True, progress: bool = True,
                  mode: str = "in-process", backend: str | None = None,
                  backend_options: dict | None = None) -> list[dict]:
    """Run every pass of `ev` not yet recorded for `step`; record and return the new rows.

    `model`/`tokenizer`: the live model; `model_ref`: the saved checkpoint or base model (passes that need saved
    weights — quantized variants — always load it; the others load it when no live model is given).
    `is_end`: the step-0 baseline or the last step (quantized variants run there unless quantized_at=all)."""
    if backend is None or backend == ev.backend:  # the recipe's backend, its options under the caller's
        backend, backend_options = ev.backend, {**ev.backend_options, **(backend_options or {})}
    new_rows = []
    for p in passes_for(ev):
        if p.at_ends_only and not is_end:
            continue
        if model_ref is None and (p.needs_saved_weights or model is None or backend != "hf"):
            continue
        with curve_file.curves_lock(run_dir):
            if (step, p.variant) in curve_file.done(run_dir):
                continue
            t0 = time.time()
            rows = run_pass(p, run_dir, step, model=model, tokenizer=tokenizer, model_ref=model_ref,
                            progress=progress, merge_lora=ev.merge_lora, backend=backend,
                            backend_options=backend_options)
            curve_file.append_pass(run_dir, step, p.variant, rows, time.time() - t0, mode)
        log.info("[mlft eval] step %s %s: %s (%.1f s)", step, p.variant, headline_text(rows), time.time() - t0)
        new_rows += rows
    return new_rows


def headline(rows: list[dict]) -> dict[str, float]:
    """{"variant/task/metric": value} for the language-averaged LPR/WPR/LCPR rows."""
    out = {}
    for r in rows:
        if r["language"] == "avg" and r["metric"] in METRICS and r["value"] is not None:
            out[f"{r['variant']}/{r['task']}/{r['metric']}"] = float(r["value"])
    return out


def headline_text(rows: list[dict]) -> str:
    parts = sorted(f"{r['task']}/{r['metric']}={r['value']:.3f}" for r in rows
                   if r["language"] == "avg" and r["metric"] in METRICS and r["value"] is not None)
    return ", ".join(parts) or f"{len(rows)} rows"

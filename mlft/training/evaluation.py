"""Evaluate one training step's model with the recipe's evaluation block and record curve rows.

Used in-process by the eval callback (with the live model) and by `mlft evaluate-run` (loading a saved
checkpoint, or the recipe's base model for step 0). Each (step, variant) pass is recorded once.
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mlft.training import curves
from mlft.training.recipe import EvaluationOptions

HEADLINE = ("lpr", "wpr", "lcpr")


@dataclass(frozen=True)
class EvalPass:
    variant: str            # "model", a few-shot variant name, or a quantized variant (w8, w4, w8a8)
    suite: str
    overrides: tuple[str, ...]
    quantized: str | None = None


def passes_for(ev: EvaluationOptions) -> list[EvalPass]:
    out = [EvalPass("model", ev.suite, tuple(ev.suite_overrides))]
    if ev.fewshot:
        out += [EvalPass(v.variant, v.suite, tuple(v.overrides)) for v in ev.fewshot_variants]
    out += [EvalPass(q, ev.suite, tuple(ev.suite_overrides), quantized=q) for q in ev.quantized]
    return out


def checkpoint_step(path: str | Path) -> int | None:
    m = re.fullmatch(r"checkpoint-(\d+)", Path(path).name)
    return int(m.group(1)) if m else None


@contextmanager
def eval_mode(model):
    """Generate in eval mode with the KV cache on; restore train mode and the cache setting afterwards
    (gradient checkpointing turns the cache off, and generating in train mode with it yields garbage)."""
    was_training = model.training
    configs = [c for c in (getattr(model, "config", None), getattr(model, "generation_config", None)) if c]
    saved = [getattr(c, "use_cache", None) for c in configs]
    model.eval()
    for c in configs:
        c.use_cache = True
    try:
        yield model
    finally:
        for c, v in zip(configs, saved):
            c.use_cache = v
        if was_training:
            model.train()


def run_pass(p: EvalPass, run_dir: Path, step: int, *, model=None, tokenizer=None, model_ref: str | None = None,
             progress: bool = True) -> list[dict]:
    """Run one pass and return its curve rows (not yet recorded)."""
    from mlft.evaluate import run_suite
    from mlft.generation.suites import load_suite

    suite = load_suite(p.suite, list(p.overrides))
    out_dir = run_dir / "evals" / f"step-{step:06d}" / p.variant
    if p.quantized:
        from mlft.training.quantize import load_quantized

        qmodel, qtok = load_quantized(model_ref, p.quantized)
        result = run_suite(suite, model=qmodel, tokenizer=qtok, out_dir=out_dir, progress=progress)
        del qmodel
    elif model is not None:
        with eval_mode(model):
            result = run_suite(suite, model=model, tokenizer=tokenizer, out_dir=out_dir, progress=progress)
    else:
        result = run_suite(suite, model_ref=model_ref, out_dir=out_dir, progress=progress)
    return [{"step": step, "variant": p.variant, "suite": r.get("suite", p.suite),
             "suite_variant": r.get("variant"), "task": r["task"], "language": r["language"],
             "metric": r["metric"], "value": r["value"], "model": model_ref} for r in result.rows]


def evaluate_step(run_dir: Path, ev: EvaluationOptions, step: int, *, model=None, tokenizer=None,
                  model_ref: str | None = None, is_end: bool = True, progress: bool = True,
                  mode: str = "in-process") -> list[dict]:
    """Run every pass of `ev` not yet recorded for `step`; record and return the new rows.

    `model`/`tokenizer`: the live model (prompting variants use it); `model_ref`: the saved checkpoint or base
    model (quantized variants always load it separately; prompting variants load it when no live model).
    `is_end`: the step-0 baseline or the last step (quantized variants run there unless quantized_at=all)."""
    new_rows = []
    for p in passes_for(ev):
        if (step, p.variant) in curves.done(run_dir):
            continue
        if p.quantized and ev.quantized_at == "ends" and not is_end:
            continue
        if model_ref is None and (p.quantized or model is None):
            continue
        t0 = time.time()
        rows = run_pass(p, run_dir, step, model=None if p.quantized else model, tokenizer=tokenizer,
                        model_ref=model_ref, progress=progress)
        curves.append_pass(run_dir, step, p.variant, rows, time.time() - t0, mode)
        print(f"[mlft eval] step {step} {p.variant}: {headline_text(rows)} ({time.time() - t0:.1f} s)", flush=True)
        new_rows += rows
    return new_rows


def headline(rows: list[dict]) -> dict[str, float]:
    """{"variant/task/metric": value} for the language-averaged LPR/WPR/LCPR rows."""
    out = {}
    for r in rows:
        if r["language"] == "avg" and r["metric"] in HEADLINE and r["value"] is not None:
            out[f"{r['variant']}/{r['task']}/{r['metric']}"] = float(r["value"])
    return out


def headline_text(rows: list[dict]) -> str:
    parts = sorted(f"{r['task']}/{r['metric']}={r['value']:.3f}" for r in rows
                   if r["language"] == "avg" and r["metric"] in HEADLINE and r["value"] is not None)
    return ", ".join(parts) or f"{len(rows)} rows"

"""The runner: run any suite with any backend it allows and write its folder.

    result = run_suite("lcb_quick", model_ref="smollm2-135m-instruct", out_dir=Path("runs/eval"))
    result = run_suite(suite, model=model, tokenizer=tok, out_dir=ckpt_dir / "eval")    # a live model
    result = run_suite("lcb_quick", backend="openai", backend_options={"base_url": ...}, model_ref="served")

out_dir/ holds what the kind wrote (e.g. per-variant completions), `scores.jsonl` (long-format metric rows),
`report.md`, one CSV per table and `results.json` (resolved suite, backend, versions, git commit, wall time).
Re-running reuses finished work (completions are resumable; kinds keep their own caches).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlft.errors import ConfigError
from mlft.evals.registry import get_kind
from mlft.evals.suite import EvalSuite, load_suite
from mlft.generation.backends import (
    DEFAULT_BACKEND,
    able,
    backend_options,
    capabilities,
    check_backend,
    check_interventions,
    create_backend,
    holds_weights,
    loads_model,
    provides,
)
from mlft.generation.interventions import split
from mlft.generation.models import load, resolve
from mlft.io.jsonl import write_jsonl
from mlft.io.metric_rows import MetricRow
from mlft.provenance import write_results


def progress_desc(suite: str, variant: str) -> str:
    return suite if variant == "default" else f"{suite}:{variant}"


@dataclass
class EvalContext:
    """What a kind gets to do its work: a backend (built on first use, one per model transform) or a local
    model, the output folder, and the progress setting."""

    out_dir: Path
    backend_name: str = DEFAULT_BACKEND
    backend_options: Any = None
    model_ref: str | None = None
    model: Any = None
    tokenizer: Any = None
    progress: bool = True
    _backends: dict = field(default_factory=dict, repr=False)

    @property
    def capabilities(self):
        """What the backend can do (mlft.generation.backends.Capabilities)."""
        return capabilities(self.backend_name)

    @property
    def model_name(self) -> str:
        return str(self.model_ref or getattr(getattr(self.model, "config", None), "_name_or_path", None) or "model")

    def check_interventions(self, interventions: Sequence, where: str) -> None:
        check_interventions(self.backend_name, interventions, where)

    def backend(self, batch_size: int = 16, token_stats: bool = False, interventions: Sequence = ()):
        """The generation backend; when `interventions` hold model transforms (e.g. quantize), a backend over
        the transformed model (built once per distinct set of transforms)."""
        transforms, _ = split(interventions)
        base_key = (batch_size, token_stats, ())
        if transforms:
            key = (batch_size, token_stats, tuple(repr(iv.describe()) for iv in transforms))
            if key not in self._backends:
                if (
                    self.model is None
                    and base_key not in self._backends
                    and all(iv.from_saved_weights for iv in transforms)
                    and self.model_ref is not None
                ):
                    # e.g. quantize: loads the saved weights itself; no need to load the full model first
                    model, tok = None, None
                    for iv in transforms:
                        model, tok = iv.transform(model, tok, self.model_ref)
                    self._backends[key] = create_backend(
                        self.backend_name,
                        self.backend_options,
                        model_ref=self.model_ref,
                        model=model,
                        tokenizer=tok,
                        batch_size=batch_size,
                        token_stats=token_stats,
                    )
                else:
                    self._backends[key] = self.backend(batch_size, token_stats).transformed(transforms)
            return self._backends[key]
        if base_key not in self._backends:
            model, tokenizer = self.model, self.tokenizer
            loaded = next((b for k, b in self._backends.items() if not k[2]), None)
            if model is None and loaded is not None and holds_weights(self.backend_name):  # reuse a loaded model
                model, tokenizer = loaded.model, loaded.tokenizer
            self._backends[base_key] = create_backend(
                self.backend_name,
                self.backend_options,
                model_ref=self.model_ref,
                model=model,
                tokenizer=tokenizer,
                batch_size=batch_size,
                token_stats=token_stats,
            )
        return self._backends[base_key]

    def fluency_model(self, spec: str | None):
        """The reference model of the fluency proxy: None when off, the evaluated model without interventions
        ("unmodified", hf only), or a fixed model reference (loaded once per process)."""
        if spec is None:
            return None, None
        if spec == "unmodified":
            if not holds_weights(self.backend_name):
                return None, None
            base = next((b for k, b in self._backends.items() if not k[2]), None)
            if base is None:
                base = self.backend()
            return base.model, base.tokenizer
        return _reference_model(spec, self.backend_name, self.backend_options)

    def local_model(self):
        """(model, tokenizer) of a local model (a backend that provides weights): the live one, or loaded once."""
        if not holds_weights(self.backend_name):
            raise ConfigError(f"this evaluation needs the model's weights; the {self.backend_name} backend has none")
        return self.backend().model, self.backend().tokenizer

    def close(self) -> None:
        for b in self._backends.values():
            b.close()


_REFERENCE: dict = {}


def _reference_model(ref: str, backend_name: str, backend_opts):
    """A fixed reference model (e.g. a training run's base model), cached: one at a time per process."""

    # the evaluated backend's placement (device, dtype) when its options hold one
    opts = backend_options(backend_name, backend_opts) if capabilities(backend_name).placement_options else None
    key = (ref, getattr(opts, "dtype", "auto"), getattr(opts, "device", None))
    if key not in _REFERENCE:
        _REFERENCE.clear()
        _REFERENCE[key] = load(ref, dtype=key[1], device=key[2])
    return _REFERENCE[key]


@dataclass
class SuiteResult:
    suite: str
    rows: list[MetricRow]  # the kind's rows with the suite named, as scores.jsonl holds them
    out_dir: Path
    report: str = ""
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)

    def value(self, metric: str, task: str, language: str = "avg", variant: str = "default") -> float | None:
        return next(
            (
                r.value
                for r in self.rows
                if (r.metric, r.task, r.language, r.variant) == (metric, task, language, variant)
            ),
            None,
        )


def check_kind_backend(suite: EvalSuite, backend: str) -> None:
    """A suite's kind can run on `backend` (it provides what the kind needs), else a ConfigError naming both."""
    kind = get_kind(suite.kind)
    check_backend(backend)
    missing = sorted(set(kind.needs) - provides(backend))
    if missing:
        ok = able(lambda c: set(kind.needs) <= c.flags())
        raise ConfigError(
            f"{suite.source_file or suite.name}: a {suite.kind} suite cannot run on the {backend} "
            f"backend ({kind.description}; it needs {', '.join(missing)}, which the {backend} backend "
            f"does not provide; it runs on: {', '.join(ok)})"
        )


def prepare(suite: EvalSuite, backend: str, backend_opts, model, model_ref) -> None:
    """Every check that needs no model: backend allowed for the kind, options valid, model reference known."""
    check_kind_backend(suite, backend)
    backend_options(backend, backend_opts, f"{backend} backend options")
    if loads_model(backend) and model is None:  # backends that load the weights themselves
        resolve(model_ref)


def run_suite(
    suite: EvalSuite | str | Path,
    *,
    out_dir: Path,
    model=None,
    tokenizer=None,
    model_ref: str | None = None,
    backend: str = DEFAULT_BACKEND,
    backend_options: dict | Any | None = None,
    progress: bool = True,
) -> SuiteResult:

    started_at = time.time()
    started = time.perf_counter()
    suite = suite if isinstance(suite, EvalSuite) else load_suite(suite)
    prepare(suite, backend, backend_options, model, model_ref)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = EvalContext(out_dir, backend, backend_options, model_ref, model, tokenizer, progress)
    try:
        out = get_kind(suite.kind).run(suite, ctx)
    finally:
        ctx.close()
    rows = [_with_suite(r, suite.name) for r in out.rows]
    write_jsonl(out_dir / "scores.jsonl", [r.to_dict() for r in rows])
    files = [out_dir / "scores.jsonl"]
    for name, text in out.tables:
        (out_dir / f"table_{name}.csv").write_text(text, encoding="utf-8")
        files.append(out_dir / f"table_{name}.csv")
    head = f"# {suite.name}\n\n" + (f"{suite.description}\n\n" if suite.description else "")
    report = head + out.report
    (out_dir / "report.md").write_text(report, encoding="utf-8")
    files += [out_dir / "report.md", *out.files]
    seconds = time.perf_counter() - started
    files.append(
        write_results(
            out_dir,
            {
                "suite": suite.to_dict(),
                "backend": backend,
                "backend_options": _safe_options(backend, backend_options),
                "model": ctx.model_name,
            },
            started_at,
            seconds,
        )
    )
    return SuiteResult(suite.name, rows, out_dir, report, seconds, files)


def _with_suite(row: MetricRow, name: str) -> MetricRow:
    import dataclasses

    return row if row.suite is not None else dataclasses.replace(row, suite=name)


def _safe_options(backend: str, options) -> dict:
    import dataclasses

    opts = dataclasses.asdict(backend_options(backend, options))
    return {k: ("<set>" if "key" in k and k != "api_key_env" and v else v) for k, v in opts.items()}

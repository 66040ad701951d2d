"""The runner: run any suite with any backend it allows and write its folder.

    result = run_suite("lcb_quick", Target(model_ref="smollm2-135m-instruct"), Path("runs/eval"))
    result = run_suite(suite, Target(model=model, tokenizer=tok), ckpt_dir / "eval")    # a live model
    result = run_suite("lcb_quick", Target("openai", {"base_url": ...}, model_ref="served"), out_dir)

What is evaluated is one `Target` (mlft.generation.target): it makes the backends and loads the weights.

out_dir/ holds what the kind wrote (e.g. per-variant completions), `scores.jsonl` (long-format metric rows),
`report.md`, one CSV per table and `results.json` (resolved suite, backend, versions, git commit, wall time).
Re-running reuses finished work (completions are resumable; kinds keep their own caches).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlft.errors import ConfigError
from mlft.evals.registry import get_kind
from mlft.evals.suite import EvalSuite, load_suite
from mlft.generation.backends import able, check_backend, check_interventions, provides
from mlft.generation.target import Models, Target
from mlft.io.jsonl import write_jsonl
from mlft.io.metric_rows import MetricRow
from mlft.provenance import write_results


def progress_desc(suite: str, variant: str) -> str:
    return suite if variant == "default" else f"{suite}:{variant}"


@dataclass
class EvalContext:
    """What a kind gets to do its work: the target (what is evaluated) and its models (backends built on first use,
    one per model transform: mlft.generation.target.Models), the output folder, and the progress setting."""

    out_dir: Path
    target: Target = field(default_factory=Target)
    progress: bool = True
    models: Models | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.models is None:
            self.models = self.target.models()

    # the target's parts, as the kinds ask for them
    @property
    def backend_name(self) -> str:
        return self.target.backend

    @property
    def backend_options(self):
        return self.target.options

    @property
    def model_ref(self) -> str | None:
        return self.target.model_ref

    @property
    def capabilities(self):
        """What the backend can do (mlft.generation.backends.Capabilities)."""
        return self.target.capabilities

    @property
    def model_name(self) -> str:
        return self.target.name

    def check_interventions(self, interventions: Sequence, where: str) -> None:
        check_interventions(self.target.backend, interventions, where)

    def backend(self, batch_size: int = 16, token_stats: bool = False, interventions: Sequence = ()):
        """The generation backend (mlft.generation.target.Models.backend: model transforms, saved weights)."""
        return self.models.backend(batch_size, token_stats, interventions)

    def fluency_model(self, spec: str | None):
        return self.models.fluency_model(spec)

    def local_model(self):
        """(model, tokenizer) of a local model (a backend that provides weights): the live one, or loaded once."""
        return self.models.local_model()

    def close(self) -> None:
        self.models.close()


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


def prepare(suite: EvalSuite, target: Target) -> None:
    """Every check that needs no model: backend allowed for the kind, model reference known (the options were
    validated when the target was built)."""
    check_kind_backend(suite, target.backend)
    target.check()


def run_suite(suite: EvalSuite | str | Path, target: Target, out_dir: Path, *, progress: bool = True) -> SuiteResult:
    """Run `suite` on `target` (mlft.generation.target.Target: backend, options, model reference or live model)
    and write its folder `out_dir`."""
    started_at = time.time()
    started = time.perf_counter()
    suite = suite if isinstance(suite, EvalSuite) else load_suite(suite)
    prepare(suite, target)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with target.open() as models:
        out = get_kind(suite.kind).run(suite, EvalContext(out_dir, target, progress, models))
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
    files.append(write_results(out_dir, {"suite": suite.to_dict(), **target.describe()}, started_at, seconds))
    return SuiteResult(suite.name, rows, out_dir, report, seconds, files)


def _with_suite(row: MetricRow, name: str) -> MetricRow:
    import dataclasses

    return row if row.suite is not None else dataclasses.replace(row, suite=name)

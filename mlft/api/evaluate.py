"""`mlft.evaluate`: an eval suite on a model (hub id, local path, a served endpoint, or a `Target`);
`mlft.evaluate_checkpoint`: a run's evaluation passes of one checkpoint (or the base model), recorded in its
curves. `mlft eval SUITE` is `evaluate` and `EvalResult`'s report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from mlft.api.results import Result, ScoreResult
from mlft.api.runs import load_run
from mlft.api.score import score
from mlft.errors import ConfigError, DataError
from mlft.evals import runner
from mlft.evals.suite import load_suite
from mlft.format import render
from mlft.generation.models import DEFAULT_MODEL
from mlft.generation.target import Target
from mlft.io.jsonl import read_jsonl
from mlft.reports.page import PAGE, write_report_page
from mlft.training.passes import EvaluationOptions, Step, evaluate_step, evaluation_target


@dataclasses.dataclass(eq=True)
class EvalResult(Result):
    """An eval suite's run (`mlft.evaluate`): its metric rows (scores.jsonl: one per variant, task, language and
    metric, with intervals), its report, and the folder `out` that holds completions, outcomes and tables.
    `scores` scores the folder's completions again as `mlft.score` would (lcb suites).

    >>> import mlft
    >>> e = mlft.evaluate("HuggingFaceTB/SmolLM2-135M-Instruct", "lcb_quick", out="runs/eval/x")  # doctest: +SKIP
    >>> e.value("lpr", "crosslingual")  # doctest: +SKIP
    """

    KIND: ClassVar[str] = "eval"

    suite: str
    out: str
    rows: list[dict]
    report: str = ""
    seconds: float = 0.0
    files: list[str] = dataclasses.field(default_factory=list)
    kind: str = ""  # the suite's kind (lcb, lm_eval, multisense, ...)

    @classmethod
    def from_folder(cls, out: str | Path, suite: str | None = None, **more) -> EvalResult:
        """The result an eval folder holds (its scores.jsonl and report.md)."""
        out = Path(out)
        if not (out / "scores.jsonl").is_file():
            raise DataError(f"{out}: no scores.jsonl: not a finished `mlft eval` folder")
        rows = read_jsonl(out / "scores.jsonl")
        report = (out / "report.md").read_text(encoding="utf-8") if (out / "report.md").is_file() else ""
        name = suite or next((r.get("suite") for r in rows if r.get("suite")), out.name)
        return cls(name, str(out), rows, more.pop("report", report), **more)

    def write_page(self) -> Path | None:
        """out/report.html: every reply of the folder on one page (lcb suites); a problem is logged, not raised."""
        return write_report_page([Path(self.out)], Path(self.out) / PAGE)

    def records(self) -> list[dict]:
        """The suite's metric rows (scores.jsonl)."""
        return [dict(r) for r in self.rows]

    def table(self, fmt: str = "table") -> str:
        """The suite's report (markdown, as `mlft eval` prints it) for table / markdown; the rows for tsv / csv."""
        if fmt in ("table", "markdown"):
            return self.report or render(*_long(self.rows), "markdown")
        return render(*_long(self.rows), fmt)

    def value(self, metric: str = "lpr", task: str = "crosslingual", language: str = "avg", variant: str | None = None):
        """One metric value (a fraction) of the suite's rows; `variant` defaults to the first one."""
        variants = list(dict.fromkeys(r.get("variant") for r in self.rows))
        variant = variant if variant is not None else (variants[0] if variants else None)
        key = (metric, task, language, variant)
        return next(
            (
                r.get("value")
                for r in self.rows
                if (r.get("metric"), r.get("task"), r.get("language"), r.get("variant")) == key
            ),
            None,
        )

    @property
    def scores(self) -> ScoreResult:
        """The completions of the suite's first variant scored again as `mlft.score` scores them (lcb suites)."""
        return self.score_variant()

    def score_variant(self, variant: str | None = None, **options) -> ScoreResult:
        """The completions of `variant` (default: the first) scored by `mlft.score` with `options` (lcb suites)."""
        variants = list(dict.fromkeys(r.get("variant") for r in self.rows))
        variant = variant if variant is not None else (variants[0] if variants else None)
        rel = next((r.get("outcomes") for r in self.rows if r.get("variant") == variant and r.get("outcomes")), None)
        path = Path(self.out) / Path(rel).parent / "completions.jsonl" if rel else None
        if path is None or not path.is_file():
            raise DataError(f"{self.out}: no completions of variant {variant!r} to score (not an lcb suite's folder?)")
        return score(path, **options)


def _long(rows: list[dict]) -> tuple[list[str], list[list]]:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    return cols, [["NA" if r.get(c) is None else r.get(c) for c in cols] for r in rows]


def dotted(overrides: dict[str, Any]) -> dict:
    """{"a.b": 1, "c": 2} -> {"a": {"b": 1}, "c": 2}: keyword overrides as typed nested settings."""
    out: dict = {}
    for key, value in overrides.items():
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{key}: {part} is set both as a value and as a mapping")
        node[last] = value
    return out


def deep_merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def make_target(model=None, backend: str = "hf", options: dict | None = None):
    """A `Target` from a model reference (hub id, local path, a served model's name), a backend and its options;
    a `Target` passes through (with `options` laid over its own)."""

    if isinstance(model, Target):
        return model.with_options(options or {})
    target = Target(backend, options or {})
    if model is None and target.loads_model:
        model = DEFAULT_MODEL
    return target.with_model(None if model is None else str(model))


def evaluate(
    model=None,
    suite: str | Path = "lcb_quick",
    *,
    backend: str = "hf",
    out: str | Path | None = None,
    overrides: list[str] | tuple = (),
    settings: dict | None = None,
    options: dict | None = None,
    base_url: str | None = None,
    prompts: str | Path | None = None,
    progress: bool = True,
    report_page: bool = True,
    **suite_overrides: Any,
) -> EvalResult:
    """Run an eval suite (generate, score, report; resumable: finished completions are reused) and return its rows.

    `model`: a hub id or local path (default: the embedded model for a backend that loads weights), a served
    model's name (backend="openai" with `base_url`), or a `mlft.Target`. `suite`: a suite name in eval/ or a
    suite YAML. Suite settings: `overrides` as KEY=VALUE texts, `settings` as a nested mapping, and keyword
    arguments as dotted keys (`**{"decoding.max_new_tokens": 20}`, `per_language=2`); `prompts`: your own prompt
    file (lcb suites). `options`: the backend's options (e.g. {"device": "cpu"}); `base_url` is one of them.
    `out`: the folder (default runs/eval/<suite>/<model>). `report_page`: write report.html beside (lcb suites).

    >>> import mlft
    >>> e = mlft.evaluate("HuggingFaceTB/SmolLM2-135M-Instruct", "lcb_quick", out="runs/eval/x",
    ...                   per_language=1)  # doctest: +SKIP
    >>> print(e.table())  # doctest: +SKIP
    """

    opts = dict(options or {})
    if base_url is not None:
        opts["base_url"] = base_url
    target = make_target(model, backend, opts)
    typed = deep_merge(dict(settings or {}), dotted(suite_overrides))
    if prompts is not None:
        typed["prompts"] = str(prompts)
    loaded = load_suite(suite, list(overrides), typed)
    out = Path(out) if out else Path("runs") / "eval" / loaded.name / Path(target.model_ref or "model").name
    done = runner.run_suite(loaded, target, out, progress=progress)
    more = {}
    if done is not None:  # (a stand-in runner may return nothing: the folder is what counts)
        more = {"report": done.report, "seconds": done.seconds, "files": [str(f) for f in done.files]}
    result = EvalResult.from_folder(out, loaded.name, kind=loaded.kind, **more)
    if report_page and loaded.kind == "lcb":
        result.write_page()
    return result


def evaluate_checkpoint(
    run_dir: str | Path,
    model: str,
    *,
    step: int = 0,
    mode: str = "baseline",
    progress: bool = True,
    **evaluation: Any,
):
    """Every evaluation pass of `model` at `step` not yet recorded in the run folder `run_dir` (its curves.jsonl:
    the training callback's format), e.g. a base model's first passes (`step=0`) shared by several runs.
    `evaluation`: the recipe's `evaluation:` keys (suite, suite_overrides, variants as `mlft.PassVariant`s, fewshot,
    fewshot_variants, quantized, backend, ...). Returns the run (`mlft.Run`).

    >>> import mlft
    >>> run = mlft.evaluate_checkpoint("runs/demo/base", "smollm2-135m-instruct", suite="lcb_demo")  # doctest: +SKIP
    >>> print(run.table())  # doctest: +SKIP
    """

    ev = EvaluationOptions(**evaluation)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    evaluate_step(run_dir, ev, Step(step, mode=mode), evaluation_target(ev).with_model(model), progress=progress)
    return load_run(run_dir)

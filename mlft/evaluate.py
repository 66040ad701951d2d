"""Run an eval suite: generate (resumably) -> score -> long-format metric rows, tables, plot.

    result = run_suite("lcb_quick", model_ref="smollm2-135m-instruct", out_dir=Path("runs/eval"))
    result = run_suite(suite, model=model, tokenizer=tok, out_dir=ckpt_dir / "eval")   # live model

out_dir/ holds `<variant>/completions.jsonl` (+ `completions.csv`, the official format), `scores.jsonl`
(the rows), `report.md`, one CSV per table, `sweep.png` for sweeps and `confusion.md` with token stats.
Re-running generates only what is missing; scoring reads the completions files.
"""

from __future__ import annotations

import importlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlft.completions import Completion, write_official_csv
from mlft.errors import ConfigError
from mlft.evals import EVAL_KINDS
from mlft.generation.backends import check_backend
from mlft.generation.runner import generate_completions
from mlft.generation.suites import EvalSuite, load_suite
from mlft.lcb.data import load_prompts, stratified_sample
from mlft.reports.format import cell, render

METRICS = ("lpr", "wpr", "lcpr")


@dataclass
class SuiteResult:
    suite: str
    rows: list[dict]
    out_dir: Path
    report: str = ""          # markdown tables
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)

    def value(self, metric: str, task: str, language: str = "avg", variant: str = "default") -> float | None:
        return next((r["value"] for r in self.rows if (r["metric"], r["task"], r["language"], r["variant"])
                     == (metric, task, language, variant)), None)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_") or "default"


def make_backend(name: str, suite: EvalSuite, model=None, tokenizer=None, model_ref: str | None = None,
                 options: dict | None = None):
    """Build (and pre-flight) a backend; fails before any generation on bad options or servers."""
    check_backend(name)
    options = dict(options or {})
    if name == "openai":
        from mlft.generation.backends.openai import OpenAIBackend

        served = options.pop("served_model", None) or model_ref
        if not served:
            raise ConfigError("openai backend: --model names the served model; none given")
        backend = OpenAIBackend(served, **options)
        backend.preflight()
        return backend
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.models import load, resolve

    if model is None:
        model, tokenizer = load(resolve(model_ref), dtype=options.pop("dtype", "auto"),
                                device=options.pop("device", None))
    if tokenizer is None:
        raise ConfigError("run_suite: a live model needs its tokenizer")
    return HFBackend(model, tokenizer, batch_size=suite.batch_size, token_stats=suite.token_stats)


def select_prompts(suite: EvalSuite):
    prompts = load_prompts(suite.tasks, suite.sources, suite.languages, path=suite.data)
    if suite.per_group:
        prompts = stratified_sample(prompts, suite.per_group, suite.seed)
    return prompts


def prepare(suite: EvalSuite, backend: str, model=None, tokenizer=None, model_ref: str | None = None,
            options: dict | None = None):
    """(prompts, backend), cheapest checks first, so that every bad input fails before any generation:
    backend name, API key and server (openai) or model reference (hf), then data, then model weights."""
    check_backend(backend)
    if backend == "openai":
        gen = make_backend(backend, suite, model, tokenizer, model_ref, options)
        return select_prompts(suite), gen
    if model is None:
        from mlft.generation.models import resolve

        resolve(model_ref)
    prompts = select_prompts(suite)
    return prompts, make_backend(backend, suite, model, tokenizer, model_ref, options)


def metric_rows(report, suite: str, variants: list[str]) -> list[dict]:
    rows = []
    for variant in variants:
        for task, model in report.groups():
            if model != variant:
                continue
            for metric, value in report.headline(task, model).items():
                if value is not None:
                    rows.append({"suite": suite, "variant": variant, "task": task, "language": "avg",
                                 "metric": metric, "value": value})
            for lang, ms in sorted(report.by_language(task, model).items()):
                for metric, value in ms.items():
                    if value is not None:
                        rows.append({"suite": suite, "variant": variant, "task": task, "language": lang,
                                     "metric": metric, "value": value})
    return rows


def sweep_tables(rows: list[dict], fmt: str = "markdown") -> list[tuple[str, str]]:
    """Paper layout (Tables 8, 9, 11): per task and metric, rows = setting, columns = avg + languages."""
    out = []
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for task in dict.fromkeys(r["task"] for r in rows):
        for metric in METRICS:
            sel = [r for r in rows if r["task"] == task and r["metric"] == metric]
            if not sel:
                continue
            langs = sorted({r["language"] for r in sel if r["language"] != "avg"})
            val = {(r["variant"], r["language"]): r["value"] for r in sel}
            body = [[v] + [cell(val.get((v, lang))) for lang in ["avg", *langs]] for v in variants]
            out.append((f"{task}_{metric}", render(["setting", "avg", *langs], body, fmt,
                                                   f"{task} {metric.upper()} (%)")))
    return out


def plot_sweep(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r["variant"] for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for metric in METRICS:
            val = {r["variant"]: r["value"] for r in rows
                   if r["task"] == task and r["metric"] == metric and r["language"] == "avg"}
            if val:
                ax.plot(range(len(variants)), [100 * val[v] if v in val else float("nan") for v in variants],
                        marker="o", label=metric.upper())
        ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right")
        ax.set_title(task)
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _run_other_kind(suite: EvalSuite, model, tokenizer, model_ref, out_dir: Path, progress: bool) -> list[dict]:
    module = importlib.import_module(EVAL_KINDS[suite.kind])
    if model is None:
        from mlft.generation.models import load

        model, tokenizer = load(model_ref)
    rows = module.run(suite.options_obj, model=model, tokenizer=tokenizer, out_dir=out_dir, progress=progress)
    return [{"suite": suite.name, "variant": "default", **r} for r in rows]


def run_suite(suite: EvalSuite | str | Path, *, model=None, tokenizer=None, model_ref: str | None = None,
              backend: str = "hf", out_dir: Path, progress: bool = True,
              backend_options: dict | None = None) -> SuiteResult:
    started = time.perf_counter()
    suite = suite if isinstance(suite, EvalSuite) else load_suite(suite)
    out_dir = Path(out_dir)
    check_backend(backend)
    if suite.kind != "lcb":
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = _run_other_kind(suite, model, tokenizer, model_ref, out_dir, progress)
        return _finish(SuiteResult(suite.name, rows, out_dir), suite, started)
    prompts, gen = prepare(suite, backend, model, tokenizer, model_ref, backend_options)
    model_name = model_ref or getattr(getattr(model, "config", None), "_name_or_path", None) or "model"
    completions, all_records = [], []
    for variant, decoding, prompting in suite.runs():
        vdir = out_dir / _slug(variant)
        records = generate_completions(prompts, gen, decoding, prompting, vdir / "completions.jsonl",
                                       str(model_name), progress, desc=f"{suite.name}:{variant}")
        write_official_csv(records, vdir / "completions.csv")
        all_records += records
        completions += [Completion(r["id"], variant, r["task"], r["source"], r["language"], r["completion"])
                        for r in records]
    if not completions:
        raise ConfigError(f"{suite.source_file}: no completions to score (every prompt failed; see the JSONL)")
    from mlft.lcb.scoring import score_completions

    report = score_completions(completions)
    rows = metric_rows(report, suite.name, [name for name, _, _ in suite.runs()])
    result = SuiteResult(suite.name, rows, out_dir)
    if suite.token_stats:
        from mlft.generation.confusion import analyze, confusion_table
        from mlft.lcb.langid import LanguageIdentifier

        table = confusion_table(analyze(all_records, LanguageIdentifier.from_spec(None)),
                                title="Confusion points (paper Table 7 layout)")
        (out_dir / "confusion.md").write_text(table, encoding="utf-8")
        result.report += table + "\n"
    return _finish(result, suite, started)


def _finish(result: SuiteResult, suite: EvalSuite, started: float) -> SuiteResult:
    out = result.out_dir
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "scores.jsonl", "w", encoding="utf-8") as fh:
        for r in result.rows:
            fh.write(json.dumps(r) + "\n")
    result.files.append(out / "scores.jsonl")
    tables = sweep_tables(result.rows) if suite.kind == "lcb" else []
    for name, text in (sweep_tables(result.rows, "csv") if tables else []):
        (out / f"table_{name}.csv").write_text(text, encoding="utf-8")
        result.files.append(out / f"table_{name}.csv")
    head = f"# {suite.name}\n\n{suite.description}\n\n" if suite.description else f"# {suite.name}\n\n"
    result.report = head + "\n".join(t for _, t in tables) + ("\n" + result.report if result.report else "")
    (out / "report.md").write_text(result.report, encoding="utf-8")
    result.files.append(out / "report.md")
    if len({r["variant"] for r in result.rows}) > 1 and suite.kind == "lcb":
        result.files.append(plot_sweep(result.rows, out / "sweep.png", suite.name))
    result.seconds = time.perf_counter() - started
    return result


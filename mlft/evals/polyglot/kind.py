"""The `polyglot` eval kind: Polyglot-or-Not CKA per language, the 20-language mean, per-relation accuracy.

    kind: polyglot
    languages: null        # null = all 20
    sample: 200            # facts per language (seeded); null = all 303k

CKA compares the log-probabilities a local model gives true and false completions, so this kind needs the
model's weights: it runs on the hf backend only.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlft.benchmarks.polyglot import metrics
from mlft.benchmarks.polyglot.data import LANGUAGES, check_language, data_dir, load_facts
from mlft.config import from_dict
from mlft.errors import ConfigError
from mlft.evals.polyglot.cka import score_facts
from mlft.evals.registry import EvalKind, KindOutput
from mlft.io.metric_rows import MetricRow


@dataclass
class PolyglotOptions:
    languages: list[str] | None = field(default=None, metadata={"help": "language codes; null = all 20"})
    sample: int | None = field(
        default=None,
        metadata={"help": "facts per language, a seeded sample (the same facts at every checkpoint); null = all"},
    )
    seed: int = field(default=0, metadata={"help": "seed of the sample and of the bootstrap"})
    batch_size: int = field(default=32, metadata={"help": "stems per forward pass"})
    bootstrap: int = field(default=10_000, metadata={"help": "bootstrap resamples for the 95% CI; 0 = no CI"})
    relations: bool = field(default=True, metadata={"help": "also report accuracy per Wikidata relation"})
    data_dir: str | None = field(
        default=None, metadata={"help": "folder with {lang}.parquet (null: $MLFT_POLYGLOT_DATA, the cache, ../shared)"}
    )

    @property
    def langs(self) -> list[str]:
        return list(self.languages or LANGUAGES)


def parse_options(options: dict, where: str) -> PolyglotOptions:
    """Options from a mapping, validated (for programmatic use; suites go through the suite loader)."""
    opts = from_dict(PolyglotOptions, options or {}, where)
    validate(opts, where)
    return opts


def validate(opts: PolyglotOptions, where: str) -> None:
    for i, lang in enumerate(opts.languages or []):
        check_language(lang, f"{where}.languages[{i}]")
    if opts.languages is not None and not opts.languages:
        raise ConfigError(f"{where}.languages: give at least one language, or null for all 20")
    if opts.sample is not None and opts.sample < 1:
        raise ConfigError(f"{where}.sample: must be >= 1 or null, got {opts.sample}")
    if opts.batch_size < 1 or opts.bootstrap < 0:
        raise ConfigError(f"{where}: batch_size must be >= 1 and bootstrap >= 0")
    missing = [lang for lang in opts.langs if not (data_dir(opts.data_dir) / f"{lang}.parquet").is_file()]
    if missing:
        raise ConfigError(
            f"{where}: no Polyglot-or-Not data for {', '.join(missing)} in {data_dir(opts.data_dir)} "
            "(fetch it with `mlft data polyglot`, or set data_dir)"
        )
    return opts


def evaluate(opts: PolyglotOptions, *, model, tokenizer, out_dir: Path, progress: bool = True) -> list[dict]:
    """Metric rows: per language accuracy (+ ci95, n), 'avg' = unweighted mean over the languages, and
    per-relation accuracy (task 'relation:<P-id>'). Per-fact scores go to out_dir/facts.jsonl."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    per_language: dict[str, float] = {}
    cis: dict[str, float] = {}
    started = time.perf_counter()
    with open(out_dir / "facts.jsonl", "w", encoding="utf-8") as fh:
        for lang in opts.langs:
            facts = load_facts(lang, opts.data_dir, opts.sample, opts.seed)
            scores = score_facts(model, tokenizer, facts, opts.batch_size, progress, desc=f"CKA {lang}")
            known = [s.known for s in scores]
            per_language[lang] = metrics.accuracy(known)
            rows.append(_row(lang, "accuracy", per_language[lang]))
            rows.append(_row(lang, "n_facts", float(len(known))))
            if opts.bootstrap:
                cis[lang] = metrics.bootstrap_halfwidth(known, opts.bootstrap, opts.seed)
                rows.append(_row(lang, "ci95", cis[lang]))
            if opts.relations:
                for rel, (acc, _n) in metrics.by_relation([s.fact.relation for s in scores], known).items():
                    rows.append(_row(lang, "accuracy", acc, task=f"relation:{rel}"))
            for s in scores:
                fh.write(
                    json.dumps(
                        {
                            "language": lang,
                            "dataset_id": s.fact.dataset_id,
                            "relation": s.fact.relation,
                            "p_true": s.p_true,
                            "p_false": list(s.p_false),
                            "known": s.known,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    rows.append(_row("avg", "accuracy", metrics.language_mean(per_language)))
    if cis:
        rows.append(_row("avg", "ci95", metrics.language_mean(cis)))
    (out_dir / "options.json").write_text(json.dumps(asdict(opts), indent=2), encoding="utf-8")
    (out_dir / "polyglot.md").write_text(report(rows, time.perf_counter() - started), encoding="utf-8")
    return rows


def run(suite, ctx) -> KindOutput:
    model, tokenizer = ctx.local_model()
    rows = evaluate(suite.options, model=model, tokenizer=tokenizer, out_dir=ctx.out_dir, progress=ctx.progress)
    rows = [MetricRow.from_dict({"variant": "default", **r}) for r in rows]
    out = ctx.out_dir
    return KindOutput(rows, (out / "polyglot.md").read_text(encoding="utf-8"), files=[out / "facts.jsonl"])


KIND = EvalKind(
    "polyglot",
    PolyglotOptions,
    validate,
    run,
    needs=("weights",),
    description="Polyglot-or-Not scores the log-probabilities of a local model's completions",
)


def _row(lang: str, metric: str, value: float, task: str = "cka") -> dict:
    return {"task": task, "language": lang, "metric": metric, "value": value}


def report(rows: list[dict], seconds: float | None = None) -> str:
    val = {(r["language"], r["metric"]): r["value"] for r in rows if r["task"] == "cka"}
    langs = [lang for lang, m in val if m == "accuracy" and lang != "avg"]
    lines = ["| language | n | accuracy (%) | 95% CI ± |", "|---|---|---|---|"]
    for lang in [*langs, "avg"]:
        n = val.get((lang, "n_facts"))
        ci = val.get((lang, "ci95"))
        lines.append(
            f"| {lang} | {'' if n is None else int(n)} | {100 * val[lang, 'accuracy']:.2f} | "
            f"{'' if ci is None else f'{100 * ci:.2f}'} |"
        )
    if seconds is not None:
        lines.append(f"\n{seconds:.0f} s")
    return "\n".join(lines) + "\n"

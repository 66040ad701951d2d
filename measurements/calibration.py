"""Are mlft's intervals and paired tests honest on real reruns of a model, not only on simulations?

One model, one suite, M replies per prompt (`samples: M`; each reply's draws are keyed by its prompt id and sample
index, so reply j of every prompt is exactly what one pass with its own key draws): the replies make M passes
with K = 1 (pass j = reply j of every prompt), and M / K passes with K replies per prompt (replies jK..jK+K-1).
For each K it reports, per task:

- spread: each aggregate (LPR, WPR, LCPR, coverage, degeneracy, validity) across the passes: mean, sd, min, max;
- false positives: how often `mlft compare` (permutation, paired bootstrap, McNemar; LPR of the task average, and the
  per-language Holm family) rejects "same model" at 5 % between two passes that share no reply: on the
  disjoint pairs (pass j vs pass j + P/2: independent tests, Wilson interval of the rate) and on all pairs
  (dependent tests: the same expected rate, a tighter point estimate);
- coverage: how often a single pass's 95 % interval (`mlft.stats.intervals`, as every table prints it: the prompt
  population) holds the value of all the other replies pooled, for the task average and for each language row.
  That value is this prompt set's, which the population intervals over-cover by design; `measurements/targets.py`
  checks each target against its own truth (redrawn prompt sets for the population).

    python measurements/calibration.py                                  # generates 24 replies per prompt, then reports
    python measurements/calibration.py --replies 24 --k 4 --out runs/calibration
    python measurements/calibration.py --data tests/data/calibration_lcb_demo.json.gz   # also the test's data
    python measurements/calibration.py --model runs/calib2/sft/final --out runs/calib2/gen --per-language 30 \
        --replies 20 --step 4 --generate-only --data tests/data/calibration_sft_lcb_demo.json.gz   # the checkpoint's

The fine-tuned checkpoint (runs/calib2/sft/final): `mlft train recipes/cpu/crosslingual_sft.yaml
run_dir=runs/calib2/sft training_args.max_steps=32 training_args.save_steps=32 evaluation.enabled=false` (the
demo's cross-lingual SFT row, training seed 0; ~5 min on 2 cores). Its data holds 30 prompts per (task,
language): near its ceiling, 10 prompts leave a language row's coverage at the mercy of discreteness (an interval
holds nine of ten or not). `sample_per_language` deals prompts round robin, so the 30 hold lcb_demo's 10.

Generation is resumable (`mlft eval lcb_demo samples=M --out OUT/lcb_demo` does the same). Writes
OUT/calibration.json and OUT/calibration.md.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from mlft.constants import TASKS
from mlft.stats import (
    Outcome,
    intervals,
    load_outcomes,
    paired_test,
    paired_tests_by_language,
    save_compact,
    wilson,
)

METRICS = ("lpr", "wpr", "lcpr", "coverage", "degeneracy", "validity")


def generate(
    out: Path,
    replies: int,
    suite: str,
    model: str | None = None,
    step: int | None = None,
    per_language: int | None = None,
) -> Path:
    """M replies per prompt of `suite` from `model` (default: the embedded model) into OUT/SUITE, resumably. With
    `step`, in rounds of `step` more replies for every prompt (samples = step, 2 step, ..., M): the generator
    finishes a prompt's replies together, so an interrupted run keeps whole rounds (reply j of every prompt for
    j below the last finished round), not all M replies of some prompts and none of the others. `per_language`
    replaces the suite's prompts per (task, language)."""
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import load_suite
    from mlft.generation.target import Target

    folder = out / suite
    path = folder / "default" / "outcomes.jsonl"
    target = Target(model_ref=model) if model else Target()
    for m in sorted({*range(step or replies, replies, step or replies), replies}):
        if not path.is_file() or len({o.sample for o in load_outcomes(path)}) < m:
            started = time.perf_counter()
            settings = {"samples": m, **({"per_language": per_language} if per_language is not None else {})}
            run_suite(load_suite(suite, settings=settings), target, folder)
            print(f"{suite}: {m} replies per prompt ({time.perf_counter() - started:.0f} s)", flush=True)
    return path


def passes(outcomes: list[Outcome], k: int) -> list[list[Outcome]]:
    """Pass j: replies jk..jk+k-1 of every prompt, renumbered 0..k-1 (so passes pair reply by reply)."""
    m = 1 + max(o.sample for o in outcomes)
    out = []
    for j in range(m // k):
        out.append([replace(o, sample=o.sample - j * k) for o in outcomes if j * k <= o.sample < (j + 1) * k])
    return out


def aggregates(outcomes: list[Outcome], n: int = 1000) -> dict:
    return intervals(outcomes, n=n, seed=0)


def spread(values: list[float]) -> dict:
    a = 100 * np.array(values)
    return {
        "mean": float(a.mean()),
        "sd": float(a.std(ddof=1)),
        "min": float(a.min()),
        "max": float(a.max()),
        "passes": len(a),
    }


def rate(k: int, n: int) -> dict:
    lo, hi = wilson(k, n)
    return {"rejected": k, "tests": n, "rate": k / n if n else None, "low": float(lo), "high": float(hi)}


def random_pair(by_prompt: dict, k: int, rng: np.random.Generator) -> tuple[list[Outcome], list[Outcome], list]:
    """Two passes of K replies per prompt that share no reply: for each prompt, 2K of its replies at random, the
    first K to A, the others to B (renumbered 0..K-1, so the passes pair reply by reply); and the replies A left
    (the pooled value they give is the truth A's intervals are checked against)."""
    a, b, rest = [], [], []
    for replies in by_prompt.values():
        order = rng.permutation(len(replies))
        a += [renumbered(replies[i], j) for j, i in enumerate(order[:k])]
        b += [renumbered(replies[i], j) for j, i in enumerate(order[k : 2 * k])]
        rest += [renumbered(replies[i], j) for j, i in enumerate(order[k:])]
    return a, b, rest


def renumbered(outcome: Outcome, sample: int, **changes) -> Outcome:
    """`dataclasses.replace(outcome, sample=sample, **changes)` (Outcome has no __post_init__ to rerun) at a tenth
    of its cost: the coverage checks renumber ~10^5 outcomes per hundred passes."""
    new = object.__new__(type(outcome))
    new.__dict__.update(outcome.__dict__, sample=sample, **changes)
    return new


def calibrate(outcomes: list[Outcome], k: int, resamples: int = 2000, pairs: int = 200, seed: int = 0) -> dict:
    """Spread over the aligned passes; false positives and coverage over `pairs` random pairs of passes (each
    prompt's 2K replies drawn at random from its M: many more independent-looking comparisons than M / 2K aligned
    pairs give; they share replies only through the finite pool, so the rates' Wilson intervals are a little
    optimistic) and over the aligned disjoint pairs."""
    ps = passes(outcomes, k)
    tasks = [t for t in TASKS if any(o.task == t for o in outcomes)]
    est = [aggregates(p, resamples) for p in ps]
    by_prompt: dict[tuple, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_prompt[(o.task, o.source, o.language, o.id)].append(o)
    result: dict = {
        "k": k,
        "passes": len(ps),
        "random_pairs": pairs,
        "prompts": len(by_prompt),
        "spread": {},
        "false_positives": {},
        "coverage": {},
    }
    for task in tasks:
        result["spread"][task] = {
            m: spread([e[(task, "all", "all")][m].value for e in est])
            for m in METRICS
            if m in est[0][(task, "all", "all")]
        }
    rng = np.random.default_rng(seed)
    half = len(ps) // 2
    schemes = {
        "aligned disjoint": [(ps[j], ps[j + half], None) for j in range(half)],
        "random": [random_pair(by_prompt, k, rng) for _ in range(pairs)],
    }
    counts = {t: {name: defaultdict(lambda: [0, 0]) for name in schemes} for t in tasks}
    mins = {t: {name: defaultdict(lambda: 1.0) for name in schemes} for t in tasks}
    hits = {t: defaultdict(lambda: [0, 0]) for t in tasks}
    for name, scheme in schemes.items():
        for a, b, rest in scheme:
            for task in tasks:
                for method in ("permutation", "bootstrap", "mcnemar"):
                    res = paired_test(a, b, "lpr", task=task, method=method, n=resamples)
                    counts[task][name][method][0] += res.p_value < 0.05
                    counts[task][name][method][1] += 1
                    mins[task][name][method] = min(mins[task][name][method], res.p_value)
                fam = paired_tests_by_language(a, b, "lpr", task=task, n=1000)
                counts[task][name]["per-language Holm (any)"][0] += any(r.significant() for r in fam.values())
                counts[task][name]["per-language Holm (any)"][1] += 1
            if rest is None:
                continue
            mine, truth = aggregates(a, resamples), aggregates(rest, 10)  # truth: point values only
            for (t, source, lang), ms in mine.items():
                if source != "all":
                    continue
                where = "average" if lang == "all" else "languages"
                for m in ("lpr", "wpr", "coverage"):
                    if m in ms and m in truth.get((t, source, lang), {}):
                        v = truth[(t, source, lang)][m].value
                        hits[t][f"{where} {m}"][0] += ms[m].low - 1e-12 <= v <= ms[m].high + 1e-12
                        hits[t][f"{where} {m}"][1] += 1
    for task in tasks:
        result["false_positives"][task] = {
            name: {m: {**rate(*c), "min_p": mins[task][name].get(m)} for m, c in counts[task][name].items()}
            for name in schemes
        }
        result["coverage"][task] = {
            name: {
                "covered": h,
                "intervals": n,
                "rate": h / n,
                "low": float(wilson(h, n)[0]),
                "high": float(wilson(h, n)[1]),
            }
            for name, (h, n) in hits[task].items()
        }
    return result


def markdown(results: list[dict], meta: dict) -> str:
    lines = [
        f"# Calibration on reruns: {meta['model']}, {meta['suite']}, {meta['replies']} replies per prompt",
        "",
        f"{meta['prompts']} prompts; passes of K replies per prompt drawn with independent keys. "
        "Rates in %, [95 % Wilson interval].",
        "",
    ]
    for r in results:
        k = r["k"]
        lines += [
            f"## K = {k} ({r['passes']} aligned passes, {r['random_pairs']} random pairs)",
            "",
            "| task | metric | mean | sd | min | max |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for task, ms in r["spread"].items():
            for m, s in ms.items():
                lines.append(f"| {task} | {m} | {s['mean']:.1f} | {s['sd']:.1f} | {s['min']:.1f} | {s['max']:.1f} |")
        lines += [
            "",
            "False positives of `mlft compare` (same model, LPR, 5 % level):",
            "",
            "| task | pairs | method | rejected | rate | min p |",
            "|---|---|---|---:|---:|---:|",
        ]
        for task, rows in r["false_positives"].items():
            for name, methods in rows.items():
                for m, x in methods.items():
                    minp = "" if x.get("min_p") is None else f"{x['min_p']:.3f}"
                    lines.append(
                        f"| {task} | {name} | {m} | {x['rejected']}/{x['tests']} | "
                        f"{100 * x['rate']:.1f} [{100 * x['low']:.1f}, {100 * x['high']:.1f}] | {minp} |"
                    )
        lines += [
            "",
            "Coverage of single-pass 95 % intervals (random passes; the truth: the pass's prompts, all their "
            "other replies pooled):",
            "",
            "| task | row | covered | rate |",
            "|---|---|---:|---:|",
        ]
        for task, rows in r["coverage"].items():
            for name, x in rows.items():
                lines.append(
                    f"| {task} | {name} | {x['covered']}/{x['intervals']} | "
                    f"{100 * x['rate']:.1f} [{100 * x['low']:.1f}, {100 * x['high']:.1f}] |"
                )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="lcb_demo")
    ap.add_argument("--replies", type=int, default=24, help="replies per prompt (M)")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 4], help="replies per prompt of a pass")
    ap.add_argument("--out", type=Path, default=Path("runs/calibration"))
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--pairs", type=int, default=200, help="random pairs of passes (false positives, coverage)")
    ap.add_argument("--data", type=Path, help="also write the per-reply outcomes here (compact, gzip JSON)")
    ap.add_argument("--model", help="the model to rerun (a checkpoint folder, a hub name; default: the embedded one)")
    ap.add_argument("--step", type=int, help="generate in rounds of this many more replies per prompt (resumable)")
    ap.add_argument("--per-language", type=int, help="prompts per (task, language) (default: the suite's)")
    ap.add_argument("--generate-only", action="store_true", help="generate (and write --data), no report")
    args = ap.parse_args()
    started = time.perf_counter()
    path = generate(args.out, args.replies, args.suite, args.model, args.step, args.per_language)
    outcomes = [o for o in load_outcomes(path) if o.sample < args.replies]
    meta = {
        "model": args.model or "smollm2-135m-instruct (embedded)",
        "suite": args.suite,
        **({"per_language": args.per_language} if args.per_language is not None else {}),
        "replies": args.replies,
        "prompts": len({(o.source, o.language, o.id) for o in outcomes}),
        "source": str(path),
    }
    if args.generate_only:  # and write --data
        if args.data:
            save_compact(args.data, outcomes, meta)
        return
    results = [calibrate(outcomes, k, args.resamples, args.pairs) for k in args.k]
    (args.out / "calibration.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    text = markdown(results, meta)
    (args.out / "calibration.md").write_text(text, encoding="utf-8")
    if args.data:
        save_compact(args.data, outcomes, meta)
    print(text)
    print(f"({time.perf_counter() - started:.0f} s; {args.out / 'calibration.md'})")


if __name__ == "__main__":
    main()

"""What the default test and intervals of mlft.stats cover, on the committed reruns (no generation).

The data: tests/data/calibration_lcb_demo.json.gz (`measurements/calibration.py --data`: the embedded
SmolLM2-135M-Instruct on the 290 lcb_demo prompts, 24 keyed replies per prompt). It reports, per task:

- false positives: the rejection rate at 5 % of the permutation test (the default), the paired bootstrap and
  McNemar on LPR of the task average, and of the per-language Holm family (any language), between two passes of
  the same model that share no reply (random pairs, K replies per prompt each), with the smallest p;
- population coverage: how often the default intervals (the prompt population) of a pass over a redrawn prompt
  set (in each stratum as many prompts as it holds, drawn with replacement, one random reply each) hold the value
  of all 290 prompts x 24 replies; task averages and language rows, as they are and 10 % narrower / 25 % wider;
- this-prompt-set coverage (K >= 2): how often the `set` intervals of a pass of K replies per prompt hold the
  value of the prompts' other replies.

    python measurements/targets.py                       # ~15 min on one busy core
    python measurements/targets.py --pairs 100 --passes 100
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from mlft.stats import intervals, paired_test, paired_tests_by_language

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration_lcb_demo.json.gz"
_spec = importlib.util.spec_from_file_location("calibration", Path(__file__).with_name("calibration.py"))
calibration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calibration)
random_pair, read_data = calibration.random_pair, calibration.read_data
TASKS = ("monolingual", "crosslingual")


def false_positives(by_prompt: dict, k: int, pairs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    p = defaultdict(list)
    for i in range(pairs):
        a, b, _ = random_pair(by_prompt, k, rng)
        for task in TASKS:
            for method in ("permutation", "bootstrap", "mcnemar"):
                if method != "mcnemar" or k == 1:  # McNemar takes one pair per prompt
                    p[f"{task} {method}"].append(
                        paired_test(a, b, "lpr", task=task, method=method, n=2000, seed=i).p_value
                    )
            for method in ("permutation", "bootstrap"):
                fam = paired_tests_by_language(a, b, "lpr", task=task, method=method, n=1000, seed=i)
                p[f"{task} {method} Holm family"].append(min(r.p_adjusted for r in fam.values()))
    return {key: {"rate": float(np.mean(np.array(v) < 0.05)), "tests": len(v), "min_p": min(v)} for key, v in p.items()}


def redrawn_pass(by_prompt: dict, strata: dict, rng) -> list:
    out = []
    for prompts in strata.values():
        for j, i in enumerate(rng.integers(0, len(prompts), len(prompts))):
            replies = by_prompt[prompts[i]]
            out.append(replace(replies[rng.integers(len(replies))], id=f"{prompts[i][3]}~{j}", sample=0))
    return out


def tally(hits: dict, iv: dict, truth: dict, target: str) -> None:
    for (task, source, lang), ms in iv.items():
        if source != "all" or "lpr" not in ms:
            continue
        e, v = ms["lpr"], truth[(task, source, lang)]["lpr"].value
        lo, hi = (e.low, e.high) if target == "population" else (e.set_low, e.set_high)
        if lo is None:
            continue
        key = f"{task} {'average' if lang == 'all' else 'languages'}"
        for scale in (1.0, 0.9, 1.25):
            a, b = e.value - scale * (e.value - lo), e.value + scale * (hi - e.value)
            hits[key][scale][0] += a - 1e-12 <= v <= b + 1e-12
            hits[key][scale][1] += 1


def rates(hits: dict) -> dict:
    return {key: {f"x{s}": h / n for s, (h, n) in by.items()} | {"intervals": by[1.0][1]} for key, by in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=300, help="random same-model pairs at K = 1 (half that at K = 4)")
    ap.add_argument("--passes", type=int, default=400, help="redrawn prompt sets (a quarter of that at K = 4)")
    ap.add_argument("--out", type=Path, default=Path("runs/targets.json"))
    args = ap.parse_args()
    outcomes = read_data(DATA)
    by_prompt = defaultdict(list)
    for o in outcomes:
        by_prompt[(o.task, o.source, o.language, o.id)].append(o)
    strata = defaultdict(list)
    for key in by_prompt:
        strata[key[:3]].append(key)
    result = {
        "false positives, K = 1": false_positives(by_prompt, 1, args.pairs, 11),
        "false positives, K = 4": false_positives(by_prompt, 4, args.pairs // 2, 11),
    }
    truth = intervals(outcomes, n=10)
    hits = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    rng = np.random.default_rng(1)
    for _ in range(args.passes):
        tally(hits, intervals(redrawn_pass(by_prompt, strata, rng), n=10), truth, "population")
    result["population coverage, K = 1"] = rates(hits)
    hits = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    rng = np.random.default_rng(0)
    for _ in range(args.passes // 4):
        a, _b, rest = random_pair(by_prompt, 4, rng)
        tally(hits, intervals(a, n=10), intervals(rest, n=10), "set")
    result["this-prompt-set coverage, K = 4"] = rates(hits)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

"""What the default test and intervals of mlft.stats cover, on the committed reruns (no generation), per model,
task, target and p-band.

The data (`measurements/calibration.py --data`; lcb_demo's prompts, keyed replies per prompt):
tests/data/calibration_lcb_demo.json.gz (the embedded SmolLM2-135M-Instruct: 290 prompts, 10 per task and
language, 24 replies) and tests/data/calibration_sft_lcb_demo.json.gz (its cross-lingual SFT checkpoint: 870
prompts, 30 per task and language, 20 replies). For each it reports, per task:

- false positives: the rejection rate at 5 % of the permutation test (the default; with its Wilson interval), the
  paired bootstrap and McNemar on LPR of the task average, and of the per-language Holm family (any language),
  between two passes of the same model that share no reply (random pairs, K replies per prompt each), with the
  smallest p;
- population coverage (K = 1): how often the default intervals (the prompt population) of a pass over a redrawn
  prompt set (in each stratum as many prompts as it holds, drawn with replacement, one random reply each) hold the
  value of all prompts x replies;
- this-prompt-set coverage (K = 4): how often the `set` intervals of a pass of K replies per prompt hold the value
  of the same prompts' other M - K replies. That truth is a finite draw too: the difference of two independent
  means has variance V (1 + K / (M - K)) where the interval's is V, so each half is scaled by sqrt(1 + K / (M - K))
  before the check (a correct interval covers 95 % then; unscaled it would cover ~92.6 % at K = 4, M = 24);

coverage of LPR's task averages and language rows (source "all"), as they are, 10 % narrower and 25 % wider, per
p-band of the row's true value (BANDS). A row whose true value is exactly 0 or 1 sits in no band: every pass
sits there too, so it is covered by construction; it is counted apart ("at 0 or 1"). A band with fewer than
MIN_ROWS rows is reported, not judged: its intervals are many but its rows few, and one row's coverage is mostly
that row's own shape (a skewed language), not the method's.

    python measurements/targets.py --out runs/targets.json       # both models (~10 min per 290 prompts on a busy core)
    python measurements/targets.py --data base=tests/data/calibration_lcb_demo.json.gz --out runs/targets_base.json
    python measurements/targets.py --combine runs/targets_base.json runs/targets_sft.json   # the results file
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from mlft.stats import intervals, load_compact, paired_test, paired_tests_by_language, wilson
from mlft.stats.aggregate import _FEATURES, _aggregate
from mlft.stats.intervals import _population_factors, _score_bounds, _weights

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/, beside measurements/ (not in the package)
from devtools.blocks import Fill  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = {
    "base": ROOT / "tests" / "data" / "calibration_lcb_demo.json.gz",
    "sft": ROOT / "tests" / "data" / "calibration_sft_lcb_demo.json.gz",
}
_spec = importlib.util.spec_from_file_location("calibration", Path(__file__).with_name("calibration.py"))
calibration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calibration)
renumbered = calibration.renumbered
random_pair = calibration.random_pair
TASKS = ("monolingual", "crosslingual")
BANDS = ((0.0, 0.5), (0.5, 0.8), (0.8, 0.95), (0.95, 1.0))  # [low, high) of the row's true LPR; the last up to 1
SCALES = (1.0, 0.9, 1.25)  # as they are, 10 % narrower, 25 % wider (each half about the value)
BOUNDS = (0.93, 0.98)  # coverage of a 95 % interval: neither too narrow nor too wide
FP_BOUNDS = (0.02, 0.08)  # the default test's rejection rate at 5 % between same-model passes
MIN_ROWS = 4  # a band is judged only with this many rows (task averages and language rows)


def band_of(value: float) -> str | None:
    """The p-band label of a true value; None at exactly 0 or 1 (covered by construction)."""
    if value <= 0.0 or value >= 1.0:
        return None
    for lo, hi in BANDS:
        if lo <= value < hi:
            return f"[{lo:g}, {hi:g})"
    return None


def load(path: Path) -> tuple[list, dict, dict]:
    """The outcomes, the replies per prompt ({(task, source, language, id): [Outcome]}) and the prompts per
    (task, source, language) stratum."""
    outcomes, _ = load_compact(path)
    by_prompt: dict[tuple, list] = defaultdict(list)
    for o in outcomes:
        by_prompt[(o.task, o.source, o.language, o.id)].append(o)
    strata: dict[tuple, list] = defaultdict(list)
    for key in by_prompt:
        strata[key[:3]].append(key)
    return outcomes, dict(by_prompt), dict(strata)


def disjoint_pair(by_prompt: dict, k: int, rng: np.random.Generator) -> tuple[list, list]:
    """`calibration.random_pair`'s two passes (the same draws of `rng`) without the rest: a fifth of its time."""
    a, b = [], []
    for replies in by_prompt.values():
        order = rng.permutation(len(replies))
        a += [renumbered(replies[i], j) for j, i in enumerate(order[:k])]
        b += [renumbered(replies[i], j) for j, i in enumerate(order[k : 2 * k])]
    return a, b


def false_positives(
    by_prompt: dict,
    k: int,
    pairs: int,
    seed: int,
    n: int = 2000,
    methods: tuple[str, ...] = ("permutation", "bootstrap", "mcnemar"),
    family: bool = True,
) -> dict:
    """{"<task> <method>": {rate, rejected, tests, low, high, min_p}} over `pairs` random same-model pairs of K
    replies per prompt that share no reply (Wilson interval of the rate; `n` draws per test)."""
    rng = np.random.default_rng(seed)
    p = defaultdict(list)
    for i in range(pairs):
        a, b = disjoint_pair(by_prompt, k, rng)
        for task in TASKS:
            for method in methods:
                if method != "mcnemar" or k == 1:  # McNemar takes one pair per prompt
                    p[f"{task} {method}"].append(
                        paired_test(a, b, "lpr", task=task, method=method, n=n, seed=i, interval=False).p_value
                    )
            if family:
                for method in ("permutation", "bootstrap"):
                    fam = paired_tests_by_language(
                        a, b, "lpr", task=task, method=method, n=1000, seed=i, interval=False
                    )
                    p[f"{task} {method} Holm family"].append(min(r.p_adjusted for r in fam.values()))
    out = {}
    for key, v in p.items():
        rejected, tests = int(np.sum(np.array(v) < 0.05)), len(v)
        lo, hi = wilson(rejected, tests)
        out[key] = {
            "rate": rejected / tests,
            "rejected": rejected,
            "tests": tests,
            "low": float(lo),
            "high": float(hi),
            "min_p": float(min(v)),
        }
    return out


def redrawn_pass(by_prompt: dict, strata: dict, rng) -> list:
    """One pass of a redrawn prompt set: in each stratum as many prompts as it holds, drawn with replacement from
    its prompts, one random reply each (the prompts x replies stand for the prompt population; a prompt drawn
    twice appears under two ids)."""
    out = []
    for prompts in strata.values():
        for j, i in enumerate(rng.integers(0, len(prompts), len(prompts))):
            replies = by_prompt[prompts[i]]
            out.append(renumbered(replies[rng.integers(len(replies))], 0, id=f"{prompts[i][3]}~{j}"))
    return out


def tally(rows: dict, iv: dict, truth: dict, target: str, widen: float = 1.0) -> None:
    """Add one pass's LPR intervals (task averages and language rows) to `rows`: {(task, language): {scale:
    [covered, intervals]}}; `truth` gives each row's value to hold ({(task, source, language): value}, or
    `intervals`' output), `widen` the truth's own noise (the halves' factor before the check)."""
    for (task, source, lang), ms in iv.items():
        if source != "all" or "lpr" not in ms or (task, source, lang) not in truth:
            continue
        e, v = ms["lpr"], truth[(task, source, lang)]
        v = v if isinstance(v, float) else v["lpr"].value
        lo, hi = (e.low, e.high) if target == "population" else (e.set_low, e.set_high)
        if lo is None:
            continue
        count(rows.setdefault((task, lang), {s: [0, 0] for s in SCALES}), e.value, lo, hi, v, widen)


def count(by: dict, value, lo, hi, v: float, widen: float = 1.0) -> None:
    """Add to `by` ({scale: [covered, intervals]}) whether each interval (value, lo, hi: floats, or arrays of
    passes) holds `v` with its halves scaled."""
    for s in SCALES:
        a, b = value - s * widen * (value - lo), value + s * widen * (hi - value)
        held = (a - 1e-12 <= v) & (v <= b + 1e-12)
        by[s][0] += int(np.sum(held))
        by[s][1] += int(np.size(held))


def prompt_codes(by_prompt: dict) -> dict[tuple, np.ndarray]:
    """Each prompt's replies as category codes (`Outcome.code`), in reply order: the passes below draw replies
    by index, so they count features without copying outcomes."""
    return {key: np.array([o.code for o in replies], np.int64) for key, replies in by_prompt.items()}


def task_strata(keys: list[tuple]) -> dict[str, tuple[list, np.ndarray]]:
    """Per task (sorted, as `intervals` goes): its sorted (source, language) strata and, for each of `keys` (task,
    source, language, ...), the index of its stratum in them (-1: another task)."""
    out = {}
    for task in sorted({k[0] for k in keys}):
        strata = sorted({k[1:3] for k in keys if k[0] == task})
        where = {s: i for i, s in enumerate(strata)}
        out[task] = (strata, np.array([where.get(k[1:3], -1) if k[0] == task else -1 for k in keys], np.int64))
    return out


def stratum_counts(codes: np.ndarray, index: np.ndarray, strata: int) -> np.ndarray:
    """Feature sums per stratum, (passes, strata, features), of replies given as codes (passes, replies) with the
    stratum of each reply (`index`; -1: left out). Whole counts: exact in any order."""
    keep = index >= 0
    out = np.zeros((codes.shape[0], strata, _FEATURES.shape[1]))
    for s in range(strata):
        out[:, s, :] = _FEATURES[codes[:, keep & (index == s)]].sum(1)
    return out


def redrawn_codes(by_prompt: dict, strata: dict, passes: int, rng) -> tuple[np.ndarray, list[tuple]]:
    """`passes` passes of `redrawn_pass` (the same draws of `rng`, in its order) as category codes (passes,
    replies), and each reply's stratum (task, source, language): the same in every pass."""
    codes = prompt_codes(by_prompt)
    keys = [stratum for stratum, prompts in strata.items() for _ in prompts]
    out = np.empty((passes, len(keys)), np.int64)
    for p in range(passes):
        at = 0
        for prompts in strata.values():
            for i in rng.integers(0, len(prompts), len(prompts)):
                replies = codes[prompts[i]]
                out[p, at] = replies[rng.integers(len(replies))]
                at += 1
    return out, keys


def population_lpr(strata: list, obs: np.ndarray, confidence: float = 0.95) -> dict:
    """{(source, language) row: (value, low, high)}, arrays over passes: the population intervals of LPR that
    `intervals` gives each of many passes of one reply per prompt, from the passes' feature sums per stratum
    (`obs`: passes, strata (sorted), features), all passes at once, with the library's own arithmetic (one reply
    per prompt: a design effect of one; tests/test_calibration.py checks them equal to `intervals`, bit for bit, on
    redrawn passes of both models): 400 calls of `intervals` were most of the population check's time."""
    point = _aggregate(strata, obs)
    trials = obs[..., 1]  # LPR's denominator: counted replies; one reply per prompt, so also the counted prompts
    f = _population_factors(trials, trials, 1.0)
    out = {}
    for row, w in _weights(strata, [True] * len(strata)).items():
        value = point[row]["lpr"]
        out[row] = (value, *_score_bounds(value, np.sum(w * w * f, axis=-1), confidence))
    return {row: out[row] for row in point if row in out}  # `intervals`' order of rows


def population_coverage(outcomes: list, by_prompt: dict, strata: dict, passes: int, seed: int) -> dict:
    """{(task, language): {scale: [covered, intervals]}} of the default intervals of `passes` redrawn passes
    (`redrawn_pass`, seeded) against every prompt x reply (the rows in the order one pass's `intervals` gives)."""
    truth = intervals(outcomes, n=10)
    rng = np.random.default_rng(seed)
    codes, keys = redrawn_codes(by_prompt, strata, passes, rng)
    rows: dict = {}
    for task, (names, index) in task_strata(keys).items():
        for (source, lang), (value, lo, hi) in population_lpr(names, stratum_counts(codes, index, len(names))).items():
            if source == "all" and (task, source, lang) in truth:
                v = truth[(task, source, lang)]["lpr"].value
                count(rows.setdefault((task, lang), {s: [0, 0] for s in SCALES}), value, lo, hi, v)
    return rows


def set_passes(by_prompt: dict, k: int, passes: int, seed: int):
    """Yield per pass (A, truth): `calibration.random_pair`'s A (the same draws of a seeded rng) and the LPR of the
    replies A left (its `rest`) per row, {(task, source, language): value}, from feature counts: the point values
    `intervals(rest)` gives (tests/test_calibration.py checks them equal), without copying the rest's replies or
    bootstrapping them."""
    keys = list(by_prompt)
    codes = prompt_codes(by_prompt)
    groups = task_strata(keys)
    every = np.concatenate([codes[key] for key in keys])[None]
    sizes = [len(codes[key]) for key in keys]
    total = {t: stratum_counts(every, np.repeat(index, sizes), len(names)) for t, (names, index) in groups.items()}
    rng = np.random.default_rng(seed)
    for _ in range(passes):
        a, taken = [], []
        for key in keys:
            replies = by_prompt[key]
            order = rng.permutation(len(replies))
            a += [renumbered(replies[i], j) for j, i in enumerate(order[:k])]
            taken.append(codes[key][order[:k]])
        taken = np.concatenate(taken)[None]
        truth = {}
        for task, (names, index) in groups.items():
            rest = total[task] - stratum_counts(taken, np.repeat(index, k), len(names))
            for (source, lang), ms in _aggregate(names, rest).items():
                truth[(task, source, lang)] = float(ms["lpr"][0])
        yield a, truth


def set_coverage(by_prompt: dict, k: int, passes: int, seed: int) -> dict:
    m = min(len(v) for v in by_prompt.values())
    widen = float(np.sqrt(1 + k / (m - k)))
    rows: dict = {}
    for a, truth in set_passes(by_prompt, k, passes, seed):
        tally(rows, intervals(a, n=10), truth, "set", widen)
    return rows


def by_band(rows: dict, truth: dict) -> dict:
    """{band: {rows: ["task lang (value)"], covered per scale, intervals, rate per scale, judged}} over the rows
    of `rows`, banded by their true value (all prompts x replies); rows at exactly 0 or 1 under "at 0 or 1"."""
    out: dict = {}
    for (task, lang), by in sorted(rows.items()):
        v = truth[(task, "all", lang)]["lpr"].value
        band = band_of(v) or "at 0 or 1"
        b = out.setdefault(band, {"rows": [], "hits": {s: [0, 0] for s in SCALES}})
        b["rows"].append(f"{task} {lang} ({100 * v:.1f})")
        for s in SCALES:
            b["hits"][s][0] += by[s][0]
            b["hits"][s][1] += by[s][1]
    result = {}
    for band in [f"[{lo:g}, {hi:g})" for lo, hi in BANDS] + ["at 0 or 1"]:
        if band not in out:
            continue
        b = out[band]
        h, n = b["hits"][1.0]
        lo, hi = wilson(h, n)
        result[band] = {
            "rows": b["rows"],
            "intervals": n,
            "rate": h / n,
            "low": float(lo),
            "high": float(hi),
            "narrower": b["hits"][0.9][0] / n,
            "wider": b["hits"][1.25][0] / n,
            "judged": band != "at 0 or 1" and len(b["rows"]) >= MIN_ROWS,
        }
    return result


def within(rate: float, bounds: tuple[float, float] = BOUNDS) -> bool:
    return bounds[0] <= rate <= bounds[1]


def set_k(replies: int) -> int:
    """K of the this-prompt-set passes: 4 replies per prompt, 2 where a model has fewer than 16 (the truth, the
    other M - K replies, must stay several times larger than the pass)."""
    return 4 if replies >= 16 else 2


def measure(path: Path, pairs: int, passes: int, family: bool = True) -> dict:
    outcomes, by_prompt, strata = load(path)
    truth = intervals(outcomes, n=10)
    m = min(len(v) for v in by_prompt.values())
    k = set_k(m)
    out = {
        "data": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "replies": m,
        "prompts": len(by_prompt),
        "per_language": len(by_prompt) // len({(t, lang) for t, _s, lang in strata}),
        "false positives, K = 1": false_positives(by_prompt, 1, pairs, 11, family=family),
    }
    if m >= 8:
        out["false positives, K = 4"] = false_positives(by_prompt, 4, pairs // 2, 11, family=family)
    out["population coverage, K = 1"] = by_band(population_coverage(outcomes, by_prompt, strata, passes, 1), truth)
    out["this-prompt-set coverage"] = {"k": k, **by_band(set_coverage(by_prompt, k, passes // 4, 0), truth)}
    return out


def pct(f: Fill, x: float) -> str:
    return f(round(100 * x, 1), ".1f")


def fp_table(models: dict) -> dict:
    f = Fill()
    lines = [
        "",
        "| model | task | permutation, K = 1, % [95 % Wilson] | smallest p | bootstrap, % | McNemar, % "
        "| permutation, K = 4, % |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in models.items():
        for task in TASKS:
            one, four = r["false positives, K = 1"], r.get("false positives, K = 4", {})
            x = one[f"{task} permutation"]
            k4 = four.get(f"{task} permutation")
            lines.append(
                f"| {name} | {task} | {pct(f, x['rate'])} [{pct(f, x['low'])}, {pct(f, x['high'])}] "
                f"({f(x['rejected'], 'd')}/{f(x['tests'], 'd')}) | {f(round(x['min_p'], 4), '.4f')} | "
                f"{pct(f, one[f'{task} bootstrap']['rate'])} | {pct(f, one[f'{task} mcnemar']['rate'])} | "
                + (f"{pct(f, k4['rate'])} ({f(k4['tests'], 'd')})" if k4 else "not run (too few replies)")
                + " |"
            )
    return f.record("\n".join(lines) + "\n")


def coverage_table(models: dict) -> dict:
    f = Fill()
    lines = [
        "",
        "| model | target | p-band of the true LPR | rows | intervals | coverage, % [95 % Wilson] | 10 % narrower "
        "| 25 % wider |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for name, r in models.items():
        for target, key in (
            ("population, K = 1", "population coverage, K = 1"),
            ("this set", "this-prompt-set coverage"),
        ):
            bands = r[key]
            label = target if key.startswith("population") else f"this set, K = {f(bands['k'], 'd')}"
            for band, x in bands.items():
                if band == "k":
                    continue
                rows = "; ".join(
                    f"{t[:5]}. " + " ".join(lang for tt, lang in (row.split()[:2] for row in x["rows"]) if tt == t)
                    for t in TASKS
                    if any(row.startswith(t) for row in x["rows"])
                )
                judged = (
                    "" if x["judged"] else (" (covered by construction)" if band == "at 0 or 1" else " (too few rows)")
                )
                lines.append(
                    f"| {name} | {label} | {band}{judged} | {rows} | {f(x['intervals'], 'd')} | "
                    f"{pct(f, x['rate'])} [{pct(f, x['low'])}, {pct(f, x['high'])}] | {pct(f, x['narrower'])} | "
                    f"{pct(f, x['wider'])} |"
                )
    return f.record("\n".join(lines) + "\n")


def judged_rates(bands: dict, key: str = "rate") -> list[float]:
    return [x[key] for b, x in bands.items() if b != "k" and x["judged"]]


def pooled_rate(bands: dict, key: str) -> float:
    judged = [x for b, x in bands.items() if b != "k" and x["judged"]]
    return sum(x[key] * x["intervals"] for x in judged) / sum(x["intervals"] for x in judged)


def paragraph(models: dict, settings: dict, before: dict, earlier: dict | None = None) -> dict:
    """The docs' "Calibrated on reruns" bullet: what was checked on which data, the ranges per model, what the
    mutations did, what a model's smaller prompt set showed (`earlier`), and the base-only numbers it replaced
    (`before`)."""
    f = Fill()
    fps = {n: [r["false positives, K = 1"][f"{t} permutation"] for t in TASKS] for n, r in models.items()}

    def rng(xs: list[float]) -> str:
        if round(min(xs), 3) == round(max(xs), 3):
            return f"{pct(f, min(xs))} % in each"
        return f"{pct(f, min(xs))}–{pct(f, max(xs))} %"

    text = [
        "",
        "- **Calibrated on reruns, two models** (`tests/test_calibration.py`, `python measurements/targets.py`: "
        "the tables below, seeded, from the committed keyed replies of lcb_demo's prompts: "
        + ", ".join(
            f"{n}, {f(r['prompts'], 'd')} prompts ({f(per_language(r), 'd')} per task and language) x "
            f"{f(r['replies'], 'd')} replies"
            + (
                " (not the 20 the calibration asks for: what its generation finished on the shared machine)"
                if r["replies"] < 20
                else ""
            )
            for n, r in models.items()
        )
        + "; sft is the cross-lingual SFT row, `recipes/cpu/crosslingual_sft.yaml` at the demo's "
        f"{f(32, 'd')} steps, training seed {f(0, 'd')}). The default permutation test between same-model passes "
        f"that share no reply ({f(settings['pairs'], 'd')} random pairs at K = {f(1, 'd')}) rejects "
        + "; ".join(f"{n} {rng([x['rate'] for x in v])}" for n, v in fps.items())
        + f" per task at the {f(5, 'd')} % level (bounds {f(2, 'd')}–{f(8, 'd')} %; outside: "
        + (
            "; ".join(
                f"{n} {t} {pct(f, x['rate'])} %"
                for n, v in fps.items()
                for t, x in zip(TASKS, v)
                if not within(x["rate"], FP_BOUNDS)
            )
            or "none"
        )
        + "), smallest p "
        + ", ".join(f"{f(round(min(x['min_p'] for x in v), 4), '.4f')} ({n})" for n, v in fps.items())
        + f". Coverage is judged per p-band of the row's true LPR with at least {f(MIN_ROWS, 'd')} rows (bounds "
        f"{f(93, 'd')}–{f(98, 'd')} %; rows at exactly 0 or 1 are covered by construction and counted apart). "
        f"Population intervals over {f(settings['passes'], 'd')} redrawn prompt sets cover "
        + "; ".join(f"{n} {rng(judged_rates(r['population coverage, K = 1']))}" for n, r in models.items())
        + "; 10 % narrower / 25 % wider (the test's per-band check, some judged band outside the bounds): "
        + "; ".join(f"{n} {mutation_verdict(f, r['population coverage, K = 1'])}" for n, r in models.items())
        + ". This-prompt-set intervals against the same prompts' other replies (each half first scaled by "
        "sqrt(1 + K / (M - K)): the truth is a finite draw too) cover "
        + "; ".join(f"{n} {rng(judged_rates(r['this-prompt-set coverage']))}" for n, r in models.items())
        + "; 10 % narrower / 25 % wider "
        + "; ".join(f"{n} {mutation_verdict(f, r['this-prompt-set coverage'])}" for n, r in models.items())
        + " (pooled over the judged bands, as the test judged mutations before: population "
        + "; ".join(
            f"{n} {pct(f, pooled_rate(r['population coverage, K = 1'], 'narrower'))} / "
            f"{pct(f, pooled_rate(r['population coverage, K = 1'], 'wider'))} %"
            for n, r in models.items()
        )
        + ", this set "
        + "; ".join(
            f"{n} {pct(f, pooled_rate(r['this-prompt-set coverage'], 'narrower'))} / "
            f"{pct(f, pooled_rate(r['this-prompt-set coverage'], 'wider'))} %"
            for n, r in models.items()
        )
        + "). Judged bands outside the bounds as they are: "
        + outside(f, models)
        + ". Language rows one or two replies from 0 or 1 take Brown, Cai & DasGupta's modified Wilson interval "
        "(`mlft.stats.intervals.modified_wilson`); plain Wilson dips far under 95 % there, which is what left the "
        "fine-tuned checkpoint's near-ceiling band under the bounds before."
        + "".join(earlier_sentence(f, n, r, models[n]) for n, r in (earlier or {}).items() if n in models),
    ]
    if before:
        v = before["values"]
        text[-1] += (
            f" Before (the base model alone, no p-bands): permutation "
            f"{f(v[2], '.1f')} / {f(v[3], '.1f')} % (mono / cross), population coverage {f(v[26], '.1f')} / "
            f"{f(v[27], '.1f')} % (averages) and {f(v[28], '.1f')} / {f(v[29], '.1f')} % (languages; rows at 0 or 1 "
            "in), this-prompt-set "
            f"{f(v[32], '.1f')} / {f(v[33], '.1f')} % (averages) and {f(v[34], '.1f')} / {f(v[35], '.1f')} % "
            "(languages, unscaled truth)."
        )
    return f.record(wrap("\n".join(text)) + "\n")


def per_language(r: dict) -> int:
    """Prompts per (task, language) row of a measured model (lcb_demo's 29 rows)."""
    return r.get("per_language") or r["prompts"] // 29


TARGETS = (("population coverage, K = 1", "population"), ("this-prompt-set coverage", "this set"))


def extremes(bands: dict) -> tuple[float, float]:
    """The lowest coverage of 10 % narrower intervals and the highest of 25 % wider ones over the judged bands."""
    judged = [x for b, x in bands.items() if b != "k" and x["judged"]]
    return min(x["narrower"] for x in judged), max(x["wider"] for x in judged)


def misses(f: Fill, r: dict) -> tuple[list[str], list[str]]:
    """A measured model's judged bands outside the bounds, and the mutations its per-band check does not catch."""
    missed = []
    for key, target in TARGETS:
        low, high = extremes(r[key])
        if low >= BOUNDS[0]:
            missed.append(f"{target} 10 % narrower (lowest band {pct(f, low)} %)")
        if high <= BOUNDS[1]:
            missed.append(f"{target} 25 % wider (highest band {pct(f, high)} %)")
    return outside_bands(f, r), missed


def earlier_sentence(f: Fill, name: str, old: dict, new: dict) -> str:
    """What a model's earlier, smaller prompt set showed that its data now replaces: the judged bands outside the
    bounds and the mutations not caught, then and now."""
    said = []
    for r in (old, new):
        out, missed = misses(f, r)
        said.append(
            "every judged band inside the bounds and every mutation caught"
            if not out and not missed
            else f"judged bands outside the bounds {'; '.join(out) or 'none'}, mutations not caught "
            f"{'; '.join(missed) or 'none'}"
        )
    return (
        f" At {f(per_language(old), 'd')} prompts per task and language ({f(old['prompts'], 'd')} prompts x "
        f"{f(old['replies'], 'd')} replies, which the {f(new['prompts'], 'd')} hold) {name}'s rows near its ceiling "
        "were at the mercy of discreteness (an interval of ten prompts at a true 96-99 % holds nine of ten or not, "
        f"so its coverage there is high or low, never 95 %): {said[0]}. At {f(per_language(new), 'd')} per task "
        f"and language: {said[1]}."
    )


def outside_bands(f: Fill, r: dict) -> list[str]:
    """A measured model's judged bands whose intervals as they are cover outside BOUNDS."""
    return [
        f"{target} {band} {pct(f, x['rate'])} %"
        for key, target in TARGETS
        for band, x in r[key].items()
        if band != "k" and x["judged"] and not within(x["rate"])
    ]


def outside(f: Fill, models: dict) -> str:
    """Each judged band whose intervals as they are cover outside BOUNDS, or "none"."""
    return "; ".join(f"{name} {band}" for name, r in models.items() for band in outside_bands(f, r)) or "none"


def mutation_verdict(f: Fill, bands: dict) -> str:
    """`caught (92.8 %) / caught (99.9 %)`: whether 10 % narrower intervals take some judged band under the bounds
    (its lowest rate) and 25 % wider ones some band over them (the highest)."""
    low, high = extremes(bands)
    verdict = lambda hit: "caught" if hit else "not caught"  # noqa: E731
    return f"{verdict(low < BOUNDS[0])} ({pct(f, low)} %) / {verdict(high > BOUNDS[1])} ({pct(f, high)} %)"


def wrap(text: str, width: int = 116) -> str:
    """Markdown lines of at most `width` characters (a bullet's continuation lines indented by two)."""
    import textwrap

    out = []
    for para in text.split("\n"):
        if not para:
            out.append("")
            continue
        out += textwrap.wrap(para, width, subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(out)


def results_record(raw: list[dict], before: dict, earlier: dict | None = None) -> dict:
    """docs/results/calibration.json: the measured models (raw, as `main` writes them), the tables and paragraph
    the docs render (`fill` records), `before`: the base-only paragraph docs/measuring.md carried before, and
    `earlier`: a model's measurement on a smaller prompt set that its data now replaces."""
    models = {name: r for one in raw for name, r in one["models"].items()}
    settings = raw[0]["settings"]
    return {
        "name": "calibration",
        "schema": "mlft.results/1",
        "provenance": (
            "python measurements/targets.py --combine (measurements/targets.py on the committed calibration data "
            "tests/data/calibration_*lcb_demo.json.gz; seeded: the same numbers on a rerun). Settings: "
            + json.dumps(settings)
        ),
        "before": before,
        "earlier": earlier or {},
        "models": models,
        "paragraph": paragraph(models, settings, before, earlier),
        "fills": {"false_positives": fp_table(models), "coverage": coverage_table(models)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=300, help="random same-model pairs at K = 1 (half that at K = 4)")
    ap.add_argument("--passes", type=int, default=400, help="redrawn prompt sets (a quarter of that at K = 4)")
    ap.add_argument("--data", nargs="+", help="NAME=FILE calibration data (default: both models')")
    ap.add_argument("--out", type=Path, default=Path("runs/targets.json"))
    ap.add_argument("--no-family", action="store_true", help="skip the per-language Holm families (the slow part)")
    ap.add_argument("--combine", type=Path, nargs="+", help="write --results from these --out files, no measuring")
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "results" / "calibration.json")
    args = ap.parse_args()
    if args.combine:
        old = json.loads(args.results.read_text(encoding="utf-8")) if args.results.is_file() else {}
        raw = [json.loads(p.read_text(encoding="utf-8")) for p in args.combine]
        earlier = dict(old.get("earlier") or {})
        for one in raw:  # a model measured again on more prompts: its earlier measurement is kept, and said
            for name, r in one["models"].items():
                was = old.get("models", {}).get(name)
                if was and was["prompts"] < r["prompts"]:
                    earlier[name] = was
        record = results_record(raw, old.get("before", {}), earlier)
        args.results.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(record["fills"]["false_positives"]["template"].format(*record["fills"]["false_positives"]["values"]))
        print(record["fills"]["coverage"]["template"].format(*record["fills"]["coverage"]["values"]))
        return
    files = dict(x.split("=", 1) for x in args.data) if args.data else {k: p for k, p in DATA.items() if p.is_file()}
    result = {
        "settings": {
            "pairs": args.pairs,
            "passes": args.passes,
            "bands": BANDS,
            "min_rows": MIN_ROWS,
            "holm_families": not args.no_family,
        },
        "models": {
            name: measure(Path(path), args.pairs, args.passes, not args.no_family) for name, path in files.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

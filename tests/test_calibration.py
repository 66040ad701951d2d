"""mlft's intervals and paired tests on real reruns of a model, not simulations.

The data (tests/data/calibration_lcb_demo.json.gz, written by `measurements/calibration.py --data`): the embedded
SmolLM2-135M-Instruct on the 290 lcb_demo prompts with the paper's decoding, 24 replies per prompt, each drawn
with its own key (so any choice of replies per prompt is a rerun with other seeds); per reply LCB's verdict bits
and lexical validity. One pass of this suite is one draw: its cross-lingual LPR spans ~16 pp across reruns."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mlft.stats import intervals, paired_test

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "calibration_lcb_demo.json.gz"


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("calibration", ROOT / "measurements" / "calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def reruns(cal):
    outcomes = cal.read_data(DATA)
    by_prompt = {}
    for o in outcomes:
        by_prompt.setdefault((o.task, o.source, o.language, o.id), []).append(o)
    return outcomes, by_prompt


def test_the_data_is_24_keyed_replies_of_290_prompts(reruns):
    outcomes, by_prompt = reruns
    assert len(by_prompt) == 290 and {len(v) for v in by_prompt.values()} == {24}
    assert {o.task for o in outcomes} == {"monolingual", "crosslingual"}


def test_one_pass_is_one_draw(cal, reruns):
    """Aligned passes (reply j of every prompt) of the same model: cross-lingual LPR spans more than 10 pp."""
    values = [intervals(p, n=10)[("crosslingual", "all", "all")]["lpr"].value for p in cal.passes(reruns[0], 1)]
    assert 100 * (max(values) - min(values)) > 10 and 100 * np.std(values, ddof=1) > 2.5


def redrawn_pass(by_prompt: dict, strata: dict, rng) -> list:
    """One pass of a redrawn prompt set: in each (task, source, language) stratum as many prompts as it holds,
    drawn with replacement from its prompts, one random reply each (the 290 prompts x 24 replies stand for the
    prompt population; a prompt drawn twice appears under two ids)."""
    out = []
    for prompts in strata.values():
        for j, i in enumerate(rng.integers(0, len(prompts), len(prompts))):
            replies = by_prompt[prompts[i]]
            out.append(replace(replies[rng.integers(len(replies))], id=f"{prompts[i][3]}~{j}", sample=0))
    return out


def coverage(passes: list[dict], truth: dict, scale: float = 1.0) -> float:
    """Share of LPR intervals (task averages and language rows) that hold the truth, each interval's two halves
    scaled by `scale` about the value (a mutation: 0.9 = 10 % narrower); rows whose truth is 0 or 1 are left out
    (every pass sits there too: covered by construction)."""
    hits = total = 0
    for iv in passes:
        for row, ms in iv.items():
            if row[1] != "all" or "lpr" not in ms or truth[row]["lpr"].value in (0.0, 1.0):
                continue
            e, v = ms["lpr"], truth[row]["lpr"].value
            lo, hi = e.value - scale * (e.value - e.low), e.value + scale * (e.high - e.value)
            hits += lo - 1e-12 <= v <= hi + 1e-12
            total += 1
    return hits / total


def test_population_intervals_cover_a_redrawn_prompt_set_within_bounds(reruns):
    """The default intervals (the prompt population) of 150 passes over redrawn prompt sets hold the value of the
    whole population (all 290 prompts x 24 replies) between 93 % and 98 % of the time: neither too narrow nor
    too wide; the same intervals 10 % narrower and 25 % wider both fail the bounds (checked here: the test can
    fail both ways). Measured: 95.5 %, 10 % narrower 91.9 %, 25 % wider 99.3 %. The bootstrap with a pooled
    pseudo-unit that these intervals replaced (2,000 resamples): 95.2 %, narrower 93.3 %, wider 97.5 %: its
    coverage moved too little with its width for the bounds to catch either mutation."""
    outcomes, by_prompt = reruns
    strata: dict = {}
    for key in by_prompt:
        strata.setdefault(key[:3], []).append(key)
    truth = intervals(outcomes, n=10)
    rng = np.random.default_rng(4)
    passes = [intervals(redrawn_pass(by_prompt, strata, rng), n=10) for _ in range(150)]
    within = lambda rate: 0.93 <= rate <= 0.98  # noqa: E731
    rates = {scale: coverage(passes, truth, scale) for scale in (1.0, 0.9, 1.25)}
    assert within(rates[1.0]), rates
    assert not within(rates[0.9]) and not within(rates[1.25]), rates  # narrower, wider: caught


def test_same_model_reruns_are_rarely_called_different(cal, reruns):
    """`mlft compare` between two passes of the same model that share no reply: the default permutation test
    rejects between 2 % and 8 % at the 5 % level (a test that never rejects fails the lower bound, checked here),
    the paired bootstrap at most 10 % and McNemar at most 8 %. Measured at this seed: 3.0 %, 2.5 %, 2.5 % of 200;
    the smallest permutation p is 0.0010 at 2,000 draws (a -9.4 pp monolingual difference, about 0.0011 at 20,000
    draws: as extreme as 1 in ~900 same-model comparisons), so the floor asserted is 0.0002."""
    rng = np.random.default_rng(2)
    p = {"permutation": [], "bootstrap": [], "mcnemar": []}
    for _ in range(100):
        a, b, _rest = cal.random_pair(reruns[1], 1, rng)
        for task in ("monolingual", "crosslingual"):
            for method, values in p.items():
                values.append(paired_test(a, b, "lpr", task=task, method=method, n=2000).p_value)
    rate = {m: float(np.mean(np.array(v) < 0.05)) for m, v in p.items()}
    within = lambda r: 0.02 <= r <= 0.08  # noqa: E731
    assert within(rate["permutation"]) and min(p["permutation"]) > 0.0002, (rate, min(p["permutation"]))
    assert rate["bootstrap"] <= 0.1 and rate["mcnemar"] <= 0.08, rate
    assert not within(float(np.mean(np.ones(len(p["permutation"])) < 0.05)))  # a never-rejecting test: caught


def test_two_replies_per_prompt_narrow_paired_comparisons(cal, reruns):
    """The within-prompt noise is what a paired comparison keeps (the prompts cancel): two replies per prompt
    shrink the paired interval of a same-model difference by more than a tenth."""
    rng = np.random.default_rng(3)
    widths = {1: [], 2: []}
    for k in widths:
        for _ in range(12):
            a, b, _rest = cal.random_pair(reruns[1], k, rng)
            r = paired_test(a, b, "lpr", task="crosslingual", n=2000)
            widths[k].append(r.ci_high - r.ci_low)
    assert np.mean(widths[2]) < 0.9 * np.mean(widths[1]), {k: np.mean(v) for k, v in widths.items()}

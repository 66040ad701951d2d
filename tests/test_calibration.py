"""mlft's intervals and paired tests on real reruns of a model, not simulations.

The data (tests/data/calibration_lcb_demo.json.gz, written by `measurements/calibration.py --data`): the embedded
SmolLM2-135M-Instruct on the 290 lcb_demo prompts with the paper's decoding, 24 replies per prompt, each drawn
with its own key (so any choice of replies per prompt is a rerun with other seeds); per reply LCB's verdict bits
and lexical validity. One pass of this suite is one draw: its cross-lingual LPR spans ~16 pp across reruns."""

import importlib.util
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


def test_single_pass_intervals_cover_the_value_of_all_other_replies(cal, reruns):
    """95 % intervals of 40 random passes (one reply per prompt) hold the pooled value of the prompts' other 23
    replies: the task averages and every language row. Before strata borrowed from their task's pool, a language
    row whose strata sat at 0 % / 100 % (or held one prompt) collapsed: 61 % of monolingual language rows covered."""
    rng = np.random.default_rng(1)
    hits = {"average": [0, 0], "languages": [0, 0]}
    for _ in range(40):
        a, _b, rest = cal.random_pair(reruns[1], 1, rng)
        mine, truth = intervals(a, n=1000), intervals(rest, n=10)
        for (task, source, lang), ms in mine.items():
            if source == "all" and "lpr" in ms:
                where = "average" if lang == "all" else "languages"
                hits[where][0] += (
                    ms["lpr"].low - 1e-12 <= truth[(task, source, lang)]["lpr"].value <= ms["lpr"].high + 1e-12
                )
                hits[where][1] += 1
    rates = {k: h / n for k, (h, n) in hits.items()}
    assert rates["average"] >= 0.9 and rates["languages"] >= 0.93, rates


def test_same_model_reruns_are_rarely_called_different(cal, reruns):
    """`mlft compare` between two passes of the same model that share no reply: the paired bootstrap and McNemar
    reject at about their 5 % level (measured: 5.0 % and 2.0 % over 400 comparisons), not the p = 0.001 that one
    pass against another once gave."""
    rng = np.random.default_rng(2)
    rejected = {"bootstrap": 0, "mcnemar": 0}
    tests = 0
    for _ in range(60):
        a, b, _rest = cal.random_pair(reruns[1], 1, rng)
        for task in ("monolingual", "crosslingual"):
            tests += 1
            for method in rejected:
                rejected[method] += paired_test(a, b, "lpr", task=task, method=method, n=2000).p_value < 0.05
    assert rejected["bootstrap"] / tests <= 0.1 and rejected["mcnemar"] / tests <= 0.08, (rejected, tests)


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

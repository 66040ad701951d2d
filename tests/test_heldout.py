"""The default paired test on held-out reruns: passes that none of the calibration code saw.

The data (tests/data/heldout_lcb_demo.json.gz, written by `measurements/heldout.py --data`): the embedded
SmolLM2-135M-Instruct on the 290 lcb_demo prompts, one reply per prompt per pass, from two generators: A, mlft's
keyed sampler at a decoding seed the calibration never used; B, plain `transformers` `generate(do_sample=True)`
with the suite's decoding and its own torch seeds. Every pair of passes is a same-model comparison; the goal:
the default test (`paired_test`: permutation, LPR, language-averaged) rejects 2-8 % of them at 5 % and
its smallest p is not below 0.001. The p-values are recomputed here (seeded: exactly the measurement's) and must
match docs/results/heldout.json."""

import itertools
import json
from pathlib import Path

import pytest
from script_helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "heldout_lcb_demo.json.gz"
RESULTS = ROOT / "docs" / "results" / "heldout.json"


@pytest.fixture(scope="module")
def heldout():
    return load_script("heldout")


@pytest.fixture(scope="module")
def data(heldout):
    return heldout.read_data(DATA)


@pytest.fixture(scope="module")
def recorded():
    return json.loads(RESULTS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def p_values(heldout, data, recorded):
    """Per task: every pair's p, recomputed as the measurement computed it."""
    passes, labels = data
    meta = recorded["meta"]
    return {
        task: {
            f"{labels[i]}-{labels[j]}": heldout.pair_p(passes[i], passes[j], task, meta["resamples"], meta["fine"])
            for i, j in itertools.combinations(range(len(passes)), 2)
        }
        for task in ("monolingual", "crosslingual")
    }


def test_the_data_is_held_out_passes_of_two_generators(data):
    passes, labels = data
    assert sum(x[0] == "A" for x in labels) >= 6 and sum(x[0] == "B" for x in labels) >= 6
    assert {len(p) for p in passes} == {290}
    assert {o.task for o in passes[0]} == {"monolingual", "crosslingual"}
    keys = [{(o.task, o.source, o.language, o.id) for o in p} for p in passes]
    assert all(k == keys[0] for k in keys)  # the same prompts in every pass
    assert len(list(itertools.combinations(labels, 2))) >= 50


def test_the_recorded_p_values_are_recomputed_exactly(p_values, recorded):
    for task, ps in p_values.items():
        assert ps == pytest.approx(recorded["tasks"][task]["p"], abs=1e-5)


def test_no_p_below_0_001_on_held_out_reruns(heldout, p_values):
    """The goal's tail: no same-model comparison at p < 0.001 (resolvable: those below 0.01 at 20,000 swaps)."""
    for task, ps in p_values.items():
        assert min(ps.values()) >= heldout.GOAL["min_p"], task


@pytest.mark.xfail(
    strict=True,
    reason="not met on this draw: 0 of 153 monolingual and 1 of 153 cross-lingual comparisons rejected (18 passes: "
    "12 of A, 6 of B); the held-out passes lie close together (LPR sd 1.39 / 2.55 pp against 2.36 / 3.46 pp over the "
    "calibration's 24 passes), so their pairwise p-values sit high "
    "(docs/results/heldout.json: spread)",
)
@pytest.mark.parametrize("task", ["monolingual", "crosslingual"])
def test_the_default_test_rejects_2_to_8_percent_of_held_out_comparisons(heldout, p_values, task):
    assert heldout.goal_problems(list(p_values[task].values())) == []


def test_the_bounds_fail_a_never_rejecting_test_and_a_loose_one(heldout, p_values):
    """The check can fail both ways (on both tasks' p-values together): a test that never rejects (every p = 1) is
    below 2 %; one that rejects at p < 0.2 (the same p-values, a looser threshold) is above 8 %; and one that
    reports p / 100 is too sure."""
    values = [p for ps in p_values.values() for p in ps.values()]
    assert any("rejected" in x for x in heldout.goal_problems([1.0] * len(values)))
    assert any("rejected" in x for x in heldout.goal_problems(values, alpha=0.2))
    assert any("smallest p" in x for x in heldout.goal_problems([p / 100 for p in values]))

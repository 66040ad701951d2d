"""The default paired test on held-out reruns: passes that none of the calibration code saw.

The data (tests/data/heldout_lcb_demo.json.gz, written by `measurements/heldout.py --data`): the embedded
SmolLM2-135M-Instruct on the 290 lcb_demo prompts, one reply per prompt per pass, from two generators: A, mlft's
keyed sampler at decoding seeds the calibration never used (a block of passes per seed); B, plain `transformers`
`generate(do_sample=True)` with the suite's decoding and its own torch seeds. Every pair of passes is a same-model
comparison; the goal: the default test (`paired_test`: permutation, LPR, language-averaged) rejects 2-8 % of them
at 5 % and its smallest p is not below 0.001. The p-values are recomputed here (seeded: exactly the measurement's)
and must match docs/results/heldout.json."""

import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
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
def p_values(recorded):
    """Per task: every pair's recorded p (docs/results/heldout.json), checked against a recomputation below."""
    return {task: recorded["tasks"][task]["p"] for task in ("monolingual", "crosslingual")}


@pytest.fixture(scope="module")
def recomputed(heldout, data, recorded):
    """Per task: the p of every pair recorded below 0.01 (the tail), of 20 more of those below 0.05 and of 40 drawn
    from all (seeded), recomputed as the measurement computed them (all 1770 pairs of both tasks: ~15 min)."""
    passes, labels = data
    meta = recorded["meta"]
    index = {x: i for i, x in enumerate(labels)}
    out = {}
    for task in ("monolingual", "crosslingual"):
        names = sorted(recorded["tasks"][task]["p"])
        rng = np.random.default_rng(0)
        p = recorded["tasks"][task]["p"]
        pick = {n for n in names if p[n] < 0.01}
        rejected = sorted(n for n in names if 0.01 <= p[n] < 0.05)
        pick |= {rejected[i] for i in rng.choice(len(rejected), min(20, len(rejected)), replace=False)}
        pick |= {names[i] for i in rng.choice(len(names), min(40, len(names)), replace=False)}
        out[task] = {}
        for name in sorted(pick):
            a, b = name.split("-")
            out[task][name] = heldout.pair_p(passes[index[a]], passes[index[b]], task, meta["resamples"], meta["fine"])
    return out


def test_the_data_is_held_out_passes_of_two_generators(data):
    passes, labels = data
    assert sum(x[0] == "A" for x in labels) >= 6 and sum(x[0] == "B" for x in labels) >= 6
    assert {len(p) for p in passes} == {290}
    assert {o.task for o in passes[0]} == {"monolingual", "crosslingual"}
    keys = [{(o.task, o.source, o.language, o.id) for o in p} for p in passes]
    assert all(k == keys[0] for k in keys)  # the same prompts in every pass
    assert len(list(itertools.combinations(labels, 2))) >= 50


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_recorded_p_values_are_recomputed_exactly(recomputed, recorded, data):
    passes, labels = data
    for task, ps in recomputed.items():
        assert len(recorded["tasks"][task]["p"]) == len(labels) * (len(labels) - 1) // 2
        assert len(ps) >= 60 and ps == pytest.approx({k: recorded["tasks"][task]["p"][k] for k in ps}, abs=1e-5)


CROSS_MIN_P = pytest.mark.xfail(
    strict=True,
    reason="the goal's literal tail, not met on the cross-lingual comparisons: one of 1770 at p 0.0008 (A35-A43, "
    "both of the second block of A). The goal was written for about fifty comparisons; at 1770 an exact test is "
    "expected to give 1.8 p-values below 0.001, so the count is checked too (test_the_tail_is_no_heavier_...); "
    "on the 52 independent comparisons of a block declared before it was drawn it is met "
    "(test_no_declared_comparison_is_below_0_001)",
)


@pytest.mark.parametrize("task", ["monolingual", pytest.param("crosslingual", marks=CROSS_MIN_P)])
def test_no_p_below_0_001_on_held_out_reruns(heldout, p_values, task):
    """The goal's tail as written: no same-model comparison at p < 0.001 (resolvable: those below 0.01 at 20,000
    swaps)."""
    assert min(p_values[task].values()) >= heldout.GOAL["min_p"]


def test_the_tail_is_no_heavier_than_an_exact_tests(heldout, p_values):
    """Per task and over both, p falls below 0.01 and below 0.001 no more often than tests of exact level allow
    (the chance of at least as many among independent exact tests is not under 1 %): the p-values are not too sure.
    A test that reports p / 10 fails it."""
    every = [p for ps in p_values.values() for p in ps.values()]
    for ps in [list(v.values()) for v in p_values.values()] + [every]:
        assert all(r["chance"] >= 0.01 for r in heldout.tail(ps)), heldout.tail(ps)
    assert any(r["chance"] < 0.01 for r in heldout.tail([p / 10 for p in every]))


@pytest.mark.parametrize("task", ["monolingual", "crosslingual"])
def test_the_default_test_rejects_2_to_8_percent_of_held_out_comparisons(heldout, p_values, task):
    """Monolingual: 60 of 1770 (3.4 %), met since the second block of A (seed 903, 30 passes, drawn after the first
    block's 0.9 % was reported and added whatever it showed: 33 of its own 435 pairs, 7.6 %). Cross-lingual: 80 of
    1770 (4.5 %)."""
    share = sum(p < 0.05 for p in p_values[task].values()) / len(p_values[task])
    assert heldout.GOAL["rate_low"] <= share <= heldout.GOAL["rate_high"]


def test_the_null_draws_are_checked_and_shaped(heldout, data):
    """`null_draws` refuses a pool whose passes hold other prompts, and tests every pair of every replicate (a small
    pool: 6 passes of the held-out data, 3 drawn, 2 replicates, 200 swaps)."""
    passes, _labels = data
    with pytest.raises(ValueError, match="pooled pass 1"):
        heldout.null_draws([passes[0], passes[1][:-1]], 2, 1)
    out = heldout.null_draws(passes[:6], 3, 2, resamples=200)
    assert (out["pool"], out["passes"], out["pairs"], out["replicates"]) == (6, 3, 3, 2)
    for task in ("monolingual", "crosslingual"):
        assert len(out[task]["counts"]) == 2 and out[task]["tests"] == 6 and 0 <= out[task]["rate"] <= 1


def test_the_bounds_fail_a_never_rejecting_test_and_a_loose_one(heldout, p_values):
    """The check can fail both ways (on both tasks' p-values together): a test that never rejects (every p = 1) is
    below 2 %; one that rejects at p < 0.2 (the same p-values, a looser threshold) is above 8 %; and one that
    reports p / 100 is too sure."""
    values = [p for ps in p_values.values() for p in ps.values()]
    assert any("rejected" in x for x in heldout.goal_problems([1.0] * len(values)))
    assert any("rejected" in x for x in heldout.goal_problems(values, alpha=0.2))
    assert any("smallest p" in x for x in heldout.goal_problems([p / 100 for p in values]))


def test_pass_values_are_the_official_value_of_each_pass(data):
    """`pass_values` aggregates many passes at once: each equals the scorer's (all, all) value of that pass alone
    (`intervals`' point value), on both tasks and for WPR too."""
    from mlft.errors import DataError
    from mlft.stats import intervals, pass_values

    passes, _labels = data
    for task in ("monolingual", "crosslingual"):
        for metric in ("lpr", "wpr"):
            each = [intervals(p, n=10)[(task, "all", "all")][metric].value for p in passes[:4]]
            assert pass_values(passes[:4], task, metric).tolist() == pytest.approx(each, abs=1e-12)
    with pytest.raises(DataError, match="no reply of task"):
        pass_values(passes[:2], "fewshot")


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_spread_check_sees_dependence_between_prompts_within_a_pass(heldout, data):
    """`spread` compares a group's LPR sd with its prompt-independent null. Deal every prompt's replies so that
    passing ones go to the first passes (prompts move together: the sd is far above the null's, no null draw as
    high) and round-robin, each prompt's passing replies starting where the last prompt's stopped (every pass
    gets its even share: prompts cancel, as tight as no null draw); the held-out data sit in between."""
    passes, _labels = data
    passes = heldout.canonical(passes)

    def dealt(even: bool) -> list:
        cols, at = [], 0
        for i in range(len(passes[0])):
            col = sorted((p[i] for p in passes), key=lambda o: o.counted and not o.line_error, reverse=True)
            if even:  # round-robin (every reply counted: a stratum's LPR is a share of a fixed n)
                col = [replace(o, counted=True, line_error=o.line_error or not o.counted) for o in col]
                col = col[-at:] + col[:-at] if at else col
                at = (at + sum(not o.line_error for o in col)) % len(col)
            cols.append(col)
        return [[cols[i][j] for i in range(len(cols))] for j in range(len(passes))]

    out = heldout.spread({"together": dealt(False), "cancel": dealt(True), "as drawn": passes}, "as drawn", draws=50)
    for task in ("monolingual", "crosslingual"):
        g = out[task]["groups"]
        assert g["together"]["sd"] > 2 * g["together"]["independent_sd"] and g["together"]["as_tight"] == 1.0
        assert g["cancel"]["sd"] < g["cancel"]["independent_sd"] and g["cancel"]["as_tight"] == 0.0
        assert 0.0 < g["as drawn"]["as_tight"] < 1.0
        assert out[task]["pooled"]["passes"] == len(passes)  # "as drawn" pooled alone: no calibration group here


def test_the_spread_nulls_codes_are_its_outcomes(heldout, data):
    """`spread`'s null deals category codes (`shuffled_codes`, `coded_values`) instead of outcomes: on the same seeded
    draws (all passes dealt, and some taken) they give `pass_values` of `_shuffled`'s passes bit for bit, on both
    tasks; a planted difference (one reply's line error flipped) is seen."""
    from mlft.stats import pass_values

    passes = heldout.aligned(data[0])
    strata = [(o.task, o.source, o.language) for o in passes[0]]
    codes = heldout.coded(passes)
    for task in ("monolingual", "crosslingual"):
        plain_rng, fast_rng = np.random.default_rng(4), np.random.default_rng(4)
        for take in (None, 5, None):
            plain = pass_values(heldout._shuffled(passes, plain_rng, take), task)
            dealt = heldout.shuffled_codes(codes, fast_rng, take)
            assert heldout.coded_values(dealt, strata, task).tolist() == plain.tolist(), (task, take)
        at = next(i for i, s in enumerate(strata) if s[0] == task and dealt[0, i] & 1)  # a counted reply
        dealt[0, at] ^= 2
        assert heldout.coded_values(dealt, strata, task).tolist() != plain.tolist(), task


# --- the fresh block: declared before it was drawn ---------------------------------------------------------------

FRESH_DATA = ROOT / "tests" / "data" / "heldout_fresh_lcb_demo.json.gz"
FRESH_RESULTS = ROOT / "docs" / "results" / "heldout_fresh.json"


@pytest.fixture(scope="module")
def fresh_data(heldout):
    return heldout.read_data(FRESH_DATA)


@pytest.fixture(scope="module")
def fresh_recorded():
    return json.loads(FRESH_RESULTS.read_text(encoding="utf-8"))


def test_the_fresh_block_is_one_new_seed_and_its_declared_pairs(heldout, fresh_data, fresh_recorded):
    """One block of mlft's keyed sampler at a decoding seed no earlier held-out block or the calibration used, an
    even number of passes (50 or more comparisons: two tasks x passes / 2), the same prompts as the held-out set;
    the declared pairs are (0, 1), (2, 3), ... and share no pass."""
    passes, labels = fresh_data
    seed = fresh_recorded["meta"]["seed_a"]
    earlier = json.loads(RESULTS.read_text(encoding="utf-8"))["meta"]["seed_a"]
    assert len(seed) == 1 and seed[0] not in [0, *earlier]
    assert len(passes) % 2 == 0 and len(passes) >= 50 and labels == [f"A{j}" for j in range(len(passes))]
    ind = fresh_recorded["independent"]
    assert ind["pairs"] == [f"A{2 * i}-A{2 * i + 1}" for i in range(len(passes) // 2)]
    assert ind["tests"] == 2 * len(ind["pairs"]) >= 50 and ind["rule"] == heldout.FRESH_RULE
    used = [x for q in ind["pairs"] for x in q.split("-")]
    assert len(used) == len(set(used))
    old, _ = heldout.read_data(DATA)
    key = [(o.task, o.source, o.language, o.id) for o in old[0]]
    assert all([(o.task, o.source, o.language, o.id) for o in p] == key for p in passes)
    page = fresh_recorded["page"]["template"].format(*fresh_recorded["page"]["values"])
    assert f"{len(passes)} passes of mlft's keyed sampler at decoding seed {seed[0]}" in page
    assert f"{ind['rejected']} of {ind['tests'] + 60} independent comparisons" in page  # with the earlier 60
    assert page == heldout.fresh_page(fresh_recorded)["template"].format(*heldout.fresh_page(fresh_recorded)["values"])


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_declared_comparisons_are_recomputed_exactly(heldout, fresh_data, fresh_recorded):
    """Every declared comparison's p (both tasks), recomputed from the committed outcomes as the measurement
    computed it, matches the results file; so does the verdict."""
    passes, labels = fresh_data
    index = {x: i for i, x in enumerate(labels)}
    meta, ind = fresh_recorded["meta"], fresh_recorded["independent"]
    got = []
    for task in ("monolingual", "crosslingual"):
        for q in ind["pairs"]:
            a, b = q.split("-")
            p = heldout.pair_p(passes[index[a]], passes[index[b]], task, meta["resamples"], meta["fine"])
            assert p == pytest.approx(fresh_recorded["tasks"][task]["p"][q], abs=1e-5), (task, q)
            got.append(p)
    assert min(got) == pytest.approx(ind["min_p"], abs=1e-5)
    assert ind["rejected"] == sum(p < heldout.ALPHA for p in got)


def test_no_declared_comparison_is_below_0_001(fresh_recorded):
    """The goal's tail on the comparisons declared before the block was drawn: the smallest p of 50 or more
    independent same-model comparisons is not below 0.001."""
    ind = fresh_recorded["independent"]
    assert ind["met"] and ind["min_p"] >= 0.001, ind["min_p"]


def test_the_fresh_check_fails_on_a_pass_of_another_model(heldout, fresh_data):
    """The declared check can fail: pass 1 replaced by a pass whose cross-lingual replies are all in the wrong
    language (another model) gives p < 0.001 on that pair and the verdict "not met"; two passes, 2,000 swaps."""
    passes, _labels = fresh_data
    wrong = [replace(o, line_error=True, counted=True) if o.task == "crosslingual" else o for o in passes[1]]
    out = heldout.fresh([passes[0], wrong], resamples=2000, fine=2000)
    assert out["independent"]["tests"] == 2 and not out["independent"]["met"]
    assert out["tasks"]["crosslingual"]["p"]["A0-A1"] < 0.001 <= out["tasks"]["monolingual"]["p"]["A0-A1"]


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_standardized_differences_are_recomputed(heldout, fresh_data, fresh_recorded):
    """Every independent comparison so far (the fresh block's declared pairs and the earlier set's disjoint ones),
    read as z = T / sd(T*) with each test's own level, recomputed from the committed outcomes, matches the results
    file; the levels are near 5 % (discreteness does not explain the few rejections) and the page states the
    mean z^2 with its interval."""
    passes, _ = fresh_data
    old, labels = heldout.read_data(DATA)
    got = heldout.standardized(
        {"fresh": (passes, heldout.adjacent(len(passes))), "earlier": (old, heldout.adjacent_halves(len(labels)))}
    )
    want = fresh_recorded["standardized"]["held_out"]
    assert got["tests"] == want["tests"] == 112
    for key in ("mean_z2", "low", "high", "p_below", "mean_level", "expected", "none"):
        assert got[key] == pytest.approx(want[key], rel=1e-9), key
    assert 0.045 < got["min_level"] <= got["mean_level"] <= 0.05
    cal = heldout.calibration_passes()  # with the calibration's own pairs, as the page reads them
    # a set's row is its own tests' (the fresh block beside it, as recorded, changes none of its numbers)
    both = heldout.standardized({"calibration": (cal, heldout.adjacent_halves(len(cal)))})
    mixed = fresh_recorded["standardized"]["with_calibration"]["sets"]
    assert both["sets"]["calibration/crosslingual"]["mean_z2"] == pytest.approx(
        mixed["calibration/crosslingual"]["mean_z2"], rel=1e-9
    )
    assert got["low"] < got["mean_z2"] < got["high"]
    page = fresh_recorded["page"]["template"].format(*fresh_recorded["page"]["values"])
    assert f"Their mean z² is {want['mean_z2']:.2f}." in page
    # the exact null on these replies: seeded, so its first draws are recomputed; its summary is its draws'
    held = {"fresh": (passes, heldout.adjacent(len(passes))), "earlier": (old, heldout.adjacent_halves(len(labels)))}
    null = fresh_recorded["standardized"]["null"]
    first = heldout.standardized_null(held, draws=2, resamples=null["resamples"])["means"]
    assert first == pytest.approx(null["means"][:2], rel=1e-9) and len(null["means"]) == null["draws"] >= 100
    assert null["mean"] == pytest.approx(np.mean(null["means"]))
    assert null["as_low"] == pytest.approx(np.mean(np.array(null["means"]) <= want["mean_z2"]))
    assert f"one as low as {want['mean_z2']:.2f} in {100 * null['as_low']:.1f} % of draws" in page


def test_the_standardized_differences_see_a_pass_of_another_model(heldout, fresh_data):
    """The same reading can fail the other way: a pass whose cross-lingual replies are all in the wrong language
    against a real one lies far outside the swaps (z of 8.6), so the interval of mean z^2 excludes 1
    from above."""
    passes, _ = fresh_data
    wrong = [replace(o, line_error=True, counted=True) if o.task == "crosslingual" else o for o in passes[1]]
    got = heldout.standardized({"wrong": ([passes[0], wrong], [(0, 1)])}, resamples=2000)
    assert got["tests"] == 2 and got["low"] > 1 and got["sets"]["wrong/crosslingual"]["max_abs_z"] > 8


Z_DATA = ROOT / "tests" / "data" / "heldout_z_lcb_demo.json.gz"
Z_RESULTS = ROOT / "docs" / "results" / "heldout_z.json"


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_z_check_block_is_new_and_recomputed(heldout, fresh_recorded):
    """The block that tests the closer-passes reading (Z_RULE): one decoding seed no earlier block or the
    calibration used, declared pairs (0, 1), (2, 3), ..., 40 comparisons or more. Its declared comparisons' mean z^2
    and levels, and the first draws of its seeded exact null, recomputed from the committed outcomes, match the
    results file; the verdict is the rule applied to them; the page is the recorded one."""
    passes, labels = heldout.read_data(Z_DATA)
    got = json.loads(Z_RESULTS.read_text(encoding="utf-8"))
    z, meta = got["z_check"], got["meta"]
    used = [0, *json.loads(RESULTS.read_text(encoding="utf-8"))["meta"]["seed_a"], *fresh_recorded["meta"]["seed_a"]]
    assert len(meta["seed_a"]) == 1 and meta["seed_a"][0] not in used
    assert z["rule"] == heldout.Z_RULE and z["tests"] == len(passes) >= 40 and labels == got["passes"]
    block = {"block": (passes, heldout.adjacent(len(passes)))}
    again = heldout.standardized(block, meta["resamples"])
    for key in ("mean_z2", "mean_level", "expected", "none"):
        assert again[key] == pytest.approx(z[key], rel=1e-9), key
    first = heldout.standardized_null(block, draws=2, resamples=z["null"]["resamples"])["means"]
    assert first == pytest.approx(z["null"]["means"][:2], rel=1e-9) and len(z["null"]["means"]) == 200
    assert z["null"]["as_low"] == pytest.approx(np.mean(np.array(z["null"]["means"]) <= z["mean_z2"]))
    assert z["supported"] == (z["null"]["as_low"] < 0.05)
    pooled = heldout.with_fresh({k: v for k, v in got.items() if k != "pooled_independent"})["pooled_independent"]
    assert pooled == got["pooled_independent"] and pooled["tests"] == z["tests"] + 112
    page = heldout.z_page(got)
    text = page["template"].format(*page["values"])
    assert text == got["page"]["template"].format(*got["page"]["values"])
    assert ("**Supported" if z["supported"] else "**Not reproduced") in text


LANG_DATA = ROOT / "tests" / "data" / "heldout_lang_lcb_demo.json.gz"
LANG_RESULTS = ROOT / "docs" / "results" / "heldout_lang.json"


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_the_per_language_block_is_new_and_recomputed(heldout, fresh_recorded):
    """The block of the per-language check (LANG_RULE): a decoding seed no earlier block or the calibration used,
    declared pairs (0, 1), (2, 3), ...; one test per (task, language) row of each pair. Its per-language
    standardized differences, levels, rejections and the first draws of its seeded exact null, recomputed from the
    committed outcomes, match the results file; the verdict is the rule applied to them; the page is the recorded
    one."""
    passes, labels = heldout.read_data(LANG_DATA)
    got = json.loads(LANG_RESULTS.read_text(encoding="utf-8"))
    c, meta = got["lang_check"], got["meta"]
    used = [
        0,
        *json.loads(RESULTS.read_text(encoding="utf-8"))["meta"]["seed_a"],
        *fresh_recorded["meta"]["seed_a"],
        *json.loads(Z_RESULTS.read_text(encoding="utf-8"))["meta"]["seed_a"],
    ]
    assert len(meta["seed_a"]) == 1 and meta["seed_a"][0] not in used
    rows = sum(len({o.language for o in passes[0] if o.task == t}) for t in ("monolingual", "crosslingual"))
    assert c["rule"] == heldout.LANG_RULE and labels == got["passes"] and len(passes) >= 20
    assert c["tests"] + c["silent"] == rows * (len(passes) // 2) and c["tests"] >= 200
    block = {"block": (passes, heldout.adjacent(len(passes)))}
    again = heldout.standardized(block, meta["resamples"], languages=True)
    for key in ("mean_z2", "mean_level", "expected", "none", "rejected", "silent"):
        assert again[key] == pytest.approx(c[key], rel=1e-9), key
    first = heldout.standardized_null(block, draws=2, languages=True)["means"]
    assert first == pytest.approx(c["null"]["means"][:2], rel=1e-9) and len(c["null"]["means"]) == 200
    means = np.array(c["null"]["means"])
    assert c["null"]["as_low"] == pytest.approx(np.mean(means <= c["mean_z2"]))
    assert c["null"]["as_high"] == pytest.approx(np.mean(means >= c["mean_z2"]))
    want = "closer" if c["null"]["as_low"] < 0.05 else "too sure" if c["null"]["as_high"] < 0.05 else "consistent"
    assert c["verdict"] == want
    pmf = np.ones(1)  # the Poisson-binomial of the levels, by convolution
    for q in c["levels"]:
        pmf = np.convolve(pmf, [1 - q, q])
    assert c["at_most"] == pytest.approx(pmf[: c["rejected"] + 1].sum())
    assert c["at_least"] == pytest.approx(pmf[c["rejected"] :].sum())
    assert heldout.busiest(got) == got["busiest"] and got["busiest"]["in_rejected"] <= got["busiest"]["rejected"]
    pooled = heldout.with_z({k: v for k, v in got.items() if k != "pooled_independent"})["pooled_independent"]
    assert pooled == got["pooled_independent"] and pooled["tests"] == got["independent"]["tests"] + 152
    every = heldout.every_block(got)  # every held-out pair: pooled per task, and each block of A's own rate
    assert every == got["all_pairs"] and sorted(every["monolingual"]["passes"]) == [20, 24, 30, 40, 52]
    assert all(e["tests"] == 4066 and min(e["blocks"]) <= e["rate"] <= max(e["blocks"]) for e in every.values())
    page = heldout.lang_page(got)
    text = page["template"].format(*page["values"])
    assert text == got["page"]["template"].format(*got["page"]["values"])
    assert f"**{heldout.VERDICTS[c['verdict']]}:" in text


def test_the_per_language_reading_can_fail_both_ways(heldout, fresh_data):
    """Per-language standardized differences see a pass of another model (every cross-lingual reply in the wrong
    language: far outside the swaps)."""
    passes, _ = fresh_data
    wrong = [replace(o, line_error=True, counted=True) if o.task == "crosslingual" else o for o in passes[1]]
    got = heldout.standardized({"wrong": ([passes[0], wrong], [(0, 1)])}, resamples=2000, languages=True)
    same = heldout.standardized({"same": ([passes[0], passes[1]], [(0, 1)])}, resamples=2000, languages=True)
    assert got["sets"]["wrong/crosslingual"]["mean_z2"] > 3 * max(1.0, same["sets"]["same/crosslingual"]["mean_z2"])
    assert got["rejected"] > same["rejected"] and got["tests"] + got["silent"] == same["tests"] + same["silent"]


def test_adjacent_pairs(heldout):
    assert heldout.adjacent(5) == [(0, 1), (2, 3)] and heldout.adjacent(2) == [(0, 1)] and heldout.adjacent(1) == []
    assert heldout.adjacent_halves(6) == [(0, 3), (1, 4), (2, 5)] and heldout.adjacent_halves(1) == []


@pytest.mark.parametrize("flag", ["--z-check", "--lang-check"])
def test_block_checks_without_fresh_are_refused(flag):
    """`--z-check` and `--lang-check` judge a fresh block; alone `--z-check` used to be ignored silently (the
    script then generated the default held-out set). Now argparse refuses either, naming the flag it needs."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, str(ROOT / "measurements" / "heldout.py"), flag],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and f"{flag} judges a fresh block: give it with --fresh" in run.stderr

"""mlft's intervals and paired tests on real reruns of a model, not simulations.

The data (tests/data/calibration_lcb_demo.json.gz, written by `measurements/calibration.py --data`): the embedded
SmolLM2-135M-Instruct on the 290 lcb_demo prompts with the paper's decoding, 24 replies per prompt, each drawn
with its own key (so any choice of replies per prompt is a rerun with other seeds); per reply LCB's verdict bits
and lexical validity. One pass of this suite is one draw: its cross-lingual LPR spans ~16 pp across reruns.
A second model (tests/data/calibration_sft_lcb_demo.json.gz): the cross-lingual SFT checkpoint of the demo
(recipes/cpu/crosslingual_sft.yaml, 32 steps, training seed 0), the same decoding, 20 replies per prompt of 870
prompts: lcb_demo's sample at 30 per (task, language), which holds its 290 (near the checkpoint's ceiling, ten
prompts a row leave coverage to discreteness: test_the_near_ceiling_band_is_the_exact_binomial_coverage). The
tests marked per model run on both; coverage is judged per p-band of the true LPR (measurements/targets.py:
BANDS, MIN_ROWS)."""

from pathlib import Path

import numpy as np
import pytest
from script_helpers import load_script

from mlft.stats import intervals, load_compact, paired_test

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "calibration_lcb_demo.json.gz"
MODELS = {"base": DATA, "sft": ROOT / "tests" / "data" / "calibration_sft_lcb_demo.json.gz"}


@pytest.fixture(scope="module")
def cal():
    return load_script("calibration")


@pytest.fixture(scope="module")
def reruns(cal):
    outcomes, _ = load_compact(DATA)
    by_prompt = {}
    for o in outcomes:
        by_prompt.setdefault((o.task, o.source, o.language, o.id), []).append(o)
    return outcomes, by_prompt


def test_the_data_is_24_keyed_replies_of_290_prompts(reruns):
    outcomes, by_prompt = reruns
    assert len(by_prompt) == 290 and {len(v) for v in by_prompt.values()} == {24}
    assert {o.task for o in outcomes} == {"monolingual", "crosslingual"}


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_one_pass_is_one_draw(cal, reruns):
    """Aligned passes (reply j of every prompt) of the same model: cross-lingual LPR spans more than 10 pp."""
    values = [intervals(p, n=10)[("crosslingual", "all", "all")]["lpr"].value for p in cal.passes(reruns[0], 1)]
    assert 100 * (max(values) - min(values)) > 10 and 100 * np.std(values, ddof=1) > 2.5


@pytest.fixture(scope="module")
def targets():
    return load_script("targets")


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request, targets):
    """One model's reruns: its name, outcomes, replies per prompt, prompts per stratum, and the truth (every
    prompt x every reply)."""
    outcomes, by_prompt, strata = targets.load(MODELS[request.param])
    return request.param, outcomes, by_prompt, strata, intervals(outcomes, n=10)


@pytest.fixture(scope="module")
def population_rows(targets, model):
    """The default (population) intervals' coverage per row: 400 passes over redrawn prompt sets, seed 1:
    measurements/targets.py's own draw, so the rates asserted are docs/results/calibration.json's."""
    _name, outcomes, by_prompt, strata, _truth = model
    return targets.population_coverage(outcomes, by_prompt, strata, 400, 1)


@pytest.fixture(scope="module")
def set_bands(targets, model):
    """The `set` intervals' coverage per p-band: 100 passes of K replies per prompt (4; 2 with fewer than 16
    replies per prompt), the truth the same prompts' other replies: measurements/targets.py's own draw (the same
    passes and seed, so the same rates as docs/results/calibration.json)."""
    name, _outcomes, by_prompt, _strata, truth = model
    m = len(next(iter(by_prompt.values())))
    return targets.by_band(targets.set_coverage(by_prompt, 4 if m >= 16 else 2, 100, 0), truth)


def test_each_model_has_20_keyed_replies_or_more_of_lcb_demos_prompts(model, reruns):
    """Every prompt holds as many replies as the others (passes pair reply by reply), at least 20 (the issue's
    reruns per model); the base model 24 of the 290 lcb_demo prompts (10 per task and language), the fine-tuned
    checkpoint 20 of 870 (30 per task and language; the 290 among them), every (task, language) row as full."""
    name, outcomes, by_prompt, strata, _truth = model
    rows = {}
    for (task, _source, lang), prompts in strata.items():
        rows[(task, lang)] = rows.get((task, lang), 0) + len(prompts)
    replies, prompts = (24, 10) if name == "base" else (20, 30)
    assert len(rows) == 29 and set(rows.values()) == {prompts}, (name, rows)
    assert {len(v) for v in by_prompt.values()} == {replies}, name
    assert {o.task for o in outcomes} == {"monolingual", "crosslingual"}
    assert {k[3] for k in reruns[1]} <= {k[3] for k in by_prompt}, name


def lpr_rows(iv: dict) -> dict:
    """The LPR (value, low, high) of `intervals`' task averages and language rows (what the coverage checks read)."""
    return {k: (e["lpr"].value, e["lpr"].low, e["lpr"].high) for k, e in iv.items() if k[1] == "all"}


def test_the_coverage_fast_paths_are_intervals_on_the_same_draws(targets, cal, model):
    """The coverage checks count features instead of copying outcomes (targets.population_lpr, set_passes): on the
    same seeded draws they give `intervals`' own LPR rows, bit for bit, for each model: the population intervals of
    redrawn passes (targets.redrawn_pass, one `intervals` call each) and the point values of the replies a `set`
    pass left (calibration.random_pair's rest). A planted difference (one reply's verdict flipped) is seen."""
    name, _outcomes, by_prompt, strata, _truth = model
    rng = np.random.default_rng(5)
    plain = [lpr_rows(intervals(targets.redrawn_pass(by_prompt, strata, rng), n=10)) for _ in range(6)]
    codes, keys = targets.redrawn_codes(by_prompt, strata, 6, np.random.default_rng(5))

    def fast(codes: np.ndarray) -> list[dict]:
        out = [{} for _ in codes]
        for task, (names, index) in targets.task_strata(keys).items():
            obs = targets.stratum_counts(codes, index, len(names))
            for row, (value, lo, hi) in targets.population_lpr(names, obs).items():
                for j in range(len(codes)):
                    out[j][(task, *row)] = (float(value[j]), float(lo[j]), float(hi[j]))
        return [{k: x for k, x in rows.items() if k[1] == "all"} for rows in out]

    assert fast(codes) == plain, name
    planted = codes.copy()
    planted[0, np.flatnonzero(planted[0] & 1)[0]] ^= 2  # a counted reply's line error flipped
    assert fast(planted) != plain, name

    k = 4 if len(next(iter(by_prompt.values()))) >= 16 else 2
    rng = np.random.default_rng(7)
    rests = [cal.random_pair(by_prompt, k, rng) for _ in range(3)]
    drawn = list(targets.set_passes(by_prompt, k, 3, 7))
    for (a, _b, rest), (fast_a, truth) in zip(rests, drawn):
        assert [(o.id, o.sample, o.code) for o in fast_a] == [(o.id, o.sample, o.code) for o in a], name
        assert truth == {row: e["lpr"].value for row, e in intervals(rest, n=10).items()}, name
    assert drawn[0][1] != {row: e["lpr"].value for row, e in intervals(rests[1][2], n=10).items()}, name


def judge(targets, bands: dict) -> tuple[dict, dict]:
    """The bands with enough rows to say (targets.MIN_ROWS) and those reported only."""
    judged = {b: x for b, x in bands.items() if x["judged"]}
    return judged, {b: (x["rows"], x["rate"]) for b, x in bands.items() if not x["judged"]}


# Bands found outside the bounds on real data: findings, not bounds moved. The test asserts they stay outside
# (so a fix shows, and the entry goes) and every other judged band inside.
FINDINGS: dict[tuple[str, str, str], str] = {}
# Emptied when the fine-tuned checkpoint's data grew from 10 to 30 prompts per (task, language): its near-ceiling
# population band over-covered (98.5 %, 400 passes: discreteness, test_the_near_ceiling_band_is_the_exact_binomial_
# coverage) and its 10 % narrower population intervals were not caught (lowest band 94.0 %); both are inside / caught
# at 30 (docs/results/calibration.json: "earlier" holds the 10-prompt measurement).


def check_bands(targets, name: str, target: str, judged: dict) -> None:
    for band, x in judged.items():
        if (name, target, band) in FINDINGS:
            assert not targets.within(x["rate"]), ("fixed? drop the finding", name, target, band, x["rate"])
        else:
            assert targets.within(x["rate"]), (name, target, band, x["rate"], x["rows"])


def caught(targets, judged: dict, mutation: str) -> bool:
    """Whether the per-band check fails on a mutation: 10 % narrower intervals take some judged band below the
    bounds, 25 % wider ones some band above (the same test run on the mutated intervals fails)."""
    if mutation == "narrower":
        return any(x["narrower"] < targets.BOUNDS[0] for x in judged.values())
    return any(x["wider"] > targets.BOUNDS[1] for x in judged.values())


def check_mutations(targets, name: str, target: str, judged: dict) -> None:
    for mutation in ("narrower", "wider"):
        rates = {b: round(100 * x[mutation], 1) for b, x in judged.items()}
        if (name, target, mutation) in FINDINGS:
            assert not caught(targets, judged, mutation), ("fixed? drop the finding", name, target, mutation, rates)
        else:
            assert caught(targets, judged, mutation), (name, target, mutation, rates)


def pooled(bands: dict, key: str) -> float:
    n = sum(x["intervals"] for x in bands.values())
    return sum(x[key] * x["intervals"] for x in bands.values()) / n


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_population_intervals_cover_a_redrawn_prompt_set_per_p_band(targets, model, population_rows):
    """The default intervals (the prompt population) of 400 passes over redrawn prompt sets (in each stratum as
    many prompts as it holds, drawn with replacement, one random reply each; measurements/targets.py's own draw)
    hold the value of the whole population (every prompt x reply) between 93 % and 98 % of the time in every
    p-band of the true LPR with at least MIN_ROWS rows (task averages and language rows; a row at exactly 0 or 1
    is covered by construction and left out), for each model; the same check fails on the same intervals 10 %
    narrower (some band under 93 %) and 25 % wider (some band over 98 %), so it can fail both ways. FINDINGS
    holds what is outside as measured. Monte-Carlo error: a band holds 4-8 rows x 400 passes; passes share rows,
    so a band's rate moves ~0.5-1 pp with the seed (at 150 passes, seed 4, the base model's narrower intervals
    stayed inside: 94.1 % at least). Before the edge modification (plain Wilson) the checkpoint's near-ceiling
    band covered 92.5 % and the mutations were judged pooled over the bands."""
    name, _outcomes, _by_prompt, _strata, truth = model
    bands = targets.by_band(population_rows, truth)
    judged, reported = judge(targets, bands)
    assert len(judged) >= 2, (name, reported)
    check_bands(targets, name, "population", judged)
    check_mutations(targets, name, "population", judged)


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_this_prompt_set_intervals_cover_the_other_replies_per_p_band(targets, model, set_bands):
    """The `set` intervals (decoding noise only) of 60 passes of K = 4 replies per prompt (2 for a model with fewer
    than 16) hold the value of the same prompts' other replies between 93 % and 98 % of the time in every judged
    p-band (at least MIN_ROWS rows; the others are reported in the message), for each model. The
    truth is a finite draw too: each half is scaled by sqrt(1 + K / (M - K)) first (the sd of a difference of
    two independent means; targets.set_coverage). Before `mlft.stats.set_design_effects` (1 - rho of the task's
    conditional intra-prompt correlation) the base model's bands covered 89.0 / 92.7 / 89.0 / 94.4 % (60
    passes; this test failed on it)."""
    judged, reported = judge(targets, set_bands)
    name = model[0]
    assert len(judged) >= 2, (name, reported)
    check_bands(targets, name, "set", judged)


@pytest.mark.slow  # the coverage passes (its fixture)
def test_this_prompt_set_mutations_fail_the_bounds(targets, model, set_bands):
    """10 % narrower and 25 % wider `set` intervals fail the per-band check (some judged band below 93 % / above
    98 %), for each model. Pooled over the judged bands they would not be caught: a correct normal interval covers
    92.2 % at 0.9 of its width and 98.6 % at 1.25, only 0.8 and 0.6 pp beyond the bounds, and the near-ceiling
    rows (exact coverage ~99 % at any width that holds nine of ten) pull the pool back inside (base model, before
    the edge modification: narrower 93.6 % pooled; this test was a strict xfail on the pooled rule)."""
    name = model[0]
    judged, _ = judge(targets, set_bands)
    check_mutations(targets, name, "set", judged)


@pytest.mark.slow  # the coverage passes (its fixture)
def test_the_near_ceiling_band_is_the_exact_binomial_coverage(targets, model, population_rows):
    """What sets coverage near the ceiling: with one reply per prompt a language row of a redrawn prompt set is
    Binomial(n, p) (n its counted replies, p the true LPR), so the exact coverage of the row's interval method is
    the binomial sum over the draws it holds. Summed over the band's language rows at their true p and number of
    prompts, it gives the measured rate within Monte-Carlo error (the task average is left out), for both models.
    For the fine-tuned checkpoint (rows at 95-99 %) the same sum at ten prompts a row, the size of its earlier
    data, is over the bounds (98.7 %): at ten prompts an interval either holds nine of ten (coverage >= 98.8 % at
    p = 0.99) or not (<= 90 %), and 93-98 % is not attainable; that was the earlier data's finding (98.5 %
    measured, docs/results/calibration.json "earlier"). At thirty a row the sum is inside the bounds: this is why
    the checkpoint's data holds 30 prompts a row."""
    from scipy.stats import binom

    from mlft.stats import modified_wilson

    def exact(method, n: int, p: float) -> float:
        x = np.arange(n + 1)
        lo, hi = method(x, np.full(n + 1, n))
        return float(binom.pmf(x, n, p)[(lo <= p) & (p <= hi)].sum())

    name, _outcomes, _by_prompt, strata, truth = model
    rows, measured = [], []
    for (task, lang), by in population_rows.items():
        p = truth[(task, "all", lang)]["lpr"].value
        if lang == "all" or targets.band_of(p) != "[0.95, 1)":
            continue
        rows.append((sum(len(v) for k, v in strata.items() if k[0] == task and k[2] == lang), p))
        measured.append(by[1.0][0] / by[1.0][1])
    assert len(measured) >= 3, name
    here = [exact(modified_wilson, n, p) for n, p in rows]
    assert abs(np.mean(measured) - np.mean(here)) < 0.015, (name, measured, here)
    assert min(here) > targets.BOUNDS[0], (name, here)
    if name == "sft":
        ten = np.mean([exact(modified_wilson, 10, p) for _n, p in rows])
        assert ten > targets.BOUNDS[1], (ten, rows)
        assert targets.within(np.mean(here)), (here, rows)


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_same_model_reruns_are_rarely_called_different_per_task(targets, model):
    """`mlft compare`'s default test (permutation over prompts, 1,000 draws) between two passes of the same model
    that share no reply (150 random pairs, K = 1) rejects between 2 % and 8 % at the 5 % level in each task, for
    each model (the rate's Wilson interval is in the message); its smallest p stays above 0.0005 (the floor of
    1,000 draws is 1 / 1,001); a test that never rejects fails the lower bound (checked here). Monte-Carlo error:
    150 tests at a true 5 % give a rate with sd 1.8 pp. At another seed (measurements/targets.py, 2,000 draws)
    the fine-tuned checkpoint rejects 6.7 % in each task (10/150); on its earlier 290 prompts its monolingual rate
    was 2.0 %, at the bound (0.7 % at 6 replies per prompt): near its ceiling few of ten prompts a row differ
    between passes and an exact test's level falls below 5 % (conservative, not anti-conservative)."""
    name, _outcomes, by_prompt, _strata, _truth = model
    fp = targets.false_positives(by_prompt, 1, 150, 2, n=1000, methods=("permutation",), family=False)
    for task in ("monolingual", "crosslingual"):
        x = fp[f"{task} permutation"]
        msg = (name, task, f"{x['rejected']}/{x['tests']}", f"[{100 * x['low']:.1f}, {100 * x['high']:.1f}] %")
        assert targets.within(x["rate"], targets.FP_BOUNDS) and x["min_p"] > 0.0005, (*msg, x["min_p"])
    assert not targets.within(0.0, targets.FP_BOUNDS)  # a never-rejecting test: caught


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

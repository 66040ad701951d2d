"""Intervals and paired tests of mlft.stats: official point values, coverage on synthetic data, planted and
null differences, exact McNemar, id checks."""

import time
from math import comb

import numpy as np
import pytest
from data_helpers import matching_interval_rows

from mlft.benchmarks.lcb.scoring import outcomes_from
from mlft.completions import read_completions
from mlft.errors import ConfigError, DataError
from mlft.stats import (
    Outcome,
    holm,
    interval_rows,
    intervals,
    load_outcomes,
    paired_test,
    paired_tests_by_language,
    save_outcomes,
    unpaired_test,
    wilson,
)

KEYS = [(s, lang) for s in ("aya", "dolly", "okapi") for lang in ("ar", "fr", "ja", "ko", "de")]


def simulate(seed, q, n_per=50, counted=0.9, task="monolingual", keys=KEYS):
    """Bernoulli replies: counted with prob `counted`, a line error with prob q[key] when counted."""
    r = np.random.default_rng(seed)
    out = []
    for key in keys:
        c = r.random(n_per) < counted
        line = c & (r.random(n_per) < q[key])
        word = c & ~line & (r.random(n_per) < 0.1)
        deg = r.random(n_per) < 0.05
        out += [
            Outcome(f"{key[0]}/{key[1]}/{i}", task, *key, bool(c[i]), bool(line[i]), bool(word[i]), bool(deg[i]))
            for i in range(n_per)
        ]
    return out


def paired_runs(seed, n_prompts=150, shift=0.0):
    """Two runs over the same prompts; prompt difficulty is shared (Beta, mean 0.25), B's error rate + shift."""
    r = np.random.default_rng(seed)
    a, b = [], []
    for i in range(n_prompts):
        source, lang = KEYS[i % len(KEYS)]
        q = r.beta(1, 3)
        for run, qq in ((a, q), (b, min(1.0, max(0.0, q + shift)))):
            c = r.random() < 0.9
            run.append(
                Outcome(str(i), "crosslingual", source, lang, c, c and r.random() < qq, c and r.random() < 0.1, False)
            )
    return a, b


def test_outcome_roundtrip(tmp_path):
    o = Outcome("x/1", "monolingual", "aya", "ar", True, False, True, False, nll=2.5)
    assert Outcome.from_dict(o.to_dict()) == o
    save_outcomes(tmp_path / "o.jsonl", [o, Outcome("x/2", "monolingual", "aya", "ar", False, False, False, True)])
    back = load_outcomes(tmp_path / "o.jsonl")
    assert back[0] == o and back[1].nll is None and back[1].degenerate
    with pytest.raises(DataError, match="missing field.*degenerate"):
        Outcome.from_dict({k: v for k, v in o.to_dict().items() if k != "degenerate"})


def test_point_values_are_the_official_numbers(shared):
    """Real replies scored by the real scorer: every value equals score_completions' (==, not approx)."""
    from mlft.benchmarks.lcb.metrics import ScoreOptions
    from mlft.benchmarks.lcb.scoring import analyze_all, load_resources, score_completions

    rows, seen = [], {}
    for c in read_completions(shared / "lcb" / "outputs" / "llama-2-instruct.csv"):
        key = (c.task, c.source, c.language)
        if seen.get(key, 0) < 4 and (c.task == "monolingual" or c.source == "okapi"):
            seen[key] = seen.get(key, 0) + 1
            rows.append(c)
    lid, words = load_resources("ftz", shared / "lcb" / "words")
    results = analyze_all([(c.completion, c.language) for c in rows], lid, words, ScoreOptions(), workers=1)
    outcomes = outcomes_from(rows, results)
    report = score_completions(rows, lid=lid, words=shared / "lcb" / "words", workers=1)
    got = intervals(outcomes, n=200)
    checked = 0
    for r in report.rows:
        est = got[(r["task"], r["source"], r["language"])]
        for m in ("lpr", "wpr", "lcpr"):
            if r.get(m) is not None:
                assert est[m].value == r[m], (r, m)
                assert est[m].low <= est[m].value <= est[m].high
                checked += 1
            else:
                assert m not in est, (r, m)
        if "n_scored" in r:
            assert est["coverage"].value == r["n_scored"] / r["n_responses"]
    assert checked > 100
    flat = interval_rows(outcomes, n=200)
    assert {"lpr", "lpr_ci_low", "lpr_ci_high", "coverage_ci_low"} <= set(flat[0])


def test_wilson_matches_scipy_and_covers():
    from scipy.stats import binom, binomtest

    for k, t in ((0, 20), (20, 20), (7, 31), (95, 100)):
        ci = binomtest(k, t).proportion_ci(0.95, method="wilson")
        lo, hi = wilson(k, t)
        assert (float(lo), float(hi)) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert tuple(map(float, wilson(0, 0))) == (0.0, 1.0)
    # exact coverage, averaged over p in (0.5, 0.995) for a group of 50 counted replies
    t = 50
    lo, hi = wilson(np.arange(t + 1), t)
    cover = [binom.pmf(np.arange(t + 1), t, p)[(lo <= p) & (p <= hi)].sum() for p in np.linspace(0.5, 0.995, 100)]
    assert 0.94 < np.mean(cover) < 0.96 and min(cover) > 0.85


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_bootstrap_interval_coverage_near_95():
    """300 seeded datasets (15 strata x 50 replies, error rates 5-40 %): the (all, all) and (all, lang) LPR
    intervals contain the true value ~95 % of the time. Monte-Carlo SE at 300 datasets is 1.3 pp; the percentile
    bootstrap is known to run ~0.5-1 pp narrow, so we accept [92 %, 98 %]."""
    q = dict(zip(KEYS, np.random.default_rng(123).uniform(0.05, 0.4, len(KEYS))))
    langs = ("ar", "fr", "ja", "ko", "de")
    truth = np.mean([np.mean([1 - q[(s, lang)] for s in ("aya", "dolly", "okapi")]) for lang in langs])
    truth_ar = np.mean([1 - q[(s, "ar")] for s in ("aya", "dolly", "okapi")])
    hit = hit_ar = 0
    for k in range(300):
        iv = intervals(simulate(k, q), n=1000, seed=k)
        e, e_ar = iv[("monolingual", "all", "all")]["lpr"], iv[("monolingual", "all", "ar")]["lpr"]
        hit += e.low <= truth <= e.high
        hit_ar += e_ar.low <= truth_ar <= e_ar.high
    assert 0.92 <= hit / 300 <= 0.98, hit / 300
    assert 0.92 <= hit_ar / 300 <= 0.98, hit_ar / 300


@pytest.mark.serial  # timed
def test_intervals_are_fast_and_seeded():
    outs = simulate(0, dict.fromkeys(KEYS, 0.2), n_per=20)  # 300 replies
    intervals(outs, n=10)  # warm-up
    t0 = time.perf_counter()
    first = intervals(outs, n=10000, seed=7)
    assert time.perf_counter() - t0 < 1.0
    assert intervals(outs, n=10000, seed=7) == first
    assert (  # LCPR is the bootstrap's (seeded); the proportions' score intervals need no seed
        intervals(outs, n=10000, seed=8)[("monolingual", "all", "all")]["lcpr"]
        != first[("monolingual", "all", "all")]["lcpr"]
    )
    assert (
        intervals(outs, n=10, seed=8)[("monolingual", "all", "all")]["lpr"]
        == first[("monolingual", "all", "all")]["lpr"]
    )
    group = first[("monolingual", "aya", "ar")]
    assert group["lpr"].method == "wilson" and group["lcpr"].method == "bootstrap"
    assert first[("monolingual", "all", "all")]["lpr"].method == "stratified-wilson"
    assert first[("monolingual", "all", "fr")].keys() == {"lpr", "coverage", "degeneracy"}
    assert intervals(outs, n=100, group_method="bootstrap")[("monolingual", "aya", "ar")]["lpr"].method == "bootstrap"


def test_paired_bootstrap_finds_planted_difference():
    a, b = paired_runs(1, shift=0.2)  # B makes ~20 pp more line errors on 150 prompts
    r = paired_test(a, b, "lpr", task="crosslingual", method="bootstrap", n=10000, seed=0)
    assert r.n_pairs == 150 and r.n_dropped == 0 and r.method == "bootstrap"
    perm = paired_test(a, b, "lpr", task="crosslingual", n=10000, seed=0)  # the default: same interval, exact p
    assert perm.method == "permutation" and (perm.ci_low, perm.ci_high) == (r.ci_low, r.ci_high)
    assert perm.p_value < 0.01
    assert r.diff == pytest.approx(r.b - r.a) and r.diff < -0.1
    assert r.ci_high < 0 and r.p_value < 0.01 and r.significant()
    m = paired_test(a, b, "lpr", method="mcnemar")
    assert m.diff < -0.1 and m.p_value < 0.01 and m.n_pairs + m.n_dropped == 150
    assert paired_test(a, b, "lcpr").diff < 0
    # a fixed null: B re-drawn from the same distribution
    a0, b0 = paired_runs(2)
    assert paired_test(a0, b0, "lpr").p_value > 0.05
    assert paired_test(a0, a0, "lpr").p_value == 1.0


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_paired_null_false_positive_rate():
    """200 seeded nulls (150 prompts, 15 strata of 10): the bootstrap rejects at 5 % about 5 % of the time
    (SE 1.5 pp; we accept <= 9 %), the exact McNemar test at most 5 % plus noise."""
    p_boot, p_mc = [], []
    for k in range(200):
        a, b = paired_runs(100 + k)
        p_boot.append(paired_test(a, b, "lpr", method="bootstrap", n=1000, seed=k).p_value)
        p_mc.append(paired_test(a, b, "lpr", method="mcnemar").p_value)
    fpr_boot, fpr_mc = np.mean(np.array(p_boot) < 0.05), np.mean(np.array(p_mc) < 0.05)
    assert 0.01 <= fpr_boot <= 0.09, fpr_boot
    assert fpr_mc <= 0.08, fpr_mc


def _pair(i, a, b):
    """(counted, line_error) per run -> two Outcomes of prompt i."""
    return (
        Outcome(str(i), "monolingual", "aya", "fr", a[0], a[1], False, False),
        Outcome(str(i), "monolingual", "aya", "fr", b[0], b[1], False, False),
    )


def test_mcnemar_exact_small_case():
    # 6 prompts pass only in B, 1 only in A, 5 in both, 3 in neither; 3 pairs not counted somewhere
    spec = (
        [((True, True), (True, False))] * 6
        + [((True, False), (True, True))]
        + [((True, False), (True, False))] * 5
        + [((True, True), (True, True))] * 3
        + [((False, False), (True, False))] * 2
        + [((False, False),) * 2]
    )
    pairs = [_pair(i, *s) for i, s in enumerate(spec)]
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    r = paired_test(a, b, "lpr", method="mcnemar")
    # two-sided exact: 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * (1 + 7) / 128
    assert r.p_value == pytest.approx(2 * (comb(7, 0) + comb(7, 1)) / 2**7) == pytest.approx(0.125)
    assert r.n_pairs == 15 and r.n_dropped == 3
    assert r.dropped == {"uncounted in A only": 2, "uncounted in both": 1}
    assert r.diff == pytest.approx((6 - 1) / 15) and r.a == pytest.approx(6 / 15) and r.b == pytest.approx(11 / 15)
    assert r.ci_low < 0 < r.diff < r.ci_high  # p > 0.05: the interval holds 0
    cov = paired_test(a, b, "coverage", method="mcnemar")  # every pair enters; 3 counted only in B
    assert cov.n_dropped == 0 and cov.diff == pytest.approx(2 / 18) and cov.p_value == pytest.approx(0.5)


def test_mismatched_ids_give_clear_errors():
    a = simulate(0, dict.fromkeys(KEYS, 0.2), n_per=4)
    b = [o for o in simulate(1, dict.fromkeys(KEYS, 0.2), n_per=4) if o.id not in ("aya/ar/0", "dolly/ko/3")]
    with pytest.raises(
        DataError,
        match=r"2 id\(s\) only in A \(e\.g\. 'aya/ar/0' \(aya/ar\), "
        r"'dolly/ko/3' \(dolly/ko\)\)",
    ):
        paired_test(a, b)
    with pytest.raises(DataError, match="id 'aya/ar/0' appears more than once in aya/ar"):
        paired_test(a, a + a[:1])
    moved = [
        Outcome(
            o.id,
            o.task,
            "okapi" if o.id == "aya/fr/1" else o.source,
            o.language,
            o.counted,
            o.line_error,
            o.word_error,
            o.degenerate,
        )
        for o in a
    ]
    with pytest.raises(
        DataError,
        match=r"1 id\(s\) only in A \(e\.g\. 'aya/fr/1' \(aya/fr\)\); "
        r"1 id\(s\) only in B \(e\.g\. 'aya/fr/1' \(okapi/fr\)\)",
    ):
        paired_test(a, moved)
    with pytest.raises(ConfigError, match="McNemar needs a per-reply"):
        paired_test(a, a, "lcpr", method="mcnemar")
    with pytest.raises(ConfigError, match="only defined for non-Latin"):
        paired_test(a, a, "wpr", language="fr")
    with pytest.raises(ConfigError, match="name one with task="):
        paired_test(a + simulate(0, dict.fromkeys(KEYS, 0.2), n_per=1, task="crosslingual"), a)
    with pytest.raises(DataError, match="no outcomes for task=monolingual, language=zh"):
        paired_test(a, a, language="zh")


def test_holm_and_per_language_family():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == [] and holm([0.5]) == [0.5]
    a, b = paired_runs(3, n_prompts=300, shift=0.2)
    fam = paired_tests_by_language(a, b, "lpr", n=2000)
    assert sorted(fam) == ["ar", "de", "fr", "ja", "ko"]
    assert all(r.p_adjusted >= r.p_value for r in fam.values())
    assert all(r.language == lang for lang, r in fam.items())
    assert sorted(paired_tests_by_language(a, b, "wpr", n=200)) == ["ar", "ja", "ko"]
    u = unpaired_test(a, b, "lpr", n=2000)
    assert u.method == "unpaired-bootstrap" and u.diff == pytest.approx(paired_test(a, b, n=10).diff)
    assert u.ci_high < 0


def test_score_bootstrap_and_eval_rows_are_one_engine(shared):
    """`mlft score --bootstrap` (score_completions) and `mlft eval` (metric_rows) give the same intervals for the
    same replies, seed and resamples: both are mlft.stats.intervals."""
    from mlft.benchmarks.lcb.guard import is_degenerate
    from mlft.benchmarks.lcb.scoring import score_completions
    from mlft.completions import read_completions
    from mlft.evals.lcb import metric_rows

    rows = [
        c
        for c in read_completions(shared / "lcb" / "outputs" / "command-r.csv")
        if c.language in ("de", "ja", "zh", "fr")
    ][:600]
    report = score_completions(rows, bootstrap=300, seed=5, confidence=0.9, workers=1)
    outs = outcomes_from(rows, report.replies, degenerate=[is_degenerate(c.completion) for c in rows])
    checked = matching_interval_rows(report.rows, metric_rows("m", outs, 0.9, 300, seed=5), values=True)
    assert checked >= 8


# ---------------------------------------------------------------- several replies per prompt (clusters)


def _replicated(outcomes, k):
    """Each reply repeated as replies 0..k-1 of its prompt (perfectly correlated replies)."""
    from dataclasses import replace

    return [replace(o, sample=s) for o in outcomes for s in range(k)]


def test_identical_replies_of_a_prompt_add_no_information():
    """K copies of each reply are one prompt's worth of evidence: with prompts as clusters the interval keeps its
    width (treating the 4 x 750 replies as independent would halve it) and the point value is unchanged."""
    base = simulate(3, dict.fromkeys(KEYS, 0.3), n_per=50)
    one = intervals(base, n=4000)[("monolingual", "all", "all")]["lpr"]
    four = intervals(_replicated(base, 4), n=4000)[("monolingual", "all", "all")]["lpr"]
    assert four.value == pytest.approx(one.value, abs=1e-12)
    assert (four.high - four.low) == pytest.approx(one.high - one.low, rel=0.1)
    assert four.n == 4 * one.n  # replies
    # a single group's Wilson interval uses the effective sample size (design effect = K here)
    g1 = intervals(base, n=200)[("monolingual", "aya", "ar")]["lpr"]
    g4 = intervals(_replicated(base, 4), n=200)[("monolingual", "aya", "ar")]["lpr"]
    assert (g4.high - g4.low) == pytest.approx(g1.high - g1.low, rel=0.05)


def test_independent_replies_of_a_prompt_narrow_the_interval():
    """K independent draws per prompt (no prompt effect) are K times the evidence: the interval shrinks ~1/sqrt(K)."""
    r = np.random.default_rng(5)
    out = []
    for key in KEYS:
        for i in range(50):
            for s in range(4):
                c = r.random() < 0.9
                out.append(
                    Outcome(
                        f"{key[0]}/{key[1]}/{i}",
                        "monolingual",
                        *key,
                        bool(c),
                        bool(c and r.random() < 0.3),
                        False,
                        False,
                        sample=s,
                    )
                )
    first = [o for o in out if o.sample == 0]
    w1 = intervals(first, n=4000)[("monolingual", "all", "all")]["lpr"]
    w4 = intervals(out, n=4000)[("monolingual", "all", "all")]["lpr"]
    assert 0.4 < (w4.high - w4.low) / (w1.high - w1.low) < 0.62  # 1/sqrt(4) = 0.5


def test_paired_tests_pair_replies_by_index_and_mcnemar_takes_one_per_prompt():
    a, b = paired_runs(11, shift=0.0)
    a4, b4 = _replicated(a, 3), _replicated(b, 3)
    boot1, boot3 = paired_test(a, b, "lpr"), paired_test(a4, b4, "lpr")
    assert boot3.diff == pytest.approx(boot1.diff, abs=1e-12)
    assert (boot3.ci_high - boot3.ci_low) == pytest.approx(boot1.ci_high - boot1.ci_low, rel=0.15)
    mc = paired_test(a4, b4, "lpr", method="mcnemar")
    assert mc.n_pairs + mc.n_dropped == len(a4) and mc.n_pairs == paired_test(a, b, "lpr", method="mcnemar").n_pairs
    assert any("first reply" in k for k in mc.dropped)
    with pytest.raises(DataError, match=r"reply 2"):
        paired_test(a4, [o for o in b4 if o.sample < 2])


def test_outcome_sample_round_trips_and_is_checked(tmp_path):
    o = Outcome("x/1", "monolingual", "aya", "ar", True, False, True, False, sample=3)
    assert Outcome.from_dict(o.to_dict()) == o
    assert Outcome.from_dict({k: v for k, v in o.to_dict().items() if k != "sample"}).sample == 0
    with pytest.raises(DataError, match="field 'sample'"):
        Outcome.from_dict({**o.to_dict(), "sample": -1}, "f: line 2")

"""Claims across training seeds as estimates: the mean gain over seeds with its t-interval,
`mlft.stats.means.seed_interval`, and its use in `devtools.seeds` (docs/results/demo_seeds.md's table, rendered from
the docs/results/demo_seeds.json that measurements/demo_seeds.py writes)."""

import math
from pathlib import Path

import numpy as np
import pytest

from devtools import seeds
from mlft.errors import ConfigError, DataError
from mlft.stats import seed_interval


def test_mean_gain_over_three_seeds_with_its_t_interval():
    """Cross-lingual SFT's cross-lingual LPR gains in seeds 0, 1, 2 (demo_seeds.md): +22.4, +12.4, +13.7. Mean
    16.17, sd 5.437, t(0.975, 2) = 4.3027: 16.17 +- 13.51 = [2.66, 29.67]."""
    est = seed_interval([22.4, 12.4, 13.7])
    assert est.mean == pytest.approx(16.1667, abs=1e-4) and est.sd == pytest.approx(5.4372, abs=1e-4)
    assert (est.low, est.high) == pytest.approx((2.660, 29.673), abs=1e-3)
    assert est.seeds == 3 and est.excludes_zero()
    # English SFT's monolingual LPR: -8.9, -3.1, -8.7 "held in sign" in every seed; the estimate holds 0
    assert seed_interval([-8.9, -3.1, -8.7]).high > 0 and not seed_interval([-8.9, -3.1, -8.7]).excludes_zero()
    wider = seed_interval([22.4, 12.4, 13.7], confidence=0.99)
    assert wider.low < est.low and wider.high > est.high
    one = seed_interval([5.0])
    assert one.mean == 5.0 and math.isnan(one.low) and not one.excludes_zero()
    with pytest.raises(DataError):
        seed_interval([])


def record(base: float, sft: float, p: float) -> dict:
    cell = lambda v, p=None: {"value": v, "low": v - 0.05, "high": v + 0.05, "p_vs_base": p}  # noqa: E731
    return {
        "base": {"label": "base", "base": True, "tasks": {"crosslingual": {"lpr": cell(base)}}},
        "+SFT": {"label": "+SFT", "tasks": {"crosslingual": {"lpr": cell(sft, p)}}},
    }


def test_demo_seeds_states_each_claim_as_an_estimate():
    per_seed = {0: record(0.544, 0.768, 0.001), 1: record(0.549, 0.673, 0.001), 2: record(0.573, 0.710, 0.001)}
    rows = seeds.summarise(per_seed)
    sft = next(r for r in rows if r["row"] == "+SFT")
    assert sft["gains"] == pytest.approx([22.4, 12.4, 13.7])
    assert (sft["gain_low"], sft["gain_high"]) == pytest.approx((2.660, 29.673), abs=1e-3)
    assert sft["verdict"] == "up"
    text = seeds.markdown(rows, [0, 1, 2])
    assert "+16.2 [+2.7, +29.7]" in text and "t-interval" in text
    noisy = {0: record(0.90, 0.81, 0.02), 1: record(0.908, 0.877, 0.37), 2: record(0.914, 0.827, 0.009)}
    assert next(r for r in seeds.summarise(noisy) if r["row"] == "+SFT")["verdict"] == "unclear"


def test_the_task_axis_is_estimated_over_seeds_too():
    """A row's task score lives in its capability columns ("Cross task"); the seeds table estimates it as it does
    LPR (fails on a summarise that reads only the task's metrics)."""
    per_seed = {}
    for s, (b, t) in enumerate(((0.06, 0.04), (0.06, 0.10), (0.06, 0.08))):
        rec = record(0.544, 0.7, 0.001)
        rec["base"]["capability"] = {"Cross task": {"value": b, "low": 0.0, "high": 0.2, "p_vs_base": None}}
        rec["+SFT"]["capability"] = {"Cross task": {"value": t, "low": 0.0, "high": 0.2, "p_vs_base": 0.5}}
        per_seed[s] = rec
    row = next(r for r in seeds.summarise(per_seed) if (r["row"], r["metric"]) == ("+SFT", "task"))
    assert row["task"] == "crosslingual" and row["gains"] == pytest.approx([-2.0, 4.0, 2.0])
    assert row["verdict"] == "unclear" and row["p"] == [0.5, 0.5, 0.5]


def test_paired_share_sd_by_hand():
    """Agresti-Min's paired sd of two shares of 50 problems: 3 answered only by the base, none only by the row:
    p10 = 3.5 / 52, p01 = 0.5 / 52, var = (0.076923 - 0.057692^2) / 52 = 0.0014153, sd 3.762 pp; two passes that
    agree on all 50 still get 1.923 pp (0.5 / 52 each way), and the sd is symmetric in the two directions."""
    from mlft.stats import paired_share_sd

    assert 100 * paired_share_sd(0, 3, 50) == pytest.approx(3.7621, abs=1e-4)
    assert 100 * paired_share_sd(0, 0, 50) == pytest.approx(1.9231, abs=1e-4)
    assert paired_share_sd(3, 0, 50) == paired_share_sd(0, 3, 50) < paired_share_sd(2, 3, 50)


def greedy_seeds(discordant: list[dict] | None) -> dict:
    """Three seeds of a row whose greedy task score falls from 3 to 0 of 50 problems in each (the verifiable RL row),
    against one shared base pass; `discordant`: the table's counts per seed (None: a record without them)."""
    per_seed = {}
    for s in range(3):
        rec = record(0.544, 0.7, 0.001)
        rec["base"]["capability"] = {"Cross task": {"value": 0.06, "low": 0.02, "high": 0.16, "n": 50}}
        cell = {"value": 0.0, "low": 0.0, "high": 0.07, "n": 50, "p_vs_base": 0.25}
        if discordant:
            cell["discordant"] = discordant[s]
        rec["+SFT"]["capability"] = {"Cross task": cell}
        per_seed[s] = rec
    return per_seed


def task_row(per_seed: dict, draw: dict) -> dict:
    return next(r for r in seeds.summarise(per_seed, draw=draw) if (r["row"], r["metric"]) == ("+SFT", "task"))


def test_a_greedy_axis_where_the_seeds_agree_keeps_the_problems_width():
    """Seeds that score the same on a greedy axis gave a point for an interval (-6.0 [-6.0, -6.0], "down"); with
    the problems' sampling added (3 of 50 lost in each seed: sd 3.762 pp, z 1.96: 7.374) it is -6.0 [-13.4, +1.4],
    unclear, as each seed's paired test (p 0.25). A record without the counts takes the most discordant problems the
    scores allow (here the same 3), and a row that agrees with the base everywhere still has a width."""
    draw = {"greedy": ["task"]}
    lost = {"up": 0, "down": 3, "n": 50}
    row = task_row(greedy_seeds([lost] * 3), draw)
    assert row["gains"] == pytest.approx([-6.0] * 3) and row["base_sd"] == pytest.approx(3.7621, abs=1e-4)
    assert (row["gain_low"], row["gain_high"]) == pytest.approx((-13.374, 1.374), abs=1e-3)
    assert row["verdict"] == "unclear" and row["base_sd_from"] == "greedy"
    assert task_row(greedy_seeds(None), draw)["base_sd"] == pytest.approx(row["base_sd"])
    same = greedy_seeds([{"up": 0, "down": 0, "n": 50}] * 3)
    for rec in same.values():
        rec["+SFT"]["capability"]["Cross task"]["value"] = 0.06
    agree = task_row(same, draw)
    assert agree["gain_mean"] == 0 and agree["gain_high"] - agree["gain_low"] == pytest.approx(2 * 1.96 * 1.9231, 1e-3)
    assert "crosslingual task 3.76 (greedy: the problems' sampling)" in seeds.markdown([row], [0, 1, 2])


def test_a_shared_base_draw_widens_the_interval_in_quadrature():
    """Gains taken against one base pass share its decoding draw (cross-lingual LPR sd 3.46 pp over the
    calibration's 24 reruns, 23 df): half-widths 13.507 (seeds) and t(0.975, 23) 2.0687 x 3.46 = 7.158 give
    15.286. Three seeds that agree exactly still get the shared draw's width (normal quantile: known sd)."""
    est = seed_interval([22.4, 12.4, 13.7], shared_sd=3.46, shared_df=23)
    assert (est.low, est.high) == pytest.approx((0.881, 31.453), abs=1e-3) and est.shared_sd == 3.46
    flat = seed_interval([-6.0, -6.0, -6.0], shared_sd=3.36)
    assert (flat.low, flat.high) == pytest.approx((-12.585, 0.585), abs=1e-3) and not flat.excludes_zero()
    assert seed_interval([-6.0, -6.0, -6.0]).excludes_zero()  # the seeds alone: no width, a "down" claim
    with pytest.raises(ConfigError):
        seed_interval([1.0, 2.0], shared_sd=-1.0)


@pytest.mark.parametrize("tau", [0.5, 3.46, 15.0])
def test_the_seeds_interval_covers_its_target_whatever_the_seeds_spread(tau):
    """Simulated claims: three seeds' gains, each its training draw (sd tau) plus one shared base draw (sd 3.46,
    itself estimated on 24 reruns). The interval must cover the true mean gain 94-98.5 % of the time, from seeds
    that agree (tau 0.5) to seeds that spread (tau 15). The seeds' t-interval alone fails where the shared draw
    dominates (25 % at tau 0.5); the same interval 25 % wider over-covers where the two are alike (99.6 %); 10 %
    narrower under-covers where the shared draw dominates (93.5 %)."""
    rng = np.random.default_rng(1)
    covered, alone, wider, narrower, n = 0, 0, 0, 0, 2000
    for _ in range(n):
        gains = rng.normal(0, tau, 3) + rng.normal(0, 3.46)
        est = seed_interval(gains, shared_sd=3.46 * math.sqrt(rng.chisquare(23) / 23), shared_df=23)
        half = (est.high - est.low) / 2
        covered += abs(est.mean) < half
        wider += abs(est.mean) < 1.25 * half
        narrower += abs(est.mean) < 0.9 * half
        seeds_only = seed_interval(gains)
        alone += seeds_only.low < 0 < seeds_only.high
    assert 0.94 <= covered / n <= 0.985
    if tau == 0.5:
        assert alone / n < 0.5 and narrower / n < 0.94
    if tau == 3.46:
        assert wider / n > 0.985


def shared_record(sft: float, p: float) -> dict:
    return record(0.529, sft, p)


def test_seeds_against_one_base_pass_carry_its_draw():
    """The seeds' base rows are one pass (the demo's runs at one decoding seed): its draw enters every gain's
    interval, bounded by the base cell's own interval (half-width 5 pp / 1.96 = 2.551 pp) or measured where the
    results file records reruns of that pass (`base_draw`). Base rows that differ are each seed's own pass: no
    term is added (the seeds' sd holds their draws)."""
    per_seed = {0: shared_record(0.60, 0.01), 1: shared_record(0.60, 0.01), 2: shared_record(0.60, 0.01)}
    sft = next(r for r in seeds.summarise(per_seed) if r["row"] == "+SFT")
    assert sft["base_sd"] == pytest.approx(2.551, abs=1e-3) and sft["base_sd_from"] == "bound"
    assert (sft["gain_low"], sft["gain_high"]) == pytest.approx((7.1 - 5.0, 7.1 + 5.0), abs=1e-9)
    draw = {"tasks": {"crosslingual": {"lpr": {"sd": 3.46, "df": 23}}}}
    measured = next(r for r in seeds.summarise(per_seed, draw=draw) if r["row"] == "+SFT")
    assert measured["base_sd_from"] == "measured" and measured["gain_high"] - 7.1 == pytest.approx(7.158, abs=1e-3)
    assert "bounded by its interval" in seeds.markdown(seeds.summarise(per_seed), [0, 1, 2])
    for rec in per_seed.values():  # a base cell with no interval cannot bound its draw: said, not guessed
        rec["base"]["tasks"]["crosslingual"]["lpr"].update(low=None, high=None)
    with pytest.raises(DataError, match="no interval to bound"):
        seeds.summarise(per_seed)
    own = {0: record(0.544, 0.768, 0.001), 1: record(0.549, 0.673, 0.001), 2: record(0.573, 0.710, 0.001)}
    row = next(r for r in seeds.summarise(own) if r["row"] == "+SFT")
    assert row["base_sd"] == 0.0 and (row["gain_low"], row["gain_high"]) == pytest.approx((2.660, 29.673), abs=1e-3)


def test_the_base_draw_is_measured_on_reruns_of_that_very_pass():
    """The calibration's 24 keyed reruns of the base on lcb_demo hold the demo's base pass (reply 0): LPR sd 2.36
    monolingual, 3.46 cross-lingual. Reruns that do not hold the pass are refused."""
    import json

    from mlft.stats import load_compact

    root = Path(__file__).resolve().parents[1]
    rec = json.loads((root / "docs" / "results" / "demo_seeds.json").read_text(encoding="utf-8"))
    base = next(r for r in rec["seeds"]["0"] if r.get("base"))
    reruns, meta = load_compact(root / "tests" / "data" / "calibration_lcb_demo.json.gz")
    draw = seeds.measured_draw(reruns, base, "calibration")
    assert draw["reruns"] == meta["replies"] == 24
    assert draw["tasks"]["monolingual"]["lpr"] == {"sd": pytest.approx(2.3555, abs=1e-4), "df": 23}
    assert draw["tasks"]["crosslingual"]["lpr"]["sd"] == pytest.approx(3.4639, abs=1e-4)
    recorded = rec["base_draw"]  # what measurements/demo_seeds.py wrote: the same numbers, the task axis greedy
    assert {k: recorded[k] for k in ("tasks", "reruns", "source")} == json.loads(json.dumps(draw)) | {
        "source": "tests/data/calibration_lcb_demo.json.gz"
    }
    assert recorded["greedy"] == ["task"]
    other = json.loads(json.dumps(base))
    other["tasks"]["crosslingual"]["lpr"]["value"] += 0.01
    with pytest.raises(DataError, match="not reruns of this pass"):
        seeds.measured_draw(reruns, other, "calibration")


def test_a_reruns_file_that_is_missing_or_unreadable_is_named(tmp_path):
    """--base-reruns pointing at nothing, or at a file that is not a compact outcomes file, fails naming it (no
    silent fallback to the bound); reruns of another pass are said and bounded instead (test_docs_numbers)."""
    per_seed = {s: shared_record(0.60, 0.01) for s in ("0", "1", "2")}
    rec = {"name": "x", "seeds": {s: list(rows.values()) for s, rows in per_seed.items()}}
    with pytest.raises(DataError, match="nowhere.json.gz: no such reruns file"):
        seeds.attach_draw(rec, tmp_path / "nowhere.json.gz")
    (tmp_path / "bad.json.gz").write_text("not gzip")
    with pytest.raises(DataError, match="bad.json.gz: not a compact outcomes file"):
        seeds.attach_draw(rec, tmp_path / "bad.json.gz")
    assert "bounded by its interval" in seeds.attach_draw(rec, None) and rec["base_draw"] == {"greedy": []}

"""Claims across training seeds as estimates: the mean gain over seeds with its t-interval,
`mlft.stats.means.seed_interval`, and its use in `mlft.reports.seeds` (docs/results/demo_seeds.md's table, rendered from
the docs/results/demo_seeds.json that measurements/demo_seeds.py writes)."""

import math

import pytest

from mlft.errors import DataError
from mlft.reports import seeds
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

"""Means, ratios and single proportions outside LCB's aggregation (one home for them too): `mean_interval`
(normal interval of a mean: reply NLL rows), `ratio_interval` (paired bootstrap of a ratio of means: the
fluency guard), `proportion_halfwidth` (bootstrap half-width of an accuracy: Polyglot-or-Not).
The mean over training seeds with its t-interval (`seed_interval`) lives here too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from mlft.errors import ConfigError, DataError
from mlft.stats.intervals import check_confidence
from mlft.stats.outcomes import Outcome


def prompt_means(
    outcomes: Iterable[Outcome], task: str | None = None, language: str | None = None
) -> dict[tuple[str, str, str], float]:
    """{(source, language, id): mean reply NLL over the prompt's replies} for replies with an NLL (one reply per
    prompt: its own NLL): the unit of the NLL rows' intervals and of the fluency guard's paired ratio, so several
    replies per prompt are not counted as independent."""
    sums: dict[tuple[str, str, str], list[float]] = {}
    for o in outcomes:
        if o.nll is None or (task is not None and o.task != task) or (language is not None and o.language != language):
            continue
        sums.setdefault((o.source, o.language, o.id), []).append(o.nll)
    return {k: v[0] if len(v) == 1 else sum(v) / len(v) for k, v in sums.items()}


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): normal-approximation interval of a mean (e.g. reply NLLs); NaN bounds below 2 values."""
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    xs = [float(v) for v in values]
    if not xs:
        raise DataError("mean_interval of no values")
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, float("nan"), float("nan")
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * statistics.stdev(xs) / math.sqrt(len(xs))
    return m, m - half, m + half


@dataclass(frozen=True)
class SeedEstimate:
    """A claim across training seeds as an estimate: the mean of per-seed values (e.g. a row's gain over the base
    row in the same seed) with its Student-t interval over seeds (and the shared term's, `seed_interval`)."""

    mean: float
    low: float  # NaN below two seeds
    high: float
    sd: float
    seeds: int
    confidence: float = 0.95
    shared_sd: float = 0.0

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def seed_interval(
    values: Sequence[float], confidence: float = 0.95, *, shared_sd: float = 0.0, shared_df: float | None = None
) -> SeedEstimate:
    """Mean over seeds with the t-interval mean +- t(1 - alpha/2, k - 1) * sd / sqrt(k): the seeds are the sample
    (each seed retrains and redraws), so the interval is for the mean over training seeds; "holds in each of three
    seeds" is a vote, this is the estimate. Gains of +22.4, +12.4, +13.7 give +16.2 [2.7, 29.7]: three seeds
    leave a wide interval.

    `shared_sd`: the sd of an error every value shares, which averaging over seeds cannot shrink and the seeds' sd
    cannot see (gains taken against one base pass carry that pass's own decoding draw in every seed). Its half
    width, q * shared_sd (q: t with `shared_df` degrees of freedom, or normal when None: known), is added to the
    seeds' in quadrature: sqrt(h_seeds^2 + h_shared^2). So a shared term only widens the interval, and three seeds
    that agree exactly still get its width. Simulated at k = 3 (tests/test_seed_estimates.py), this covers 95-98 %
    whatever the two sd's ratio; Welch-Satterthwaite degrees of freedom narrow it instead and cover 92-93 % where
    the seeds' spread dominates; the seeds' t-interval alone covers 25 % where the shared draw dominates."""
    from scipy.stats import t as student_t

    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    if not shared_sd >= 0 or (shared_df is not None and not shared_df > 0):
        raise ConfigError(f"shared_sd must be >= 0 and shared_df > 0, got {shared_sd} and {shared_df}")
    xs = [float(v) for v in values]
    if not xs:
        raise DataError("seed_interval of no values")
    m, k = statistics.mean(xs), len(xs)
    if k < 2:
        return SeedEstimate(m, float("nan"), float("nan"), 0.0, 1, confidence, shared_sd)
    q = 0.5 + confidence / 2
    sd = statistics.stdev(xs)
    own = float(student_t.ppf(q, k - 1)) * sd / math.sqrt(k)
    shared = (NormalDist().inv_cdf(q) if shared_df is None else float(student_t.ppf(q, shared_df))) * shared_sd
    half = math.hypot(own, shared)
    return SeedEstimate(m, m - half, m + half, sd, k, confidence, shared_sd)


def paired_share_sd(up: float, down: float, n: int) -> float:
    """The sd of a paired difference of two shares over the same n binary items (problems, one greedy reply a side):
    `up` items only B gets right, `down` only A. Agresti-Min: half an item added to each of the four cells, so two
    sides that agree everywhere keep a width: sd = sqrt((p01 + p10 - (p01 - p10)^2) / (n + 2))."""
    p01, p10 = (up + 0.5) / (n + 2), (down + 0.5) / (n + 2)
    return math.sqrt((p01 + p10 - (p01 - p10) ** 2) / (n + 2))


def ratio_interval(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, n: int = 10000, seed: int = 0
) -> tuple[float, float, float]:
    """(ratio, low, high) of mean(b) / mean(a) over paired values (same items, same order): a paired percentile
    bootstrap over items (e.g. the fluency guard's NLL ratio of a run to its base)."""
    check_confidence(confidence, n)
    xa, xb = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if xa.shape != xb.shape or xa.size == 0:
        raise DataError(f"ratio_interval needs paired values, got {xa.size} and {xb.size}")
    idx = np.random.default_rng(seed).integers(0, xa.size, (n, xa.size))
    ratios = xb[idx].mean(1) / np.maximum(xa[idx].mean(1), 1e-12)
    alpha = 1 - confidence
    lo, hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
    return float(xb.mean() / xa.mean()), float(lo), float(hi)


def proportion_halfwidth(
    successes: int, trials: int, *, confidence: float = 0.95, n: int = 10000, seed: int = 0
) -> float:
    """Half the width of the percentile bootstrap interval of a proportion (items resampled with replacement).

    Resampling `trials` items and counting successes is a Binomial(trials, p) draw, so the resampled proportions
    are drawn as binomials: the same distribution as resampling the items, in O(1) memory per resample."""
    check_confidence(confidence, n)
    if trials < 1:
        raise DataError("proportion_halfwidth of an empty set")
    draws = np.random.default_rng(seed).binomial(trials, successes / trials, size=n) / trials
    alpha = 1 - confidence
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return float(high - low) / 2

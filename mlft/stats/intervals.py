"""Intervals (`intervals`, `interval_rows`) name their target:
- "the prompt population" (`low`, `high`, the `*_ci_low/high` columns every table prints; the default): the
  value another draw of prompts from the same (source, language) strata would give, with new replies: prompt
  sampling and decoding noise. Per stratum the variance of its mean is (sigma2_b + sigma2_w / K) / n (n prompts,
  K replies each; sigma2_b between prompts, sigma2_w within a prompt).
- "this prompt set" (`set_low`, `set_high`, the `*_set_ci_low/high` columns): the value these prompts' other
  replies would give: decoding noise only, sigma2_w / (K n). Only estimable with several replies per prompt
  (None with one: a single reply cannot split its variance).
- per-reply proportions (LPR, WPR, coverage, degeneracy, validity), every row (`group_method="wilson"`,
  default): score intervals (`_score_intervals`): a (source, language) group by Wilson (`modified_wilson` at the
  edges), an aggregate by stratified Wilson (Yan & Su 2010: the variance evaluated at the candidate p, sum_s w_s^2
  p (1 - p) deff_s / N_s, w_s the official weights, N_s the stratum's denominator), with deff_s = 1 + (K_s - 1)
  rho (population), rho the task's intra-prompt correlation (`within_share`, one-way ANOVA pooled over strata), or
  this set's (`set_design_effects`: the within-prompt variance of the ratio, linearised so that replies LCB skips
  count; the larger of the stratum's and its task's). A stratum at 0 % or 100 % still has width (the variance is taken
  at the candidate p, not at the stratum's own), no stratum borrows values from others (only the design effect
  is the task's), nothing is re-centred: a language at 10/10 gets Wilson's [0.72, 1] whatever the task's other
  languages do (the pseudo-unit it replaces gave [0.90, 1] next to languages at 90 % and [0.81, 1] next to
  60 %). WPR's denominator (counted, line-clean replies) is taken as fixed for the population target.
- LCPR (a harmonic mean, no score interval) and every row with `group_method="bootstrap"`: stratified
  percentile bootstrap over prompts (the population target). Units are resampled with replacement within each
  (source, language) stratum and the metric is recomputed with the official aggregation; a resample of a
  stratum is drawn as multinomial category counts (the same distribution as index resampling, O(categories)
  per resample), with n_s - 1 draws (McCarthy & Snowden 1985: the variance of a stratum mean is then s^2 / n_s;
  400 paired nulls, 150 prompts in 15 strata: 6.8 % false positives at 5 % with n_s draws, 5.3 % with n_s - 1).
  Each stratum is resampled from its own units mixed with `PSEUDO` (one) unit's worth of a pool (its task's
  strata of the same script, Latin or not: a Latin-script reply's word-error flag feeds no metric and must not
  widen a non-Latin WPR), and the bootstrap distribution is centred back on the official value.
- several replies per prompt (`Outcome.sample` > 0, `clustered`): a prompt's replies are one unit (a cluster):
  the bootstrap resamples prompts with their replies, McNemar takes one pair (the first replies) per prompt, and
  the NLL rows and the fluency guard average a prompt's replies first (`prompt_means`). With one reply per
  prompt nothing changes.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from mlft.errors import ConfigError
from mlft.languages import NON_LATIN
from mlft.stats.aggregate import (
    _FEATURES,
    _NFEAT,
    PSEUDO,
    _aggregate,
    _observed,
    _resample_counts,
    _strata,
    _tasks,
    clustered,
)
from mlft.stats.outcomes import PER_REPLY, Outcome


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float  # low, high: the interval for the prompt population (prompt sampling and decoding noise)
    method: str  # "bootstrap" | "wilson" (one stratum) | "stratified-wilson" (an aggregate)
    n: int  # replies in the row (bootstrap) or the proportion's denominator (wilson)
    set_low: float | None = None  # the interval for this prompt set (decoding noise only); None: not estimable
    set_high: float | None = None  # (one reply per prompt, or a bootstrap row)

    def columns(self, name: str) -> dict:
        out = {name: self.value, f"{name}_ci_low": self.low, f"{name}_ci_high": self.high}
        if self.set_low is not None:
            out.update({f"{name}_set_ci_low": self.set_low, f"{name}_set_ci_high": self.set_high})
        return out


def wilson(successes, trials, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (vectorised); trials == 0 gives [0, 1]."""
    k, t = np.asarray(successes, np.float64), np.asarray(trials, np.float64)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    safe = np.maximum(t, 1)
    p = k / safe
    centre = (p + z * z / (2 * safe)) / (1 + z * z / safe)
    half = z / (1 + z * z / safe) * np.sqrt(p * (1 - p) / safe + z * z / (4 * safe * safe))
    empty = t == 0
    # the interval holds p (exactly, not up to rounding: at p = 1 the upper bound is 1, not 0.9999999999999998)
    low, high = np.minimum(centre - half, p), np.maximum(centre + half, p)
    return np.where(empty, 0.0, np.clip(low, 0, 1)), np.where(empty, 1.0, np.clip(high, 0, 1))


def modified_wilson(successes, trials, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson with Brown, Cai & DasGupta's edge modification (Stat. Sci. 16(2), 2001, 4.1.1): a count within x* of
    the edge it is near (x* = 2 for n <= 50, else 3) takes the one-sided Poisson bound chi2_{2x}(alpha) / 2n on that
    side. Plain Wilson covers 83.5 % at n = 10 near p = 0.98 (tests/test_intervals_target.py: exact sums)."""
    from scipy.stats import chi2

    k, t = np.asarray(successes, np.float64), np.asarray(trials, np.float64)
    (low, high), safe = wilson(k, t, confidence), np.maximum(t, 1)
    for x, lower in ((k, True), (t - k, False)):  # successes near 0 move the lower bound, failures the upper one
        near = (x > 1e-9) & (x <= np.where(t <= 50, 2.0, 3.0)) & (x < t / 2)  # 0 / 2 is near 0, not near 2
        bound = chi2.ppf(1 - confidence, 2 * np.where(near, x, 1.0)) / (2 * safe)
        if lower:
            low = np.where(near, np.minimum(bound, k / safe), low)
        else:
            high = np.where(near, np.maximum(1 - bound, k / safe), high)
    return low, high


def check_confidence(confidence: float, n: int) -> None:
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    if n < 1:
        raise ConfigError(f"number of resamples must be >= 1, got {n}")


def _success_trials(units: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per unit (rows of feature sums): the successes and trials of a group proportion."""
    nr, scored, line, word, degen, invalid, measured = (units[:, i] for i in range(_NFEAT))
    return {
        "lpr": (scored - line, scored),
        "coverage": (scored, nr),
        "degeneracy": (degen, nr),
        "validity": (measured - invalid, measured),
        "wpr": (scored - line - word, scored - line),
    }[metric]


def within_share(units_by_stratum: list[np.ndarray], metric: str) -> float | None:
    """The intra-prompt correlation rho of a proportion's pass/fail over a task's strata (one-way ANOVA estimator
    for clusters of unequal size, pooled over strata with each stratum's own mean): the share of a reply's
    variance that lies between prompts, sigma2_b / (sigma2_b + sigma2_w), clipped to [0, 1]. None where it is not
    estimable (no prompt with two replies, or no spread at all)."""
    ssw = ssb = big_n = small_n = sum_sq = 0.0
    for units in units_by_stratum:
        y, m = _success_trials(units, metric)
        keep = m > 0
        y, m = y[keep], m[keep]
        if not len(m):
            continue
        mean = y.sum() / m.sum()
        ssw += float(np.sum(y - y * y / m))  # binary replies: sum of squares within each prompt
        ssb += float(np.sum(m * (y / m - mean) ** 2))
        big_n += float(m.sum())
        small_n += len(m) - 1
        sum_sq += float(np.sum(m * m) / m.sum())
    within_df = big_n - small_n - (len([u for u in units_by_stratum if len(u)]))
    if small_n <= 0 or within_df <= 0 or ssw + ssb == 0:
        return None
    msb, msw = ssb / small_n, ssw / within_df
    k0 = (big_n - sum_sq) / small_n
    if msb + (k0 - 1) * msw <= 0:
        return None
    return float(np.clip((msb - msw) / (msb + (k0 - 1) * msw), 0.0, 1.0))


def set_design_effects(units_by_stratum: list[np.ndarray], metric: str) -> list[float | None]:
    """Per stratum, the design effect of "this prompt set" (decoding noise only): Var_set(p_hat) N / (p (1 - p)),
    N the stratum's denominator. Var_set is the within-prompt variance of the ratio, linearised: each reply's
    u = success - p trial (a reply's trial is itself random: a reply LCB skips leaves LPR's denominator), its
    sample variance within each prompt of >= 2 replies, sum_i K_i var_i / N^2. Conditioning on the denominator
    (as `within_share` does) leaves the skipped replies' variance out. A stratum's own estimate rests on ~10
    prompts, most of them unanimous, and is often too small; each stratum takes the larger of its own and its
    task's pooled one (the strata's within variances summed over their binomial variances summed), both at most 1
    (decoding noise is at most a reply's whole variance: replies of a prompt that split more evenly than draws
    would, as 1 of 2 in every prompt, give no more than the replies counted apart). On the base
    model's reruns (lcb_demo, K = 4, 60 passes; measurements/targets.py) the set intervals covered per p-band of
    the true LPR 89.0 / 92.7 / 89.0 / 94.4 % with 1 - rho (the task's `within_share`), 79.8 / 91.5 / 76.0 /
    96.9 % with each stratum's own conditional share, 93.1 / 93.8 / 91.7 / 96.9 % linearised per stratum, and
    95.0 / 96.9 / 94.0 / 96.9 % as here. None where not estimable (no prompt with two replies, or no spread)."""
    per, num, den = [], 0.0, 0.0
    for units in units_by_stratum:
        y, m = _success_trials(units, metric)
        k = units[:, 0]  # replies of the prompt
        ok = k >= 2
        if not ok.any() or m.sum() == 0:
            per.append(None)
            continue
        p = float(y.sum() / m.sum())
        y, m, k = y[ok], m[ok], k[ok]
        sum_u, sum_u2 = y - p * m, y * (1 - 2 * p) + p * p * m  # binary replies: success^2 = success, trial^2 = trial
        within = float(np.sum(k * (sum_u2 - sum_u**2 / k) / (k - 1)))
        binomial = float(m.sum()) * p * (1 - p)
        num, den = num + within, den + binomial
        per.append(min(1.0, within / binomial) if binomial > 0 else None)
    if den <= 0:
        return [None] * len(per)
    pooled = min(1.0, num / den)  # decoding noise is at most a reply's whole variance (1 - rho <= 1)
    return [pooled if d is None else max(d, pooled) for d in per]


def _weights(keys: list[tuple[str, str]], has: list[bool]) -> dict[tuple[str, str], np.ndarray]:
    """Per official row, the weight of each stratum in its value (the official unweighted averages): a
    (source, language) row is its stratum; (source, all) the mean over the source's languages, (all, lang) over
    the language's sources, (all, all) over the language rows. Strata where the metric is undefined (`has`) are
    left out as the official aggregation leaves them out."""
    out = {}
    idx = {k: s for s, k in enumerate(keys) if has[s]}

    def mean_of(parts: list[np.ndarray]) -> np.ndarray:
        return sum(parts) / len(parts)

    def one(s: int) -> np.ndarray:
        w = np.zeros(len(keys))
        w[s] = 1.0
        return w

    for k, s in idx.items():
        out[k] = one(s)
    for source in {k[0] for k in idx}:
        out[(source, "all")] = mean_of([one(s) for k, s in idx.items() if k[0] == source])
    langs = {lang: mean_of([one(s) for k, s in idx.items() if k[1] == lang]) for lang in {k[1] for k in idx}}
    out.update({("all", lang): w for lang, w in langs.items()})
    if langs:
        out[("all", "all")] = mean_of(list(langs.values()))
    return out


def _population_factors(trials, prompts, rho: float):
    """Per stratum, Var(p_hat_s) / (p (1 - p)) for the prompt population: deff_s / N_s, deff_s = 1 + (K_s - 1) rho
    (K_s: replies per counted prompt); an empty stratum counts as one trial (its official value is a guess). Arrays
    with a leading axis of passes work alike."""
    per_prompt = np.where(prompts > 0, trials / np.maximum(prompts, 1), 1.0)
    return (1 + (per_prompt - 1) * rho) * (1.0 / np.maximum(trials, 1.0))


def _score_bounds(value, var_unit, confidence: float):
    """(low, high) of rows of `value` whose Var(p_hat) / (p (1 - p)) is `var_unit` (arrays alike): modified Wilson at
    the effective size 1 / var_unit, the value itself where var_unit is 0; around the value itself (value * n_eff /
    n_eff can round below it: a high of 1 - 2e-16 at 1)."""
    value, var_unit = np.asarray(value, np.float64), np.asarray(var_unit, np.float64)
    live = var_unit > 0
    n_eff = 1.0 / np.where(live, var_unit, 1.0)
    lo, hi = modified_wilson(value * n_eff, n_eff, confidence)
    return np.minimum(np.where(live, lo, value), value), np.maximum(np.where(live, hi, value), value)


def _score_intervals(out: dict, task: str, keys, codes, table, obs, confidence: float) -> None:
    """Replace the bootstrap's interval of every per-reply proportion (LPR, WPR, coverage, degeneracy, validity)
    by a score interval for each target (module docstring, "Targets"): Wilson on the effective sample size of the
    row, stratified Wilson (Yan & Su 2010: the variance at the candidate p, sum_s w_s^2 p (1 - p) deff_s / N_s)
    for an aggregate. deff_s = 1 + (K_s - 1) rho for the prompt population (rho: the task's pooled intra-prompt
    correlation, `within_share`; K_s = replies per prompt of stratum s), `set_design_effects` for this prompt set
    (1 - rho where that is not estimable). One reply per
    prompt: deff = 1, and this prompt set is not estimable (None). No pseudo-units, no re-centring."""
    several = table is not _FEATURES  # several replies per prompt
    for metric in PER_REPLY:
        units = [table[c] for c in codes]
        trials = np.array([float(_success_trials(u, metric)[1].sum()) for u in units])
        prompts = np.array([float(np.sum(_success_trials(u, metric)[1] > 0)) for u in units])
        has = [(task, *k) in out and metric in out[(task, *k)] for k in keys]
        if not any(has):
            continue
        rho = within_share([u for u, h in zip(units, has) if h], metric) if several else None
        if rho is None:  # no spread to split: population as if replies of a prompt agreed, this set as if not
            rho_pop, rho_set = 1.0, 0.0
        else:
            rho_pop = rho_set = rho
        inv = 1.0 / np.maximum(trials, 1.0)  # an empty stratum counts as one trial (its official value is a guess)
        deff_set = set_design_effects(units, metric) if several else [None] * len(units)
        deff_set = np.array([1 - rho_set if d is None else d for d in deff_set])
        factors = {"population": _population_factors(trials, prompts, rho_pop), "set": deff_set * inv}
        weights = _weights(keys, has)
        bounds, pending = {}, []  # (row, target, value, var_unit): one modified Wilson call for all (same numbers)
        for row, w in weights.items():
            value = out[(task, *row)][metric].value
            for target, f in factors.items():
                if target == "set" and not several:
                    bounds[(row, target)] = (None, None)
                else:
                    pending.append((row, target, value, float(np.sum(w * w * f))))  # Var(p_hat) / (p (1 - p))
        values, var_units = (np.array([x[i] for x in pending], dtype=np.float64).reshape(-1) for i in (2, 3))
        for (row, target, _, _), lo, hi in zip(pending, *_score_bounds(values, var_units, confidence)):
            bounds[(row, target)] = (float(lo), float(hi))
        for row, w in weights.items():
            est, method = out[(task, *row)][metric], "wilson" if np.count_nonzero(w) == 1 else "stratified-wilson"
            pop, this_set = bounds[(row, "population")], bounds[(row, "set")]
            out[(task, *row)][metric] = Estimate(est.value, *pop, method, est.n, *this_set)


def intervals(
    outcomes: Sequence[Outcome],
    *,
    confidence: float = 0.95,
    n: int = 10000,
    seed: int = 0,
    group_method: str = "wilson",
) -> dict[tuple[str, str, str], dict[str, Estimate]]:
    """{(task, source, language): {metric: Estimate}} for every row the official scorer reports (source or
    language "all" for aggregates); WPR/LCPR only where defined. Point values equal the official ones."""
    check_confidence(confidence, n)
    if group_method not in ("wilson", "bootstrap"):
        raise ConfigError(f"unknown group_method {group_method!r}; valid: wilson, bootstrap")
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence
    out: dict[tuple[str, str, str], dict[str, Estimate]] = {}
    for task, outs in _tasks(outcomes).items():
        keys, codes, table = _strata(outs)
        obs = _observed(codes, table)
        point = _aggregate(keys, obs)
        # a stratum borrows from the strata of its script: Latin-script replies' word-error flags feed no metric
        # and must not widen the non-Latin strata's WPR (a WPR at 0 word errors stayed [0.864, 1])
        script = [lang in NON_LATIN for _, lang in keys]
        boot = _aggregate(keys, _resample_counts(codes, n, rng, [table], PSEUDO, script)[0])
        names = [(row, m) for row, ms in point.items() for m in ms]
        stack = np.stack([boot[row][m] for row, m in names], axis=1)
        # the pool pulls each stratum's resamples towards the task's mean: centred back on the official value
        stack = np.clip(stack - stack.mean(0) + np.array([point[row][m][0] for row, m in names]), 0.0, 1.0)
        qs = np.quantile(stack, [alpha / 2, 1 - alpha / 2], axis=0)
        sizes = {k: int(obs[0, s, 0]) for s, k in enumerate(keys)}  # replies
        for j, (row, m) in enumerate(names):
            size = sum(v for k, v in sizes.items() if row[0] in ("all", k[0]) and row[1] in ("all", k[1]))
            out.setdefault((task, *row), {})[m] = Estimate(
                float(point[row][m][0]), float(qs[0, j]), float(qs[1, j]), "bootstrap", size
            )
        if group_method == "wilson":
            for s, key in enumerate(keys):  # a group's n: its proportion's denominator
                nr, scored, line, word, degen, invalid, measured = obs[0, s]
                denominators = {"lpr": scored, "coverage": nr, "degeneracy": nr, "validity": measured}
                denominators["wpr"] = max(0.0, scored - line)
                for m, est in out[(task, *key)].items():
                    if m in denominators:
                        out[(task, *key)][m] = replace(est, n=int(denominators[m]))
            _score_intervals(out, task, keys, codes, table, obs, confidence)
    return out


def unknown_share_intervals(
    outcomes: Sequence[Outcome], *, confidence: float = 0.95, n: int = 2000, seed: int = 0
) -> dict[tuple[str, str, str], dict]:
    """{(task, source, language): {"unknown", "unknown_ci_low", "unknown_ci_high", "lines", "unknown_lines"}}:
    the share of counted lines fastText labels "unknown" (score <= threshold), pooled over the lines of a
    (source, language) group and aggregated the official unweighted way ((source, all), (all, language),
    (all, all)); None without counted lines (or for outcomes written before the count existed).

    Interval: lines cluster in replies (a salad reply has many unknown lines), so replies - not lines - are
    resampled (a prompt's replies together when there are several per prompt), within each (source, language)
    stratum with n_s - 1 draws as `mlft.stats.intervals` does;
    each resample's ratio of pooled counts is aggregated like the point value; percentile interval."""

    check_confidence(confidence, n)
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence
    units: dict[tuple[str, str, str], dict] = {}  # a unit: a reply, or a prompt's replies (clustered)
    cluster = clustered(outcomes)
    for i, o in enumerate(outcomes):
        g = units.setdefault((o.task, o.source, o.language), {})
        if o.lines is not None:
            old = g.get(o.id if cluster else i, (0, 0))
            g[o.id if cluster else i] = (old[0] + o.lines, old[1] + (o.unknown_lines or 0))
    groups = {k: list(v.values()) for k, v in units.items()}
    point: dict[tuple[str, str, str], float | None] = {}
    boot: dict[tuple[str, str, str], np.ndarray] = {}
    counts: dict[tuple[str, str, str], tuple[int, int]] = {}
    for key in sorted(groups):
        pairs = np.array(groups[key], dtype=np.float64).reshape(-1, 2)
        lines, unknown = pairs.sum(0) if len(pairs) else (0.0, 0.0)
        counts[key] = (int(lines), int(unknown))
        point[key] = unknown / lines if lines else None
        if len(pairs):
            idx = rng.integers(0, len(pairs), size=(n, max(1, len(pairs) - 1)))
            # whole counts: exact sums in any order; one contiguous column at a time is 5x faster than pairs[idx]
            drawn_lines, drawn_unknown = (np.ascontiguousarray(pairs[:, j])[idx].sum(1) for j in (0, 1))
            with np.errstate(invalid="ignore", divide="ignore"):
                boot[key] = np.where(drawn_lines > 0, drawn_unknown / np.maximum(drawn_lines, 1), np.nan)
        else:
            boot[key] = np.full(n, np.nan)

    def row(keys: list, value: float | None, draws: np.ndarray) -> dict:
        lo = hi = None
        if value is not None and np.isfinite(draws).any():
            lo, hi = (float(q) for q in np.nanquantile(draws, [alpha / 2, 1 - alpha / 2]))
        return {
            "unknown": value,
            "unknown_ci_low": lo,
            "unknown_ci_high": hi,
            "lines": sum(counts[k][0] for k in keys),
            "unknown_lines": sum(counts[k][1] for k in keys),
        }

    def avg(keys: list, values: dict, draws: dict) -> tuple[float | None, np.ndarray]:
        known = [k for k in keys if values[k] is not None]
        if not known:
            return None, np.full(n, np.nan)
        # resamples where a group lost all its lines average over the others (as the point value skips None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no lines in any group: NaN
            return sum(values[k] for k in known) / len(known), np.nanmean(np.stack([draws[k] for k in known]), 0)

    out = {key: row([key], point[key], boot[key]) for key in groups}
    for task in sorted({k[0] for k in groups}):
        keys = sorted(k for k in groups if k[0] == task)
        for source in sorted({k[1] for k in keys}):
            sub = [k for k in keys if k[1] == source]
            out[(task, source, "all")] = row(sub, *avg(sub, point, boot))
        lang_point, lang_boot = {}, {}
        for lang in sorted({k[2] for k in keys}):
            sub = [k for k in keys if k[2] == lang]
            lang_point[lang], lang_boot[lang] = avg(sub, point, boot)
            out[(task, "all", lang)] = row(sub, lang_point[lang], lang_boot[lang])
        out[(task, "all", "all")] = row(keys, *avg(sorted(lang_point), lang_point, lang_boot))
    return out


def interval_rows(outcomes: Sequence[Outcome], **kwargs) -> list[dict]:
    """`intervals` as flat rows {task, source, language, lpr, lpr_ci_low, lpr_ci_high, ...} to merge into
    score rows; keyword arguments as `intervals`."""
    rows = []
    for (task, source, lang), ms in intervals(outcomes, **kwargs).items():
        row = {"task": task, "source": source, "language": lang}
        for m, est in ms.items():
            row.update(est.columns(m))
        rows.append(row)
    return rows

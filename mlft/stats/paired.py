"""Paired comparisons of two runs B and A over the same prompts (matched on source, language and id):
- `method="permutation"` (default; `swap_test`): the p-value of a paired permutation test with an exact level
  under "A and B are draws of the same model on these prompts": then, per prompt, A's replies and B's are
  exchangeable, so swapping them (a prompt's K replies move together) leaves the joint distribution unchanged.
  T = B - A at the official row, recomputed for each swap pattern; p = share of patterns with |T*| >= |T|
  (every pattern enumerated when the prompts whose sides differ are few, else seeded draws with the (1 + k) /
  (1 + n) correction, which keeps the level). For a mean this is the sign-flip test of the per-prompt
  differences; for LCB's ratios and unweighted averages it is the same group action on the replies. The
  interval beside it is the paired bootstrap's (below), not inverted from the test: near the edge the two can
  disagree (0 just inside the interval with p < 0.05 or the reverse); the p-value is the one with the exact
  level. Why: near the ceiling a few prompts carry all the variance and the bootstrap's tail is too thin (on
  held-back reruns: 10 of 56 language-averaged same-model comparisons at p < 0.05, smallest p 0.0004).
- `method="bootstrap"`: resample prompt ids within strata, recompute both aggregates on the same resample;
  diff = B - A, percentile CI, two-sided p = 2 * min(P*(d <= 0), P*(d >= 0)) with the (1 + k) / (1 + n)
  correction (the p-value that agrees with the CI, up to resampling granularity: p < 1 - confidence
  when 0 lies outside it).
- `method="mcnemar"`: exact McNemar test on per-reply pass/fail (binomial test of the discordant pairs).
  Pairs are kept when the reply enters the metric's denominator in *both* runs: LPR needs counted in both,
  WPR counted and line-clean in both (non-Latin languages only), coverage and degeneracy keep every pair;
  the others are reported in `n_dropped` / `dropped`. diff is the pooled paired difference of pass rates over
  kept pairs (not the official unweighted aggregate: use the bootstrap for that); its CI is exact conditional
  on the number of discordant pairs (Clopper-Pearson on the share won by B).
  Over 1,000 seeded nulls (150 prompts) the bootstrap rejects 5.6 % at the 5 % level, McNemar 3.3 %
  (exact tests are conservative); a planted 20 pp LPR drop is found 97 % of the time. On real reruns (200
  random pairs of same-model passes of the embedded model on lcb_demo sharing no reply): bootstrap 6.5 %
  monolingual / 3.5 % cross-lingual, McNemar 1.5 % / 2.5 % (measurements/calibration.py).
- `holm` / `paired_tests_by_language`: Holm's step-down adjustment for a family of per-language tests (valid
  under any dependence, uniformly more powerful than Bonferroni): with 15 languages tested at 5 % each, more
  than half of all comparisons of two equal runs would otherwise show some "significant" language.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mlft.constants import VALID_SHARE
from mlft.errors import ConfigError, DataError
from mlft.languages import NON_LATIN
from mlft.stats.aggregate import _FEATURES, _NFEAT, _aggregate, _observed, _resample_counts, _strata, _units, clustered
from mlft.stats.intervals import check_confidence
from mlft.stats.outcomes import _NCODE, METHODS, METRICS, PER_REPLY, Outcome


@dataclass(frozen=True)
class PairedResult:
    metric: str
    task: str
    source: str  # "all" or a source
    language: str  # "all" or a language
    method: str  # "permutation" | "bootstrap" | "mcnemar" | "unpaired-bootstrap"
    a: float  # run A's value (official aggregate; McNemar: pooled pass rate over kept pairs)
    b: float
    diff: float  # b - a
    ci_low: float
    ci_high: float
    p_value: float
    n_pairs: int  # pairs used (unpaired: 0)
    n_dropped: int  # matched pairs left out (McNemar eligibility)
    dropped: dict = field(default_factory=dict)  # reason -> count
    confidence: float = 0.95
    p_adjusted: float | None = None  # set by paired_tests_by_language / holm families
    permutations: int = 0  # permutation: swap patterns behind p (all 2^m when exact, else seeded draws)
    exact: bool = False  # permutation: every swap pattern enumerated
    null_sd: float | None = None  # permutation: sd of T* over the swap patterns (diff / null_sd: the standardized T)
    level: float | None = None  # permutation: share of swap patterns this test would reject at 1 - confidence

    def significant(self, alpha: float | None = None) -> bool:
        alpha = 1 - self.confidence if alpha is None else alpha
        return (self.p_value if self.p_adjusted is None else self.p_adjusted) < alpha


def _check_metric(metric: str, method: str) -> None:
    if metric not in METRICS:
        raise ConfigError(f"unknown metric {metric!r}; valid: {', '.join(METRICS)}")
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if method == "mcnemar" and metric not in PER_REPLY:
        raise ConfigError(f"McNemar needs a per-reply pass/fail; {metric} has none (use method='bootstrap')")


def _select(
    outcomes: Sequence[Outcome], task: str | None, source: str | None, language: str | None, name: str
) -> tuple[str, list[Outcome]]:
    tasks = sorted({o.task for o in outcomes})
    if task is None:
        if len(tasks) != 1:
            raise ConfigError(f"run {name} holds tasks {', '.join(tasks) or '(none)'}: name one with task=")
        task = tasks[0]
    sel = [
        o
        for o in outcomes
        if o.task == task and (source is None or o.source == source) and (language is None or o.language == language)
    ]
    if not sel:
        what = ", ".join(f"{k}={v}" for k, v in (("task", task), ("source", source), ("language", language)) if v)
        raise DataError(f"run {name}: no outcomes for {what}")
    return task, sel


def _pairs(a: list[Outcome], b: list[Outcome]) -> list[tuple[Outcome, Outcome]]:
    """Match replies on (source, language, id, sample): official CSV ids restart at 0 in every (source, language)
    file, mlft's JSONL ids are unique anyway; reply k of a prompt is paired with reply k (drawn with the same
    key: common random numbers)."""

    def index(outs, name):
        ids: dict[tuple[str, str, str, int], Outcome] = {}
        for o in outs:
            key = (o.source, o.language, o.id, o.sample)
            if key in ids:
                reply = f" (reply {o.sample})" if o.sample else ""
                raise DataError(f"run {name}: id {o.id!r}{reply} appears more than once in {o.source}/{o.language}")
            ids[key] = o
        return ids

    ia, ib = index(a, "A"), index(b, "B")
    only_a, only_b = sorted(set(ia) - set(ib)), sorted(set(ib) - set(ia))
    if only_a or only_b:
        parts = [
            f"{len(keys)} id(s) only in {name} (e.g. "
            f"{', '.join(f'{i!r}' + (f' reply {k}' if k else '') + f' ({s}/{lang})' for s, lang, i, k in keys[:5])})"
            for name, keys in (("A", only_a), ("B", only_b))
            if keys
        ]
        raise DataError("paired test needs the same prompts (and replies per prompt) in both runs: " + "; ".join(parts))
    return [(ia[k], ib[k]) for k in ia]


def _defined(metric: str, outs: list[Outcome]) -> None:
    if metric in ("wpr", "lcpr") and not any(o.language in NON_LATIN for o in outs):
        raise ConfigError(f"{metric} is only defined for non-Latin-script languages ({', '.join(NON_LATIN)})")
    if metric == "validity" and not any(o.validity is not None for o in outs):
        raise ConfigError(
            "validity is not measured for these replies (no lexicon for their language, or "
            "outcomes written before lexical validity existed)"
        )


def _percentile_test(d: np.ndarray, confidence: float) -> tuple[float, float, float]:
    alpha = 1 - confidence
    lo, hi = np.quantile(d, [alpha / 2, 1 - alpha / 2])
    k = len(d)
    p = 2 * min((1 + np.sum(d <= 0)) / (1 + k), (1 + np.sum(d >= 0)) / (1 + k))
    return float(lo), float(hi), float(min(1.0, p))


def paired_mean_bootstrap(
    groups: Sequence[Sequence[float]], *, n: int = 4000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float, float]:
    """Paired differences in groups (e.g. per-document run - base, per task): the statistic is the unweighted
    mean over groups of each group's mean difference (a group aggregation, as LCB's); values are resampled
    within each group. Returns (difference, low, high, p) with the percentile interval and the two-sided
    bootstrap p of `paired_test`."""
    check_confidence(confidence, n)
    diffs = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not diffs:
        raise DataError("paired bootstrap: no paired values")
    point = float(np.mean([d.mean() for d in diffs]))
    rng = np.random.default_rng(seed)
    boot = np.mean([d[rng.integers(0, len(d), (n, len(d)))].mean(1) for d in diffs], axis=0)
    lo, hi, p = _percentile_test(boot, confidence)
    return point, lo, hi, p


def swap_test(
    codes: list[np.ndarray],
    keys: list,
    feat_a: np.ndarray,
    feat_b: np.ndarray,
    metric: str,
    n: int,
    seed: int,
    alpha: float = 0.05,
) -> tuple[float, int, bool, float, float]:
    """(p, swap patterns, exact, null sd, level) of the paired permutation test (module docstring): per unit (a
    prompt with its replies) A's and B's replies trade places or not; T = B - A at the official ("all", "all") row
    of the strata `keys`. Units whose two sides carry the same counts change nothing and are left out; the
    remaining m are enumerated (2^m patterns, p = #{|T*| >= |T|} / 2^m, the identity included) when 2^m <= n,
    else `n` seeded random patterns (p = (1 + #{|T*| >= |T|}) / (1 + n)). Null sd: T*'s sd over the patterns
    (under the null, E[(T / sd)^2] = 1 when prompts are independent). Level: the share of patterns whose own p is
    <= alpha, the test's level given these replies (under alpha when T* takes few values: few prompts differ)."""
    obs_a, obs_b = _observed(codes, feat_a), _observed(codes, feat_b)
    top_a, top_b = (_aggregate(keys, obs, metric)[("all", "all")][metric] for obs in (obs_a, obs_b))
    t_obs = (top_b - top_a)[0]
    diffs = [feat_b[c] - feat_a[c] for c in codes]  # per stratum: (units, _NFEAT), B minus A
    live = [d[np.any(d != 0, axis=1)] for d in diffs]
    m = sum(len(d) for d in live)
    exact = 2**m <= n
    patterns = 2**m if exact else n
    every = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(np.float64) if exact else None
    rng = np.random.default_rng(seed)
    shift = np.empty((patterns, len(codes), _NFEAT))
    start = 0
    for s, d in enumerate(live):  # a swapped unit moves its difference from B to A
        # random patterns drawn stratum by stratum: memory n x (a stratum's units), not n x (all units)
        flips = every[:, start : start + len(d)] if exact else rng.integers(0, 2, (n, len(d))).astype(np.float64)
        shift[:, s, :] = flips @ d
        start += len(d)
    rows_a, rows_b = _aggregate(keys, obs_a + shift, metric), _aggregate(keys, obs_b - shift, metric)
    t = rows_b[("all", "all")][metric] - rows_a[("all", "all")][metric]
    hits = int(np.sum(np.abs(t) >= abs(t_obs) - 1e-12 * max(1.0, abs(t_obs))))  # ties count (float round-off)
    p = hits / patterns if exact else (1 + hits) / (1 + n)
    at = np.sort(np.abs(t))  # each pattern's own p, from the same patterns
    own = len(at) - np.searchsorted(at, at - 1e-12 * np.maximum(1.0, at)) + (0 if exact else 1)
    level = float(np.mean(own / (patterns if exact else n + 1) <= alpha + 1e-12))
    return float(min(1.0, p)), patterns, exact, float(np.std(t)), level


def paired_test(
    a: Sequence[Outcome],
    b: Sequence[Outcome],
    metric: str = "lpr",
    *,
    task: str | None = None,
    language: str | None = None,
    source: str | None = None,
    method: str = "permutation",
    n: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    interval: bool = True,
) -> PairedResult:
    """B - A for `metric` at the official row (task, source or "all", language or "all"), over the same
    prompts (matched on source, language and id; a DataError names missing ones). Methods: module docstring.
    `interval=False` skips the paired bootstrap where the p-value is not its (the permutation test): ci_low and
    ci_high are NaN, everything else is the same (its own seeded draws); for measurements that read only the
    test over thousands of pairs, where the bootstrap was half the time."""
    _check_metric(metric, method)
    check_confidence(confidence, n)
    task, sa = _select(a, task, source, language, "A")
    _, sb = _select(b, task, source, language, "B")
    pairs = _pairs(sa, sb)
    _defined(metric, sa)
    _defined(metric, sb)
    where = {
        "metric": metric,
        "task": task,
        "source": source or "all",
        "language": language or "all",
        "confidence": confidence,
    }
    if method == "mcnemar":
        return _mcnemar(pairs, **where)
    joint: dict[tuple[str, str], dict] = defaultdict(dict)
    cluster = clustered(sa) or clustered(sb)  # several replies per prompt: a prompt's pairs are one unit
    for i, (x, y) in enumerate(pairs):
        joint[(x.source, x.language)].setdefault(x.id if cluster else i, []).append(x.code * _NCODE + y.code)
    feat_a, feat_b = _FEATURES[np.arange(_NCODE * _NCODE) // _NCODE], _FEATURES[np.arange(_NCODE * _NCODE) % _NCODE]
    keys, codes, (feat_a, feat_b) = _units(joint, [feat_a, feat_b])
    va = _aggregate(keys, _observed(codes, feat_a), metric)[("all", "all")][metric][0]
    vb = _aggregate(keys, _observed(codes, feat_b), metric)[("all", "all")][metric][0]
    lo = hi = p = float("nan")
    if interval or method != "permutation":
        xa, xb = _resample_counts(codes, n, np.random.default_rng(seed), [feat_a, feat_b])
        d = _aggregate(keys, xb, metric)[("all", "all")][metric] - _aggregate(keys, xa, metric)[("all", "all")][metric]
        lo, hi, p = _percentile_test(d, confidence)
    patterns, exact, null_sd, level = 0, False, None, None
    if method == "permutation":  # the p-value from the swap test; the interval stays the bootstrap's
        p, patterns, exact, null_sd, level = swap_test(codes, keys, feat_a, feat_b, metric, n, seed, 1 - confidence)
    return PairedResult(
        method=method,
        permutations=patterns,
        exact=exact,
        null_sd=null_sd,
        level=level,
        a=float(va),
        b=float(vb),
        diff=float(vb - va),
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        n_pairs=len(pairs),
        n_dropped=0,
        **where,
    )


def _eligible(o: Outcome, metric: str) -> bool:
    if metric == "lpr":
        return o.counted
    if metric == "wpr":
        return o.counted and not o.line_error
    if metric == "validity":
        return o.validity is not None
    return True


def _passes(o: Outcome, metric: str) -> bool:
    if metric == "validity":
        return o.validity > VALID_SHARE
    return {"lpr": not o.line_error, "wpr": not o.word_error, "coverage": o.counted, "degeneracy": o.degenerate}[metric]


def _mcnemar(pairs: list[tuple[Outcome, Outcome]], metric: str, **where) -> PairedResult:
    from scipy.stats import binomtest

    why = {"lpr": "uncounted", "wpr": "uncounted or line error", "validity": "validity not measured"}.get(metric, "")
    dropped: dict[str, int] = defaultdict(int)
    kept = []
    for x, y in pairs:
        if x.sample:  # several replies per prompt: McNemar needs independent pairs, so one per prompt
            dropped["not the prompt's first reply (McNemar takes one pair per prompt)"] += 1
            continue
        if metric == "wpr" and x.language not in NON_LATIN:
            dropped["no WPR (Latin-script language)"] += 1
            continue
        ea, eb = _eligible(x, metric), _eligible(y, metric)
        if ea and eb:
            kept.append((_passes(x, metric), _passes(y, metric)))
        else:
            dropped[f"{why} in {'both' if not (ea or eb) else 'A only' if eb else 'B only'}"] += 1
    if not kept:
        raise DataError(f"McNemar on {metric}: no pair is eligible in both runs ({dict(dropped)})")
    xa, xb = np.array(kept, bool).T
    m = len(kept)
    b_wins, a_wins = int(np.sum(xb & ~xa)), int(np.sum(xa & ~xb))
    disc = a_wins + b_wins
    if disc:
        test = binomtest(b_wins, disc, 0.5)
        ci = test.proportion_ci(where["confidence"], method="exact")
        p, lo, hi = float(test.pvalue), disc / m * (2 * ci.low - 1), disc / m * (2 * ci.high - 1)
    else:
        p, lo, hi = 1.0, 0.0, 0.0
    va, vb = float(xa.mean()), float(xb.mean())
    return PairedResult(
        metric=metric,
        method="mcnemar",
        a=va,
        b=vb,
        diff=(b_wins - a_wins) / m,
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        n_pairs=m,
        n_dropped=len(pairs) - m,
        dropped=dict(dropped),
        **where,
    )


def unpaired_test(
    a: Sequence[Outcome],
    b: Sequence[Outcome],
    metric: str = "lpr",
    *,
    task: str | None = None,
    language: str | None = None,
    source: str | None = None,
    n: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedResult:
    """B - A when the runs do not share prompts: each run is resampled independently within its own strata."""
    _check_metric(metric, "bootstrap")
    check_confidence(confidence, n)
    task, sa = _select(a, task, source, language, "A")
    _, sb = _select(b, task, source, language, "B")
    _defined(metric, sa)
    _defined(metric, sb)
    rng = np.random.default_rng(seed)
    vals, boots = [], []
    for outs in (sa, sb):
        keys, codes, table = _strata(outs)
        vals.append(_aggregate(keys, _observed(codes, table), metric)[("all", "all")][metric][0])
        boots.append(_aggregate(keys, _resample_counts(codes, n, rng, [table])[0], metric)[("all", "all")][metric])
    lo, hi, p = _percentile_test(boots[1] - boots[0], confidence)
    return PairedResult(
        metric=metric,
        task=task,
        source=source or "all",
        language=language or "all",
        method="unpaired-bootstrap",
        a=float(vals[0]),
        b=float(vals[1]),
        diff=float(vals[1] - vals[0]),
        ci_low=lo,
        ci_high=hi,
        p_value=p,
        n_pairs=0,
        n_dropped=0,
        confidence=confidence,
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    p = np.asarray(p_values, np.float64)
    if p.size == 0:
        return []
    order = np.argsort(p, kind="stable")
    scaled = (len(p) - np.arange(len(p))) * p[order]
    adj = np.empty_like(p)
    adj[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adj.tolist()


def adjust(results: Sequence[PairedResult]) -> list[PairedResult]:
    """The same results with Holm-adjusted p-values over the family."""
    return [replace(r, p_adjusted=q) for r, q in zip(results, holm([r.p_value for r in results]))]


def paired_tests_by_language(
    a: Sequence[Outcome],
    b: Sequence[Outcome],
    metric: str = "lpr",
    *,
    task: str | None = None,
    method: str = "permutation",
    n: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
    interval: bool = True,
) -> dict[str, PairedResult]:
    """One paired test per language of the task (WPR/LCPR: non-Latin languages), Holm-adjusted as a family.
    The smallest p of n draws is 1 / (n + 1) (permutation) or 2 / (n + 1) (bootstrap), so n must exceed
    2 * languages / alpha (600 for 15 languages at 5 %) for any adjusted p to pass; the default 10000 leaves
    room. An exact permutation p is at least 2 / 2^m (m prompts that differ). `interval`: as `paired_test`."""
    task, sa = _select(a, task, None, None, "A")
    langs = sorted(
        {
            o.language
            for o in sa
            if (metric not in ("wpr", "lcpr") or o.language in NON_LATIN)
            and (metric != "validity" or o.validity is not None)
        }
    )
    results = [
        paired_test(
            a,
            b,
            metric,
            task=task,
            language=lang,
            method=method,
            n=n,
            seed=seed,
            confidence=confidence,
            interval=interval,
        )
        for lang in langs
    ]
    return dict(zip(langs, adjust(results)))


def sign_flip_p(d: np.ndarray, n: int = 10000, seed: int = 0) -> tuple[float, int, bool]:
    """(p, patterns, exact) of the paired permutation test on the mean of per-unit differences `d` (`swap_test` for
    LCB's aggregated metrics; this for a plain share such as the task score) (swapping a prompt's A and B replies
    flips its difference's sign; prompts with no difference change nothing and are left out)."""
    live = d[d != 0]
    m = len(live)
    if m == 0:
        return 1.0, 1, True
    t_obs = abs(live.sum())
    exact = 2**m <= n
    if exact:
        signs = 1 - 2 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
    else:
        signs = 1 - 2 * np.random.default_rng(seed).integers(0, 2, (n, m))
    hits = int(np.sum(np.abs(signs @ live) >= t_obs - 1e-12 * max(1.0, t_obs)))
    p = hits / 2**m if exact else (1 + hits) / (1 + n)
    return float(min(1.0, p)), (2**m if exact else n), exact

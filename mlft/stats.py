"""Intervals and paired tests for LCB metrics, computed from per-reply outcomes.

Unit of analysis: one `Outcome` per reply (counted, line error, word error, degenerate, optional NLL), written
once by an eval pass (`save_outcomes`) so intervals and tests never need rescoring. Every statistic follows the
official aggregation: a metric per (source, language) group, (all, lang) = mean over sources, (source, all) =
mean over languages, (all, all) = mean over (all, lang); LCPR = harmonic(LPR, WPR) per language, averaged over
the non-Latin languages. Coverage (share of replies with >= 1 counted line), degeneracy (share of degenerate
replies, `mlft.benchmarks.lcb.guard`) and lexical validity (share of replies whose words are mostly words of the
language,
`mlft.benchmarks.lcb.guard.lexical_validity`; defined for a (source, language) group whose replies carry it) are
aggregated
the same unweighted way. Point values are the official numbers, bit for bit (same formulas, same summation order).

Intervals (`intervals`, `interval_rows`) name their target:
- "the prompt population" (`low`, `high`, the `*_ci_low/high` columns every table prints; the default): the
  value another draw of prompts from the same (source, language) strata would give, with new replies: prompt
  sampling and decoding noise. Per stratum the variance of its mean is (sigma2_b + sigma2_w / K) / n (n prompts,
  K replies each; sigma2_b between prompts, sigma2_w within a prompt).
- "this prompt set" (`set_low`, `set_high`, the `*_set_ci_low/high` columns): the value these prompts' other
  replies would give: decoding noise only, sigma2_w / (K n). Only estimable with several replies per prompt
  (None with one: a single reply cannot split its variance).
- per-reply proportions (LPR, WPR, coverage, degeneracy, validity), every row (`group_method="wilson"`,
  default): score intervals (`_score_intervals`): a (source, language) group by Wilson, an aggregate by
  stratified Wilson (Yan & Su 2010: the variance evaluated at the candidate p, sum_s w_s^2 p (1 - p) deff_s /
  N_s, w_s the official weights, N_s the stratum's denominator), with deff_s = 1 + (K_s - 1) rho (population)
  or 1 - rho (this set), rho the task's intra-prompt correlation (`within_share`, one-way ANOVA pooled over
  strata). A stratum at 0 % or 100 % still has width (the variance is taken at the candidate p, not at the
  stratum's own), no stratum borrows from others, nothing is re-centred: a language at 10/10 gets Wilson's
  [0.72, 1] whatever the task's other languages do (the pseudo-unit it replaces gave [0.90, 1] next to
  languages at 90 % and [0.81, 1] next to 60 %). WPR's denominator (counted, line-clean replies)
  is taken as fixed.
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

Means, ratios and single proportions outside LCB's aggregation (one home for them too): `mean_interval`
(normal interval of a mean: reply NLL rows), `ratio_interval` (paired bootstrap of a ratio of means: the
fluency guard), `proportion_halfwidth` (bootstrap half-width of an accuracy: Polyglot-or-Not).

Paired comparisons of two runs B and A over the same prompts (matched on source, language and id):
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

import json
import math
import statistics
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from statistics import NormalDist

import numpy as np

from mlft.constants import GUARD_METRICS, VALID_SHARE
from mlft.constants import METRICS as LCB_METRICS
from mlft.errors import ConfigError, DataError
from mlft.io.jsonl import iter_objects
from mlft.languages import NON_LATIN

METRICS = (*LCB_METRICS, *GUARD_METRICS)
PER_REPLY = ("lpr", "wpr", "coverage", "degeneracy", "validity")  # metrics with a per-reply pass/fail (McNemar)
METHODS = ("permutation", "bootstrap", "mcnemar")
_COUNTED, _LINE, _WORD, _DEGEN, _INVALID, _MEASURED = 1, 2, 4, 8, 16, 32  # bits of a reply's category code
_NCODE = 64


@dataclass(frozen=True)
class Outcome:
    """What the statistics need to know about one scored reply."""

    id: str
    task: str
    source: str
    language: str
    counted: bool  # has >= 1 counted line (else left out of every denominator)
    line_error: bool  # a counted line is in another language
    word_error: bool  # WPR failure (official: only set for counted, line-clean replies)
    degenerate: bool  # mlft.benchmarks.lcb.guard.is_degenerate(reply)
    nll: float | None = None  # mean token NLL under a reference LM (mlft.benchmarks.lcb.fluency)
    validity: float | None = (
        None  # share of known words (mlft.benchmarks.lcb.guard.lexical_validity); None: not measured
    )
    lines: int | None = None  # counted lines (LID detail)
    unknown_lines: int | None = None  # counted lines fastText labels "unknown" (score <= threshold)
    sample: int = 0  # which of the prompt's replies (several replies per prompt: a cluster per id)

    @property
    def code(self) -> int:
        line = self.counted and self.line_error
        word = self.counted and not line and self.word_error
        measured = self.validity is not None
        invalid = measured and self.validity <= VALID_SHARE
        return (
            self.counted * _COUNTED
            + line * _LINE
            + word * _WORD
            + self.degenerate * _DEGEN
            + invalid * _INVALID
            + measured * _MEASURED
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, rec: dict, where: str = "outcome") -> Outcome:
        missing = [
            k
            for k in ("id", "task", "source", "language", "counted", "line_error", "word_error", "degenerate")
            if k not in rec
        ]
        if missing:
            raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
        nll, validity = rec.get("nll"), rec.get("validity")
        lines, unknown = rec.get("lines"), rec.get("unknown_lines")
        sample = rec.get("sample") or 0
        if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
            raise DataError(f"{where}: field 'sample' must be a whole number >= 0, got {sample!r}")
        return cls(
            id=str(rec["id"]),
            task=str(rec["task"]),
            source=str(rec["source"]),
            language=str(rec["language"]),
            counted=bool(rec["counted"]),
            line_error=bool(rec["line_error"]),
            word_error=bool(rec["word_error"]),
            degenerate=bool(rec["degenerate"]),
            nll=None if nll is None else float(nll),
            validity=None if validity is None else float(validity),
            lines=None if lines is None else int(lines),
            unknown_lines=None if unknown is None else int(unknown),
            sample=sample,
        )


def save_outcomes(path: str | Path, outcomes: Iterable[Outcome]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for o in outcomes:
            fh.write(json.dumps(o.to_dict(), ensure_ascii=False) + "\n")


def load_outcomes(path: str | Path) -> list[Outcome]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    return [Outcome.from_dict(rec, f"{path}: line {n}") for n, rec in iter_objects(path)]


# ---------------------------------------------------------------- aggregation on count arrays

# per category code: [replies, counted, line errors, word errors, degenerate, lexically invalid, validity measured]
_FEATURES = np.array(
    [
        [1, c & _COUNTED > 0, c & _LINE > 0, c & _WORD > 0, c & _DEGEN > 0, c & _INVALID > 0, c & _MEASURED > 0]
        for c in range(_NCODE)
    ],
    dtype=np.float64,
)
_NFEAT = _FEATURES.shape[1]


def _mean(arrays: list[np.ndarray]) -> np.ndarray:
    """Python's sum(values) / len(values), elementwise and in the same order (bit-identical to the scorer)."""
    total = arrays[0].copy()
    for a in arrays[1:]:
        total += a
    return total / len(arrays)


def _harmonic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    s = a + b
    return np.where(s == 0, 0.0, 2 * a * b / np.where(s == 0, 1.0, s))


def _aggregate(keys: list[tuple[str, str]], x: np.ndarray) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """Every row and metric from per-stratum counts x[..., s, feature] (keys sorted, as the scorer sorts)."""
    n, scored, line, word, degen, invalid, measured = (x[..., i] for i in range(_NFEAT))
    rows: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for s, (source, lang) in enumerate(keys):
        m = {
            "lpr": 1 - line[..., s] / np.maximum(1, scored[..., s]),
            "coverage": scored[..., s] / n[..., s],
            "degeneracy": degen[..., s] / n[..., s],
        }
        if measured[..., s].max() > 0:  # the group's replies carry lexical validity
            m["validity"] = 1 - invalid[..., s] / np.maximum(1, measured[..., s])
        if lang in NON_LATIN:
            m["wpr"] = 1 - word[..., s] / np.maximum(1, scored[..., s] - line[..., s])
            m["lcpr"] = _harmonic(m["lpr"], m["wpr"])
        rows[(source, lang)] = m

    def avg(ms: list[dict]) -> dict:
        out = {k: _mean([m[k] for m in ms]) for k in ("lpr", "coverage", "degeneracy")}
        for k in ("wpr", "validity"):
            values = [m[k] for m in ms if k in m]
            if values:
                out[k] = _mean(values)
        return out

    per_source, per_lang = defaultdict(list), defaultdict(list)
    for (source, lang), m in list(rows.items()):
        per_source[source].append(m)
        per_lang[lang].append(m)
    for source, ms in per_source.items():
        rows[(source, "all")] = avg(ms)
    lang_rows = {lang: avg(ms) for lang, ms in per_lang.items()}
    for lang, m in lang_rows.items():
        if "wpr" in m:
            m["lcpr"] = _harmonic(m["lpr"], m["wpr"])
        rows[("all", lang)] = m
    top = avg(list(lang_rows.values()))
    lcpr = [m["lcpr"] for m in lang_rows.values() if "lcpr" in m]
    if lcpr:
        top["lcpr"] = _mean(lcpr)
    rows[("all", "all")] = top
    return rows


def clustered(outcomes: Sequence) -> bool:
    """Whether the outcomes hold several replies per prompt (any `sample` > 0): then a prompt's replies form one
    resampling unit (a cluster), since they share the prompt."""
    return any(getattr(o, "sample", 0) for o in outcomes)


def _units(by_key: dict, tables: list[np.ndarray]) -> tuple[list, list[np.ndarray], list[np.ndarray]]:
    """Sorted stratum keys, each stratum's unit codes, and per table the features of a unit code.

    `by_key`: stratum -> {unit: [codes]} (a unit is a reply, or a prompt's replies). When every unit holds one
    code, the codes index `tables` as they are (one reply per prompt: the official categories, unchanged);
    else a unit's code indexes the summed features of its multiset of codes (a cluster of replies)."""
    keys = sorted(by_key)
    if all(len(v) == 1 for k in keys for v in by_key[k].values()):
        return keys, [np.array([v[0] for v in by_key[k].values()], np.int64) for k in keys], tables
    ids: dict[tuple[int, ...], int] = {}
    codes = [np.array([ids.setdefault(tuple(sorted(v)), len(ids)) for v in by_key[k].values()], np.int64) for k in keys]
    multisets = list(ids)
    return keys, codes, [np.stack([t[list(m)].sum(0) for m in multisets]) for t in tables]


def _strata(outcomes: Sequence[Outcome]) -> tuple[list[tuple[str, str]], list[np.ndarray], np.ndarray]:
    """Sorted (source, language) keys, each stratum's unit codes and the feature table they index: a unit is a
    reply, or with several replies per prompt (`clustered`) a prompt's replies."""
    by_key: dict[tuple[str, str], dict] = defaultdict(dict)
    cluster = clustered(outcomes)
    for i, o in enumerate(outcomes):
        by_key[(o.source, o.language)].setdefault(o.id if cluster else i, []).append(o.code)
    keys, codes, (table,) = _units(by_key, [_FEATURES])
    return keys, codes, table


PSEUDO = 1.0  # intervals: pseudo-units each stratum borrows from its task's pool when resampled (module docstring)


def _resample_counts(
    codes: list[np.ndarray],
    n: int,
    rng: np.random.Generator,
    features: list[np.ndarray],
    pseudo: float = 0.0,
    pools: Sequence | None = None,
) -> list[np.ndarray]:
    """Bootstrap the feature sums of each stratum: returns one (n, S, _NFEAT) array per feature table.

    `codes[s]` are category codes (joint codes for pairs) and `features[j]` maps a code to its counts; one
    multinomial draw of category counts per stratum is shared by all tables (pairs stay pairs). With `pseudo`
    > 0 a stratum is resampled from its own units mixed with `pseudo` units' worth of a pool (a stratum at 0 % or
    100 %, or with one prompt, still varies): the pool of the strata with the same label in `pools` (default: all
    strata one pool)."""
    out = [np.empty((n, len(codes), _NFEAT)) for _ in features]
    labels = [0] * len(codes) if pools is None else list(pools)
    shared = {}
    if pseudo > 0:
        for label in set(labels):
            cats, counts = np.unique(
                np.concatenate([c for c, x in zip(codes, labels) if x == label]), return_counts=True
            )
            shared[label] = (cats, counts / counts.sum())
    for s, c in enumerate(codes):
        size = max(1, len(c) - 1)  # n_s - 1 draws: unbiased variance for small strata (McCarthy-Snowden)
        if pseudo > 0:
            pool_cats, pool = shared[labels[s]]
            cats = pool_cats
            counts = np.zeros(len(cats))
            own, k = np.unique(c, return_counts=True)
            counts[np.searchsorted(cats, own)] = k
            probs = (counts + pseudo * pool) / (len(c) + pseudo)
        else:
            cats, counts = np.unique(c, return_counts=True)
            probs = counts / len(c)
        draws = rng.multinomial(size, probs, size=n).astype(np.float64)  # (n, categories)
        for o, f in zip(out, features):
            o[:, s, :] = draws @ f[cats]
    return out


def _observed(codes: list[np.ndarray], feature: np.ndarray) -> np.ndarray:
    return np.stack([feature[c].sum(0) for c in codes])[None]  # (1, S, _NFEAT)


def _tasks(outcomes: Sequence[Outcome]) -> dict[str, list[Outcome]]:
    out: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        out[o.task].append(o)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- intervals


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
    return np.where(empty, 0.0, np.clip(centre - half, 0, 1)), np.where(empty, 1.0, np.clip(centre + half, 0, 1))


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


def _score_intervals(out: dict, task: str, keys, codes, table, obs, confidence: float) -> None:
    """Replace the bootstrap's interval of every per-reply proportion (LPR, WPR, coverage, degeneracy, validity)
    by a score interval for each target (module docstring, "Targets"): Wilson on the effective sample size of the
    row, stratified Wilson (Yan & Su 2010: the variance at the candidate p, sum_s w_s^2 p (1 - p) deff_s / N_s)
    for an aggregate. deff_s = 1 + (K_s - 1) rho for the prompt population, 1 - rho for this prompt set (rho: the
    task's pooled intra-prompt correlation, `within_share`; K_s = replies per prompt of stratum s). One reply per
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
        per_prompt = np.where(prompts > 0, trials / np.maximum(prompts, 1), 1.0)
        if rho is None:  # no spread to split: population as if replies of a prompt agreed, this set as if not
            rho_pop, rho_set = 1.0, 0.0
        else:
            rho_pop = rho_set = rho
        inv = 1.0 / np.maximum(trials, 1.0)  # an empty stratum counts as one trial (its official value is a guess)
        factors = {"population": (1 + (per_prompt - 1) * rho_pop) * inv, "set": (1 - rho_set) * inv}
        for row, w in _weights(keys, has).items():
            est = out[(task, *row)][metric]
            bounds = {}
            for target, f in factors.items():
                var_unit = float(np.sum(w * w * f))  # Var(p_hat) / (p (1 - p))
                if target == "set" and not several:
                    bounds[target] = (None, None)
                elif var_unit <= 0:
                    bounds[target] = (est.value, est.value)
                else:
                    n_eff = 1.0 / var_unit
                    lo, hi = wilson(est.value * n_eff, n_eff, confidence)
                    bounds[target] = (float(lo), float(hi))
            method = "wilson" if np.count_nonzero(w) == 1 else "stratified-wilson"
            out[(task, *row)][metric] = Estimate(est.value, *bounds["population"], method, est.n, *bounds["set"])


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
    row in the same seed) with its Student-t interval over seeds."""

    mean: float
    low: float  # NaN below two seeds
    high: float
    sd: float
    seeds: int
    confidence: float = 0.95

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def seed_interval(values: Sequence[float], confidence: float = 0.95) -> SeedEstimate:
    """Mean over seeds with the t-interval mean +- t(1 - alpha/2, k - 1) * sd / sqrt(k): the seeds are the sample
    (each seed retrains and redraws), so the interval is for the mean over training seeds; "holds in each of three
    seeds" is a vote, this is the estimate. Gains of +22.4, +12.4, +13.7 give +16.2
    [2.7, 29.7]: three seeds leave a wide interval."""
    from scipy.stats import t as student_t

    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    xs = [float(v) for v in values]
    if not xs:
        raise DataError("seed_interval of no values")
    m = statistics.mean(xs)
    if len(xs) < 2:
        return SeedEstimate(m, float("nan"), float("nan"), 0.0, 1, confidence)
    sd = statistics.stdev(xs)
    half = float(student_t.ppf(0.5 + confidence / 2, len(xs) - 1)) * sd / math.sqrt(len(xs))
    return SeedEstimate(m, m - half, m + half, sd, len(xs), confidence)


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


# ---------------------------------------------------------------- paired comparisons


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
    codes: list[np.ndarray], keys: list, feat_a: np.ndarray, feat_b: np.ndarray, metric: str, n: int, seed: int
) -> tuple[float, int, bool]:
    """(p, swap patterns, exact) of the paired permutation test (module docstring): per unit (a prompt with its
    replies) A's and B's replies trade places or not; T = B - A at the official ("all", "all") row of the strata
    `keys`. Units whose two sides carry the same counts change nothing and are left out; the remaining m are
    enumerated (2^m patterns, p = #{|T*| >= |T|} / 2^m, the identity included) when 2^m <= n, else `n` seeded
    random patterns (p = (1 + #{|T*| >= |T|}) / (1 + n))."""
    obs_a, obs_b = _observed(codes, feat_a), _observed(codes, feat_b)
    t_obs = (_aggregate(keys, obs_b)[("all", "all")][metric] - _aggregate(keys, obs_a)[("all", "all")][metric])[0]
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
    rows_a, rows_b = _aggregate(keys, obs_a + shift), _aggregate(keys, obs_b - shift)
    t = rows_b[("all", "all")][metric] - rows_a[("all", "all")][metric]
    hits = int(np.sum(np.abs(t) >= abs(t_obs) - 1e-12 * max(1.0, abs(t_obs))))  # ties count (float round-off)
    p = hits / patterns if exact else (1 + hits) / (1 + n)
    return float(min(1.0, p)), patterns, exact


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
) -> PairedResult:
    """B - A for `metric` at the official row (task, source or "all", language or "all"), over the same
    prompts (matched on source, language and id; a DataError names missing ones). Methods: module docstring."""
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
    va = _aggregate(keys, _observed(codes, feat_a))[("all", "all")][metric][0]
    vb = _aggregate(keys, _observed(codes, feat_b))[("all", "all")][metric][0]
    xa, xb = _resample_counts(codes, n, np.random.default_rng(seed), [feat_a, feat_b])
    d = _aggregate(keys, xb)[("all", "all")][metric] - _aggregate(keys, xa)[("all", "all")][metric]
    lo, hi, p = _percentile_test(d, confidence)
    patterns, exact = 0, False
    if method == "permutation":  # the p-value from the swap test; the interval stays the bootstrap's
        p, patterns, exact = swap_test(codes, keys, feat_a, feat_b, metric, n, seed)
    return PairedResult(
        method=method,
        permutations=patterns,
        exact=exact,
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
        vals.append(_aggregate(keys, _observed(codes, table))[("all", "all")][metric][0])
        boots.append(_aggregate(keys, _resample_counts(codes, n, rng, [table])[0])[("all", "all")][metric])
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
) -> dict[str, PairedResult]:
    """One paired test per language of the task (WPR/LCPR: non-Latin languages), Holm-adjusted as a family.
    The smallest p of n draws is 1 / (n + 1) (permutation) or 2 / (n + 1) (bootstrap), so n must exceed
    2 * languages / alpha (600 for 15 languages at 5 %) for any adjusted p to pass; the default 10000 leaves
    room. An exact permutation p is at least 2 / 2^m (m prompts that differ)."""
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
        paired_test(a, b, metric, task=task, language=lang, method=method, n=n, seed=seed, confidence=confidence)
        for lang in langs
    ]
    return dict(zip(langs, adjust(results)))

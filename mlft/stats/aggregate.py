"""LCB's official aggregation on count arrays, and the stratified resampling the intervals and tests share.

Replies are reduced to a category code (counted, line error, word error, degenerate, ...), so a (source, language)
stratum is a vector of counts and a bootstrap resample of it is a multinomial draw of counts (`_resample_counts`);
`_aggregate` applies the official formulas (a metric per group, unweighted means over sources and languages, LCPR =
harmonic(LPR, WPR) over the non-Latin languages) to observed or resampled counts alike. Kept apart from the
intervals and the paired tests, which both resample through it: one implementation of the official numbers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from mlft.errors import DataError
from mlft.languages import NON_LATIN
from mlft.stats.outcomes import _COUNTED, _DEGEN, _INVALID, _LINE, _MEASURED, _NCODE, _WORD, Outcome

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


def _aggregate(
    keys: list[tuple[str, str]], x: np.ndarray, metric: str | None = None
) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """Every row and metric from per-stratum counts x[..., s, feature] (keys sorted, as the scorer sorts). With
    `metric`, that metric alone (and what it is made of: LCPR's LPR and WPR), by the same operations: a paired
    test reads one metric of thousands of resamples, and the others were most of its time."""
    n, scored, line, word, degen, invalid, measured = (x[..., i] for i in range(_NFEAT))

    def want(k: str) -> bool:
        return metric is None or k == metric or (metric == "lcpr" and k in ("lpr", "wpr"))

    rows: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for s, (source, lang) in enumerate(keys):
        m = {}
        if want("lpr"):
            m["lpr"] = 1 - line[..., s] / np.maximum(1, scored[..., s])
        if want("coverage"):
            m["coverage"] = scored[..., s] / n[..., s]
        if want("degeneracy"):
            m["degeneracy"] = degen[..., s] / n[..., s]
        if want("validity") and measured[..., s].max() > 0:  # the group's replies carry lexical validity
            m["validity"] = 1 - invalid[..., s] / np.maximum(1, measured[..., s])
        if lang in NON_LATIN and want("wpr"):
            m["wpr"] = 1 - word[..., s] / np.maximum(1, scored[..., s] - line[..., s])
        if lang in NON_LATIN and want("lcpr"):
            m["lcpr"] = _harmonic(m["lpr"], m["wpr"])
        rows[(source, lang)] = m

    def avg(ms: list[dict]) -> dict:
        out = {k: _mean([m[k] for m in ms]) for k in ("lpr", "coverage", "degeneracy") if want(k)}
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
        if "wpr" in m and want("lcpr"):
            m["lcpr"] = _harmonic(m["lpr"], m["wpr"])
        rows[("all", lang)] = m
    top = avg(list(lang_rows.values()))
    lcpr = [m["lcpr"] for m in lang_rows.values() if "lcpr" in m]
    if lcpr:
        top["lcpr"] = _mean(lcpr)
    rows[("all", "all")] = top
    return rows


def pass_values(passes: Sequence[Sequence[Outcome]], task: str, metric: str = "lpr") -> np.ndarray:
    """The official (all, all) value of `metric` on `task` for each of several passes over the same prompts (one
    reply per prompt per pass), aggregated at once: what the scorer reports for each pass, as one array."""
    index: dict[tuple[str, str], int] = {}
    rows = [
        [(index.setdefault((o.source, o.language), len(index)), o.code) for o in p if o.task == task] for p in passes
    ]
    if not index:
        raise DataError(f"no reply of task {task!r} in the passes")
    keys = sorted(index)
    order = np.array([keys.index(k) for k in index])  # first-seen stratum -> its sorted position
    x = np.zeros((len(rows), len(keys), _NFEAT))
    for j, row in enumerate(rows):
        s, c = np.array(row, np.int64).T
        np.add.at(x[j], order[s], _FEATURES[c])
    return _aggregate(keys, x, metric)[("all", "all")][metric]


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

"""lm-evaluation-harness samples files (one JSON row per document: task, doc_id, per-document metric values) and
the paired comparison of two runs on them (Table 11's capability columns; the bootstrap is mlft.stats')."""

from __future__ import annotations

import json
from pathlib import Path

from mlft.stats import paired_mean_bootstrap


def read_sample_values(path: str | Path, metric: str) -> dict[tuple, float]:
    """{(task, doc_id): value} of `metric` (its name before any `/filter`) in an lm-eval samples file; documents
    without a number for it are left out."""
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            x = json.loads(line)
            v = x.get(metric.split("/")[0])
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[(x.get("task"), x.get("doc_id"))] = float(v)
    return out


def paired_samples_test(
    base: str | Path, run: str | Path, metric: str, *, n: int = 4000, seed: int = 0, confidence: float = 0.95
):
    """Paired bootstrap of run − base on the documents both evaluated (per-document `metric` values of lm-eval's
    samples, keyed by task and doc_id): the statistic is the unweighted mean over tasks of the mean difference
    (a group's aggregation), documents resampled within each task. Returns (difference, low, high, p, pairs),
    or None when fewer than 2 documents pair up or the metric has no per-document number."""
    a, b = read_sample_values(base, metric), read_sample_values(run, metric)
    keys = sorted(a.keys() & b.keys(), key=str)
    if len(keys) < 2:
        return None
    tasks = sorted({k[0] for k in keys}, key=str)
    groups = [[b[k] - a[k] for k in keys if k[0] == t] for t in tasks]
    point, lo, hi, p = paired_mean_bootstrap(groups, n=n, seed=seed, confidence=confidence)
    return point, lo, hi, p, len(keys)

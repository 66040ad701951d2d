"""Polyglot-or-Not metrics: accuracy per language, the unweighted mean over languages, per-relation accuracy and
bootstrap 95% confidence-interval half-widths (percentile bootstrap, 10,000 resamples, seeded)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from mlft.stats import proportion_halfwidth

N_RESAMPLES = 10_000


def accuracy(known: Sequence[bool]) -> float:
    if not known:
        raise ValueError("accuracy of an empty set of facts")
    return sum(map(bool, known)) / len(known)


def bootstrap_halfwidth(
    known: Sequence[bool], n_resamples: int = N_RESAMPLES, seed: int = 0, level: float = 0.95
) -> float:
    """Half the width of the percentile bootstrap CI of the accuracy.

    Resampling n facts with replacement and counting the known ones is a Binomial(n, accuracy) draw, so the
    10,000 resampled accuracies are drawn as binomials (26k facts x 10k resamples would not fit otherwise);
    computed by `mlft.stats.proportion_halfwidth`, the one statistics module.
    """
    accuracy(known)  # an empty set is an error

    return proportion_halfwidth(sum(map(bool, known)), len(known), confidence=level, n=n_resamples, seed=seed)


def by_relation(relations: Sequence[str], known: Sequence[bool]) -> dict[str, tuple[float, int]]:
    """relation -> (accuracy, n facts)."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for rel, k in zip(relations, known, strict=True):
        groups[rel].append(bool(k))
    return {rel: (accuracy(ks), len(ks)) for rel, ks in sorted(groups.items())}


def language_mean(per_language: Mapping[str, float]) -> float:
    """The paper's multilingual score: the unweighted mean over languages."""
    if not per_language:
        raise ValueError("no languages to average")
    return sum(per_language.values()) / len(per_language)

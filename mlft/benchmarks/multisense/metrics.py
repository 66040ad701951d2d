"""Multisense metrics on prediction lists in gold-label space (-1 = unparseable reply).

- accuracy: share of `pred == label` (-1 is wrong);
- consistency: share of items with the same prediction in both runs ((-1, -1) counts as consistent, as in the
  authors' `analysis_helpers.py`);
- the breakdown of consistency on items the reference run got right vs wrong;
- the invalid-answer rate, and consistency over the pairs where both replies parsed.
"""

from __future__ import annotations

from collections.abc import Sequence

INVALID = -1


def _check_lengths(*seqs: Sequence) -> int:
    n = len(seqs[0])
    if any(len(s) != n for s in seqs):
        raise ValueError(f"prediction lists differ in length: {[len(s) for s in seqs]}")
    return n


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def accuracy(preds: Sequence[int], labels: Sequence[int]) -> float:
    _check_lengths(preds, labels)
    return _share([p == y for p, y in zip(preds, labels)])


def invalid_rate(preds: Sequence[int]) -> float:
    return _share([p == INVALID for p in preds])


def consistency(preds_a: Sequence[int], preds_b: Sequence[int]) -> float:
    _check_lengths(preds_a, preds_b)
    return _share([a == b for a, b in zip(preds_a, preds_b)])


def consistency_valid(preds_a: Sequence[int], preds_b: Sequence[int]) -> float:
    """Consistency over the item pairs where neither reply is invalid (NaN when there are none)."""
    _check_lengths(preds_a, preds_b)
    return _share([a == b for a, b in zip(preds_a, preds_b) if a != INVALID and b != INVALID])


def consistency_breakdown(reference: Sequence[int], other: Sequence[int], labels: Sequence[int]) -> dict[str, float]:
    """Consistency overall, on items `reference` answered correctly, and on those it answered wrongly."""
    _check_lengths(reference, other, labels)
    right = [r == o for r, o, y in zip(reference, other, labels) if r == y]
    wrong = [r == o for r, o, y in zip(reference, other, labels) if r != y]
    return {
        "consistency": consistency(reference, other),
        "consistency_when_right": _share(right),
        "consistency_when_wrong": _share(wrong),
    }


def compare(
    reference: Sequence[int], other: Sequence[int], labels_ref: Sequence[int], labels_other: Sequence[int] | None = None
) -> dict[str, float]:
    """All metrics of one condition against the reference run (T_src): a flat name -> value mapping."""
    labels_other = labels_ref if labels_other is None else labels_other
    out = {"accuracy": accuracy(other, labels_other), "invalid_rate": invalid_rate(other)}
    out.update(consistency_breakdown(reference, other, labels_ref))
    out["consistency_valid"] = consistency_valid(reference, other)
    return out


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (sacrebleu defaults; the `zh` tokenizer when the references are Chinese)."""
    import sacrebleu

    _check_lengths(hypotheses, references)
    tokenize = "zh" if any("\u4e00" <= ch <= "\u9fff" for ref in references[:50] for ch in ref) else "13a"
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score

"""Per-reply outcomes, the unit of every statistic in `mlft.stats`, and their file (`outcomes.jsonl`).

An `Outcome` says what the statistics need to know about one scored reply (counted, line error, word error,
degenerate, optional NLL, lexical validity, LID detail, sample index); an eval pass writes them once
(`save_outcomes`) so intervals and tests never need rescoring. The metric names and test methods the engine knows
live here too, since every other module of the engine checks against them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from mlft.constants import GUARD_METRICS, VALID_SHARE
from mlft.constants import METRICS as LCB_METRICS
from mlft.errors import DataError
from mlft.io.jsonl import iter_objects

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

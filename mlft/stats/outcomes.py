"""Per-reply outcomes, the unit of every statistic in `mlft.stats`, and their file (`outcomes.jsonl`).

An `Outcome` says what the statistics need to know about one scored reply (counted, line error, word error,
degenerate, optional NLL, lexical validity, LID detail, sample index); an eval pass writes them once
(`save_outcomes`) so intervals and tests never need rescoring. Reruns of a pass (many replies per prompt) keep
compact (`save_compact` / `load_compact`: per prompt each reply's category bits and validity, gzipped; the
calibration's and held-out sets' data). The metric names and test methods the engine knows live here too, since
every other module of the engine checks against them."""

from __future__ import annotations

import gzip
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


def save_compact(path: str | Path, outcomes: Iterable[Outcome], meta: dict) -> None:
    """Outcomes of many replies per prompt, compact: {meta, prompts: [[task, source, language, id, [[bits,
    validity] per reply in sample order]]]}, gzipped JSON (bits: counted 1, line error 2, word error 4,
    degenerate 8)."""
    prompts: dict[tuple, dict] = {}
    for o in outcomes:
        p = prompts.setdefault((o.task, o.source, o.language, o.id), {})
        p[o.sample] = [o.counted + 2 * o.line_error + 4 * o.word_error + 8 * o.degenerate, o.validity]
        if o.validity is not None:
            p[o.sample][1] = round(o.validity, 4)
    rows = [[*key, [v[s] for s in sorted(v)]] for key, v in prompts.items()]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"meta": meta, "prompts": rows}, fh, separators=(",", ":"))


def load_compact(path: str | Path) -> tuple[list[Outcome], dict]:
    """(outcomes, meta) of a `save_compact` file; reply j of a prompt is its sample j."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
        out = [
            Outcome(pid, task, source, lang, *(bool(bits & b) for b in (1, 2, 4, 8)), validity=valid, sample=j)
            for task, source, lang, pid, replies in data["prompts"]
            for j, (bits, valid) in enumerate(replies)
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a compact outcomes file ({type(exc).__name__}: {exc})") from None
    return out, data.get("meta") or {}

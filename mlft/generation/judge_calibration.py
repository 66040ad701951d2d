"""Calibrating a judge of "does the reply answer?" on a labelled set, and writing the result with the model it was
fitted on (`mlft build judge calibrate` / `mlft build judge check`).

A labelled set is JSONL rows {"prompt", "reply", "language", "label": "answer" | "not_answer"[, "id", "class"]}
(the shipped one: mlft/resources/labelled.jsonl, 220 hand-labelled replies in 10 languages, 60 answers and
160 non-answers of 11 classes). `load_labelled` refuses a bad row before any model loads.

  fit_pmi     the PMI relevance judge (mlft.generation.relevance) under one model: its PMI for every row, the
              threshold that agrees best with the labels (midpoints between sorted scores; ties: the lower
              threshold), the echo rule as the judge applies it. The result carries the model: the answer terms'
              `threshold` takes the file and refuses it for another `judge_model` (`fitted_threshold`).
  check_llm   an LLM-as-judge (mlft.generation.llm_judge) on the same rows: agreement with the labels, per class
              and per language, the share of verdicts it did not give in the protocol's words, and what always
              saying "not an answer" would agree.
Both report the honest replies' and the non-answers' share called answers (what a reward that trusts the judge
pays each), and the result is written as JSON (`write_result`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from mlft.errors import ConfigError
from mlft.generation.llm_judge import PROTOCOL_VERSION
from mlft.generation.models import load
from mlft.generation.relevance import ECHO_SHARE, echo_share, judge_name, pmi
from mlft.io.jsonl import iter_objects
from mlft.languages import LANGUAGES

LABELS = ("answer", "not_answer")


def load_labelled(path: str | Path) -> list[dict]:
    """The labelled rows of `path`, every one checked (prompt and reply text, a suite language, a label)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"labelled set {path}: no such file")
    rows = []
    for n, row in iter_objects(path):  # a line that is not a JSON object: a DataError naming the file and line
        where = f"labelled set {path}: line {n}"
        for key in ("prompt", "reply"):
            if not isinstance(row.get(key), str):
                raise ConfigError(f"{where}: `{key}` must be text")
        if row.get("language") not in LANGUAGES:
            raise ConfigError(f"{where}: language {row.get('language')!r} is not one of {', '.join(LANGUAGES)}")
        if row.get("label") not in LABELS:
            raise ConfigError(f"{where}: label {row.get('label')!r} is not one of {', '.join(LABELS)}")
        rows.append(row)
    if not rows or len({r["label"] for r in rows}) < 2:
        raise ConfigError(f"labelled set {path}: needs rows of both labels ({', '.join(LABELS)})")
    return rows


def agreement(rows: list[dict], called: list[bool]) -> dict:
    """Agreement of `called` (True: an answer) with the rows' labels, overall, per class and per language; the
    share of answers and of non-answers called answers; and the always-"not an answer" baseline."""
    truth = [r["label"] == "answer" for r in rows]
    by_class: dict[str, list[bool]] = defaultdict(list)
    by_lang: dict[str, list[bool]] = defaultdict(list)
    for r, t, c in zip(rows, truth, called):
        by_class[r.get("class", r["label"])].append(t == c)
        by_lang[r["language"]].append(t == c)
    answers = [c for t, c in zip(truth, called) if t]
    others = [c for t, c in zip(truth, called) if not t]
    return {
        "n": len(rows),
        "agreement": sum(t == c for t, c in zip(truth, called)) / len(rows),
        "always_not_answer": truth.count(False) / len(rows),
        "answers_called_answers": sum(answers) / len(answers),
        "non_answers_called_answers": sum(others) / len(others),
        "per_class": {k: sum(v) / len(v) for k, v in sorted(by_class.items())},
        "per_language": {k: sum(v) / len(v) for k, v in sorted(by_lang.items())},
    }


def best_threshold(scores: list[float | None], truth: list[bool], allowed: list[bool]) -> tuple[float, float]:
    """(threshold, agreement): the threshold on `scores` (None: never an answer; `allowed` False: never an answer,
    the echo rule) agreeing best with `truth`."""
    values = sorted({s for s in scores if s is not None})
    cuts = [values[0] - 1.0] + [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[-1] + 1.0]
    best = (cuts[0], -1.0)
    for cut in cuts:
        called = [s is not None and s >= cut and ok for s, ok in zip(scores, allowed)]
        agree = sum(c == t for c, t in zip(called, truth)) / len(truth)
        if agree > best[1]:
            best = (cut, agree)
    return best


def fit_pmi(model_ref: str | None, rows: list[dict], echo: float | None = None, batch_size: int = 8) -> dict:
    """The PMI judge's threshold under `model_ref` (null: the embedded model) fitted on `rows`, with its
    agreement there (in-sample: a threshold's held-out agreement needs a split, measurements/relevance_judge.py)."""
    echo = ECHO_SHARE if echo is None else echo
    model, tok = load(model_ref, dtype="float32", device="cpu")
    scores = pmi(model, tok, [r["prompt"] for r in rows], [r["reply"] for r in rows], batch_size=batch_size)
    allowed = [echo_share(r["prompt"], r["reply"]) < echo for r in rows]
    truth = [r["label"] == "answer" for r in rows]
    cut, _ = best_threshold(scores, truth, allowed)
    called = [s is not None and s >= cut and ok for s, ok in zip(scores, allowed)]
    return {"judge": "pmi", "model": judge_name(model_ref), "threshold": round(cut, 4), "echo": echo} | agreement(
        rows, called
    )


def check_llm(judge, rows: list[dict]) -> dict:
    """An LLM judge's (`mlft.generation.llm_judge.LlmJudge`) agreement with `rows`' labels."""
    verdicts = judge.judge([r["prompt"] for r in rows], [r["reply"] for r in rows], [r["language"] for r in rows])
    out = {"judge": "llm", "model": judge.model_name, "backend": judge.backend_name, "protocol": PROTOCOL_VERSION}
    out |= agreement(rows, [v.answers for v in verdicts])
    out["unparsed"] = sum(not v.parsed for v in verdicts) / len(verdicts)
    out["said_yes"] = sum(v.answers for v in verdicts) / len(verdicts)
    return out


def write_result(result: dict, path: str | Path, labelled: str | Path) -> Path:
    """`result` with the labelled set's path, as JSON at `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, "labelled": str(labelled)}, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return path

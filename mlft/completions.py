"""Completions files: the arrow between generation and scoring.

Two formats are read:
- the official LCB CSV: columns `id, model, completion, task, source, language`;
- mlft's JSONL, one record per prompt (written incrementally by every backend):

    {"id": "crosslingual/okapi/ko/3", "task": "crosslingual", "source": "okapi", "language": "ko",
     "model": "smollm2-135m-instruct", "completion": "...", "prompt": "...", "messages": [...],
     "prompting": "chat", "decoding": {"temperature": 0.3, "top_p": 0.75, ...},
     "usage": {"prompt_tokens": 41, "completion_tokens": 100}, "finish_reason": "length",
     "seconds": 1.92, "error": null, ...}

  Only id, task, source, language and completion are required; `model` defaults to the file's stem.
  A record whose `error` is set failed to generate: it is kept in the file (so a resumed run can retry
  it) but left out of scoring.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mlft.constants import TASKS
from mlft.errors import ConfigError, DataError
from mlft.io.jsonl import iter_objects
from mlft.languages import LANGUAGES, check_scorable

REQUIRED = ("task", "source", "language", "completion")


@dataclass
class Completion:
    id: str
    model: str
    task: str
    source: str
    language: str
    completion: str
    extra: dict = field(default_factory=dict)  # everything else the record carried

    @property
    def group(self) -> tuple[str, str, str, str]:
        return (self.task, self.model, self.source, self.language)


def _check(rec: dict, where: str, default_model: str) -> Completion:
    for key in REQUIRED:
        if key not in rec:
            raise DataError(f"{where}: missing field {key!r}")
    if rec["language"] not in LANGUAGES:
        try:
            check_scorable(str(rec["language"]), f"{where}: field 'language'")
        except ConfigError as exc:
            raise DataError(str(exc)) from None
    if rec["task"] not in TASKS:
        raise DataError(f"{where}: unknown task {rec['task']!r}; valid: {', '.join(TASKS)}")
    completion = rec["completion"]
    if completion is None:
        completion = ""
    if not isinstance(completion, str):
        raise DataError(f"{where}: field 'completion' must be text, got {type(completion).__name__}")
    extra = {k: v for k, v in rec.items() if k not in (*REQUIRED, "id", "model")}
    return Completion(
        id=str(rec.get("id", "")),
        model=str(rec.get("model") or default_model),
        task=rec["task"],
        source=str(rec["source"]),
        language=rec["language"],
        completion=completion,
        extra=extra,
    )


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start}, line {line})") from None
    if not text.strip():
        raise DataError(f"{path}: file is empty")
    return text


def _iter_csv(path: Path, text: str) -> Iterator[Completion]:
    csv.field_size_limit(1 << 30)
    # universal newlines, like the official script's open(): only \n, \r\n and \r end lines
    reader = csv.DictReader(io.StringIO(text, newline=None))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DataError(
            f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} "
            f"(header: {', '.join(header)}); expected id, model, completion, task, source, language"
        )
    for row in reader:
        # data row n sits on physical line reader.line_num
        yield _check(row, f"{path}: row {reader.line_num - 1} (line {reader.line_num})", path.stem)


def _iter_jsonl(path: Path, text: str) -> Iterator[Completion]:
    for n, rec in iter_objects(path, text):
        if rec.get("error"):
            continue
        yield _check(rec, f"{path}: line {n}", path.stem)


def read_completions(path: str | Path) -> list[Completion]:
    """Read a CSV (official) or JSONL (mlft) completions file, validating every row."""
    path = Path(path)
    text = _read_text(path)
    is_jsonl = path.suffix in (".jsonl", ".json") or text.lstrip().startswith("{")
    rows = list(_iter_jsonl(path, text) if is_jsonl else _iter_csv(path, text))
    if not rows:
        raise DataError(f"{path}: no completions in file")
    return rows


def completions_from_records(records, where: str = "records", default_model: str = "model") -> list[Completion]:
    """Completions from dicts (a DataFrame's records, a program's rows), each validated as a file's rows are; a
    record whose `error` is set is left out, as in a JSONL file."""
    out = []
    for i, rec in enumerate(records, 1):
        if not isinstance(rec, dict):
            raise DataError(f"{where}: record {i}: expected a mapping of fields, got {type(rec).__name__}")
        if not rec.get("error"):
            out.append(_check(rec, f"{where}: record {i}", default_model))
    if not out:
        raise DataError(f"{where}: no completions")
    return out


def write_official_csv(records: list[dict], path: str | Path) -> None:
    """Export to the official CSV format (id, model, completion, task, source, language)."""
    cols = ["id", "model", "completion", "task", "source", "language"]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for rec in records:
            if not rec.get("error"):
                w.writerow({c: rec.get(c, "") for c in cols})

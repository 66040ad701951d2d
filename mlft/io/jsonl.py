"""JSON Lines files that survive crashes: appends are fsynced, a torn last line is repaired, writers are locked.

records = read_jsonl(path)                 # [] when missing; a torn last line is ignored
with JsonlAppender(path) as out:           # takes the file's OutputLock (second writer: OutputLocked)
    out.write(record)                      # one line, flushed and fsynced
    out.write_many(records)                # one block: all of them or (after a crash) none
write_jsonl(path, records)                 # atomic replacement (compaction, whole files)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from mlft.errors import DataError
from mlft.io.locks import OutputLock


def read_jsonl(path: str | Path) -> list[dict]:
    """Records of a JSONL file; [] if it does not exist. A torn *last* line (a crash mid-write) is ignored;
    an invalid line elsewhere is a DataError naming the line."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines):
                break  # interrupted write: that record is regenerated on resume
            raise DataError(f"{path}: line {n}: invalid JSON") from None
    return out


def iter_objects(path: str | Path, text: str | None = None):
    """(line number, object) for every non-empty line of a JSONL file read strictly: an invalid line or one
    that is not a JSON object is a DataError naming the file and line (user input: completions, prompts)."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: line {n}: invalid JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}: line {n}: expected a JSON object")
        yield n, rec


def _dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def repair_tail(path: Path) -> None:
    """Drop a torn last line left by a crash, so appends start on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        data = path.read_bytes()
    with open(path, "r+b") as fh:
        fh.truncate(data.rfind(b"\n") + 1)


class JsonlAppender:
    """Appends records to `path` under its OutputLock; every write is flushed and fsynced."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = OutputLock(self.path).acquire()
        try:
            repair_tail(self.path)
            self._fh = open(self.path, "a", encoding="utf-8")
        except BaseException:
            self._lock.release()
            raise

    def write(self, record: dict) -> None:
        self._sync(_dumps(record))

    def write_many(self, records: Iterable[dict]) -> None:
        block = "".join(_dumps(r) for r in records)
        if block:
            self._sync(block)

    def _sync(self, text: str) -> None:
        self._fh.write(text)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
            self._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def append_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    """Append `records` as one fsynced block (under the file's lock)."""
    with JsonlAppender(path) as out:
        out.write_many(records)


def write_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    """Write a whole file atomically (a temporary file, then os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("".join(_dumps(r) for r in records))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)

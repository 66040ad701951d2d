"""Multisense test sets (PAWS-X, XNLI in en/de/zh) and the authors' stored run files.

Layout of a data folder (the same as `../shared/multisense/`, and what `mlft.benchmarks.multisense.fetch` writes):
`{task}/test-{lang}.tsv` with a header and the columns `id`, the task's two sentence columns, `label`.
Row i of every language is item i (PAWS-X and XNLI are parallel), so items pair up across languages by row.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from mlft import paths
from mlft.benchmarks.multisense.prompts import LANGUAGES, TASKS
from mlft.config import check_choice
from mlft.errors import DataError
from mlft.io.jsonl import iter_objects

ENV_VAR = "MLFT_MULTISENSE_DATA"


@dataclass(frozen=True)
class Item:
    idx: int  # 0-based row in the file (= the item across languages)
    id: str  # PAWS-X id or XNLI row index
    sentences: tuple[str, str]
    label: int


def check_task(task: str, where: str = "task") -> str:
    return check_choice(task, TASKS, "multisense task", where)


def check_language(lang: str, where: str = "language") -> str:
    return check_choice(lang, LANGUAGES, "multisense language", where)


def data_dir(explicit: str | Path | None = None) -> Path:
    """Where the TSVs are: `explicit`, else `$MLFT_MULTISENSE_DATA`, else the cache (after `fetch`), else
    `../shared/multisense` beside the checkout."""
    return paths.data_dir("multisense", ENV_VAR, explicit, lambda d: any((d / t).is_dir() for t in TASKS))


def test_file(task: str, lang: str, folder: str | Path | None = None) -> Path:
    return data_dir(folder) / check_task(task) / f"test-{check_language(lang)}.tsv"


def load_items(task: str, lang: str, folder: str | Path | None = None) -> list[Item]:
    """All test items of `task` in `lang`, in file order; DataError names the file and row on bad input."""
    path = test_file(task, lang, folder)
    if not path.is_file():
        raise DataError(
            f"{path}: multisense test file not found; download the test sets with "
            f"`mlft data multisense` or point {ENV_VAR} (or the suite option data_dir) at a folder "
            f"holding {task}/test-{lang}.tsv"
        )
    keys = TASKS[task].sentence_keys
    labels = TASKS[task].labels
    items = []
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t")
            missing = [c for c in ("id", *keys, "label") if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(f"{path}: missing column(s) {', '.join(missing)} (header: {reader.fieldnames})")
            for row_no, row in enumerate(reader, start=2):
                where = f"{path}, line {row_no}"
                if None in row or any(row[k] is None for k in ("id", *keys, "label")):
                    raise DataError(f"{where}: wrong number of fields")
                try:
                    label = int(row["label"])
                except ValueError:
                    raise DataError(f"{where}: label {row['label']!r} is not an integer") from None
                if label not in labels:
                    raise DataError(f"{where}: label {label} is not one of {list(labels)} for {task}")
                if not all(row[k].strip() for k in keys):
                    raise DataError(f"{where}: empty sentence in column(s) {[k for k in keys if not row[k].strip()]}")
                items.append(Item(len(items), row["id"], (row[keys[0]], row[keys[1]]), label))
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    if not items:
        raise DataError(f"{path}: no rows")
    return items


def read_run(path: str | Path) -> list[dict]:
    """A stored run file (JSONL: idx, id, label, response, standardized, pred), e.g. from `reference/`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: run file not found")

    rows = []
    for line_no, row in iter_objects(path):  # invalid JSON / not an object: DataError naming the line
        for key in ("idx", "label", "pred"):
            if not isinstance(row.get(key), int):
                raise DataError(f"{path}, line {line_no}: field {key!r} missing or not an integer")
        rows.append(row)
    return rows

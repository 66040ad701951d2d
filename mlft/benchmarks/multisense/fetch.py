"""Download the multisense test sets into the cache, in the layout `data.load_items` reads.

Public sources, through the `datasets` client (parquet on the Hugging Face hub):
- PAWS-X: `google-research-datasets/paws-x`, configs en/de/zh, split `test` (2000 rows; id, sentence1,
  sentence2, label) — the split the paper used (HF `paws-x`);
- XNLI: `facebook/xnli`, configs en/de/zh, split `test` (5010 rows; premise, hypothesis, label 0/1/2 =
  entailment/neutral/contradiction). The paper read XGLUE's copy (`xglue/xnli`, a loading script that current
  `datasets` no longer runs); facebook/xnli holds the same test set and is parallel across languages, but its
  row order may differ from XGLUE's, so item indices need not match the authors' stored runs (this matters
  only for replaying their files; a model run pairs languages by row within one download).
"""

from __future__ import annotations

import csv
from pathlib import Path

from mlft.benchmarks.multisense.prompts import LANGUAGES, TASKS
from mlft.errors import DataError
from mlft.paths import cache_dir

SOURCES = {"pawsx": "google-research-datasets/paws-x", "xnli": "facebook/xnli"}


def fetch(tasks=tuple(TASKS), languages=LANGUAGES, dest: Path | None = None, progress: bool = True) -> list[Path]:
    """Write `{dest}/{task}/test-{lang}.tsv` for each task and language; returns the files written."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise DataError(
            "fetching the multisense test sets needs the `datasets` package: pip install datasets"
        ) from None
    dest = Path(dest) if dest else cache_dir() / "multisense"
    written = []
    for task in tasks:
        keys = TASKS[task].sentence_keys
        for lang in languages:
            try:
                ds = load_dataset(SOURCES[task], lang, split="test")
            except Exception as exc:  # noqa: BLE001 - network, hub or cache problems: all reported the same way
                raise DataError(f"could not download {SOURCES[task]} ({lang}, test): {exc}") from None
            path = dest / task / f"test-{lang}.tsv"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tsv.tmp")
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
                writer.writerow(["id", *keys, "label"])
                for i, row in enumerate(ds):
                    writer.writerow([row.get("id", i), row[keys[0]], row[keys[1]], row["label"]])
            tmp.replace(path)
            written.append(path)
            if progress:
                print(f"wrote {path} ({len(ds)} rows)")
    return written

"""Polyglot-or-Not fact-completion data (Schott, Furman & Bhat, 2023): one parquet file per language.

Columns (strings): dataset_id, stem, true, false, relation (+ subject, object, unused: score with `true`).
`false` holds one or more counterfactuals separated by " <br> ". A translated stem may hold per-entity variants,
also " <br> "-separated: variant 0 goes with `true`, variant k with the k-th false answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from mlft import paths
from mlft.config import check_choice
from mlft.errors import DataError

LANGUAGES = (
    "bg",
    "ca",
    "cs",
    "da",
    "de",
    "en",
    "es",
    "fr",
    "hr",
    "hu",
    "it",
    "nl",
    "pl",
    "pt",
    "ro",
    "ru",
    "sl",
    "sr",
    "sv",
    "uk",
)
SEPARATOR = " <br> "
COLUMNS = ("dataset_id", "stem", "true", "false", "relation")
ENV_VAR = "MLFT_POLYGLOT_DATA"


@dataclass(frozen=True)
class Fact:
    dataset_id: str
    relation: str
    true: str
    false: tuple[str, ...]
    true_stem: str  # the stem the true answer is scored after
    false_stems: tuple[str, ...]  # the stem for each false answer (same index)


def check_language(lang: str, where: str = "language") -> str:
    return check_choice(lang, LANGUAGES, "Polyglot-or-Not language", where)


def data_dir(explicit: str | Path | None = None) -> Path:
    """`explicit`, else `$MLFT_POLYGLOT_DATA`, else the cache (after `fetch`), else `../shared/polyglot`."""
    return paths.data_dir("polyglot", ENV_VAR, explicit, lambda d: any(d.glob("*.parquet")))


def parse_row(row: dict, where: str) -> Fact:
    """One parquet row -> Fact; DataError naming `where` (file and row) when the row is malformed."""
    for col in COLUMNS:
        if not isinstance(row.get(col), str) or not row[col].strip():
            raise DataError(f"{where}: column {col!r} is empty or not a string")
    false = tuple(f.strip() for f in row["false"].split(SEPARATOR))
    if any(not f for f in false):
        raise DataError(f"{where}: empty counterfactual in false={row['false']!r}")
    stem = row["stem"]
    variants = tuple(stem.split(SEPARATOR))
    if len(variants) == 1:
        true_stem, false_stems = stem, (stem,) * len(false)
    elif len(variants) == 1 + len(false):
        true_stem, false_stems = variants[0], variants[1:]
    else:
        raise DataError(
            f"{where}: stem has {len(variants)} ' <br> ' variants but there are {len(false)} false "
            f"answers (expected 1 or {1 + len(false)} variants): {stem!r}"
        )
    if any(not s.strip() for s in (true_stem, *false_stems)):
        raise DataError(f"{where}: empty stem variant in {stem!r}")
    if any(s != s.rstrip() for s in (true_stem, *false_stems)):
        raise DataError(f"{where}: stem ends with whitespace (the scorer appends nothing): {stem!r}")
    return Fact(row["dataset_id"], row["relation"], row["true"].strip(), false, true_stem, tuple(false_stems))


def load_facts(lang: str, folder: str | Path | None = None, sample: int | None = None, seed: int = 0) -> list[Fact]:
    """Facts of one language in file order; `sample` keeps a seeded random subset (in file order)."""
    import pyarrow.parquet as pq

    path = data_dir(folder) / f"{check_language(lang)}.parquet"
    if not path.is_file():
        raise DataError(
            f"{path}: Polyglot-or-Not file not found; download the data with `mlft data polyglot` "
            f"or point {ENV_VAR} (or the suite option data_dir) at a folder holding {lang}.parquet"
        )
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for corrupt files
        raise DataError(f"{path}: cannot read parquet ({exc})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)} (has {', '.join(table.column_names)})")
    rows = table.select(list(COLUMNS)).to_pylist()
    indices = range(len(rows))
    if sample is not None and sample < len(rows):
        indices = sorted(random.Random(f"{seed}:{lang}").sample(indices, sample))
    return [parse_row(rows[i], f"{path}, row {i}") for i in indices]

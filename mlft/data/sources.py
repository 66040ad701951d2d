"""Read one mix source into a Pool: per-row languages plus lazy access to normalised examples.

hub    datasets.load_dataset(path, subset, split=..., revision=...) — the real Hugging Face Hub code; with a
       `parallel:` block, one configuration per language, turned into cross-lingual rows (mlft/data/parallel_corpus.py)
local  datasets.load_dataset("json" | "parquet" | "csv", data_files=path)
seed   mlft's own seed sets (mlft/data/seed.py)
"""

from __future__ import annotations

from mlft.data.language_codes import to_lcb_code
from mlft.data.mix_config import LOCAL_SUFFIXES, SourceConfig
from mlft.data.mix_kinds import mix_kind
from mlft.data.normalize import check_columns, column_map, convert_row
from mlft.data.parallel_corpus import load_parallel_pool
from mlft.data.pool import Pool
from mlft.data.seed import SEED_SETS
from mlft.errors import DataError


def load_pool(src: SourceConfig, wanted: list[str | None], where: str) -> Pool:
    """The rows of `src` (only languages in `wanted` for seed sets, whose rows are built in memory), each converted
    by its row format (validated against the mix's kind by the loader)."""
    if src.type == "seed":
        return _seed_pool(src, [lang for lang in wanted if lang is not None])
    if src.parallel is not None:
        return load_parallel_pool(src, [lang for lang in wanted if lang is not None], where)
    dataset = _load_dataset(src, where)
    cols = column_map(src.format, src.columns)
    check_columns(list(dataset.column_names), src.format, cols, where)
    if src.language:
        languages = [src.language] * len(dataset)
    else:
        if src.language_column not in dataset.column_names:
            raise DataError(
                f"{where}.language_column: column {src.language_column!r} not found; the data has "
                f"{', '.join(dataset.column_names)}"
            )
        languages = [to_lcb_code(v, src.language_map) for v in dataset[src.language_column]]

    def example(k: int) -> tuple[str, dict | None]:
        return f"{src.name}:{k}", convert_row(dataset[k], src.format, cols, src.task)

    return Pool(src.name, languages, example)


def _seed_pool(src: SourceConfig, languages: list[str]) -> Pool:
    seed_set = SEED_SETS[src.path]
    rows, langs = [], []
    for lang in languages:
        for row in seed_set.rows(lang):
            rows.append(row)
            langs.append(lang)

    def example(k: int) -> tuple[str, dict]:
        row = dict(rows[k])
        return f"{src.name}:{langs[k]}:{row.pop('id')}", row

    return Pool(src.name, langs, example)


def _load_dataset(src: SourceConfig, where: str):
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"{where}: reading {src.type} sources needs the `datasets` package (pip install 'mlft[train]')"
        ) from None
    try:
        if src.type == "hub":
            return datasets.load_dataset(src.path, src.subset, split=src.split, revision=src.revision)
        builder = LOCAL_SUFFIXES[src.path[src.path.rfind(".") :].lower()]
        return datasets.load_dataset(builder, data_files=src.path, split="train")
    except Exception as exc:  # noqa: BLE001 - datasets raises many types: report them all
        what = (
            f"hub dataset {src.path!r}"
            + (f" ({src.subset}, split {src.split})" if src.subset else f" (split {src.split})")
            if src.type == "hub"
            else src.path
        )
        raise DataError(f"{where}.path: could not load {what}: {type(exc).__name__}: {exc}") from None


def source_columns(src: SourceConfig, kind: str) -> frozenset[str]:
    """The columns `src`'s rows bring into a mix of `kind` besides source / language / id, known before any data
    loads: a seed set's own keys; else the kind's columns, plus those of roles the source maps (a prompts source's
    `answer`)."""
    if src.type == "seed":
        seed_set = SEED_SETS[src.path]
        rows = seed_set.rows(seed_set.languages[0])
        return frozenset(k for k in (rows[0] if rows else {}) if k != "id")
    return mix_kind(kind).source_columns(src.columns)

"""The types of mix source (`type:` in a mix file), one entry each: how a source of that type is checked before any
data loads, read into a Pool (per-row languages plus lazy access to normalised examples), which languages it holds
by default and which columns its rows bring.

hub    datasets.load_dataset(path, subset, split=..., revision=...) — the real Hugging Face Hub code; with a
       `parallel:` block, one configuration per language, turned into cross-lingual rows (mlft/data/parallel_corpus.py)
local  datasets.load_dataset("json" | "parquet" | "csv", data_files=path)
seed   mlft's own seed sets (mlft/data/seed.py)

The mix loader and the mixer ask the entry and test no type's name, as they do for mix kinds (mlft.data.mix_kinds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlft.config import did_you_mean
from mlft.data.language_codes import to_lcb_code
from mlft.data.mix_kinds import mix_kind
from mlft.data.normalize import FORMATS, check_columns, column_map, convert_row
from mlft.data.parallel_corpus import load_parallel_pool, subset_languages, validate_parallel
from mlft.data.pool import Pool
from mlft.data.seed import SEED_SETS
from mlft.errors import ConfigError, DataError
from mlft.languages import check_language

LOCAL_SUFFIXES = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


@dataclass(frozen=True)
class SourceType:
    """One type of mix source."""

    name: str
    help: str  # the mix file's `type:` help
    check: Callable[[SourceConfig, str, str, Path], None]  # (src, mix kind, where, base dir), before any data loads
    load: Callable[[SourceConfig, list[str | None], str], Pool]  # (src, wanted languages, where)
    languages: Callable[[SourceConfig], list[str | None]]  # its languages when it names none (None: each row's own)
    columns: Callable[[SourceConfig, str], frozenset[str]]  # (src, mix kind): its rows' columns, known before loading
    parallel: bool = False  # may take a `parallel:` block (cross-lingual rows from a parallel dataset)


def source_type(name: str, where: str = "type") -> SourceType:
    """The entry of source type `name`; a ConfigError naming `where` (the file and field) for an unknown one."""
    try:
        return SOURCE_TYPES[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"{where}: {name!r} is not a source type{did_you_mean(str(name), SOURCE_TYPES)}; "
            f"valid: {', '.join(SOURCE_TYPES)}"
        ) from None


def load_pool(src: SourceConfig, wanted: list[str | None], where: str) -> Pool:
    """The rows of `src` (only languages in `wanted` where the rows are built in memory: seed sets, parallel
    sources), each converted by its row format (validated against the mix's kind by the loader)."""
    return SOURCE_TYPES[src.type].load(src, wanted, where)


def source_columns(src: SourceConfig, kind: str) -> frozenset[str]:
    """The columns `src`'s rows bring into a mix of `kind` besides source / language / id, known before any data
    loads: a seed set's own keys; else the kind's columns, plus those of roles the source maps (a prompts source's
    `answer`)."""
    return SOURCE_TYPES[src.type].columns(src, kind)


# --- rows read with `datasets` (hub, local) ------------------------------------------------------------------------


def _check_rows(src: SourceConfig, kind: str, w: str) -> None:
    """A source of dataset rows names their format (one the mix's kind takes), its columns' roles and the rows'
    language."""
    if src.format is None:
        raise ConfigError(f"{w}.format: required for {src.type} sources; one of {', '.join(FORMATS)}")
    if src.format not in FORMATS:
        raise ConfigError(
            f"{w}.format: {src.format!r} is not a row format{did_you_mean(str(src.format), FORMATS)}; "
            f"valid: {', '.join(FORMATS)}"
        )
    formats = mix_kind(kind).formats
    if src.format not in formats:
        raise ConfigError(f"{w}.format: {src.format!r} rows cannot feed a {kind} mix; use {' or '.join(formats)}")
    roles = FORMATS[src.format].roles
    for role in src.columns:
        if role not in roles:
            raise ConfigError(
                f"{w}.columns: unknown role {role!r} for format {src.format!r}"
                f"{did_you_mean(role, roles)}; valid: {', '.join(roles)}"
            )
    if not src.language and not src.language_column:
        raise ConfigError(f"{w}: say which language the rows are in: `language: en` or `language_column: ...`")


def _check_hub(src: SourceConfig, kind: str, w: str, base_dir: Path) -> None:
    if src.parallel is not None:
        validate_parallel(src, kind, w)
    else:
        _check_rows(src, kind, w)


def _check_local(src: SourceConfig, kind: str, w: str, base_dir: Path) -> None:
    """Also resolves the file's path against the mix file's folder."""
    _check_rows(src, kind, w)
    file = Path(src.path) if Path(src.path).is_absolute() else base_dir / src.path
    if not file.is_file():
        raise ConfigError(f"{w}.path: file not found: {file}")
    if file.suffix.lower() not in LOCAL_SUFFIXES:
        raise ConfigError(f"{w}.path: {file.name}: unsupported file type; use {', '.join(LOCAL_SUFFIXES)}")
    src.path = str(file.resolve())


def _datasets(src: SourceConfig, where: str):
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"{where}: reading {src.type} sources needs the `datasets` package (pip install 'mlft[train]')"
        ) from None
    return datasets


def _load_hub(src: SourceConfig, wanted: list[str | None], where: str) -> Pool:
    if src.parallel is not None:
        return load_parallel_pool(src, [lang for lang in wanted if lang is not None], where)
    datasets = _datasets(src, where)
    try:
        dataset = datasets.load_dataset(src.path, src.subset, split=src.split, revision=src.revision)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types: report them all
        what = f"hub dataset {src.path!r}" + (
            f" ({src.subset}, split {src.split})" if src.subset else f" (split {src.split})"
        )
        raise DataError(f"{where}.path: could not load {what}: {type(exc).__name__}: {exc}") from None
    return _rows_pool(src, dataset, where)


def _load_local(src: SourceConfig, wanted: list[str | None], where: str) -> Pool:
    datasets = _datasets(src, where)
    try:
        builder = LOCAL_SUFFIXES[src.path[src.path.rfind(".") :].lower()]
        dataset = datasets.load_dataset(builder, data_files=src.path, split="train")
    except Exception as exc:  # noqa: BLE001 - datasets raises many types: report them all
        raise DataError(f"{where}.path: could not load {src.path}: {type(exc).__name__}: {exc}") from None
    return _rows_pool(src, dataset, where)


def _rows_pool(src: SourceConfig, dataset, where: str) -> Pool:
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


def _rows_columns(src: SourceConfig, kind: str) -> frozenset[str]:
    return mix_kind(kind).source_columns(src.columns)


# --- mlft's seed sets ----------------------------------------------------------------------------------------------


def _check_seed(src: SourceConfig, kind: str, w: str, base_dir: Path) -> None:
    if src.path not in SEED_SETS:
        raise ConfigError(
            f"{w}.path: unknown seed set {src.path!r}{did_you_mean(src.path, SEED_SETS)}; valid: {', '.join(SEED_SETS)}"
        )
    seed_set = SEED_SETS[src.path]
    if seed_set.kind != kind:
        raise ConfigError(f"{w}.path: seed set {src.path!r} holds {seed_set.kind} rows, the mix is kind {kind!r}")
    if src.format or src.columns or src.language_column or src.task:
        raise ConfigError(
            f"{w}: seed sets know their format, task and languages; drop format/columns/language_column/task"
        )
    for lang in src.languages or []:
        check_language(lang, f"{w}.languages")
    missing = [lang for lang in (src.languages or []) if lang not in seed_set.languages]
    if missing:
        raise ConfigError(
            f"{w}.languages: seed set {src.path!r} has no {', '.join(missing)} rows; it has "
            f"{', '.join(seed_set.languages)}"
        )


def _load_seed(src: SourceConfig, wanted: list[str | None], where: str) -> Pool:
    seed_set = SEED_SETS[src.path]
    rows, langs = [], []
    for lang in wanted:
        if lang is None:
            continue
        for row in seed_set.rows(lang):
            rows.append(row)
            langs.append(lang)

    def example(k: int) -> tuple[str, dict]:
        row = dict(rows[k])
        return f"{src.name}:{langs[k]}:{row.pop('id')}", row

    return Pool(src.name, langs, example)


def _seed_columns(src: SourceConfig, kind: str) -> frozenset[str]:
    seed_set = SEED_SETS[src.path]
    rows = seed_set.rows(seed_set.languages[0])
    return frozenset(k for k in (rows[0] if rows else {}) if k != "id")


SOURCE_TYPES: dict[str, SourceType] = {
    t.name: t
    for t in (
        SourceType(
            "hub",
            "a Hugging Face dataset (datasets.load_dataset)",
            _check_hub,
            _load_hub,
            lambda src: list(subset_languages(src).values()) if src.parallel else [None],
            _rows_columns,
            parallel=True,
        ),
        SourceType(
            "local", "a JSON/JSONL/parquet/CSV file", _check_local, _load_local, lambda src: [None], _rows_columns
        ),
        SourceType(
            "seed",
            "one of mlft's own seed sets",
            _check_seed,
            _load_seed,
            lambda src: list(SEED_SETS[src.path].languages),
            _seed_columns,
        ),
    )
}


# ---------------------------------------------------------------- a source as a mix file writes it


@dataclass
class ParallelConfig:
    """A hub dataset with one configuration per language whose rows align by id (mlft/data/parallel_corpus.py)."""

    build: Literal["crosslingual", "crosslingual_pairs"] = field(
        metadata={
            "help": "crosslingual: SFT rows (instruction in A + a request for X -> the reply in X); "
            "crosslingual_pairs: DPO pairs (chosen the reply in X, rejected the reply in A)."
        }
    )
    subsets: list[str] = field(
        metadata={
            "help": "The dataset's configurations to read, one per language; each name is mapped to an LCB code "
            "(ISO codes and English names are understood; the source's `language_map` first)."
        }
    )
    instruction_languages: list[str] = field(
        default_factory=lambda: ["en"],
        metadata={
            "help": "LCB codes of the instruction (and request) language A, chosen per row among these (A != X)."
        },
    )
    id_column: str = field(default="id", metadata={"help": "The column that aligns rows across configurations."})
    skip_language_mentions: bool = field(
        default=True,
        metadata={
            "help": "Skip ids whose English instruction/input names a language or asks for a translation (they "
            "would contradict the request)."
        },
    )


@dataclass
class SourceConfig:
    name: str = field(metadata={"help": "Tag written into every row's `source` column (unique in the mix)."})
    type: str = field(metadata={"help": "; ".join(f"{t.name}: {t.help}" for t in SOURCE_TYPES.values()) + "."})
    path: str = field(
        metadata={
            "help": "hub: dataset id; local: file path (relative to the mix file); seed: set name "
            f"({', '.join(SEED_SETS)})."
        }
    )
    share: float | None = field(
        default=None,
        metadata={"help": "Share of the FINAL mix taken from this source (split equally over a `languages` list)."},
    )
    languages: list[str] | dict[str, float] | None = field(
        default=None,
        metadata={
            "help": "Languages to take: a list (shares split equally) or {code: share of the final mix}. "
            "Default: the seed set's languages, or every row's own language."
        },
    )
    language: str | None = field(
        default=None,
        metadata={"help": "The language of every row (for single-language sources such as an English set)."},
    )
    language_column: str | None = field(
        default=None,
        metadata={
            "help": "Column holding each row's language (ISO 639-1/639-3 codes and English names are understood)."
        },
    )
    language_map: dict[str, str] = field(
        default_factory=dict, metadata={"help": "Extra labels of `language_column` -> LCB code, consulted first."}
    )
    subset: str | None = field(default=None, metadata={"help": "hub: the dataset configuration name."})
    split: str = field(default="train", metadata={"help": "hub: the split to read."})
    revision: str | None = field(default=None, metadata={"help": "hub: a commit/tag to pin."})
    task: Literal["monolingual", "crosslingual"] | None = field(
        default=None,
        metadata={
            "help": "prompts mixes: the task of every row (cross-lingual: the prompt asks for a reply in `language`), "
            "unless the `task` column says; default monolingual."
        },
    )
    format: str | None = field(
        default=None,
        metadata={"help": f"Row format ({', '.join(FORMATS)}; see mlft/data/normalize.py); seed sets know their own."},
    )
    columns: dict[str, str] = field(
        default_factory=dict, metadata={"help": "Format role -> column name, e.g. {prompt: inputs, response: targets}."}
    )
    allow_replacement: bool = field(
        default=False,
        metadata={
            "help": "Reuse rows when a (source, language) cell needs more rows than it has (otherwise an error)."
        },
    )
    parallel: ParallelConfig | None = field(
        default=None,
        metadata={
            "help": "hub: build cross-lingual rows from a parallel dataset (one configuration per language, rows "
            "aligned by id); `languages` are then the requested reply languages X."
        },
    )

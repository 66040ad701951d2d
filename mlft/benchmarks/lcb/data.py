"""LCB prompts: load the official test sets by task, source and language, with cross-lingual metadata."""

from __future__ import annotations

import csv
import io
import random
import zipfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from mlft.benchmarks.lcb.fetch import locate_test_sets
from mlft.constants import TASKS
from mlft.errors import ConfigError, DataError
from mlft.io.jsonl import iter_objects
from mlft.languages import LANGUAGES, check_scorable

# folder name in the archive -> the `source` value its rows (and the released outputs) carry
SOURCES: dict[str, dict[str, str]] = {
    "monolingual": {
        "aya": "aya_human_annotated",
        "dolly": "dolly_human_edited",
        "native": "native_prompts",
        "okapi": "okapi",
    },
    "crosslingual": {"complex_prompts": "complex_prompts", "okapi": "okapi", "sharegpt": "sharegpt"},
}


@dataclass(frozen=True)
class Prompt:
    id: str  # "{task}/{source}/{language}/{row}" — stable across runs
    task: str
    source: str
    language: str
    prompt: str
    location: str | None = None  # cross-lingual: Start / Middle / End
    phrasing: str | None = None  # cross-lingual: e.g. "reply in {language_requested}"

    def to_dict(self) -> dict:
        return asdict(self)


def _source_name(task: str, name: str) -> str:
    """Accept a folder name (aya) or a row value (aya_human_annotated); return the row value."""
    table = SOURCES[task]
    if name in table:
        return table[name]
    if name in table.values():
        return name
    valid = sorted(set(table) | set(table.values()))
    raise ConfigError(f"unknown {task} source {name!r}; valid: {', '.join(valid)}")


class _Archive:
    """Reads `test_sets/{task}/{source}/{lang}.csv` from the zip or an extracted folder."""

    def __init__(self, path: Path):
        self.path = path
        if path.is_dir():
            root = path / "test_sets" if (path / "test_sets").is_dir() else path
            self.files = {str(p.relative_to(root)): p for p in root.glob("*/*/*.csv")}
            self._read = lambda key: self.files[key].read_bytes()
        else:
            try:
                zf = zipfile.ZipFile(path)
            except (zipfile.BadZipFile, OSError) as exc:
                raise DataError(f"{path}: not a readable zip archive ({exc})") from None
            self.files = {n.split("test_sets/", 1)[-1]: n for n in zf.namelist() if n.endswith(".csv")}
            self._read = lambda key: zf.read(self.files[key])
        if not self.files:
            raise DataError(f"{path}: no test_sets/<task>/<source>/<lang>.csv files inside")

    def rows(self, key: str) -> list[dict]:
        try:
            text = self._read(key).decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{self.path}: {key} is not UTF-8") from None
        return list(csv.DictReader(io.StringIO(text)))


def load_prompts(
    tasks: list[str] | None = None,
    sources: list[str] | None = None,
    languages: list[str] | None = None,
    path: str | Path | None = None,
    verify: bool = True,
) -> list[Prompt]:
    """All prompts matching the filters, in a stable order (task, source folder, language, row)."""
    tasks = list(tasks or TASKS)
    for t in tasks:
        if t not in TASKS:
            raise ConfigError(f"unknown task {t!r}; valid: {', '.join(TASKS)}")
    for lang in languages or []:
        if lang not in LANGUAGES:
            raise ConfigError(f"unknown language {lang!r}; valid: {', '.join(sorted(LANGUAGES))}")
    archive = _Archive(locate_test_sets(path, verify=verify))
    prompts: list[Prompt] = []
    for task in tasks:
        wanted = None
        if sources:
            wanted = set()
            for s in sources:
                try:
                    wanted.add(_source_name(task, s))
                except ConfigError:
                    if len(tasks) == 1 or not any(s in SOURCES[t] or s in SOURCES[t].values() for t in tasks):
                        raise
        for folder, source in SOURCES[task].items():
            if wanted is not None and source not in wanted:
                continue
            for lang in sorted(LANGUAGES):
                if languages and lang not in languages:
                    continue
                key = f"{task}/{folder}/{lang}.csv"
                if key not in archive.files:
                    continue
                for i, row in enumerate(archive.rows(key)):
                    if "prompt" not in row:
                        raise DataError(f"{archive.path}: {key} has no 'prompt' column")
                    prompts.append(
                        Prompt(
                            id=f"{task}/{source}/{lang}/{i}",
                            task=task,
                            source=source,
                            language=lang,
                            prompt=row["prompt"],
                            location=row.get("location"),
                            phrasing=row.get("phrasing"),
                        )
                    )
    return prompts


PROMPT_FIELDS = ("id", "prompt", "language")


def load_prompt_file(path: str | Path) -> list[Prompt]:
    """A prompt set of your own: JSONL or CSV with `id, prompt, language` and optional `task` (default
    monolingual), `source` (default: the file's stem), `location`, `phrasing`. Any language the LID model knows
    can be scored. Every bad row is named (file, line/row, field)."""

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: prompt file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc})") from None
    rows: list[tuple[str, dict]] = []
    if path.suffix.lower() in (".jsonl", ".json") or text.lstrip().startswith("{"):
        rows = [(f"line {n}", rec) for n, rec in iter_objects(path, text)]
    else:
        reader = csv.DictReader(io.StringIO(text, newline=None))
        missing = [c for c in PROMPT_FIELDS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(
                f"{path}: missing column(s) {', '.join(missing)} (header: "
                f"{', '.join(reader.fieldnames or [])}); expected id, prompt, language[, task, source]"
            )
        rows = [(f"row {reader.line_num - 1}", dict(r)) for r in reader]
    prompts, seen = [], {}
    for where, rec in rows:
        w = f"{path}: {where}"
        for key in PROMPT_FIELDS:
            if rec.get(key) in (None, ""):
                raise DataError(f"{w}: missing field {key!r}")
        if not isinstance(rec["prompt"], str) or not rec["prompt"].strip():
            raise DataError(f"{w}: field 'prompt' must be non-empty text")
        task = rec.get("task") or "monolingual"
        if task not in TASKS:
            raise DataError(f"{w}: field 'task': unknown task {task!r}; valid: {', '.join(TASKS)}")
        try:
            language = check_scorable(str(rec["language"]), f"{w}: field 'language'")
        except ConfigError as exc:
            raise DataError(str(exc)) from None
        pid = str(rec["id"])
        if pid in seen:
            raise DataError(f"{w}: duplicate id {pid!r} (first at {seen[pid]})")
        seen[pid] = where
        prompts.append(
            Prompt(
                id=pid,
                task=task,
                source=str(rec.get("source") or path.stem),
                language=language,
                prompt=rec["prompt"],
                location=rec.get("location") or None,
                phrasing=rec.get("phrasing") or None,
            )
        )
    if not prompts:
        raise DataError(f"{path}: no prompts in file")
    return prompts


def stratified_sample(prompts: list[Prompt], per_group: int, seed: int = 0) -> list[Prompt]:
    """A seeded sample of at most `per_group` prompts per (task, source, language), order kept."""
    groups: dict[tuple, list[Prompt]] = defaultdict(list)
    for p in prompts:
        groups[(p.task, p.source, p.language)].append(p)
    keep: set[str] = set()
    for key in sorted(groups):
        rng = random.Random(f"{seed}/{'/'.join(key)}")
        members = groups[key]
        keep.update(p.id for p in rng.sample(members, min(per_group, len(members))))
    return [p for p in prompts if p.id in keep]


def sample_per_language(prompts: list[Prompt], n: int, seed: int = 0) -> list[Prompt]:
    """A seeded sample of `n` prompts per (task, language), spread as evenly as possible over the sources that
    have that language (round robin over per-source shuffles), order kept. LCB's languages sit in different
    sources (hi/ru only in dolly, ja/ko only in native, tr only in aya), so this is how a suite gets the same
    number of prompts for every language."""
    by: dict[tuple, dict[str, list[Prompt]]] = defaultdict(lambda: defaultdict(list))
    for p in prompts:
        by[(p.task, p.language)][p.source].append(p)
    keep: set[str] = set()
    for key in sorted(by):
        pools = []
        for source in sorted(by[key]):
            members = list(by[key][source])
            random.Random(f"{seed}/{'/'.join(key)}/{source}").shuffle(members)
            pools.append(members)
        taken, i = 0, 0
        while taken < n and any(pools):
            pool = pools[i % len(pools)]
            if pool:
                keep.add(pool.pop(0).id)
                taken += 1
            i += 1
    return [p for p in prompts if p.id in keep]


def summarize(prompts: list[Prompt]) -> dict[str, dict[str, int]]:
    """task -> source -> count."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in prompts:
        out[p.task][p.source] += 1
    return {t: dict(s) for t, s in out.items()}

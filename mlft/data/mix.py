"""Data mixes: `load_mix` validates a mix file up front; `build_mix` samples the exact mixed dataset.

Order of work in build_mix: load each source -> for every (source, language) cell walk its rows in a seeded
random order, skipping malformed rows and rows matching an LCB test prompt, until the cell's row count is
reached (reusing rows only with `allow_replacement`; rows with LCB's request phrasings are counted, and
dropped with `decontaminate.phrasings: drop`) -> shuffle the whole mix -> write
out_dir/mix/{train.jsonl, stats.json, decontamination.json, mix.yaml}; a prompts mix also writes prompts.jsonl,
its prompts as a prompt file for a base pass with K replies each (`mlft data mix filter`, mlft/training/spread.py).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

import yaml

from mlft.data.decontaminate import DecontaminationReport, build_index
from mlft.data.mix_config import DecontaminationConfig, MixConfig, load_mix, validate
from mlft.data.mix_kinds import mix_kind
from mlft.data.prompt_file import PROMPT_FILE, prompt_rows
from mlft.data.sources import Pool, SourceConfig, load_pool
from mlft.data.stats import mix_stats
from mlft.errors import ConfigError, DataError
from mlft.io.jsonl import write_jsonl

__all__ = ["MixConfig", "SourceConfig", "DecontaminationConfig", "load_mix", "build_mix", "validate"]


def build_mix(mix: MixConfig, out_dir: str | Path, kind: str | None = None, tokenizer=None, progress: bool = True):
    """Build and write the mix; returns a `datasets.Dataset` of rows with `source`, `language` and `id` columns.

    `kind` (sft | dpo), when given, must match the mix's own; `tokenizer` makes stats count its tokens."""
    where = f"{mix.path}: mix"
    entry = mix_kind(mix.kind, f"{where}.kind")
    if kind is not None and kind != mix.kind:
        raise ConfigError(f"{where}.kind: the mix holds {mix.kind} rows but a {kind} run was asked for")
    index = build_index(mix.decontaminate, where)
    report = DecontaminationReport(
        mix.decontaminate.enabled, mix.decontaminate.ngram, index.size if index else 0, mix.decontaminate.phrasings
    )
    counts = mix.counts()
    rows: list[dict] = []
    bar = _progress(len(counts), progress, "mix")
    for i, src in enumerate(mix.sources):
        cells = [(lang, n) for j, lang, n in counts if j == i]
        pool = load_pool(src, [lang for lang, _ in cells], f"{where}.sources[{i}]")
        for lang, n in cells:
            rows += _sample_cell(pool, src, lang, n, mix.seed, index, report, f"{where}.sources[{i}]")
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    if any("answer" in row for row in rows):  # one column for every row (trl passes it to the reward terms)
        for row in rows:
            row.setdefault("answer", None)
    random.Random(f"{mix.seed}/shuffle").shuffle(rows)
    _write(mix, entry.prompt_file, rows, report, Path(out_dir) / "mix", counts, tokenizer)
    import datasets

    return datasets.Dataset.from_list(rows)


def _sample_cell(
    pool: Pool, src: SourceConfig, lang: str | None, n: int, seed: int, index, report: DecontaminationReport, where: str
) -> list[dict]:
    """`n` clean rows of `pool` in language `lang` (None: any LCB language), in a seeded order."""
    if n == 0:
        return []
    candidates = [k for k, code in enumerate(pool.languages) if code is not None and (lang is None or code == lang)]
    random.Random(f"{seed}/{src.name}/{lang}").shuffle(candidates)
    taken: list[dict] = []
    malformed = 0
    for k in candidates:
        row_id, example = pool.example(k)
        if example is None:
            malformed += 1
            continue
        code = pool.languages[k]
        hit = index.match(example) if index else None
        template = index.phrasing(example) if index else None
        if not report.record(src.name, code, row_id, hit, template):
            taken.append({**example, "source": src.name, "language": code, "id": row_id})
            if len(taken) == n:
                return taken
    label = f"language {lang!r}" if lang else "all languages"
    if not taken or not src.allow_replacement:
        dropped = sum(v for (s, lg, _), v in report.dropped.items() if s == src.name and lang in (None, lg))
        raise DataError(
            f"{where} ({src.name}), {label}: {n} rows needed, only {len(taken)} available "
            f"({len(candidates)} rows, {malformed} malformed, {dropped} matching LCB prompts/phrasings); "
            "set `allow_replacement: true` on the source, or lower its share or the mix total"
        )
    rng = random.Random(f"{seed}/{src.name}/{lang}/reuse")
    out = list(taken)
    while len(out) < n:  # whole passes over the pool, so every row is used floor or ceil(n / available) times
        batch = list(taken)
        rng.shuffle(batch)
        out += batch[: n - len(out)]
    return out


def _progress(total: int, enabled: bool, desc: str):
    """One bar for the whole mix (cells of every source), or None."""
    if not enabled or total < 2:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="cell", leave=False)


def _write(
    mix: MixConfig, prompt_file: bool, rows: list[dict], report: DecontaminationReport, out: Path, counts, tokenizer
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "train.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(out / "train.jsonl")
    stats = mix_stats(rows, tokenizer)
    stats["kind"], stats["seed"] = mix.kind, mix.seed
    stats["plan"] = [{"source": mix.sources[i].name, "language": lang or "any", "rows": n} for i, lang, n in counts]
    (out / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "decontamination.json").write_text(
        json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out / "mix.yaml").write_text(yaml.safe_dump(asdict(mix), sort_keys=False, allow_unicode=True), encoding="utf-8")
    listed = prompt_rows(rows) if prompt_file else None
    if listed is not None:  # the prompts as a prompt file (`mlft eval --prompts`), each id once
        write_jsonl(out / PROMPT_FILE, listed)

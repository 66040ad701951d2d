"""The data-mix file: sources, each with an explicit share of the FINAL mix, a total size and a seed.

Share rule (no silent normalisation): the shares of all (source, language) cells must sum to 1 (±1e-6).
A source's share is given by `share:` (split equally over its `languages:` list, if any) or by a
`languages:` mapping whose values are each language's share of the final mix. Row counts are the largest-
remainder apportionment of `total` over the cells, so they always sum to exactly `total`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlft.config import apply_overrides, did_you_mean, from_dict, load_yaml
from mlft.constants import TASKS
from mlft.data.mix_kinds import MIX_KINDS, kinds_help, mix_kind
from mlft.data.sources import SOURCE_TYPES, SourceConfig, source_type
from mlft.errors import ConfigError
from mlft.languages import check_language

SHARE_TOLERANCE = 1e-6


@dataclass
class DecontaminationConfig:
    enabled: bool = field(default=True, metadata={"help": "Drop rows whose prompt matches an LCB test prompt."})
    lcb_path: str | None = field(
        default=None,
        metadata={"help": "LCB test_sets.zip (or folder); default: $MLFT_LCB_DATA, the cache, else a download."},
    )
    ngram: int = field(
        default=13,
        metadata={
            "help": "Drop rows sharing one n-gram of this many units (words; single characters in zh/ja) "
            "with an LCB prompt, besides normalised exact matches."
        },
    )
    tasks: list[str] = field(
        default_factory=lambda: list(TASKS), metadata={"help": "LCB tasks whose prompts are held out."}
    )
    phrasings: Literal["report", "drop"] = field(
        default="report",
        metadata={
            "help": "Rows whose prompt contains one of LCB's eight cross-lingual request templates with a language "
            "name ('reply in Korean', bare 'in Korean'...): count them per source and language in "
            "decontamination.json (report), or also drop them (drop)."
        },
    )


@dataclass
class MixConfig:
    kind: str = field(metadata={"help": kinds_help()})  # one of mlft.data.mix_kinds.MIX_KINDS
    total: int = field(metadata={"help": "Rows in the final mix."})
    sources: list[SourceConfig] = field(metadata={"help": "Where the rows come from and their shares."})
    seed: int = field(default=0, metadata={"help": "Seed of every sampling and shuffling step."})
    decontaminate: DecontaminationConfig = field(
        default_factory=DecontaminationConfig, metadata={"help": "Hold out the LCB test prompts."}
    )
    path: str = field(default="<mix>", metadata={"help": "(set by load_mix) the file this mix came from."})

    def cells(self) -> list[tuple[int, str | None, float]]:
        """(source index, language or None = the rows' own, share of the final mix), in file order."""
        out = []
        for i, src in enumerate(self.sources):
            if isinstance(src.languages, dict):
                out += [(i, lang, share) for lang, share in src.languages.items()]
            else:
                langs = src.languages or _default_languages(src)
                out += [(i, lang, src.share / len(langs)) for lang in langs]
        return out

    def counts(self) -> list[tuple[int, str | None, int]]:
        """Rows per cell: largest remainder of total * share (ties go to the earlier cell); sums to total."""
        cells = self.cells()
        exact = [self.total * share for _, _, share in cells]
        floors = [int(x) for x in exact]
        order = sorted(range(len(cells)), key=lambda k: (-(exact[k] - floors[k]), k))
        for k in order[: self.total - sum(floors)]:
            floors[k] += 1
        return [(i, lang, n) for (i, lang, _), n in zip(cells, floors)]


def _default_languages(src: SourceConfig) -> list[str | None]:
    if src.language:
        return [src.language]
    return SOURCE_TYPES[src.type].languages(src)


def load_mix(path: str | Path, overrides=()) -> MixConfig:
    """Read (with `include:`), apply `key=value` overrides (`total=500`, `seed=1`, `decontaminate.enabled=false`;
    `sources` is a list, so change a source in the file) and validate a mix, before any data is loaded."""
    path = Path(path)
    data = apply_overrides(load_yaml(path, shipped="data_mixes"), list(overrides))
    data["path"] = str(path)
    where = f"{path}: mix"
    mix = from_dict(MixConfig, data, where)
    validate(mix, where, base_dir=path.parent)
    return mix


def validate(mix: MixConfig, where: str, base_dir: Path = Path(".")) -> None:
    """Semantic checks from_dict cannot do; resolves local paths against `base_dir`. Raises ConfigError."""
    mix_kind(mix.kind, f"{where}.kind")
    if mix.total < 1:
        raise ConfigError(f"{where}.total: must be a positive number of rows, got {mix.total}")
    if not mix.sources:
        raise ConfigError(f"{where}.sources: at least one source is needed")
    if mix.decontaminate.ngram < 4:
        raise ConfigError(
            f"{where}.decontaminate.ngram: {mix.decontaminate.ngram} is too short to mean overlap "
            "(use 8 or more; 13 is the usual)"
        )
    for t in mix.decontaminate.tasks:
        if t not in TASKS:
            raise ConfigError(f"{where}.decontaminate.tasks: unknown task {t!r}{did_you_mean(t, TASKS)}")
    names = set()
    for i, src in enumerate(mix.sources):
        w = f"{where}.sources[{i}]"
        if src.name in names:
            raise ConfigError(f"{w}.name: duplicate source name {src.name!r}")
        names.add(src.name)
        _validate_source(src, mix.kind, w, base_dir)
    total_share = sum(share for _, _, share in mix.cells())
    if abs(total_share - 1.0) > SHARE_TOLERANCE:
        listing = ", ".join(f"{s.name}={_source_share(s):g}" for s in mix.sources)
        raise ConfigError(
            f"{where}.sources: shares must sum to 1 (shares of the final mix), got {total_share:g} ({listing})"
        )


def _source_share(src: SourceConfig) -> float:
    return sum(src.languages.values()) if isinstance(src.languages, dict) else (src.share or 0.0)


def _validate_source(src: SourceConfig, kind: str, w: str, base_dir: Path) -> None:
    entry = source_type(src.type, f"{w}.type")
    if src.parallel is not None and not entry.parallel:
        able = " / ".join(f"`type: {t.name}`" for t in SOURCE_TYPES.values() if t.parallel)
        raise ConfigError(f"{w}.parallel: only {able} sources can be parallel (got {src.type!r})")
    entry.check(src, kind, w, base_dir)
    if src.task is not None and not mix_kind(kind).takes_task:
        takers = " / ".join(k.name for k in MIX_KINDS.values() if k.takes_task)
        raise ConfigError(f"{w}.task: only {takers} mixes take a task (the mix is kind {kind!r})")
    if src.language:
        check_language(src.language, f"{w}.language")
        if src.language_column:
            raise ConfigError(f"{w}: give either `language` or `language_column`, not both")
    for label, code in src.language_map.items():
        check_language(code, f"{w}.language_map.{label}")
    langs = src.languages
    if isinstance(langs, dict):
        for lang, share in langs.items():
            check_language(lang, f"{w}.languages")
            if share <= 0:
                raise ConfigError(f"{w}.languages.{lang}: share must be > 0, got {share}")
        if src.share is not None and abs(src.share - sum(langs.values())) > SHARE_TOLERANCE:
            raise ConfigError(
                f"{w}.share: {src.share:g} differs from the sum of its languages' shares "
                f"({sum(langs.values()):g}); give one or the other"
            )
    else:
        if src.share is None:
            raise ConfigError(f"{w}.share: required (or give `languages` as a mapping of shares)")
        if src.share <= 0:
            raise ConfigError(f"{w}.share: must be > 0, got {src.share}")
        for lang in langs or []:
            check_language(lang, f"{w}.languages")
        if langs is not None and len(set(langs)) != len(langs):
            raise ConfigError(f"{w}.languages: listed twice: {sorted({x for x in langs if langs.count(x) > 1})}")
    chosen = list(langs) if langs else []
    if src.language and any(lang != src.language for lang in chosen):
        raise ConfigError(f"{w}.languages: the rows are all {src.language!r} (`language`), cannot take {chosen}")

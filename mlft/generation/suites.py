"""Eval suites: YAML files in eval/ saying what to generate and score (with `include:` for shared parts).

    load_suite("lcb_quick")                      # a file stem in eval/, or a path
    load_suite("decoding_sweep", ["per_group=2"])

Everything is validated here, before any model is loaded: unknown keys (with a "did you mean"), unknown
tasks, sources and languages, bad decoding values, and the options of non-LCB kinds (checked by their
module, see mlft.evals.EVAL_KINDS).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mlft.config import apply_overrides, did_you_mean, from_dict, load_yaml
from mlft.errors import ConfigError
from mlft.evals import EVAL_KINDS
from mlft.generation.decoding import Decoding
from mlft.generation.prompting import Prompting
from mlft.languages import check_language
from mlft.lcb.data import SOURCES, TASKS
from mlft.paths import project_root

SUITE_DIR = project_root() / "eval"


@dataclass
class Variant:
    name: str = field(metadata={"help": "row label in the report (e.g. 'T=0.3', '5-shot')"})
    decoding: dict = field(default_factory=dict, metadata={"help": "decoding keys overriding the suite's"})
    prompting: dict = field(default_factory=dict, metadata={"help": "prompting keys overriding the suite's"})


@dataclass
class EvalSuite:
    name: str = field(default="", metadata={"help": "suite name (defaults to the file stem)"})
    description: str = field(default="", metadata={"help": "one line shown in reports"})
    kind: Literal["lcb", "multisense", "polyglot"] = field(default="lcb", metadata={
        "help": "lcb: generate + LPR/WPR/LCPR; other kinds run their module in mlft.evals"})
    tasks: list[str] = field(default_factory=lambda: list(TASKS), metadata={"help": "LCB tasks"})
    sources: list[str] | None = field(default=None, metadata={"help": "LCB sources (null = all)"})
    languages: list[str] | None = field(default=None, metadata={"help": "language codes (null = all 15)"})
    per_group: int | None = field(default=None, metadata={
        "help": "seeded stratified sample: at most this many prompts per (task, source, language); null = all"})
    seed: int = field(default=0, metadata={"help": "seed of the stratified sample"})
    data: str | None = field(default=None, metadata={
        "help": "LCB test_sets.zip or folder (null: $MLFT_LCB_DATA, the cache, else download)"})
    decoding: Decoding = field(default_factory=Decoding, metadata={"help": "decoding settings (paper defaults)"})
    prompting: Prompting = field(default_factory=Prompting, metadata={"help": "chat / qa / raw, few-shot"})
    variants: list[Variant] = field(default_factory=list, metadata={
        "help": "sweep rows: each overrides decoding/prompting keys; empty = one run"})
    batch_size: int = field(default=16, metadata={"help": "prompts per generate call (hf) / chunk (openai)"})
    token_stats: bool = field(default=False, metadata={
        "help": "record per-token entropy and nucleus size (hf) and report confusion points (paper Table 7)"})
    options: dict[str, Any] = field(default_factory=dict, metadata={"help": "options of a non-lcb kind"})
    source_file: str | None = field(default=None, metadata={"help": "(set by load_suite)"})
    options_obj: Any = field(default=None, init=False, repr=False)

    def runs(self) -> list[tuple[str, Decoding, Prompting]]:
        """(variant name, decoding, prompting) per row; one 'default' row when there are no variants."""
        if not self.variants:
            return [("default", self.decoding, self.prompting)]
        where = self.source_file or self.name
        out = []
        for i, v in enumerate(self.variants):
            dec = from_dict(Decoding, {**dataclasses.asdict(self.decoding), **v.decoding},
                            f"{where}: variants[{i}].decoding")
            pro = from_dict(Prompting, {**dataclasses.asdict(self.prompting), **v.prompting},
                            f"{where}: variants[{i}].prompting")
            out.append((v.name, dec, pro))
        return out


def suite_path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"{path}: suite file not found")
        return path
    cand = SUITE_DIR / f"{name_or_path}.yaml"
    if not cand.is_file():
        names = available_suites()
        raise ConfigError(f"unknown eval suite {str(name_or_path)!r}{did_you_mean(str(name_or_path), names)}; "
                          f"available in {SUITE_DIR}: {', '.join(names)} (or give a path to a .yaml file)")
    return cand


def available_suites() -> list[str]:
    return sorted(p.stem for p in SUITE_DIR.glob("*.yaml") if not p.stem.startswith("_"))


def validate_suite(suite: EvalSuite, where: str) -> None:
    for i, t in enumerate(suite.tasks):
        if t not in TASKS:
            raise ConfigError(f"{where}: tasks[{i}]: unknown task {t!r}{did_you_mean(t, TASKS)}; "
                              f"valid: {', '.join(TASKS)}")
    for i, lang in enumerate(suite.languages or []):
        check_language(lang, f"{where}: languages[{i}]")
    valid_sources = {s for t in suite.tasks for pair in SOURCES[t].items() for s in pair}
    for i, s in enumerate(suite.sources or []):
        if s not in valid_sources:
            raise ConfigError(f"{where}: sources[{i}]: unknown source {s!r}{did_you_mean(s, valid_sources)}; "
                              f"valid for {', '.join(suite.tasks)}: {', '.join(sorted(valid_sources))}")
    if suite.per_group is not None and suite.per_group < 1:
        raise ConfigError(f"{where}: per_group: must be >= 1 or null, got {suite.per_group}")
    if suite.batch_size < 1:
        raise ConfigError(f"{where}: batch_size: must be >= 1, got {suite.batch_size}")
    names = [name for name, _, _ in suite.runs()]  # validates every variant's decoding/prompting
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: variants: names must be unique, got {names}")
    if suite.token_stats and any(d.num_beams > 1 for _, d, _ in suite.runs()):
        raise ConfigError(f"{where}: token_stats needs num_beams=1 in every variant")
    if suite.kind != "lcb":
        try:
            module = importlib.import_module(EVAL_KINDS[suite.kind])
        except ModuleNotFoundError as exc:
            raise ConfigError(f"{where}: kind {suite.kind!r} is not available ({exc})") from None
        suite.options_obj = module.validate(suite.options, f"{where}: options")
    elif suite.options:
        raise ConfigError(f"{where}: options: only used by non-lcb kinds ({', '.join(EVAL_KINDS)})")


def load_suite(name_or_path: str | Path, overrides: list[str] | tuple = ()) -> EvalSuite:
    """Read, merge includes, apply `key=value` overrides and validate an eval suite."""
    path = suite_path(name_or_path)
    data = apply_overrides(load_yaml(path), list(overrides))
    data.setdefault("name", path.stem)
    data["source_file"] = str(path)
    try:
        suite = from_dict(EvalSuite, data, str(path))
        validate_suite(suite, str(path))
    except ConfigError as exc:  # value checks inside Decoding/Prompting do not know the file
        raise ConfigError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
    return suite

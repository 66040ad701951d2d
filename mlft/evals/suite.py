"""Suite files: YAML (in eval/, or any path) saying which kind of evaluation to run and with which options.

    load_suite("lcb_quick")                        # a shipped suite name, or a path to a .yaml
    load_suite("decoding_sweep", ["per_group=2"])  # key=value overrides (text, as typed by a user)
    load_suite("lcb_quick", settings={"decoding": {"max_new_tokens": 20}})  # typed values (flags), over both

A suite has three envelope keys — `name` (default: the file stem), `description`, `kind` (default `lcb`) —
and the options of its kind at the top level (`include:` pulls in shared parts, e.g. `_lcb_base.yaml`).
Everything is validated here, before any model is loaded: unknown keys (with a "did you mean"), unknown
tasks, sources, languages, interventions, bad decoding values, missing data.

Suite names are looked up as: an explicit path, then `eval/<name>.yaml` under the current directory, then
the suites shipped with mlft (mlft.paths.resource_dirs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlft.config import apply_overrides, deep_merge, did_you_mean, from_dict, load_yaml
from mlft.errors import ConfigError
from mlft.evals.registry import get_kind
from mlft.paths import find_resource, resource_dirs

log = logging.getLogger(__name__)
SUITE_FOLDER = "eval"


@dataclass
class EvalSuite:
    name: str
    kind: str
    options: Any  # the kind's options dataclass
    description: str = ""
    source_file: str | None = None
    overrides: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)  # typed values set over the file and the overrides (flags)

    def to_dict(self) -> dict:
        import dataclasses

        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "source_file": self.source_file,
            "overrides": list(self.overrides),
            **({"settings": self.settings} if self.settings else {}),
            **dataclasses.asdict(self.options),
        }


def available_suites() -> list[str]:
    names = set()
    for folder in resource_dirs(SUITE_FOLDER):
        names.update(p.stem for p in folder.glob("*.yaml") if not p.stem.startswith("_"))
    return sorted(names)


def suite_path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"{path}: suite file not found")
        return path
    found = find_resource(SUITE_FOLDER, f"{name_or_path}.yaml")
    if found is None:
        names = available_suites()
        raise ConfigError(
            f"unknown eval suite {str(name_or_path)!r}{did_you_mean(str(name_or_path), names)}; "
            f"available: {', '.join(names)} (or give a path to a .yaml file)"
        )
    return found


def build_suite(data: dict, where: str, overrides: list[str] | tuple = ()) -> EvalSuite:
    """Validate a suite mapping (already merged and overridden) into an EvalSuite."""
    data = dict(data)
    kind_name = data.pop("kind", "lcb")
    kind = get_kind(kind_name, f"{where}: kind")
    name = data.pop("name", "") or Path(where).stem
    description = data.pop("description", "")
    source_file = data.pop("source_file", None)
    if kind_name != "lcb" and isinstance(data.get("options"), dict):  # the pre-0.2 layout: options: {...}
        log.warning("%s: `options:` is no longer needed: put the %s options at the top level", where, kind_name)
        data = {**data.pop("options"), **data}
    options = from_dict(kind.options, data, where)
    kind.validate(options, where)
    return EvalSuite(
        name=name,
        kind=kind_name,
        options=options,
        description=description,
        source_file=source_file,
        overrides=list(overrides),
    )


def load_suite(name_or_path: str | Path, overrides: list[str] | tuple = (), settings: dict | None = None) -> EvalSuite:
    """Read, merge includes, apply `key=value` overrides, then the typed `settings` (e.g. the command line's flags:
    {"decoding": {"max_new_tokens": 20}, "prompts": "my.jsonl"}), and validate an eval suite."""
    path = suite_path(name_or_path)
    data = deep_merge(apply_overrides(load_yaml(path, shipped=SUITE_FOLDER), list(overrides)), dict(settings or {}))
    data.setdefault("name", path.stem)
    data["source_file"] = str(path)
    try:
        suite = build_suite(data, str(path), overrides)
        suite.settings = dict(settings or {})
        return suite
    except ConfigError as exc:  # value checks inside nested dataclasses do not know the file
        raise ConfigError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None

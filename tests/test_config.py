"""YAML include / overrides / validation shared by recipes, suites and mixes."""

from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest

from mlft.config import apply_overrides, from_dict, load_yaml
from mlft.errors import ConfigError


@dataclass
class Inner:
    rate: float = 0.1


@dataclass
class Cfg:
    name: str
    steps: int = 1
    mode: Literal["sft", "dpo"] = "sft"
    langs: list[str] = field(default_factory=list)
    inner: Inner = field(default_factory=Inner)
    note: Optional[str] = None


def test_include_and_overrides(tmp_path):
    (tmp_path / "base.yaml").write_text("name: base\nsteps: 3\ninner: {rate: 0.5}\n")
    (tmp_path / "top.yaml").write_text("include: base.yaml\nname: top\n")
    data = apply_overrides(load_yaml(tmp_path / "top.yaml"), ["steps=7", "inner.rate=1e-4", "langs=[de,fr]"])
    cfg = from_dict(Cfg, data, "top.yaml")
    assert cfg == Cfg(name="top", steps=7, langs=["de", "fr"], inner=Inner(rate=1e-4))


def test_errors_name_file_and_key(tmp_path):
    with pytest.raises(ConfigError, match=r"top.yaml: unknown key 'stpes' \(did you mean 'steps'\?\)"):
        from_dict(Cfg, {"name": "x", "stpes": 2}, "top.yaml")
    with pytest.raises(ConfigError, match=r"top.yaml.steps: expected int"):
        from_dict(Cfg, {"name": "x", "steps": "many"}, "top.yaml")
    with pytest.raises(ConfigError, match=r"top.yaml.mode: 'ppo' is not one of"):
        from_dict(Cfg, {"name": "x", "mode": "ppo"}, "top.yaml")
    with pytest.raises(ConfigError, match="missing required key"):
        from_dict(Cfg, {}, "top.yaml")
    (tmp_path / "a.yaml").write_text("include: b.yaml\n")
    (tmp_path / "b.yaml").write_text("include: a.yaml\n")
    with pytest.raises(ConfigError, match="include cycle"):
        load_yaml(tmp_path / "a.yaml")
    with pytest.raises(ConfigError, match="file not found"):
        load_yaml(tmp_path / "missing.yaml")

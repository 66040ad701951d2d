"""YAML include / overrides / validation shared by recipes, suites and mixes."""

from dataclasses import dataclass, field
from typing import Literal

import pytest

from mlft.config import apply_overrides, coerce, from_dict, load_yaml
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
    note: str | None = None


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


def test_user_suite_includes_a_shipped_suite_by_name(tmp_path, monkeypatch):
    """A suite file in any folder can `include: lcb_tiny` (name, `.yaml` optional): the shipped suite is found
    after the including file's own folder; a misspelt name names both places and suggests the shipped one."""
    from mlft.evals.suite import load_suite

    monkeypatch.chdir(tmp_path)  # no eval/ here: only mlft's shipped copy can supply lcb_tiny
    shipped = load_suite("lcb_tiny")
    (tmp_path / "mine.yaml").write_text("include: lcb_tiny\nper_group: 3\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "two.yaml").write_text("include: [lcb_tiny.yaml]\n")
    mine = load_suite(str(tmp_path / "mine.yaml"))
    assert mine.kind == shipped.kind == "lcb" and mine.name == "mine"
    assert mine.options.per_group == 3 and shipped.options.per_group == 1
    assert mine.options.languages == shipped.options.languages and mine.options.tasks == shipped.options.tasks
    assert load_suite(str(tmp_path / "sub" / "two.yaml")).options == shipped.options
    (tmp_path / "bad.yaml").write_text("include: lcb_tiyn\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: include lcb_tiyn: file not found .*did you mean 'lcb_tiny'"):
        load_suite(str(tmp_path / "bad.yaml"))
    # a file beside the including one wins over the shipped suite of the same name
    (tmp_path / "lcb_tiny.yaml").write_text("include: lcb_quick\n")
    beside = load_suite(str(tmp_path / "mine.yaml")).options
    assert beside.per_group == 3 and beside.languages != shipped.options.languages
    # without a shipped folder (plain load_yaml) an include is a path relative to the file, as before
    with pytest.raises(ConfigError, match="file not found"):
        load_yaml(tmp_path / "mine.yaml")


def test_user_recipe_includes_a_shipped_base_by_its_path(tmp_path, monkeypatch):
    """A recipe outside the checkout includes `cpu/_sft.yaml` from the shipped recipes/ and equals the shipped
    recipe that does the same from beside it."""
    from mlft.paths import find_resource
    from mlft.training.recipe import load_recipe

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(
        "include: cpu/_sft.yaml\nmix: data_mixes/cpu/crosslingual_sft.yaml\nrun_dir: runs/cpu/crosslingual_sft\n"
    )
    mine = load_recipe(tmp_path / "mine.yaml")
    shipped = load_recipe(find_resource("recipes", "cpu/crosslingual_sft.yaml"))
    assert (mine.trainer, mine.model, mine.lora, mine.training_args) == (
        shipped.trainer,
        shipped.model,
        shipped.lora,
        shipped.training_args,
    )
    assert mine.trainer == "sft" and mine.lora.enabled


def test_coerce_is_public_for_values_typed_by_other_annotations():
    """`coerce` (what from_dict does per field) on annotations that are not mlft's: trl's config fields in
    training/recipe.py."""
    assert coerce("1e-4", float, "lr") == 1e-4 and coerce(3, float, "lr") == 3.0
    assert coerce({"rate": 2}, Inner | None, "x") == Inner(rate=2.0) and coerce(None, Inner | None, "x") is None
    assert coerce([1, 2], list[int], "ids") == [1, 2]
    with pytest.raises(ConfigError, match=r"training_args\.max_steps: expected int, got True"):
        coerce(True, int, "training_args.max_steps")
    with pytest.raises(ConfigError, match=r"mode: 'sfft' is not one of \['sft', 'dpo'\].*did you mean 'sft'"):
        coerce("sfft", Literal["sft", "dpo"], "mode")

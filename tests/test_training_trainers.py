"""The trainer table (mlft.training.trainers): each entry agrees with the installed trl, and the recipe loader and
`mlft train` ask the entry (no code tests a trainer's name)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from mlft.data.mix_kinds import MIX_KINDS
from mlft.errors import ConfigError
from mlft.training.recipe import Recipe
from mlft.training.trainers import MANAGED_ARGS, TRAINERS, trainer_entry

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", list(TRAINERS))
def test_entry_matches_installed_trl(name):
    entry = TRAINERS[name]
    fields = {f.name for f in dataclasses.fields(entry.config())}
    assert entry.config().__name__ == entry.config_class and entry.trainer().__name__ == entry.trainer_class
    assert set(entry.managed()) - {"push_to_hub"} <= fields | {"output_dir"}  # mlft manages fields that exist
    assert set(MANAGED_ARGS) <= set(entry.managed())
    if entry.reference == "beta":
        assert "beta" in fields
    if entry.padding_free:
        assert "padding_free" in fields
    if entry.rewards:
        assert {"reward_weights", "use_vllm"} <= fields and entry.columns is None  # reward terms get every column
    kind = MIX_KINDS[entry.mix_kind]  # the mix kind it trains on is an entry of the mix kinds' table
    assert entry.columns is None or set(entry.columns) <= kind.columns  # and its rows carry the columns kept


def test_recipe_trainer_values_are_the_table():
    from typing import get_args, get_type_hints

    assert get_args(get_type_hints(Recipe)["trainer"]) == tuple(TRAINERS)
    with pytest.raises(ConfigError, match=r"'spf' is not one of .*did you mean 'sft'"):
        trainer_entry("spf")


def test_needs_reference():
    class Config:
        beta = 0.0

    assert not TRAINERS["sft"].needs_reference(Config()) and TRAINERS["dpo"].needs_reference(Config())
    assert not TRAINERS["grpo"].needs_reference(Config())
    Config.beta = 0.04
    assert TRAINERS["grpo"].needs_reference(Config())


def test_no_trainer_name_is_tested_in_training_code():
    """Adding a trainer is one entry in trainers.py: recipe.py and train.py ask the entry."""
    names = "|".join(TRAINERS)
    for path in ("mlft/training/recipe.py", "mlft/training/train.py"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not re.findall(rf"trainer\s*(==|!=|in)\s|[\"'](?:{names})[\"']\s*:", text), path


@pytest.mark.parametrize("recipe_file", ["english_sft", "english_dpo", "grpo_summed_control"])
def test_make_trainer_builds_the_entry_trainer(recipe_file, tmp_path, monkeypatch):
    """`mlft train` builds the entry's trl trainer with the same arguments for every trainer: the reference model
    as `ref_model=` where the trainer takes one, reward terms and their weights where the entry has rewards."""
    from mlft.training import train as train_mod
    from mlft.training.recipe import load_recipe

    recipe = load_recipe(
        ROOT / "recipes/cpu" / f"{recipe_file}.yaml", ["model=smollm2-135m-instruct"], check_linked=False
    )
    built = {}

    class FakeTrainer:
        ref_model = None

        def __init__(self, **kwargs):
            built.update(kwargs)
            self.callbacks = []

        def add_callback(self, cb):
            self.callbacks.append(cb)

    monkeypatch.setattr(type(recipe.entry), "trainer", lambda self: FakeTrainer)
    monkeypatch.setattr(type(recipe.entry), "takes_reference", lambda self: self.reference == "always")
    config = type("Config", (), {"reward_weights": None})()
    ref = object() if recipe.entry.reference == "always" else None
    trainer = train_mod._make_trainer(recipe, "model", ref, "tok", config, "dataset", None, tmp_path)
    assert {"model", "args", "train_dataset", "processing_class", "peft_config"} <= set(built)
    assert ("ref_model" in built) is (ref is not None) and built.get("ref_model") is ref
    assert ("reward_funcs" in built) is recipe.entry.rewards
    if recipe.entry.rewards:
        assert len(built["reward_funcs"]) == len(recipe.rewards) == len(config.reward_weights)
        assert len(trainer.callbacks) == 1  # rewards.jsonl

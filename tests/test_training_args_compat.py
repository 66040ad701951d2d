"""Recipes name activation checkpointing the transformers >= 5.2x way (`activation_checkpointing`); transformers
5.17 (the GPU image's) knows only `gradient_checkpointing`. Found by running the GPU benchmark's smoke test under
transformers 5.17: every GPU recipe failed validation ("unknown SFTConfig field 'activation_checkpointing'")."""

from dataclasses import dataclass

import pytest

from mlft.errors import ConfigError
from mlft.training import recipe as recipe_module
from mlft.training import training_args
from mlft.training.recipe import Recipe
from mlft.training.train import _trainer_config
from mlft.training.training_args import validate_training_args


@dataclass
class OldConfig:
    """The fields that matter of an SFTConfig on transformers 5.17: only the old names."""

    output_dir: str | None = None
    run_name: str | None = None
    bf16: bool = False
    gradient_checkpointing: bool = True  # trl's default
    gradient_checkpointing_kwargs: dict | None = None
    model_init_kwargs: dict | None = None


@pytest.fixture
def old_transformers(monkeypatch):
    for module in (training_args, recipe_module):  # the checks and the Recipe that builds the config
        monkeypatch.setattr(module, "trl_config_class", lambda trainer: OldConfig)


def test_new_names_become_the_old_ones_where_only_those_exist(old_transformers):
    out = validate_training_args(
        {"bf16": True, "activation_checkpointing": True, "activation_checkpointing_kwargs": {"use_reentrant": False}},
        "sft",
        "r.yaml",
    )
    assert out == {
        "bf16": True,
        "gradient_checkpointing": True,
        "gradient_checkpointing_kwargs": {"use_reentrant": False},
    }
    with pytest.raises(ConfigError, match="same setting"):
        validate_training_args({"activation_checkpointing": True, "gradient_checkpointing": False}, "sft", "r.yaml")
    with pytest.raises(ConfigError, match="unknown OldConfig field 'activation_checkpointin'"):
        validate_training_args({"activation_checkpointin": True}, "sft", "r.yaml")


def test_trainer_config_on_old_transformers_keeps_the_old_name(old_transformers, tmp_path):
    recipe = Recipe(
        model="m",
        mix="x.yaml",
        training_args=validate_training_args({"activation_checkpointing": False}, "sft", "r.yaml"),
    )
    config = _trainer_config(recipe, tmp_path)
    assert isinstance(config, OldConfig) and config.gradient_checkpointing is False
    assert _trainer_config(Recipe(model="m", mix="x.yaml"), tmp_path).gradient_checkpointing is True  # trl's


def test_installed_new_names_are_kept():
    from trl import SFTConfig

    if "activation_checkpointing" not in SFTConfig.__dataclass_fields__:
        pytest.skip("transformers < 5.2x installed")
    out = validate_training_args({"activation_checkpointing": True}, "sft", "r.yaml")
    assert out == {"activation_checkpointing": True}

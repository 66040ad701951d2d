"""What a GPU run would find late, refused when the recipe is validated: an in-process evaluation under sharded
weights (ZeRO-3, FSDP), and `mlft train --check` keeping the recipe's dtype."""

from __future__ import annotations

import pytest

from mlft.errors import ConfigError
from mlft.training.launch import sharded_weights
from mlft.training.passes import EvaluationOptions
from mlft.training.recipe import check_sharded_evaluation, load_recipe
from tests.training_helpers import REPO

GPU_RECIPE = "recipes/multilingual_sft.yaml"


@pytest.fixture(autouse=True)
def _offline_lcb(shared, monkeypatch):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    monkeypatch.chdir(REPO)


def test_the_shipped_configs_say_which_shard_the_weights():
    assert sharded_weights("configs/accelerate/zero3.yaml") == "DeepSpeed ZeRO-3"
    assert sharded_weights("configs/accelerate/multinode_zero3.yaml") == "DeepSpeed ZeRO-3"
    assert sharded_weights("configs/accelerate/cpu_zero3.yaml") == "DeepSpeed ZeRO-3"
    for name in ("zero2", "ddp", "single", "multinode_zero2", "cpu_ddp", "cpu_zero2"):
        assert sharded_weights(f"configs/accelerate/{name}.yaml") is None, name


@pytest.mark.parametrize("data_parallel", [True, False])
def test_in_process_always_under_zero3_is_refused_at_validation_naming_the_option(data_parallel):
    """Rank 0 generating through ZeRO-3's hooks alone (and a data-parallel pass: a different number of forwards per
    rank) waits on collectives the other ranks never join, until the group's timeout: refused before any load."""
    overrides = [
        "accelerate_config=configs/accelerate/zero3.yaml",
        "evaluation.in_process=always",
        f"evaluation.data_parallel={str(data_parallel).lower()}",
    ]
    with pytest.raises(ConfigError) as err:
        load_recipe(GPU_RECIPE, overrides)
    message = str(err.value)
    assert "evaluation.in_process: always under DeepSpeed ZeRO-3" in message and "zero3.yaml" in message
    assert "in_process: auto" in message
    assert ("evaluation.data_parallel" in message) is data_parallel
    # auto (the saved checkpoint in a separate process) passes; so does `always` where weights are whole
    assert load_recipe(GPU_RECIPE, overrides[:1] + ["evaluation.in_process=auto"]).evaluation.in_process == "auto"
    kept = load_recipe(GPU_RECIPE, ["accelerate_config=configs/accelerate/zero2.yaml", *overrides[1:]])
    assert kept.evaluation.in_process == "always"


def test_the_training_process_refuses_it_too_when_launched_under_another_config():
    """`accelerate launch --config_file zero3.yaml -m mlft train R` with a recipe naming zero2: train() asks the
    trainer what shards the weights and refuses with the same message before the first step."""
    ev = EvaluationOptions(in_process="always")
    with pytest.raises(ConfigError, match="evaluation.in_process: always under FSDP"):
        check_sharded_evaluation(ev, "FSDP", "r.yaml")
    check_sharded_evaluation(ev, None, "r.yaml")
    check_sharded_evaluation(EvaluationOptions(in_process="auto"), "FSDP", "r.yaml")
    check_sharded_evaluation(EvaluationOptions(in_process="always", enabled=False), "FSDP", "r.yaml")
    source = (REPO / "mlft/training/train.py").read_text(encoding="utf-8")
    assert "check_sharded_evaluation(ev, sharded, recipe.source)" in source


def test_check_keeps_the_recipes_dtype():
    """`mlft train --check` said OK to a recipe whose `model_init_kwargs.dtype` (float32) overrode its `dtype:`
    (bfloat16): the weights loaded in float32 while the chain, card and child evaluations said bfloat16. Now refused
    at load, naming both; and the trl config --check builds (on this CPU machine: bf16 set aside) loads the
    recipe's dtype."""
    from mlft.commands import train as train_command
    from mlft.training import train

    for key in ("dtype", "torch_dtype"):
        with pytest.raises(ConfigError, match=rf"model_init_kwargs.{key}: 'float32' differs from the recipe's dtype"):
            load_recipe(GPU_RECIPE, [f"training_args.model_init_kwargs={{{key}: float32}}"])
    built = []
    original = train._trainer_config

    def spy(*args, **kwargs):
        built.append(original(*args, **kwargs))
        return built[-1]

    for dtype in ("bfloat16", "float32", "float16"):
        recipe = load_recipe(
            GPU_RECIPE,
            [f"dtype={dtype}", f"training_args.model_init_kwargs={{dtype: {dtype}, attn_implementation: sdpa}}"],
        )
        try:
            train._trainer_config = spy
            train_command.check_trainer_config(recipe)
        finally:
            train._trainer_config = original
        assert built[-1].model_init_kwargs["dtype"] == dtype and recipe.dtype == dtype
    assert load_recipe(GPU_RECIPE).dtype == "bfloat16"  # the shipped GPU recipes: bf16 weights (recipes/_base.yaml)

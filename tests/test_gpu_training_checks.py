"""What a GPU run would find late, refused when the recipe is validated: an in-process evaluation under sharded
weights (ZeRO-3, FSDP), and `mlft train --check` keeping the recipe's dtype."""

from __future__ import annotations

import importlib.util

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
    import mlft
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
            mlft.check_recipe(recipe)
        finally:
            train._trainer_config = original
        assert built[-1].model_init_kwargs["dtype"] == dtype and recipe.dtype == dtype
    assert load_recipe(GPU_RECIPE).dtype == "bfloat16"  # the shipped GPU recipes: bf16 weights (recipes/_base.yaml)


# ---------------------------------------------------------------- the memory plan (mlft.training.memory)

_spec = importlib.util.spec_from_file_location("gpu_geometry", REPO / "measurements" / "gpu" / "geometry.py")
_geometry = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_geometry)
SMOLLM2_17B = {"vocab_size": 49152, **_geometry.SMOLLM2_1_7B, "tie_word_embeddings": True}


def test_the_memory_plan_refuses_a_run_that_cannot_fit_the_card_before_any_allocation():
    """SmolLM2-1.7B's geometry, the GPU recipe's shape (bf16, 8 x 2,048 rows, no checkpointing) with a w8a8 variant
    at the end: planned on the meta device (a real fp32 copy would be 6.8 GB; this process grows by far less),
    refused on a 40 GiB card with the numbers, fitting an 80 GiB one under ZeRO-2 ... and the parts add up."""
    import resource

    from transformers import LlamaConfig

    from mlft.training.memory import GIB, check_fits, plan_memory

    config = LlamaConfig(**SMOLLM2_17B)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    plan = plan_memory(config, dtype="bfloat16", rows=8, max_length=2048, zero_stage=2, quantized=("w8a8",))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    assert grown_mib < 500, grown_mib  # nothing of 1.7 B parameters was allocated
    assert plan.parameters == 1_711_376_384
    n = plan.parameters
    assert plan.parts["weights"] == 2 * n and plan.parts["gradients"] == 2 * n
    assert plan.parts["optimizer"] == 12 * n  # fp32 Adam moments + DeepSpeed's fp32 master copy
    assert plan.eval_parts["quantized_copy"] == 2 * n  # w8a8 loads a full bf16 copy first
    kv = (32768 + 256 * 100) * 24 * 2 * 32 * 64 * 2
    assert plan.eval_parts["kv_cache"] == kv
    with pytest.raises(ConfigError) as err:
        check_fits(plan, 40 * GIB, "r.yaml", "a 40 GiB card")
    message = str(err.value)
    assert "does not fit a 40 GiB card (40.0 GiB, 38.0 usable)" in message
    assert f"planned peak {plan.peak / GIB:.1f} GiB" in message and "quantized_copy 3.2" in message
    assert "kv_cache 10.7" in message and "optimizer 19.1" in message
    check_fits(plan, 80 * GIB, "r.yaml")  # an H100
    # w8 instead: int8 linear weights, 16-bit embeddings
    w8 = plan_memory(config, dtype="bfloat16", rows=8, max_length=2048, zero_stage=2, quantized=("w8",))
    assert w8.eval_parts["quantized_copy"] < plan.eval_parts["quantized_copy"] / 1.5


def test_train_plans_the_memory_before_loading_anything(monkeypatch):
    """train() checks the plan before the mix and the model are loaded (the check raises; nothing after it runs)."""
    source = (REPO / "mlft/training/train.py").read_text(encoding="utf-8")
    body = source[source.index("def _train(") :]
    assert body.index("check_memory(") < body.index("_load_dataset(") < body.index("_model_and_tokenizer(")


@pytest.mark.slow
def test_a_quantized_pass_records_its_weights_format_not_the_embeddings_dtype(embedded_model, tmp_path):
    """The completions of a w8 / w4 pass said `dtype: float32` (on a GPU: bfloat16): the hf backend read the first
    parameter, the 16/32-bit embeddings bitsandbytes leaves alone. They now record the quantized linear weights'
    format, so a quantized variant is told apart from the model it was made from."""
    pytest.importorskip("bitsandbytes")
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.interventions.quantize import load_quantized

    model, tok = embedded_model
    assert HFBackend(model, tok).placement["dtype"] == "float32"
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    for scheme, fmt in (("w8", "int8"), ("w4", "nf4")):
        quantized, qtok = load_quantized(tmp_path, scheme)
        assert str(next(quantized.parameters()).dtype) == "torch.float32"  # what was recorded before
        assert HFBackend(quantized, qtok).placement == {"device": "cpu", "dtype": fmt}

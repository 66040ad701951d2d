"""The GPU recipes (recipes/*.yaml, not cpu/) resolve to the values they pass to trl (handbook-style: bf16 weights
under DeepSpeed, no activation checkpointing at 8 x 2048, padding-free SFT rows and Liger kernels where
installed, a parallel dataset map), and padding-free rows on sdpa / eager attention are refused at
`mlft train --check`: trl joins a batch's rows into one and sdpa then attends through a dense L x L mask."""

from __future__ import annotations

import importlib.util

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.training import train as train_mod
from mlft.training import training_args
from mlft.training.recipe import load_recipe
from mlft.training.train import _trainer_config
from tests.training_helpers import REPO

GPU_RECIPES = sorted(p for p in (REPO / "recipes").glob("*.yaml") if not p.name.startswith("_"))


@pytest.fixture(autouse=True)
def _offline_lcb(shared, monkeypatch):
    import transformers.training_args as ta

    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(ta, "is_torch_bf16_gpu_available", lambda: True)  # the configs are built, not run, here


def _resolved(path, tmp_path, extra=()):
    overrides = ["model=smollm2-135m-instruct"] if "dpo" in path.stem else []  # DPO starts from the SFT output
    recipe = load_recipe(path, [*overrides, f"run_dir={tmp_path / path.stem}", *extra])
    return recipe, _trainer_config(recipe, tmp_path / path.stem, world_size=8)


@pytest.fixture
def gpu_machine(monkeypatch):
    """A GPU machine with flash-attn and liger-kernel installed (as the attention / kernel probes see it)."""
    monkeypatch.setattr(training_args, "default_attention", lambda: "flash_attention_2")
    monkeypatch.setattr(train_mod, "default_attention", lambda: "flash_attention_2")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "liger_kernel" else real(name, *a)
    )


def test_gpu_recipes_pass_handbook_values_to_trl(tmp_path):
    """On this machine (no GPU, no flash-attn, no liger-kernel): sdpa, so padding-free stays off."""
    assert len(GPU_RECIPES) == 9  # + grpo_verifiable.yaml (GRPO over verifiable prompts)
    for path in GPU_RECIPES:
        recipe, config = _resolved(path, tmp_path)
        assert config.model_init_kwargs == {"dtype": "bfloat16", "attn_implementation": "sdpa"}, path
        assert recipe.accelerate_config.endswith("configs/accelerate/zero2.yaml")  # DeepSpeed: fp32 master weights
        assert config.bf16 is True
        if recipe.trainer == "grpo":  # online RL: rollouts, not a tokenised mix (no max_length, no packing)
            assert type(config).__name__ == "GRPOConfig"
            assert config.activation_checkpointing is True  # memory: the colocated vLLM engine and 16 x 8 rollouts
            assert config.num_generations == 8 and config.max_completion_length == 256 and config.beta == 0.04
            continue
        sft = recipe.trainer == "sft"
        assert type(config).__name__ == ("SFTConfig" if sft else "DPOConfig")
        assert config.activation_checkpointing is False
        assert config.per_device_train_batch_size == 8 and config.gradient_accumulation_steps == 4  # 256 / (8 x 8)
        assert config.dataset_num_proc == 8 and config.use_liger_kernel is False
        assert config.padding_free is False
        assert config.max_length == (2048 if sft else 1024)
        if sft:
            assert config.packing is False and config.assistant_only_loss is True
        else:
            assert config.precompute_ref_log_probs is True


def test_gpu_recipes_on_a_gpu_with_flash_attn_and_liger(tmp_path, gpu_machine):
    for path in GPU_RECIPES:
        recipe, config = _resolved(path, tmp_path)
        assert config.model_init_kwargs["attn_implementation"] == "flash_attention_2"
        if recipe.trainer == "grpo":
            continue
        assert config.use_liger_kernel is True
        assert config.padding_free is (recipe.trainer == "sft")  # trl's DPOTrainer turns padding_free off
        assert recipe.training_args.get("padding_free", False) is config.padding_free  # resolved into the recipe


@pytest.mark.parametrize(
    "extra, message",
    [
        (["training_args.padding_free=true"], r"padding_free with attn_implementation 'sdpa'.*dense L x L"),
        (["training_args.packing=true"], r"packing \(bfd strategy: padding-free\) with attn_implementation 'sdpa'"),
        (
            ["training_args.padding_free=true", "training_args.model_init_kwargs.attn_implementation=eager"],
            r"attn_implementation 'eager'",
        ),
        (["training_args.padding_free=maybe"], r"padding_free: true, false or auto, got 'maybe'"),
    ],
)
def test_padding_free_rows_on_dense_attention_are_refused_at_check(extra, message, capsys):
    with pytest.raises(ConfigError, match=message):
        load_recipe(REPO / "recipes/english_sft.yaml", extra)
    assert main(["train", "--check", "recipes/english_sft.yaml", *extra]) != 0
    assert "dense L x L" in capsys.readouterr().err or "maybe" in extra[0]


def test_varlen_or_wrapped_packing_passes_check():
    ok = [
        ["training_args.packing=true", "training_args.packing_strategy=wrapped"],
        ["training_args.padding_free=true", "training_args.model_init_kwargs.attn_implementation=flex_attention"],
    ]
    for extra in ok:
        assert main(["train", "--check", "recipes/english_sft.yaml", *extra]) == 0
    with pytest.raises(ConfigError, match="DPOTrainer turns padding_free off"):
        load_recipe(
            REPO / "recipes/english_dpo.yaml", ["model=smollm2-135m-instruct", "training_args.padding_free=true"]
        )


def _mask_widths(config, embedded_model) -> list[int]:
    """Train one step of trl's SFTTrainer with `config` on 16 rows of 20-40 tokens; the key widths of the attention
    masks the first layer's attention sees."""
    from datasets import Dataset
    from trl import SFTTrainer

    model, tok = embedded_model
    rows = [{"text": " ".join(["word"] * n)} for n in (20, 25, 30, 35, 40, 22, 28, 33) * 2]
    widths: list[int] = []

    def spy(_module, args, kwargs):
        mask = kwargs.get("attention_mask")
        widths.append(mask.shape[-1] if mask is not None else kwargs["hidden_states"].shape[1])

    handle = model.model.layers[0].self_attn.register_forward_pre_hook(spy, with_kwargs=True)
    state, was_training = {k: v.clone() for k, v in model.state_dict().items()}, model.training
    try:
        SFTTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=tok).train()
    finally:  # the session's shared model goes back as it came: weights and mode (later tests assert eval mode)
        handle.remove()
        model.load_state_dict(state)
        model.train(was_training)
    return widths


def test_no_attention_mask_wider_than_max_length_in_a_packed_step(tmp_path, embedded_model):
    from trl import SFTConfig

    common = {
        "output_dir": str(tmp_path / "out"),
        "max_steps": 1,
        "per_device_train_batch_size": 8,
        "max_length": 64,
        "use_cpu": True,
        "bf16": False,
        "report_to": "none",
        "save_strategy": "no",
        "activation_checkpointing": False,
        "dataset_num_proc": None,
        "model_init_kwargs": None,
    }
    # what mlft lets through on sdpa: packing into rows of max_length (wrapped), no joined row
    args = training_args.resolve_auto_args(
        {"packing": True, "packing_strategy": "wrapped", "padding_free": "auto"}, "sft", "r.yaml"
    )
    training_args.check_joined_rows(args, "sft", "r.yaml")
    widths = _mask_widths(SFTConfig(**common, **args), embedded_model)
    assert widths and max(widths) <= 64
    # what it refuses: trl's padding-free row on sdpa attends over all 8 packed rows at once (the spy sees it)
    with pytest.raises(ConfigError):
        training_args.check_joined_rows({"packing": True}, "sft", "r.yaml")
    joined = _mask_widths(SFTConfig(**common, packing=True), embedded_model)  # bfd: trl turns padding-free on
    assert max(joined) > 3 * 64

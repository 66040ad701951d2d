"""Saved runs reload to exactly the model that was trained, also chained runs and after moving the run directory.

Four kinds (and GRPO on the LoRA SFT adapter), 2 optimizer steps each with a checkpoint after each step, trained
in-process: full SFT, LoRA SFT,
DPO (LoRA) on the LoRA SFT adapter, DPO (LoRA) on the full SFT model. A callback captures the live model's
logits on a fixed prompt at every save (eval mode); `final/` and `checkpoints/checkpoint-1`, reloaded through
mlft.generation.models.load, must give the same logits — before and after `shutil.move` of the run directory
into a folder where its parent run is not beside it (the parent is moved away too).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from mlft.generation.models import CHAIN_FILE, CHAIN_SENTINEL, load, resolve
from mlft.training import chain
from mlft.training.recipe import load_recipe
from mlft.training.train import train
from tests.training_helpers import REPO

pytestmark = pytest.mark.slow
SFT, DPO = REPO / "recipes/cpu/multilingual_sft.yaml", REPO / "recipes/cpu/multilingual_dpo.yaml"
FAST = [
    "training_args.max_steps=2",
    "training_args.save_steps=1",
    "training_args.logging_steps=1",
    "training_args.per_device_train_batch_size=2",
    "training_args.max_length=96",
    "training_args.warmup_steps=0",
    "mix_overrides=[total=8]",
    "evaluation.enabled=false",
]
# fp32 logits (|logit| up to ~40): merging a LoRA into W rounds; measured up to 1.4e-4 against the live unmerged
# model. A model saved as root base + this run's adapter (no SFT weights) is off by orders more.
ATOL = 5e-4


class Capture(TrainerCallback):
    """Logits of the live model on one prompt at every checkpoint save (eval mode, train mode restored)."""

    def __init__(self, ids):
        self.ids = ids
        self.logits: dict[int, torch.Tensor] = {}

    def on_save(self, args, state, control, model=None, **kwargs):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            self.logits[state.global_step] = model(input_ids=self.ids).logits.float().clone()
        model.train(was_training)


@pytest.fixture(scope="module")
def prompt_ids(shared):  # shared: the mixes decontaminate against LCB's test sets (skipped without them)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve(None).path)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Réponds en français : quelle est la capitale de l'Italie ?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    return tok(text, return_tensors="pt").input_ids


def _train(recipe: Path, run_dir: Path, ids, *overrides: str) -> dict[int, torch.Tensor]:
    capture = Capture(ids)
    train(load_recipe(recipe, [*FAST, f"run_dir={run_dir}", *overrides]), progress=False, callbacks=[capture])
    assert sorted(capture.logits) == [1, 2]
    return capture.logits


def _logits(ref: Path | str, ids) -> torch.Tensor:
    model, _ = load(str(ref))
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def _check_reload(run_dir: Path, live: dict, ids) -> None:
    for folder, step in (("final", 2), ("checkpoints/checkpoint-1", 1)):
        torch.testing.assert_close(
            _logits(run_dir / folder, ids), live[step], atol=ATOL, rtol=0, msg=lambda m, f=folder: f"{run_dir / f}: {m}"
        )


def _check_portable(run_dir: Path) -> None:
    """No saved adapter names an absolute path (the embedded model's cache folder, the parent run) as its base."""
    cache = resolve(None).path
    for config in run_dir.rglob("adapter_config.json"):
        base = json.loads(config.read_text())["base_model_name_or_path"]
        assert base in ("smollm2-135m-instruct", CHAIN_SENTINEL), f"{config}: {base}"
        assert cache not in (config.parent / "README.md").read_text(), config.parent / "README.md"
    for spec_file in run_dir.rglob(CHAIN_FILE):
        spec = json.loads(spec_file.read_text())
        paths = [*spec["merge"], *([spec["base"]["path"]] if "path" in spec["base"] else [])]
        assert paths and not any(Path(p).is_absolute() for p in paths), spec_file


def _move(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(src), str(dst))
    return dst


@pytest.fixture(scope="module")
def lora_sft(tmp_path_factory, prompt_ids):
    run_dir = tmp_path_factory.mktemp("lora") / "sft"
    live = _train(SFT, run_dir, prompt_ids, "training_args.learning_rate=1e-3")
    return {"run_dir": run_dir, "live": live}


@pytest.fixture(scope="module")
def full_sft(tmp_path_factory, prompt_ids):
    run_dir = tmp_path_factory.mktemp("full") / "sft"
    live = _train(
        SFT,
        run_dir,
        prompt_ids,
        "lora.enabled=false",
        "training_args.learning_rate=1e-5",
        "training_args.save_only_model=true",
    )
    return {"run_dir": run_dir, "live": live}


def test_full_sft_reloads_and_moves(full_sft, prompt_ids, tmp_path):
    run_dir, live = full_sft["run_dir"], full_sft["live"]
    assert (run_dir / "final" / "model.safetensors").is_file() and not (run_dir / "final_adapter").exists()
    info = chain.read(run_dir)
    assert info["base"] == {"ref": "smollm2-135m-instruct"} and info["merge"] == [] and not info["chained"]
    _check_reload(run_dir, live, prompt_ids)
    full_sft["run_dir"] = _move(run_dir, tmp_path / "elsewhere" / "full_sft")
    _check_reload(full_sft["run_dir"], live, prompt_ids)


def test_lora_sft_reloads_and_moves(lora_sft, prompt_ids, tmp_path):
    run_dir, live = lora_sft["run_dir"], lora_sft["live"]
    assert (run_dir / "final" / "adapter_config.json").is_file() and not chain.read(run_dir)["chained"]
    assert not (run_dir / "final" / CHAIN_FILE).exists()  # base only: plain peft can load it from the base name
    _check_portable(run_dir)
    _check_reload(run_dir, live, prompt_ids)
    lora_sft["run_dir"] = _move(run_dir, tmp_path / "elsewhere" / "lora_sft")
    _check_reload(lora_sft["run_dir"], live, prompt_ids)


def _dpo_on(parent: dict, prompt_ids, tmp_path: Path, resume: bool = False) -> Path:
    """Train DPO on `parent`'s final/, check it in place (`resume`: also resumed from checkpoint-1), then move it
    (and the parent elsewhere) and check again."""
    run_dir = tmp_path / "runs" / "dpo"
    overrides = [f"model={parent['run_dir'] / 'final'}", "training_args.learning_rate=1e-3"]
    live = _train(DPO, run_dir, prompt_ids, *overrides)
    if resume:  # the trainer resumes from a chained checkpoint (portable adapter_config + mlft_chain.json)
        for name in ("complete", "final", "final_adapter", "checkpoints/checkpoint-2"):
            shutil.rmtree(run_dir / name) if (run_dir / name).is_dir() else (run_dir / name).unlink()
        capture = Capture(prompt_ids)
        train(load_recipe(DPO, [*FAST, f"run_dir={run_dir}", *overrides]), progress=False, callbacks=[capture])
        assert json.loads((run_dir / "complete").read_text())["resumed_from"].endswith("checkpoint-1")
        assert sorted(capture.logits) == [2]
        live = {1: live[1], 2: capture.logits[2]}
    # the chain matters: base + this adapter without the parent's weights is far off
    assert (_without_chain(run_dir / "checkpoints" / "checkpoint-1", prompt_ids) - live[1]).abs().max() > 100 * ATOL
    info = chain.read(run_dir)
    assert info["chained"] and info["method"] == "lora" and info["trainer"] == "dpo"
    assert [e.get("run") for e in info["lineage"]] == [None, "sft", "dpo"]
    assert info["lineage"][1]["output"] == "final" and info["lineage"][1]["global_step"] == 2
    assert (run_dir / "final" / "model.safetensors").is_file() and not (
        run_dir / "final" / "adapter_config.json"
    ).exists(), "a chained LoRA run's final/ holds merged full weights"
    _check_portable(run_dir)
    _check_reload(run_dir, live, prompt_ids)
    torch.testing.assert_close(_logits(run_dir / "final_adapter", prompt_ids), live[2], atol=ATOL, rtol=0)
    # plain peft fails loudly on a chained checkpoint instead of loading base + DPO adapter
    from peft import AutoPeftModelForCausalLM

    with pytest.raises(OSError, match="mlft-chain"):
        AutoPeftModelForCausalLM.from_pretrained(str(run_dir / "checkpoints" / "checkpoint-1"))
    parent["run_dir"] = _move(parent["run_dir"], tmp_path / "parent_gone" / parent["run_dir"].name)
    moved = _move(run_dir, tmp_path / "other" / "place" / "dpo")
    _check_reload(moved, live, prompt_ids)
    # evaluate-run's step 0 is the starting model kept in the chain (the parent's final model), not the
    # parent's path that the recipe names (moved away)
    from mlft.commands.evaluate_run import run_recipe

    recipe = run_recipe(moved, [])
    assert Path(recipe.model).is_relative_to(moved)
    torch.testing.assert_close(_logits(recipe.model, prompt_ids), parent["live"][2], atol=ATOL, rtol=0)
    return moved


GRPO = REPO / "recipes/cpu/grpo_summed_control.yaml"
GRPO_FAST = [
    "training_args.max_steps=2",
    "training_args.save_steps=1",
    "training_args.logging_steps=1",
    "training_args.per_device_train_batch_size=4",
    "training_args.num_generations=2",
    "training_args.max_completion_length=8",
    "training_args.warmup_steps=0",
    "training_args.learning_rate=1e-3",
    "mix_overrides=[total=8]",
    "evaluation.enabled=false",
]


def test_grpo_on_lora_sft_adapter(lora_sft, prompt_ids, tmp_path):
    """GRPO (LoRA) on the SFT adapter, as DPO on SFT: the SFT adapter merged into the start, checkpoints and final/
    reload to the live model, and the KL reference is the SFT model (the adapter switched off), not the base."""
    run_dir = tmp_path / "runs" / "grpo"
    capture = Capture(prompt_ids)
    recipe = load_recipe(GRPO, [*GRPO_FAST, f"run_dir={run_dir}", f"model={lora_sft['run_dir'] / 'final'}"])
    train(recipe, progress=False, callbacks=[capture])
    assert sorted(capture.logits) == [1, 2]
    info = chain.read(run_dir)
    assert info["chained"] and info["trainer"] == "grpo" and info["method"] == "lora"
    assert [e.get("run") for e in info["lineage"]][-1] == "grpo"
    assert (run_dir / "final" / "model.safetensors").is_file() and (run_dir / "final_adapter").is_dir()
    _check_portable(run_dir)
    _check_reload(run_dir, capture.logits, prompt_ids)
    assert (
        _without_chain(run_dir / "checkpoints" / "checkpoint-1", prompt_ids) - capture.logits[1]
    ).abs().max() > 100 * ATOL  # the chain matters
    moved = _move(run_dir, tmp_path / "elsewhere" / "grpo")
    _check_reload(moved, capture.logits, prompt_ids)


def _without_chain(adapter: Path, ids) -> torch.Tensor:
    from peft import PeftModel

    model, _ = load("smollm2-135m-instruct")
    model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def test_dpo_on_lora_sft_adapter(lora_sft, prompt_ids, tmp_path):
    moved = _dpo_on(lora_sft, prompt_ids, tmp_path, resume=True)
    info = chain.read(moved)
    assert info["base"] == {"ref": "smollm2-135m-instruct"}
    assert len(info["merge"]) == 1 and re.fullmatch(r"chain/1-\w+-final", info["merge"][0])  # the SFT adapter's copy
    assert (moved / info["merge"][0] / "adapter_model.safetensors").is_file()


def test_dpo_on_full_sft_model(full_sft, prompt_ids, tmp_path):
    moved = _dpo_on(full_sft, prompt_ids, tmp_path)
    info = chain.read(moved)
    assert info["base"] == {"path": "chain/base"} and info["merge"] == []
    assert (moved / "chain" / "base" / "model.safetensors").is_file()


def _random_lora(model, out: Path, seed: int) -> None:
    """Save a LoRA adapter with non-zero random weights for `model` into `out`."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    peft_model = get_peft_model(
        model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM")
    )
    peft_model.save_pretrained(out)
    peft_model.unload()


def test_two_adapters_deep_chain_without_training(prompt_ids, tmp_path):
    """A run on a chained run's checkpoint copies both ancestors in merge order; a legacy adapter (absolute cache
    path as its base, as mlft saved before chains) maps back to the embedded name."""
    from peft import PeftModel

    base, _ = load(None)
    _random_lora(base, tmp_path / "legacy", seed=1)
    assert (
        json.loads((tmp_path / "legacy" / "adapter_config.json").read_text())["base_model_name_or_path"]
        == resolve(None).path
    )
    first = tmp_path / "runs" / "first"
    info = chain.prepare(load_recipe(DPO, [*FAST, f"model={tmp_path / 'legacy'}", f"run_dir={first}"]), first)
    assert info["base"] == {"ref": "smollm2-135m-instruct"} and info["merge"] == ["chain/1-legacy"]
    (first / "recipe.yaml").write_text("trainer: dpo\n")  # enough for the next run's lineage
    ckpt = first / "checkpoints" / "checkpoint-3"
    started, _ = load(chain.start_ref(first, info))
    _random_lora(started, ckpt, seed=2)
    chain.mark_run_adapter(ckpt, first, info)

    second = tmp_path / "runs" / "second"
    info2 = chain.prepare(load_recipe(DPO, [*FAST, f"model={ckpt}", f"run_dir={second}"]), second)
    assert info2["merge"] == ["chain/1-legacy", "chain/2-first-checkpoint-3"]
    assert info2["lineage"][-2]["output"] == "checkpoint-3" and info2["lineage"][-2]["global_step"] == 3
    expected = PeftModel.from_pretrained(
        PeftModel.from_pretrained(load(None)[0], str(tmp_path / "legacy")).merge_and_unload(), str(ckpt)
    ).merge_and_unload()
    with torch.no_grad():
        want = expected(input_ids=prompt_ids).logits
    shutil.rmtree(first)
    shutil.rmtree(tmp_path / "legacy")
    moved = _move(second, tmp_path / "far" / "away")
    torch.testing.assert_close(_logits(chain.start_ref(moved, info2), prompt_ids), want, atol=ATOL, rtol=0)
    # one adapter copied out of its run directory: a clear error, never base + that adapter alone
    from mlft.errors import ModelError

    shutil.copytree(moved / "chain" / "2-first-checkpoint-3", tmp_path / "alone")
    with pytest.raises(ModelError, match="copy or move the whole run directory"):
        resolve(str(tmp_path / "alone"))

"""Run a recipe: build the mix, set up trl's SFTTrainer/DPOTrainer/GRPOTrainer (full or LoRA), train, resume.

Run directory layout (`recipe.run_dir`):
    recipe.yaml          the resolved recipe (after include + overrides)
    mix/                 the exact mixed dataset and its per-source/per-language counts (from build_mix)
    checkpoints/         trainer checkpoints (checkpoint-N/), resumed from automatically
    evals/step-N/VARIANT completions and scores of each eval pass
    curves.jsonl         one row per (step, variant, suite, task, language, metric)
    eval_passes.jsonl    wall time of each eval pass
    rewards.jsonl        GRPO: each logged step's reward, KL and per-term mean/std (mlft.training.rollouts)
    rollouts.jsonl       GRPO: each step's highest- and lowest-reward rollouts, each term's value, LCB's verdict
    chain.json, chain/   the starting model's chain: root base, copies of ancestor adapters (see chain.py)
    chat_template.jinja  the chat template the run trains with (evaluate-run applies it to a base model without one)
    final/               the final model (or LoRA adapter) and tokenizer; merged full weights when the run is a
                         LoRA run on top of other adapters or a local model (its adapter: final_adapter/)
    report.html          the run's report page (curves, every checkpoint's replies; mlft.reports.page)
    complete             JSON marker written last: steps, wall times
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from mlft.console import get_logger, quiet_transformers
from mlft.data.mix import build_mix, load_mix
from mlft.errors import ConfigError
from mlft.generation.models import load, resolve
from mlft.io.jsonl import read_jsonl
from mlft.io.locks import OutputLock
from mlft.provenance import write_results
from mlft.training import chain
from mlft.training.card import push, write_card
from mlft.training.chat_template import base_model_template, training_chat_template
from mlft.training.memory import check_fits, recipe_plan
from mlft.training.passes import RUN_CHAT_TEMPLATE
from mlft.training.recipe import Recipe, accumulation_steps, check_sharded_evaluation, dump_recipe, uses_vllm
from mlft.training.rewards import reward_functions
from mlft.training.rollouts import reward_curve_callback
from mlft.training.training_args import default_attention

COMPLETE = "complete"
CHAT_TEMPLATE = RUN_CHAT_TEMPLATE  # the template the run trained with (read by evaluate-run)
PG_TIMEOUT_MARGIN_S = 600  # the other ranks' wait for an evaluation also covers saving and loading around it
log = get_logger(__name__)


def _check_same_recipe(run_dir: Path, recipe: Recipe) -> None:
    """A run directory belongs to one recipe: resuming with a different one would mix two experiments."""
    saved = run_dir / "recipe.yaml"
    if not saved.is_file():
        return
    old = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    new = recipe.to_dict()
    ignored = {"evaluation", "control"}  # re-evaluating (or re-labelling) differently is fine; training is not
    defaults = {
        f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        for f in dataclasses.fields(Recipe)
    }
    for k in set(new) - set(old):  # a key added to recipes since the run was written: its default is what ran
        if k in defaults and defaults[k] is not dataclasses.MISSING:
            default = defaults[k]
            old[k] = dataclasses.asdict(default) if dataclasses.is_dataclass(default) else default
    diff = sorted(k for k in set(old) | set(new) if k not in ignored and old.get(k) != new.get(k))
    if diff:
        raise ConfigError(
            f"{recipe.source}: run_dir {run_dir} holds a run of a different recipe "
            f"(differs in: {', '.join(diff)}); choose another run_dir or delete it"
        )


def _trainer_config(recipe: Recipe, run_dir: Path, world_size: int | None = None):
    args = dict(recipe.training_args)
    args["output_dir"] = str(run_dir / "checkpoints")
    if any(f.name == "ddp_timeout" for f in dataclasses.fields(recipe.config_class())):
        args["ddp_timeout"] = int(process_group_timeout(recipe))
    if recipe.global_batch_size is not None:
        world = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE", "1") or 1)
        args["gradient_accumulation_steps"] = accumulation_steps(recipe, world, f"{recipe.source}: global_batch_size")
    args.setdefault("run_name", Path(recipe.source).stem or run_dir.name)  # what trackers call the run
    cls = recipe.config_class()
    renamed = any(f.name == "activation_checkpointing" for f in dataclasses.fields(cls))  # transformers >= 5.2x
    if renamed and "activation_checkpointing" not in args:  # trl still defaults the old name to on
        default = next((f.default for f in dataclasses.fields(cls) if f.name == "gradient_checkpointing"), False)
        args["activation_checkpointing"] = args.pop("gradient_checkpointing", default)
        args.pop("gradient_checkpointing_kwargs", None) if "activation_checkpointing_kwargs" in args else None
    kwargs = dict(args.get("model_init_kwargs") or {})
    if recipe.dtype != "auto" or "model_init_kwargs" not in args:
        kwargs["dtype"] = recipe.dtype  # the recipe's (validation refuses a model_init_kwargs dtype that differs)
        kwargs.pop("torch_dtype", None)
    kwargs.setdefault("attn_implementation", default_attention())
    args["model_init_kwargs"] = kwargs
    if recipe.entry.rewards:  # trl's own vLLM rollouts, from the recipe's `generation:`
        args["use_vllm"] = uses_vllm(recipe)
    try:
        config = recipe.config_class()(**args)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{recipe.source}: training_args: {exc}") from None
    _share_checkpointing_kwargs(config)
    return config


def _share_checkpointing_kwargs(config) -> None:
    """One dict under both names of the activation-checkpointing kwargs. transformers 5 reads
    `activation_checkpointing_kwargs`; trl (PEFT + ZeRO-3) writes `use_reentrant=True` into the deprecated
    `gradient_checkpointing_kwargs`, replacing an empty value with a new dict that transformers never reads (the
    reentrant CheckpointError, transformers#47254). A non-empty shared dict is updated in place, so both see it."""
    if not getattr(config, "activation_checkpointing", False):
        return
    kwargs = config.activation_checkpointing_kwargs
    if isinstance(kwargs, str) or (kwargs and config.gradient_checkpointing_kwargs is kwargs):
        return
    kwargs = dict(kwargs or {}) or {"use_reentrant": False}  # torch's recommended default, set explicitly
    config.activation_checkpointing_kwargs = config.gradient_checkpointing_kwargs = kwargs


def process_group_timeout(recipe: Recipe) -> float:
    """Seconds a rank may wait in a collective: the recipe's ddp_timeout (trl's default when unset), raised above
    the evaluation's limit (ranks 1..N-1 wait for rank 0's evaluation pass at a barrier)."""

    default = next((f.default for f in dataclasses.fields(recipe.config_class()) if f.name == "ddp_timeout"), 1800)
    seconds = float(recipe.training_args.get("ddp_timeout") or default)
    if recipe.evaluation.enabled:
        seconds = max(seconds, float(recipe.evaluation.timeout_s) + PG_TIMEOUT_MARGIN_S)
    return seconds


def group_timeout_s() -> float | None:
    """The default process group's timeout as set (None without a group or when torch does not say)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        pg = dist.distributed_c10d._get_default_group()
        device = torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")
        return pg._get_backend(device).options._timeout.total_seconds()
    except Exception:  # noqa: BLE001 — private API: report nothing rather than fail a run
        return None


def _load_dataset(recipe: Recipe, run_dir: Path, state):
    """The mix, built once: rank 0 builds it and writes it into the run directory (mix/train.jsonl and its stats);
    the other ranks read that file (run_dir is on a filesystem every node sees)."""
    import datasets

    mix = load_mix(recipe.mix, list(recipe.mix_overrides))
    if state.is_main_process:
        dataset = build_mix(mix, run_dir, recipe.entry.mix_kind)
    state.wait_for_everyone()
    if not state.is_main_process:
        rows = read_jsonl(run_dir / "mix" / "train.jsonl")
        dataset = datasets.Dataset.from_list(rows)
    keep = recipe.entry.columns  # None: every column (trl passes them to the reward terms as kwargs)
    if keep is None:
        return dataset
    return dataset.remove_columns([c for c in dataset.column_names if c not in keep])


def _model_and_tokenizer(recipe: Recipe, config, start: str):
    """(model, ref_model, tokenizer) for the run's starting model `start` (from its chain: the same model on a
    resume even if `recipe.model` changed since). A path string lets trl load the model itself
    (model_init_kwargs, ZeRO-3 init); a LoRA adapter (e.g. the SFT run's final/ as the base of DPO) is merged
    into its base first. Full-weight DPO on a merged adapter gets that merged model as its reference (trl would
    reload the reference from the config's name: the base, without the adapters)."""
    from transformers import AutoTokenizer

    mref = resolve(start)
    ref_model = None
    if mref.kind == "adapter":
        model, tok = load(mref, dtype=recipe.dtype, device="cpu")  # the trainer places it
        if recipe.entry.needs_reference(config) and not recipe.lora.enabled:
            ref_model, _ = load(mref, dtype=recipe.dtype, device="cpu")
    else:
        model = mref.path
        tok = AutoTokenizer.from_pretrained(mref.path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if recipe.chat_template != "auto":
        tok.chat_template = Path(recipe.chat_template).read_text(encoding="utf-8")
    elif not getattr(tok, "chat_template", None):  # a base model: mlft's ChatML template, turns end at <|im_end|>
        tok.chat_template, end = base_model_template(tok)
        if hasattr(config, "eos_token") and config.eos_token is None:
            config.eos_token = end
    elif getattr(config, "assistant_only_loss", False):  # an SFTConfig field: the loss on the replies only
        template = training_chat_template(tok)
        if template is not None:
            tok.chat_template = template
    return model, ref_model, tok


def _make_trainer(recipe: Recipe, model, ref_model, tok, config, dataset, peft_config, run_dir: Path):
    """The trl trainer of the recipe's entry (mlft.training.trainers). A trainer with rewards (GRPO): the recipe's
    reward terms (mlft.training.rewards, the scorer of `mlft score`) with their weights (writing each step's
    highest- and lowest-reward rollouts to rollouts.jsonl), and a callback writing each logged step's terms to
    rewards.jsonl."""
    entry = recipe.entry
    kwargs = {}
    if entry.rewards:
        kwargs["reward_funcs"], config.reward_weights = reward_functions(
            recipe.rewards, recipe.scorer.scorer(), run_dir=run_dir
        )
    takes_ref = ref_model is not None and entry.takes_reference()
    if takes_ref:
        kwargs["ref_model"] = ref_model
    trainer = entry.trainer()(
        model=model, args=config, train_dataset=dataset, processing_class=tok, peft_config=peft_config, **kwargs
    )
    if ref_model is not None and not takes_ref and getattr(trainer, "ref_model", None) is not None:
        # full-weight GRPO on a merged adapter: trl built its reference from the config's name (the root base,
        # without the adapters); the reference is the starting model
        trainer.ref_model = trainer.accelerator.prepare_model(
            ref_model.to(trainer.accelerator.device), evaluation_mode=True
        )
    if entry.rewards:
        trainer.add_callback(reward_curve_callback(run_dir, recipe.rewards))
    return trainer


def _weights_sharded(trainer) -> str | None:
    """What shards the live model's weights ("FSDP", "DeepSpeed ZeRO-3"), None when each rank holds them whole."""
    if getattr(trainer, "is_fsdp_enabled", False):
        return "FSDP"
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return "DeepSpeed ZeRO-3" if plugin is not None and plugin.zero_stage == 3 else None


def check_memory(recipe: Recipe, start: str, state) -> None:
    """On a GPU: the run's memory plan (mlft.training.memory: training state, the end's quantized copy and the KV
    cache, from the model's config on the meta device) against this card, refused with its numbers before anything
    is allocated. A LoRA adapter start (its base's config) and a machine without CUDA are not planned."""
    import torch

    if not torch.cuda.is_available() or recipe.training_args.get("use_cpu"):
        return
    mref = resolve(start)
    if mref.kind == "adapter":
        return
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(mref.path)
    stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") if os.environ.get("ACCELERATE_USE_DEEPSPEED") else None
    plan = recipe_plan(recipe, config, state.num_processes, int(stage) if stage else None)
    device = torch.device("cuda", torch.cuda.current_device())
    total = torch.cuda.mem_get_info(device)[1]
    check_fits(plan, total, recipe.source, torch.cuda.get_device_name(device))
    if state.is_main_process:
        log.info("mlft train: memory plan %s (card %.1f GiB)", plan.describe(), total / 2**30)


def _save_final(trainer, tok, recipe: Recipe, run_dir: Path, info: dict, state) -> str:
    """final/ (and final_adapter/ for a chained LoRA run: final/ then holds the merged full weights)."""
    merged = recipe.lora.enabled and chain.is_chained(info)
    out = run_dir / ("final_adapter" if merged else "final")
    if state.is_main_process:  # a crash between saving the adapter and merging leaves stale folders
        for name in ("final", "final_adapter", "final.tmp"):
            shutil.rmtree(run_dir / name, ignore_errors=True)
    state.wait_for_everyone()
    trainer.save_model(str(out))
    if state.is_main_process:
        tok.save_pretrained(str(out))
        if recipe.lora.enabled:
            chain.mark_run_adapter(out, run_dir, info)
        if merged:
            chain.write_merged(out, run_dir / "final", recipe.dtype)
    return "merged" if merged else "adapter" if recipe.lora.enabled else "full"


def train(recipe: Recipe, progress: bool = True, callbacks=()) -> Path:
    """Train `recipe` (resuming from its last checkpoint); return the run directory.
    `callbacks`: extra transformers TrainerCallbacks (e.g. to inspect the live model at each save)."""
    from datetime import timedelta

    from accelerate import PartialState

    t0 = time.time()
    run_dir = Path(recipe.run_dir)
    # The process group is created first, with the recipe's timeout raised above the evaluation's: creating the
    # trl config would create it otherwise, and on CPU (use_cpu) transformers passes no timeout at all (1800 s).
    state = PartialState(
        cpu=bool(recipe.training_args.get("use_cpu")), timeout=timedelta(seconds=process_group_timeout(recipe))
    )
    config = _trainer_config(recipe, run_dir)  # validates values too (before any load)
    quiet_transformers()
    if (run_dir / COMPLETE).is_file():
        _check_same_recipe(run_dir, recipe)
        if state.is_main_process:
            log.info("mlft train: %s is already complete (delete %s to train again)", run_dir, run_dir / COMPLETE)
        return run_dir
    lock = OutputLock(run_dir / "checkpoints") if state.is_main_process else None
    if lock is not None:  # a second `mlft train` on the same run directory is refused at once
        lock.acquire()
    try:
        return _train(recipe, run_dir, config, state, progress, callbacks, t0)
    finally:
        if lock is not None:
            lock.release()


def _train(recipe: Recipe, run_dir: Path, config, state, progress: bool, callbacks, t0: float) -> Path:
    from transformers.trainer_utils import get_last_checkpoint

    from mlft.training.callback import EvalCallback

    if state.is_main_process:
        if recipe.control:  # never silently: the run trains on a signal kept to compare against
            log.warning("mlft train: %s is a CONTROL recipe: %s", recipe.source, recipe.control)
        run_dir.mkdir(parents=True, exist_ok=True)
        _check_same_recipe(run_dir, recipe)
        dump_recipe(recipe, run_dir / "recipe.yaml")
        chain.prepare(recipe, run_dir)
    state.wait_for_everyone()
    info = chain.read(run_dir)

    check_memory(recipe, chain.start_ref(run_dir, info), state)  # before the data and the model are loaded
    dataset = _load_dataset(recipe, run_dir, state)
    model, ref_model, tok = _model_and_tokenizer(recipe, config, chain.start_ref(run_dir, info))
    if state.is_main_process and getattr(tok, "chat_template", None):
        (run_dir / CHAT_TEMPLATE).write_text(tok.chat_template, encoding="utf-8")
    if not isinstance(model, str):  # an already-loaded (merged) model: trl would ignore model_init_kwargs, noisily
        config.model_init_kwargs = None
    peft_config = recipe.lora.to_peft() if recipe.lora.enabled else None
    from mlft.training.progress import replace_progress

    trainer = _make_trainer(recipe, model, ref_model, tok, config, dataset, peft_config, run_dir)
    if recipe.lora.enabled:  # before the eval callback, which may load the saved checkpoint
        trainer.add_callback(chain.ChainCallback(run_dir, info))
    ev = recipe.evaluation
    sharded = _weights_sharded(trainer)
    check_sharded_evaluation(ev, sharded, recipe.source)  # launched under another config than the recipe's
    in_process = ev.in_process == "always" or (ev.in_process == "auto" and not sharded)
    callback = EvalCallback(recipe, run_dir, tok, in_process=in_process, progress=progress)
    callback.trainer = trainer
    trainer.add_callback(callback)
    for extra in callbacks:
        trainer.add_callback(extra)
    replace_progress(trainer, run_dir.name, progress)

    ckpt_dir = Path(config.output_dir)
    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    if last and state.is_main_process:
        log.info("mlft train: resuming from %s", last)
    result = trainer.train(resume_from_checkpoint=last)
    final_kind = _save_final(trainer, tok, recipe, run_dir, info, state)
    if state.is_main_process:
        shutil.rmtree(run_dir / "tmp", ignore_errors=True)
        marker = {
            "global_step": trainer.state.global_step,
            "train_runtime_s": result.metrics.get("train_runtime"),
            "train_loss": result.metrics.get("train_loss"),
            "wall_s": round(time.time() - t0, 2),
            "eval_s": round(callback.seconds, 2),
            "world_size": state.num_processes,
            "gradient_accumulation_steps": config.gradient_accumulation_steps,
            "process_group_timeout_s": group_timeout_s(),
            "eval_in_process": in_process,
            "resumed_from": last,
            "final": final_kind,
            "pid": os.getpid(),
        }
        write_results(run_dir, {"recipe": recipe.to_dict()}, t0, time.time() - t0, {"complete": marker})
        (run_dir / COMPLETE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")

        try:
            log.info("mlft train: model card %s", write_card(run_dir))
        except Exception as exc:  # noqa: BLE001 — the trained model is saved; the card can be rebuilt
            log.warning(
                "mlft train: could not write the model card (%s: %s); rebuild it with `mlft show card %s`",
                type(exc).__name__,
                exc,
                run_dir,
            )
        if recipe.push_to_hub:
            log.info(
                "mlft train: pushed final/ to %s (%s)",
                recipe.push_to_hub,
                push(run_dir, recipe.push_to_hub, recipe.hub_private),
            )
        log.info(
            "mlft train: done: %s (step %s, %.0f s, of which eval %.0f s)",
            run_dir,
            marker["global_step"],
            marker["wall_s"],
            marker["eval_s"],
        )
    state.wait_for_everyone()
    return run_dir

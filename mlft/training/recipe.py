"""Training recipes: one flat YAML per experiment (alignment-handbook style), validated before any load.

A recipe names the model, the data mix, the trainer (`sft` | `dpo` | `grpo`), any field of the installed trl
SFTConfig/DPOConfig/GRPOConfig under `training_args:`, the reward terms of a GRPO run (`rewards:`), LoRA options, the
accelerate config to launch with, and the
evaluation block run by the per-checkpoint callback. `include:` pulls in a base recipe; `key=value`
overrides on the command line win over the YAML, which wins over the defaults below.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from mlft.config import apply_overrides, deep_merge, from_dict, load_yaml, parse_overrides
from mlft.console import get_logger, rank
from mlft.data.mix import load_mix
from mlft.data.sources import source_columns
from mlft.errors import ConfigError
from mlft.evals.runner import check_kind_backend
from mlft.generation.backends import (
    able,
    backend_options,
    capabilities,
    check_backend,
    check_interventions,
    option_names,
    vllm_support,
)
from mlft.generation.interventions import build_interventions
from mlft.generation.interventions.quantize import SCHEMES
from mlft.generation.models import EMBEDDED
from mlft.generation.target import Target
from mlft.paths import resolve_path
from mlft.training.launch import read_accelerate_config, sharded_weights
from mlft.training.open_prompts import check_control, check_open_prompt_judge
from mlft.training.passes import EvaluationOptions, load_pass_suite, passes_for
from mlft.training.reward_terms import RewardSpec, ScorerOptions
from mlft.training.rewards import resolve_term, validate_rewards
from mlft.training.trainers import TRAINERS, TrainerEntry, TrainerName, with_rewards
from mlft.training.training_args import check_joined_rows, resolve_auto_args, trl_config_class, validate_training_args

QUANT_VARIANTS = SCHEMES  # the `quantize` intervention's schemes


@dataclass
class LoraOptions:
    enabled: bool = field(default=False, metadata={"help": "Train a LoRA adapter (peft) instead of all weights."})
    r: int = field(default=16, metadata={"help": "LoRA rank."})
    alpha: int = field(default=32, metadata={"help": "LoRA alpha (scaling = alpha / r)."})
    dropout: float = field(default=0.05, metadata={"help": "Dropout on the LoRA branch."})
    target_modules: list[str] | str = field(
        default="all-linear", metadata={"help": "Modules to adapt: a list of names or 'all-linear'."}
    )

    def to_peft(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=self.target_modules,
            task_type="CAUSAL_LM",
        )


@dataclass
class Recipe:
    model: str = field(
        metadata={
            "help": "Model to train: 'smollm2-135m-instruct' (embedded), a local folder (full model or LoRA "
            "adapter, e.g. the SFT run's final/: copied into the run's chain/, see chain.json), or a hub id "
            "like HuggingFaceTB/SmolLM2-1.7B."
        }
    )
    mix: str = field(metadata={"help": "Data mix YAML (data_mixes/*.yaml), relative to cwd or the project."})
    trainer: TrainerName = field(
        default="sft",
        metadata={
            "help": "trl trainer: sft | dpo | grpo (online RL on a `kind: prompts` mix with the `rewards:` terms)."
        },
    )
    mix_overrides: list[str] = field(default_factory=list, metadata={"help": "key=value overrides for the mix."})
    run_dir: str | None = field(
        default=None,
        metadata={
            "help": "Run directory (recipe copy, mix stats, checkpoints/, curves.jsonl, complete). "
            "Default: runs/<recipe file stem>."
        },
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = field(
        default="auto", metadata={"help": "Weights dtype when loading the model."}
    )
    chat_template: str = field(
        default="auto",
        metadata={
            "help": "Training chat template: 'auto' (the model's own: as is if it has {% generation %} markers, "
            "else trl's patched one or mlft's twin; a model without one gets mlft's ChatML template, turns ending at "
            "<|im_end|>) or a .jinja path."
        },
    )
    accelerate_config: str | None = field(
        default=None,
        metadata={
            "help": "configs/accelerate/*.yaml to launch with: `mlft train` re-launches itself through "
            "`accelerate launch --config_file` when not already launched."
        },
    )
    training_args: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "Any field of the installed trl SFTConfig / DPOConfig / GRPOConfig (checked by name and type)."
        },
    )
    rewards: list[RewardSpec] = field(
        default_factory=list,
        metadata={
            "help": "trainer grpo: the reward terms [{name, weight, options}] (mlft.training.rewards.REWARDS: "
            "language, "
            "words, validity, degeneracy, or 'module:function'), computed by the scorer of `mlft score`."
        },
    )
    scorer: ScorerOptions = field(
        default_factory=ScorerOptions,
        metadata={
            "help": "trainer grpo: the reward terms' scorer {lid, words, word_check, label_aliases, min_tokens, "
            "threshold}; the official scorer by default (mlft.training.reward_terms.ScorerOptions)."
        },
    )
    generation: Literal["auto", "hf", "vllm"] = field(
        default="auto",
        metadata={
            "help": "trainer grpo: how the rollouts are generated: 'vllm' (trl's vLLM generation, colocated on the "
            "training GPUs; needs the vllm package and a GPU), 'hf' (transformers generate), 'auto' (vllm on a "
            "GPU when vllm is installed, else hf). training_args.vllm_* tune it (e.g. vllm_gpu_memory_utilization)."
        },
    )
    global_batch_size: int | None = field(
        default=None,
        metadata={
            "help": "Rows per optimizer step over all processes: gradient_accumulation_steps is derived as "
            "global / (per_device_train_batch_size x world size), so 1 GPU, 8 GPUs or 2 nodes take the same "
            "optimizer steps at the same learning rate (an error when it does not divide)."
        },
    )
    lora: LoraOptions = field(default_factory=LoraOptions, metadata={"help": "LoRA (peft) options."})
    push_to_hub: str | None = field(
        default=None,
        metadata={
            "help": "Hub repo id (ORG/NAME): when the run completes, final/ and its model card are uploaded there."
        },
    )
    hub_private: bool = field(default=True, metadata={"help": "Create the Hub repo as private."})
    evaluation: EvaluationOptions = field(
        default_factory=EvaluationOptions, metadata={"help": "Per-checkpoint evaluation (the eval callback)."}
    )
    control: str | None = field(
        default=None,
        metadata={
            "help": "Why this recipe is a control (kept to compare against, not to train a model to use): required "
            "of a GRPO recipe whose answer term asks a relevance judge that fails its separation check on open "
            "prompts (mlft.training.open_prompts); printed by `mlft train --check` and when the run starts."
        },
    )
    # filled by load_recipe (not YAML keys)
    source: str = field(default="", init=False, metadata={"help": "The recipe file it was loaded from."})

    @property
    def entry(self) -> TrainerEntry:
        """The trainer's entry (mlft.training.trainers.TRAINERS)."""
        return TRAINERS[self.trainer]

    def config_class(self):
        return trl_config_class(self.trainer)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data.pop("source")
        return data


log = get_logger(__name__)

TRL_VLLM = "vllm"  # `generation:` value for trl's own vLLM rollouts (GRPOConfig.use_vllm), not an mlft backend


def uses_vllm(recipe: Recipe, cuda: bool | None = None, vllm: bool | None = None) -> bool:
    """Whether a GRPO run generates its rollouts with trl's vLLM integration (`generation:`); `cuda`/`vllm`
    default to what this machine has (a GPU, the vllm package). Raises ConfigError for vllm without either.
    `auto` on a GPU with a vLLM outside trl's range uses hf and warns, naming both (at `--check` and at train
    start): a fallback is what auto means, but a silent one hides why rollouts are slow; `mlft[vllm]` installs a
    vLLM the backend supports and trl does not (0.32)."""

    if not recipe.entry.rewards:
        return False
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    vllm = importlib.util.find_spec("vllm") is not None if vllm is None else vllm
    cpu = bool(recipe.training_args.get("use_cpu")) or not cuda
    version = vllm_support.installed_vllm() if vllm else None
    supported = version is None or vllm_support.trl_supports(version)  # unknown version: trl itself warns
    if recipe.generation == TRL_VLLM:
        if not vllm:
            raise ConfigError(f"{recipe.source}: generation: vllm needs the vllm package (pip install 'mlft[vllm]')")
        if cpu:
            raise ConfigError(f"{recipe.source}: generation: vllm needs a GPU (this run trains on the CPU)")
        if not supported:
            raise ConfigError(
                f"{recipe.source}: generation: vllm: trl's GRPO rollouts support vLLM "
                f"{vllm_support.TRL_VLLM_RANGE}, this machine has vLLM {version} (install a version in "
                "that range, or generation: hf)"
            )
        return True
    if recipe.generation == "auto" and vllm and not cpu and not supported and rank() == 0:
        log.warning(
            "%s: generation: auto generates the GRPO rollouts with hf, not vLLM: trl's GRPO rollouts support vLLM "
            "%s, this machine has vLLM %s (install a vLLM in that range for vLLM rollouts; generation: hf says "
            "hf outright)",
            recipe.source,
            vllm_support.TRL_VLLM_RANGE,
            version,
        )
    return recipe.generation == "auto" and vllm and not cpu and supported


def _validate_model(model: str, where: str) -> None:
    if model in EMBEDDED:
        return
    path = Path(model).expanduser()
    if path.exists():
        if not ((path / "config.json").is_file() or (path / "adapter_config.json").is_file()):
            raise ConfigError(f"{where}: {model!r} is a folder without config.json or adapter_config.json")
        return
    if model.count("/") == 1 and not model.startswith((".", "/", "~")):
        return  # a hub id: checked when loaded
    raise ConfigError(
        f"{where}: model {model!r} not found: not an embedded model ({', '.join(EMBEDDED)}), "
        "an existing folder, or a hub id like org/name (train the recipe that produces it first)"
    )


def _check_one_dtype(recipe: Recipe, src: str) -> None:
    """The weights' dtype is the recipe's `dtype:`. A `training_args.model_init_kwargs.dtype` (or `torch_dtype`) that
    says otherwise would win where trl loads the model, while the run's chain, card and separate-process evaluations
    read `dtype:` (and `--check` said OK): refused, naming both."""
    kwargs = recipe.training_args.get("model_init_kwargs") or {}
    for key in ("dtype", "torch_dtype"):
        value = kwargs.get(key)
        if value is None or str(value).removeprefix("torch.") == recipe.dtype:
            continue
        raise ConfigError(
            f"{src}: training_args.model_init_kwargs.{key}: {value!r} differs from the recipe's dtype: "
            f"{recipe.dtype!r} (the weights would load as {value!r} while the run's chain, model card and evaluation "
            f"processes say {recipe.dtype!r}); set the recipe's `dtype:` and leave model_init_kwargs.{key} out"
        )


def _validate_backend(ev: EvaluationOptions, where: str) -> None:
    """A registered backend (did-you-mean) that can evaluate a training run: the live model or saved checkpoints."""
    check_backend(ev.backend, where)
    caps = capabilities(ev.backend)
    if not (caps.live_model or caps.saved_weights):
        ok = able(lambda c: c.live_model or c.saved_weights)
        raise ConfigError(
            f"{where}: the {ev.backend} backend can evaluate neither the live model nor a saved "
            f"checkpoint; use one that can: {', '.join(ok)}"
        )


def _validate_linked(recipe: Recipe, src: str) -> None:
    """Load the mix and suites (config files only: no data, no model) so their errors surface now."""

    mix_path = resolve_path(recipe.mix)
    if not mix_path.is_file():
        raise ConfigError(f"{src}: mix: file not found: {recipe.mix}")
    recipe.mix = str(mix_path)
    try:
        mix = load_mix(str(mix_path), list(recipe.mix_overrides))
    except ConfigError as exc:
        raise ConfigError(f"{src}: mix: {exc}") from None
    if mix.kind != recipe.entry.mix_kind:
        raise ConfigError(
            f"{src}: mix: {recipe.mix} is a {mix.kind!r} mix but trainer {recipe.trainer!r} trains on "
            f"a {recipe.entry.mix_kind!r} mix"
        )
    if recipe.entry.rewards:
        _check_reward_columns(recipe, mix, src)
        check_open_prompt_judge(recipe, mix, src)
    ev = recipe.evaluation
    if not ev.enabled:
        return

    opts = backend_options(ev.backend, ev.backend_options, f"{src}: evaluation.backend_options")
    target = Target(ev.backend, opts, model_ref=recipe.model)
    for p in passes_for(ev):
        key = "evaluation.suite" if p.variant == "model" else f"evaluation pass {p.variant!r}"
        try:
            suite = load_pass_suite(p)
            backend = target.for_pass(p.interventions).backend  # quantized: a backend that can transform a model
            check_kind_backend(suite, backend)
            ivs = getattr(suite.options, "interventions", None) or []
            variants = [v.interventions for v in getattr(suite.options, "variants", []) if v.interventions]
            for specs in [ivs, *variants]:
                check_interventions(backend, build_interventions(specs, "interventions"), "interventions")
        except ConfigError as exc:
            raise ConfigError(f"{src}: {key}: {exc}") from None


def _check_reward_columns(recipe: Recipe, mix, src: str) -> None:
    """A reward term that needs a mix column on every row (`required_columns`, e.g. answered_language with
    `source: answer` needs `answer`) is refused when a source of the mix cannot bring it, before any data loads."""
    for i, spec in enumerate(recipe.rewards):
        need = getattr(resolve_term(spec.name, f"{src}: rewards[{i}].name"), "required_columns", None)
        for column in need(**spec.options) if need else ():
            for j, source in enumerate(mix.sources):
                if column not in source_columns(source, mix.kind):
                    raise ConfigError(
                        f"{src}: rewards[{i}].options.source: {spec.name!r} with source "
                        f"{spec.options.get('source')!r} checks every reply against the mix's `{column}` column, but "
                        f"{recipe.mix}: sources[{j}] ({source.name}, {source.type} {source.path}) has no `{column}` "
                        f"column; use a mix of verifiable prompts (data_mixes/cpu/arithmetic_prompts.yaml), map the "
                        f"column (`columns: {{{column}: COLUMN}}` on a prompt source), or set source: auto (the "
                        "relevance judge where a row has no answer)"
                    )


def validate_recipe(recipe: Recipe, src: str, check_linked: bool = True) -> Recipe:
    args = resolve_auto_args(recipe.training_args, recipe.trainer, f"{src}: training_args")
    recipe.training_args = validate_training_args(args, recipe.trainer, f"{src}: training_args")
    check_joined_rows(recipe.training_args, recipe.trainer, f"{src}: training_args")
    _validate_model(recipe.model, f"{src}: model")
    _check_one_dtype(recipe, src)
    check_control(recipe.control, src)
    if recipe.entry.rewards:
        validate_rewards(recipe.rewards, f"{src}: rewards")
        recipe.scorer.validate(f"{src}: scorer")
    elif recipe.rewards:
        raise ConfigError(
            f"{src}: rewards: only trainer {with_rewards()} takes reward terms (trainer is {recipe.trainer!r})"
        )
    elif recipe.scorer != ScorerOptions():
        raise ConfigError(
            f"{src}: scorer: only trainer {with_rewards()} scores replies while training (trainer is "
            f"{recipe.trainer!r})"
        )
    elif recipe.generation != "auto":
        raise ConfigError(
            f"{src}: generation: only trainer {with_rewards()} generates while training (trainer is {recipe.trainer!r})"
        )
    if recipe.entry.check_args is not None:
        recipe.entry.check_args(recipe.training_args, f"{src}: training_args")
    if recipe.chat_template != "auto":
        path = resolve_path(recipe.chat_template)
        if not path.is_file():
            raise ConfigError(f"{src}: chat_template: file not found: {recipe.chat_template}")
        recipe.chat_template = str(path)
    if recipe.accelerate_config is not None:
        path = resolve_path(recipe.accelerate_config)
        if not path.is_file():
            raise ConfigError(f"{src}: accelerate_config: file not found: {recipe.accelerate_config}")
        recipe.accelerate_config = str(path)
    ev = recipe.evaluation
    _validate_backend(ev, f"{src}: evaluation.backend")
    if (
        recipe.chat_template != "auto"
        and not capabilities(ev.backend).live_model
        and "chat_template" in option_names(ev.backend)
        and "chat_template" not in ev.backend_options
    ):
        # a base model has no chat template of its own: evaluate the saved weights with the one the recipe trains
        # with (a backend on the live model uses the training tokenizer's)
        ev.backend_options = {**ev.backend_options, "chat_template": os.path.abspath(recipe.chat_template)}
    if ev.every_steps is not None:
        if ev.every_steps < 1:
            raise ConfigError(f"{src}: evaluation.every_steps: must be >= 1, got {ev.every_steps}")
        if "save_steps" in recipe.training_args and recipe.training_args["save_steps"] != ev.every_steps:
            raise ConfigError(
                f"{src}: evaluation.every_steps={ev.every_steps} conflicts with "
                f"training_args.save_steps={recipe.training_args['save_steps']} (set one)"
            )
        recipe.training_args["save_strategy"] = "steps"
        recipe.training_args["save_steps"] = ev.every_steps
    if recipe.global_batch_size is not None:
        if recipe.global_batch_size < 1:
            raise ConfigError(f"{src}: global_batch_size: must be >= 1, got {recipe.global_batch_size}")
        if "gradient_accumulation_steps" in recipe.training_args:
            raise ConfigError(
                f"{src}: global_batch_size and training_args.gradient_accumulation_steps are both set "
                "(accumulation is derived from global_batch_size: set one)"
            )
        if recipe.accelerate_config is not None:  # the world size it will launch with: check now, not on the GPUs
            cfg = read_accelerate_config(recipe.accelerate_config)
            accumulation_steps(recipe, int(cfg.num_processes or 1), f"{src}: global_batch_size")
    if recipe.accelerate_config is not None:
        check_sharded_evaluation(ev, sharded_weights(recipe.accelerate_config), src, recipe.accelerate_config)
    if len(set(ev.quantized)) != len(ev.quantized):
        raise ConfigError(f"{src}: evaluation.quantized: duplicate variants {ev.quantized}")
    names = [v.variant for v in [*ev.variants, *ev.fewshot_variants]]
    if len(set(names)) != len(names) or {"model", *QUANT_VARIANTS} & set(names):
        raise ConfigError(
            f"{src}: evaluation.variants / fewshot_variants: variant names must be unique and not "
            f"'model'/{'/'.join(QUANT_VARIANTS)}: {names}"
        )
    if recipe.push_to_hub is not None and (recipe.push_to_hub.count("/") != 1 or " " in recipe.push_to_hub):
        raise ConfigError(f"{src}: push_to_hub: expected a repo id like org/name, got {recipe.push_to_hub!r}")
    if recipe.lora.r < 1:
        raise ConfigError(f"{src}: lora.r: must be >= 1, got {recipe.lora.r}")
    if check_linked:
        _validate_linked(recipe, src)
    return recipe


def check_sharded_evaluation(ev: EvaluationOptions, sharding: str | None, src: str, config: str = "") -> None:
    """Under sharded weights (ZeRO-3, FSDP) the live model is a shell of partitions: an in-process pass would
    generate through the sharding hooks, whose every forward is a collective that all ranks must join, while only
    rank 0 generates (and a data-parallel pass would give each rank a different number of forwards): the ranks
    wait on each other until the process group's timeout. `in_process: auto` evaluates the saved checkpoint in a
    separate process there; `always` is refused, naming the option."""
    if sharding is None or not ev.enabled or ev.in_process != "always":
        return
    shared = " and its data-parallel passes (evaluation.data_parallel: true)" if ev.data_parallel else ""
    raise ConfigError(
        f"{src}: evaluation.in_process: always under {sharding} ({config or 'the launch'} shards the weights): an "
        f"in-process pass{shared} would run the sharded model's collectives on rank 0 alone and hang until the "
        "process group's timeout; use in_process: auto (the saved checkpoint, evaluated in a separate process) or "
        "a config that keeps whole weights on each rank (configs/accelerate/zero2.yaml)"
    )


def per_device_batch(recipe: Recipe) -> int:
    """per_device_train_batch_size: the recipe's, else the installed trl config's default."""
    if "per_device_train_batch_size" in recipe.training_args:
        return int(recipe.training_args["per_device_train_batch_size"])
    return int(
        next(
            (f.default for f in dataclasses.fields(recipe.config_class()) if f.name == "per_device_train_batch_size"), 8
        )
    )


def accumulation_steps(recipe: Recipe, world_size: int, where: str = "global_batch_size") -> int:
    """gradient_accumulation_steps that make `global_batch_size` rows per optimizer step on `world_size` ranks."""
    per_device = per_device_batch(recipe)
    per_step = per_device * max(world_size, 1)
    if recipe.global_batch_size % per_step:
        raise ConfigError(
            f"{where}: {recipe.global_batch_size} rows per optimizer step is not a multiple of "
            f"per_device_train_batch_size ({per_device}) x world size ({world_size}) = {per_step}; "
            "change global_batch_size or per_device_train_batch_size"
        )
    return recipe.global_batch_size // per_step


def refuse_setting_texts(data: dict, src: str) -> None:
    """A suite's settings in a recipe are a mapping (`suite_overrides: {judge: langdetect}`, a variant's `overrides:`
    too): the `key=value` text lists recipes once wrote (`suite_overrides: ["judge=langdetect"]`) are refused, naming
    the field and the mapping to write (and the command line's form), so settings are typed where they enter."""
    ev = data.get("evaluation")
    if not isinstance(ev, dict):
        return
    fields = [("evaluation.suite_overrides", ev.get("suite_overrides"))]
    for key in ("variants", "fewshot_variants"):
        items = ev.get(key) if isinstance(ev.get(key), list) else []
        fields += [
            (f"evaluation.{key}[{i}].overrides", v.get("overrides")) for i, v in enumerate(items) if isinstance(v, dict)
        ]
    for where, value in fields:
        if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
            continue
        try:
            mapping = yaml.safe_dump(parse_overrides(list(value), f"{src}: {where}"), default_flow_style=True).strip()
            hint = f"; write {mapping}" + (
                f" (on the command line: {' '.join(f'{where}.{x.strip()}' for x in value)})" if "[" not in where else ""
            )
        except ConfigError:
            hint = ""
        raise ConfigError(f"{src}: {where}: suite settings are a mapping, not key=value texts ({list(value)}){hint}")


def load_recipe(
    path: str | Path,
    overrides: list[str] | tuple[str, ...] = (),
    check_linked: bool = True,
    settings: dict | None = None,
) -> Recipe:
    """Read, merge (`include:`), override and validate a recipe — before any model or dataset is loaded.
    `overrides`: `key=value` texts (a command line's); `settings`: typed values laid over both (a program's, e.g.
    {"training_args": {"max_steps": 4}, "evaluation": {"suite_overrides": {"judge": "langdetect"}}})."""
    path = resolve_path(path)
    src = str(path)
    data = load_yaml(path, shipped="recipes")
    data = deep_merge(apply_overrides(data, list(overrides)), settings or {})
    refuse_setting_texts(data, src)
    recipe = from_dict(Recipe, data, src)
    recipe.source = src
    if recipe.run_dir is None:
        recipe.run_dir = str(Path("runs") / Path(src).stem)
    return validate_recipe(recipe, src, check_linked)


def dump_recipe(recipe: Recipe, path: Path) -> None:
    path.write_text(yaml.safe_dump(recipe.to_dict(), sort_keys=False, allow_unicode=True), encoding="utf-8")

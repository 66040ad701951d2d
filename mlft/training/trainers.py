"""The trainers a recipe can name (`trainer:`), one entry each: what the recipe loader and `mlft train` ask of it.

An entry names its trl config and trainer classes (imported when asked: trl is heavy), the mix kind it trains on,
the dataset columns it keeps, whether it needs a reference model, the training_args mlft manages for it and its
own argument checks. Adding a trainer (KTO, ORPO...) is one entry here plus its tests (and, for a new kind of
data, its mix kind in mlft.data.mix); recipe.py and train.py ask the entry and test no trainer's name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from mlft.config import did_you_mean
from mlft.errors import ConfigError

# training_args keys that mlft sets itself (from the recipe) for every trainer, so a recipe may not set them.
MANAGED_ARGS = {
    "output_dir": "set `run_dir:` instead (checkpoints go to run_dir/checkpoints)",
    "push_to_hub": "set the recipe's top-level `push_to_hub: ORG/NAME` instead (mlft uploads final/ with "
    "its model card when the run completes)",
}


# GRPOConfig values trl 1.16 checks only once training runs (in the first step, or never with a clear name)
GRPO_CHOICES = {
    "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
    "scale_rewards": ("group", "batch", "none", True, False),
}
GRPO_MINIMUM = {
    "num_generations": (2, "GRPO's advantages are taken within each prompt's group of replies"),
    "max_completion_length": (1, "a reply of no token earns nothing to learn from"),
    "num_iterations": (1, "optimisation passes over each generated batch"),
}


def check_grpo_args(args: dict, where: str) -> None:
    """The GRPO values trl refuses late (or names unclearly), named by their field before any model loads; trl's
    own checks run at `mlft train --check` too (it builds the GRPOConfig)."""
    for key, choices in GRPO_CHOICES.items():
        if key in args and args[key] not in choices:
            raise ConfigError(f"{where}.{key}: {args[key]!r} is not one of {', '.join(map(str, choices))}")
    for key, (least, why) in GRPO_MINIMUM.items():
        value = args.get(key)
        if value is not None and value < least:
            raise ConfigError(f"{where}.{key}: must be >= {least} ({why}), got {value}")
    high, low = args.get("epsilon_high"), args.get("epsilon", 0.2)
    if high is not None and high < low:
        raise ConfigError(
            f"{where}.epsilon_high: {high} is below epsilon ({low}): the upper clip bound must be >= the lower one"
        )
    if "use_vllm" in args:
        raise ConfigError(
            f"{where}.use_vllm: set the recipe's `generation: auto | hf | vllm` "
            "instead (auto: vllm on a GPU when installed)"
        )


@dataclass(frozen=True)
class TrainerEntry:
    """One trainer: its trl classes and what mlft does around them."""

    name: str
    config_class: str  # trl's config class (a name in `trl`)
    trainer_class: str  # trl's trainer class (a name in `trl`)
    mix_kind: str  # the mix kind it trains on (mlft.data.mix)
    columns: tuple[str, ...] | None  # dataset columns kept; None: every column (trl passes them to the reward terms)
    reference: Literal["never", "always", "beta"]  # needs a reference model: never, always, or when config.beta != 0
    managed_args: dict[str, str] = field(default_factory=dict)  # its training_args mlft sets: key -> what instead
    rewards: bool = False  # online RL: generates replies while training (`generation:`), scored by `rewards:` terms
    packing_joins_rows: bool = False  # `packing` (bfd strategies) joins a batch's rows into one (padding-free)
    padding_free: bool = False  # trl honours `padding_free` (`auto` may turn it on); False: trl turns it off
    check_args: Callable[[dict, str], None] | None = None  # its own training_args checks (before any load)

    def config(self) -> type:
        import trl

        return getattr(trl, self.config_class)

    def trainer(self) -> type:
        import trl

        return getattr(trl, self.trainer_class)

    def managed(self) -> dict[str, str]:
        """The training_args a recipe may not set for this trainer, with what to set instead."""
        return {**MANAGED_ARGS, **self.managed_args}

    def needs_reference(self, config) -> bool:
        return self.reference == "always" or (self.reference == "beta" and getattr(config, "beta", 0.0) != 0.0)

    def takes_reference(self) -> bool:
        """Whether the trl trainer takes a reference model as `ref_model=` (else it builds its own)."""
        return "ref_model" in inspect.signature(self.trainer()).parameters


TRAINERS: dict[str, TrainerEntry] = {
    e.name: e
    for e in (
        TrainerEntry(
            "sft",
            "SFTConfig",
            "SFTTrainer",
            mix_kind="sft",
            columns=("messages",),
            reference="never",
            packing_joins_rows=True,
            padding_free=True,
        ),
        TrainerEntry(
            "dpo",
            "DPOConfig",
            "DPOTrainer",
            mix_kind="dpo",
            columns=("prompt", "chosen", "rejected"),
            reference="always",
        ),
        TrainerEntry(
            "grpo",
            "GRPOConfig",
            "GRPOTrainer",
            mix_kind="prompts",
            columns=None,
            reference="beta",
            managed_args={"reward_weights": "set each term's `weight` under the recipe's `rewards:` instead"},
            rewards=True,
            check_args=check_grpo_args,
        ),
    )
}
TrainerName = Literal[tuple(TRAINERS)]  # the recipe's `trainer:` values


def trainer_entry(name: str, where: str = "trainer") -> TrainerEntry:
    try:
        return TRAINERS[name]
    except KeyError:
        raise ConfigError(f"{where}: {name!r} is not one of {list(TRAINERS)}{did_you_mean(name, TRAINERS)}") from None


def with_rewards() -> str:
    """The trainers that take reward terms, for messages ('grpo')."""
    return " / ".join(repr(name) for name, e in TRAINERS.items() if e.rewards)

"""`mlft.train`: validate a recipe, then train it in this process; `mlft.check_recipe`: every check of a recipe
that needs no model (trl's own value checks included). `mlft train RECIPE` is these and the launch (accelerate,
SLURM) around them."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from mlft.api.evaluate import deep_merge, dotted
from mlft.api.runs import load_run
from mlft.training.launch import read_accelerate_config
from mlft.training.recipe import Recipe, load_recipe


def launched() -> bool:
    """True inside `accelerate launch` / torchrun (or a process mlft already re-launched)."""
    return any(k in os.environ for k in ("MLFT_LAUNCHED", "ACCELERATE_MIXED_PRECISION", "LOCAL_RANK"))


def load(recipe, overrides: list[str] | tuple = (), settings: dict | None = None, **keys: Any):
    """The validated recipe (mlft.training.recipe.Recipe) of a recipe YAML with its overrides: `overrides` as
    key=value texts, `settings` as a nested mapping, keyword arguments as dotted keys (`mlft.load_recipe`).

    >>> import mlft
    >>> mlft.load_recipe("recipes/cpu/crosslingual_sft.yaml", **{"lora.r": 8}).trainer  # doctest: +SKIP
    'sft'
    """

    if isinstance(recipe, Recipe):
        return recipe
    return load_recipe(recipe, list(overrides), settings=deep_merge(dict(settings or {}), dotted(keys)) or None)


def check_recipe(
    recipe, overrides: list[str] | tuple = (), *, accelerate_config: str | None = None, settings=None, **keys: Any
):
    """Validate a recipe and build the trl config object the run would train with (no model, no data), so trl's own
    value checks run (e.g. GRPO: the generation batch must divide into groups of num_generations; trl computes it
    for this one process, global_batch_size's accumulation for the launch's world size); a refusal is a ConfigError
    naming training_args. Without a GPU here, a GPU recipe's bf16 / vLLM settings are set aside for the check.
    Returns the recipe.

    >>> import mlft
    >>> mlft.check_recipe("recipes/cpu/crosslingual_sft.yaml").trainer  # doctest: +SKIP
    'sft'
    """
    import torch

    from mlft.training.train import _trainer_config

    recipe = load(recipe, overrides, settings, **keys)
    config = accelerate_config or recipe.accelerate_config
    world = int(read_accelerate_config(config).num_processes or 1) if config else 1
    checked = recipe
    if not torch.cuda.is_available():  # check the values, not this machine: a GPU recipe's bf16 / vLLM set aside
        args = {**recipe.training_args, "use_cpu": True, "bf16": False, "fp16": False}
        args.pop("tf32", None)
        checked = dataclasses.replace(recipe, training_args=args, generation="hf")
        checked.source = recipe.source
    _trainer_config(checked, Path(checked.run_dir), world_size=world)
    return recipe


def train(
    recipe, overrides: list[str] | tuple = (), *, settings: dict | None = None, progress: bool = True, **keys: Any
):
    """Validate `recipe` (a recipe YAML, or a loaded Recipe) with its overrides before anything is loaded, then
    train it in this process (resuming from the run's last checkpoint), evaluating checkpoints as its
    `evaluation:` says. Overrides: keyword arguments as dotted keys, `overrides` as key=value texts, `settings`
    as a nested mapping. For several GPUs, run the calling script under `accelerate launch` (or use
    `mlft train RECIPE`, which launches). Returns the finished run (`mlft.Run`).

    >>> import mlft
    >>> run = mlft.train("recipes/cpu/crosslingual_sft.yaml", **{"training_args.max_steps": 10})  # doctest: +SKIP
    >>> run.plot("curves.png")  # doctest: +SKIP
    """
    from mlft.training.train import train as train_recipe

    return load_run(train_recipe(load(recipe, overrides, settings, **keys), progress=progress))

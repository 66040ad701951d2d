"""`mlft train RECIPE [key=value ...]`: validate the recipe, then train (re-launching through accelerate)."""

from __future__ import annotations

import os
import subprocess
import sys

from mlft.config import help_of
from mlft.training.recipe import Recipe, load_recipe


def add_parser(sub) -> None:
    keys = ", ".join(help_of(Recipe))
    p = sub.add_parser("train", help="train a recipe (SFT/DPO, full or LoRA) with per-checkpoint evaluation",
                       description="Train with trl's SFTTrainer/DPOTrainer from one recipe YAML. The recipe is "
                                   "validated (against the installed trl) before anything is loaded; training "
                                   f"resumes from the run's last checkpoint. Recipe keys: {keys}.")
    p.add_argument("recipe", help="recipe YAML, e.g. recipes/cpu/multilingual_sft.yaml")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="override recipe keys, e.g. training_args.max_steps=10 lora.r=8")
    p.add_argument("--no-launch", action="store_true",
                   help="run in this process even if the recipe names an accelerate_config")
    p.add_argument("--check", action="store_true", help="validate the recipe and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bars in evaluation")
    p.set_defaults(func=run)


def launched() -> bool:
    """True inside `accelerate launch` / torchrun (or a process mlft already re-launched)."""
    return any(k in os.environ for k in ("MLFT_LAUNCHED", "ACCELERATE_MIXED_PRECISION", "LOCAL_RANK"))


def run(args) -> int:
    recipe = load_recipe(args.recipe, args.overrides)
    if args.check:
        print(f"{args.recipe}: OK ({recipe.trainer}, model {recipe.model}, run_dir {recipe.run_dir})")
        return 0
    if recipe.accelerate_config and not args.no_launch and not launched():
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", recipe.accelerate_config,
               "-m", "mlft", "train", args.recipe, *args.overrides]
        if args.no_progress:
            cmd.append("--no-progress")
        print("mlft train: launching:", " ".join(cmd), flush=True)
        return subprocess.run(cmd, env={**os.environ, "MLFT_LAUNCHED": "1"}).returncode
    from mlft.training.train import train

    train(recipe, progress=not args.no_progress)
    return 0

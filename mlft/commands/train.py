"""`mlft train RECIPE [key=value ...]`: validate the recipe, then train (re-launching through accelerate)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from mlft.errors import ConfigError


def _describe(p) -> None:
    """The description lists the recipe keys (read from the Recipe dataclass when asked)."""
    from mlft.config import help_of
    from mlft.training.recipe import Recipe

    p.description = (
        "Train with trl's SFTTrainer/DPOTrainer/GRPOTrainer from one recipe YAML. The recipe is "
        "validated (against the installed trl) before anything is loaded; training "
        f"resumes from the run's last checkpoint. Recipe keys: {', '.join(help_of(Recipe))}."
    )


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train", help="train a recipe (SFT, DPO or GRPO; full or LoRA) with per-checkpoint evaluation", later=_describe
    )
    p.add_argument("recipe", help="recipe YAML, e.g. recipes/cpu/multilingual_sft.yaml")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="override recipe keys, e.g. training_args.max_steps=10 lora.r=8",
    )
    p.add_argument(
        "--no-launch", action="store_true", help="run in this process even if the recipe names an accelerate_config"
    )
    p.add_argument(
        "--launcher",
        choices=("local", "slurm"),
        default="local",
        help="local: `accelerate launch` on this machine (when the recipe names an accelerate_config); "
        "slurm: on this node of a SLURM allocation (run once per node, e.g. by "
        "slurm/train.sbatch): machine rank, node count and main address from SLURM's variables",
    )
    p.add_argument(
        "--accelerate-config",
        metavar="YAML",
        help="launch with this accelerate config instead of the recipe's accelerate_config (the recipe "
        "itself is unchanged), e.g. configs/accelerate/multinode_zero2.yaml",
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        metavar="N",
        help="--launcher slurm: processes per node (default: SLURM_GPUS_ON_NODE / SLURM_GPUS_PER_NODE)",
    )
    p.add_argument(
        "--main-process-port",
        type=int,
        metavar="PORT",
        help="--launcher slurm: rendezvous port on the first node (default: 29500 + SLURM_JOB_ID %% 2000)",
    )
    p.add_argument(
        "--print-launch",
        action="store_true",
        help="print the launch command (after validating the recipe) and exit without running it",
    )
    p.add_argument("--check", action="store_true", help="validate the recipe and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bars in evaluation")
    p.set_defaults(func=run)


def _launch_command(args, recipe) -> list[str] | None:
    """The `accelerate launch` argv for this invocation, or None to train in this process."""
    from mlft.api.train import launched
    from mlft.training.launch import launch_command, slurm_allocation

    slurm = args.launcher == "slurm"
    if slurm and (args.no_launch or launched()):
        raise ConfigError(
            "--launcher slurm starts `accelerate launch` on this node: it cannot be combined with "
            "--no-launch or run inside an already launched process"
        )
    if not slurm and (args.gpus_per_node is not None or args.main_process_port is not None):
        raise ConfigError("--gpus-per-node / --main-process-port are for --launcher slurm")
    config = args.accelerate_config or recipe.accelerate_config
    if args.no_launch or launched() or not config:
        if slurm:
            raise ConfigError(
                f"{args.recipe}: --launcher slurm needs an accelerate config: the recipe has no "
                "accelerate_config; pass --accelerate-config configs/accelerate/multinode_zero2.yaml"
            )
        return None
    alloc = slurm_allocation(os.environ, args.gpus_per_node, args.main_process_port) if slurm else None
    extra = ["--no-progress"] if args.no_progress else []
    return launch_command(args.recipe, args.overrides, config, alloc, extra)


def run(args) -> int:
    import mlft
    from mlft.api.train import load

    recipe = load(args.recipe, args.overrides)
    if args.check:
        mlft.check_recipe(recipe, accelerate_config=args.accelerate_config)
        print(f"{args.recipe}: OK ({recipe.trainer}, model {recipe.model}, run_dir {recipe.run_dir})")
        if recipe.control:
            print(f"{args.recipe}: a CONTROL recipe, not one to train a model to use: {recipe.control}")
        return 0
    cmd = _launch_command(args, recipe)
    if args.print_launch:
        print(shlex.join(cmd) if cmd else f"mlft train: {args.recipe} trains in this process (no launch)")
        return 0
    if cmd is not None:
        print("mlft train: launching:", shlex.join(cmd), flush=True)
        env = {**os.environ, "MLFT_LAUNCHED": "1"}
        if args.launcher == "slurm":  # hand the node over to the launcher: SLURM's signals reach it directly
            sys.stderr.flush()
            os.execve(cmd[0], cmd, env)
        return subprocess.run(cmd, env=env).returncode

    mlft.train(recipe, progress=not args.no_progress)
    return 0

"""`mlft evaluate-run RUN_DIR`: (re)evaluate the checkpoints of an existing run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlft.errors import ConfigError
from mlft.generation.cli_flags import add_model_args


def add_parser(sub) -> None:
    p = sub.add_parser(
        "evaluate-run",
        help="(re)evaluate the checkpoints of a training run",
        description="Evaluate every checkpoint of RUN_DIR (and the step-0 base model) with the "
        "run's evaluation block; passes already in curves.jsonl are skipped. "
        "Overrides change the evaluation, e.g. evaluation.quantized=[w8,w4].",
        later=_model_args,
    )
    p.add_argument("run_dir", help="a run directory written by `mlft train`")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides (evaluation.*)")
    p.add_argument("--step", type=int, help="evaluate only this step (with --model: that model as this step)")
    p.add_argument("--not-end", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _model_args(p) -> None:
    """The backend flags come from each backend's class (hf's imports torch): added when the command is used."""
    add_model_args(p)  # --model (a checkpoint to evaluate as --step: the training callback's), --backend, --device...
    p.set_defaults(backend=None)  # the recipe's evaluation.backend unless --backend says otherwise


def _targets(run_dir: Path, recipe) -> list[tuple[int, str]]:
    from mlft.training.passes import checkpoint_step

    out = [(0, recipe.model)] if recipe.evaluation.at_start else []
    ckpts = [(checkpoint_step(p), str(p)) for p in (run_dir / "checkpoints").glob("checkpoint-*")]
    return out + sorted((s, p) for s, p in ckpts if s is not None)


def run_recipe(run_dir: Path, overrides: list[str]):
    """The run's recipe, its `model` (step 0) set to the starting model kept in the run's chain (so a moved run,
    or one whose parent run is gone or retrained, evaluates the model it actually started from); the command
    line's overrides are parsed here, once, and laid over it (a `model=` of the user's wins)."""
    from mlft.config import deep_merge, parse_overrides
    from mlft.training import chain
    from mlft.training.recipe import load_recipe

    if not (run_dir / "recipe.yaml").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no recipe.yaml)")
    start = {}
    if (run_dir / chain.CHAIN_JSON).is_file():
        start = {"model": chain.start_ref(run_dir, chain.read(run_dir))}
    return load_recipe(run_dir / "recipe.yaml", settings=deep_merge(start, parse_overrides(overrides)))


def run(args) -> int:
    from mlft.generation.backends import check_backend, options_from_args
    from mlft.training.passes import Step, evaluate_step, evaluation_target

    run_dir = Path(args.run_dir)
    recipe = run_recipe(run_dir, args.overrides)
    ev = recipe.evaluation
    backend = check_backend(args.backend or ev.backend, "--backend")
    target = evaluation_target(ev, run_dir, backend, options_from_args(backend, args))  # checked before any load
    if args.model is not None:
        if args.step is None:
            raise ConfigError("--model needs --step")
        targets = [(args.step, args.model)]
    else:
        targets = [t for t in _targets(run_dir, recipe) if args.step is None or t[0] == args.step]
        if not targets:
            raise ConfigError(
                f"{run_dir}: nothing to evaluate (no checkpoint{'' if args.step is None else f' for step {args.step}'})"
            )
    last = max(s for s, _ in targets)
    for step, ref in targets:
        is_end = step == 0 or (step == last and not args.not_end)
        at = Step(step, is_end, "separate-process")
        evaluate_step(run_dir, recipe.evaluation, at, target.with_model(ref), progress=not args.no_progress)
    return 0

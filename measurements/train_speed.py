"""`mlft train` vs plain trl on the same config, s/step in one run (goal: mlft / trl <= 1.05).

CPU by default: the CPU recipe (recipes/cpu/english_sft.yaml: the embedded SmolLM2-135M-Instruct, LoRA r 16,
fp32, batch 4 x max_length 256) for a few steps, the eval callback off (evaluation.enabled=false). mlft runs
`mlft.training.train.train` (its
chain, callbacks, progress, curves); trl runs SFTTrainer alone with the SFTConfig mlft built, the rows mlft's mix
wrote (run_dir/mix/train.jsonl), the same chat template and LoRA config. Each runs in a process of its own
(mlft first: it writes the rows), each step's time written as it finishes (measurements/step_times.py); the ratio
compares median step times after the first step.
Usage: python measurements/train_speed.py [RECIPE] [--steps N] [--work DIR] [-o KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_times import median_step, read_steps, step_times  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe", nargs="?", default="recipes/cpu/english_sft.yaml")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, deleted)")
    ap.add_argument("-o", "--override", action="append", default=[], help="recipe key=value (repeatable)")
    ap.add_argument("--only", choices=("mlft", "trl"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="mlft_train_speed_"))
    if args.only is None:  # each side in its own process
        import subprocess

        shutil.rmtree(work / "mlft", ignore_errors=True)
        for side in ("mlft", "trl"):
            (work / f"{side}_steps.jsonl").unlink(missing_ok=True)
            cmd = [
                sys.executable,
                __file__,
                args.recipe,
                "--steps",
                str(args.steps),
                "--work",
                str(work),
                "--only",
                side,
                *[x for o in args.override for x in ("-o", o)],
            ]
            subprocess.run(cmd, check=True)
        report(args, work)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
        return
    run_side(args, work)


def run_side(args, work: Path) -> None:
    import datasets
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from mlft.generation.models import resolve
    from mlft.io.jsonl import read_jsonl
    from mlft.training.recipe import load_recipe
    from mlft.training.train import _trainer_config, train

    overrides = [
        f"training_args.max_steps={args.steps}",
        "training_args.logging_steps=1",
        "evaluation.enabled=false",
        *args.override,
    ]
    recipe = load_recipe(args.recipe, [*overrides, f"run_dir={work / 'mlft'}"])
    if args.only == "mlft":
        train(recipe, progress=False, callbacks=[step_times(work / "mlft_steps.jsonl")])
        return

    plain = load_recipe(args.recipe, [*overrides, f"run_dir={work / 'trl'}"])
    config = _trainer_config(plain, work / "trl")
    rows = read_jsonl(work / "mlft" / "mix" / "train.jsonl")
    dataset = datasets.Dataset.from_list([{"messages": r["messages"]} for r in rows])
    ref = resolve(recipe.model)
    tok = AutoTokenizer.from_pretrained(ref.path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    template = work / "mlft" / "chat_template.jinja"
    if template.is_file():
        tok.chat_template = template.read_text(encoding="utf-8")
    trainer = SFTTrainer(
        model=str(ref.path),
        args=config,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=recipe.lora.to_peft() if recipe.lora.enabled else None,
        callbacks=[step_times(work / "trl_steps.jsonl")],
    )
    trainer.train()


def report(args, work: Path) -> None:
    m, t = read_steps(work / "mlft_steps.jsonl"), read_steps(work / "trl_steps.jsonl")
    out = {"recipe": args.recipe, "steps": args.steps}
    for key in ("step_s", "wall_s"):
        a, b = median_step(m, key), median_step(t, key)
        out[key] = {"mlft": a, "trl": b, "ratio": round(a / b, 3) if a and b else None}
    print(json.dumps(out, indent=1))
    print(
        f"mlft train vs plain trl, median s/step after step 1: {out['step_s']['mlft']:.3f} vs "
        f"{out['step_s']['trl']:.3f} (ratio {out['step_s']['ratio']}); between step ends (callbacks, logging "
        f"included): ratio {out['wall_s']['ratio']}"
    )


if __name__ == "__main__":
    main()

"""The paper's experiment, the README's main job: end to end on CPU with the embedded SmolLM2-135M-Instruct.

Run it as `mlft demo [flags]` (the copy shipped with mlft) or as `python recipes/demo.py [flags]` (this file: copy
it and edit it like a recipe; the flags are the same).

One shared step-0 evaluation of the base model (and, with --full, its few-shot, intervention and quantized
variants), then LoRA runs, each evaluated at its end by the per-checkpoint callback on the powered suite
(eval/lcb_demo.yaml: 10 prompts per task and language):
  default   English-only SFT (the paper's negative control) and cross-lingual SFT (instructions that ask for a
            reply in another language, phrasings disjoint from LCB's): ~14 min on 2 cores;
  --decoding-row  the best inference-time mitigation row of eval/mitigation_decoding.yaml (DECODE_SMARTER) on the
            base model and on the cross-lingual SFT checkpoint: fine-tune, decode smarter, or both, as rows of
            the same table (+~7 min);
  --rl      online RL (GRPO, the LCB judge as the reward, the guard as the constraint; docs/rl.md) from the base
            model and on the cross-lingual SFT checkpoint, every pass also judged by langdetect (a Table 11 column),
            and the base and RL models on prompts in languages outside LCB's and the RL mix's (cs, fi, bg, bn, uk:
            eval/mitigation_outside_lcb.yaml without its interventions) as a second table, outside_lcb.md;
  --full    also cross-lingual preference tuning on top of the cross-lingual SFT run, the paper's multilingual
            SFT and preference tuning, English preference tuning, few-shot prompting, the quantized variants,
            the decoding row, and a mid-run checkpoint for every SFT run (~1 h).
Every row also gets the task axis (does the fix cost answers?): the row's model (and its decoding variant) on a
small verifiable suite beside lcb_demo (eval/arithmetic.yaml: TASK_LANGUAGES x 10 arithmetic word problems per
task, greedy, 48 new tokens), its task score with a Wilson interval, the paired permutation test against base and
the guard's flag when it drops (mlft/reports/task_axis.py); its cost is printed and kept in timings.json
(`--no-task` leaves it out).
Then the curves PNG (95 % bands; DPO continues its SFT run), per-run heatmaps, and the mitigation table (Table 11
layout with intervals, paired significance against base and the guard) as markdown and PNG, and report.html (every
reply of every run and checkpoint, `mlft report`). Rerunning resumes:
finished runs and passes are kept.
"""
# This is an experiment script beside the recipes it runs (recipes/cpu/*.yaml), not a module of the mlft package:
# it builds its runs, passes and tables as objects (typed recipe settings, PassVariant, TableSpec) and calls mlft's
# public API only (`import mlft`, docs/api.md; tests/test_api_demo.py keeps it so); table.yaml is written as the
# user's record of each table (`mlft table runs/demo/table.yaml`).

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mlft
from mlft import (
    FEWSHOT_BASELINES,
    QUANTIZATION_SCHEMES,
    MlftError,
    PassVariant,
    RowSpec,
    TableSpec,
    get_logger,
    judge_columns,
    load_suite,
    task_columns,
)

log = get_logger(__name__)
BASE_MODEL = "smollm2-135m-instruct"
FEWSHOT = [PassVariant(name, overrides=settings) for name, settings in FEWSHOT_BASELINES]
DECODE_SMARTER = PassVariant(
    "+script gate +line resampling",
    interventions=[{"name": "script_gate", "mode": "soft", "penalty": 3.0}, {"name": "line_resample"}],
)


@dataclass(frozen=True)
class DemoRun:
    key: str  # its folder under --out
    recipe: str
    label: str  # its row in Table 11
    parent: str | None  # the run whose final model it starts from
    default: bool  # in the default demo (else --full, or --rl for the RL runs)


RUNS = [
    DemoRun("english_sft", "recipes/cpu/english_sft.yaml", "+English SFT", None, True),
    DemoRun("english_dpo", "recipes/cpu/english_dpo.yaml", "+English pref. tuning", "english_sft", False),
    DemoRun("multilingual_sft", "recipes/cpu/multilingual_sft.yaml", "+Multilingual SFT", None, False),
    DemoRun(
        "multilingual_dpo", "recipes/cpu/multilingual_dpo.yaml", "+Multilingual pref. tuning", "multilingual_sft", False
    ),
    DemoRun("crosslingual_sft", "recipes/cpu/crosslingual_sft.yaml", "+Cross-lingual SFT", None, True),
    DemoRun(
        "crosslingual_dpo",
        "recipes/cpu/crosslingual_dpo.yaml",
        "+Cross-lingual pref. tuning",
        "crosslingual_sft",
        False,
    ),  # ~20 s a step on 2 cores: in --full only, to keep the default <= 15 min
    # online RL with the LCB judge as the reward: with --rl
    DemoRun("grpo", "recipes/cpu/grpo_verifiable.yaml", "+GRPO (correct x gated language)", None, False),
    DemoRun("grpo_on_sft", "recipes/cpu/grpo_verifiable.yaml", "+Cross-lingual SFT +GRPO", "crosslingual_sft", False),
]
RL_RUNS = ("grpo", "grpo_on_sft")
SECOND_JUDGE = "langdetect"  # with --rl every pass is also judged by a second LID (a column of Table 11)
# with --rl: the base model and every RL run's final model on prompts in languages the RL mix never asked for
# (cs, fi, bg, bn, uk; fastText and langdetect), as a second table with paired tests against base
OUTSIDE_SUITE = "mitigation_outside_lcb"
# the task axis of every row: verifiable prompts (answers checked by code), cheap: 5 languages x 10 problems per
# task (mono: the problem in X; cross: the English problem + a request for X), greedy, 48 new tokens
TASK_SUITE = "task_axis"  # eval/task_axis.yaml: the arithmetic problems and the extractive questions
TASK_LANGUAGES = ["de", "fr", "ru", "zh", "hi"]
TASK_SETTINGS = {
    "languages": TASK_LANGUAGES,
    "per_language": 10,
    "samples": 1,
    "decoding": {"temperature": 0.0, "max_new_tokens": 48},
}


HELP = "the main job: SFT / preference tuning vs decoding-time mitigation on CPU, curves + Table 11 with intervals"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The experiment's flags (`mlft demo` and `python recipes/demo.py` take the same)."""
    p.add_argument("--out", default="runs/demo", help="folder for the runs, curves.png and mitigation.md")
    p.add_argument(
        "--full",
        action="store_true",
        help="every row: + multilingual and English preference runs, few-shot, quantized variants, mid-run checkpoints",
    )
    p.add_argument("--sft-steps", type=int, default=32, help="SFT optimizer steps per run")
    p.add_argument("--dpo-steps", type=int, default=12, help="preference-tuning steps per run (0: none)")
    p.add_argument(
        "--rl",
        action="store_true",
        help="add GRPO rows (online RL, the LCB judge as the reward, the "
        "guard as the constraint): from the base model and on the cross-lingual SFT checkpoint; every "
        f"pass is also judged by {SECOND_JUDGE} (see docs/rl.md)",
    )
    p.add_argument("--rl-steps", type=int, default=16, help="GRPO optimizer steps per RL run")
    p.add_argument("--suite", default="lcb_demo", help="eval suite of the callback")
    p.add_argument("--max-new-tokens", type=int, help="override the suite's max_new_tokens (faster passes)")
    p.add_argument(
        "--samples",
        type=int,
        help="replies per prompt of every pass (default: the suite's `samples`; "
        "each reply a draw of its own, intervals resample prompts)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the story's seed: every run's training seed, and every pass's decoding seed unless --decode-seed "
        "names another (rerun with other seeds to see which claims hold: measurements/demo_seeds.py)",
    )
    p.add_argument(
        "--decode-seed",
        type=int,
        default=None,
        help="every pass's decoding seed, apart from the training seed (default: --seed); measurements/demo_seeds.py "
        "holds it fixed so that the seeds' spread is the training seed's",
    )
    p.add_argument(
        "--task",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"the task axis: every row's model on {TASK_SUITE} ({len(TASK_LANGUAGES)} languages x 10 problems per "
        "task, greedy) beside the suite: a task column with intervals, paired tests and the guard's flag",
    )
    p.add_argument(
        "--decoding-row",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"add the inference-time mitigation ({DECODE_SMARTER.variant}) on the base model and on "
        "the cross-lingual SFT checkpoint as rows (default: only with --full)",
    )


def _ensure_lcb_data(full: bool = False) -> dict[str, Path]:
    """The demo's LCB files: the test sets and the word list (WPR), with --full the few-shot examples too
    (`mlft.ensure_lcb_data`: $MLFT_LCB_DATA, the cache, ../shared/lcb beside a checkout, else a checksum-checked
    download). Raises MissingDataError (naming `mlft lcb --from PATH` and MLFT_LCB_DATA) when none has them."""
    return mlft.ensure_lcb_data("the demo (it evaluates on the LCB test sets)", few_shot=full)


def _train(recipe_path: str, settings: dict) -> Path:
    recipe = mlft.load_recipe(recipe_path, settings=settings)  # validated before anything is loaded
    log.info("\n=== mlft train %s %s", recipe_path, json.dumps(settings, default=str))
    return Path(mlft.train(recipe, progress=True).run_dir)


def _baseline(base: Path, suite: str, suite_settings: dict, full: bool, decoding_row: bool) -> None:
    """Every step-0 pass, once, in its own run folder `base/` (the runs share it instead of redoing it)."""

    variants = [copy.deepcopy(DECODE_SMARTER)] if decoding_row else []
    fewshot = copy.deepcopy(FEWSHOT) if full else []
    log.info("\n=== step-0 evaluation of the base model (shared by every run)")
    mlft.evaluate_checkpoint(
        base,
        BASE_MODEL,
        step=0,
        mode="baseline",
        suite=suite,
        suite_overrides=suite_settings,
        variants=variants,
        fewshot=full,
        fewshot_variants=fewshot,
        quantized=list(QUANTIZATION_SCHEMES) if full else [],
    )


def _share_baseline(base: Path, dst: Path) -> None:
    """Copy the base model's step-0 pass (rows and files) into a run: its curve starts there."""
    mlft.load_run(base).copy_pass(dst, step=0, variant="model")


def run_settings(
    out: Path,
    key: str,
    steps: int,
    full: bool,
    parent_dir: Path | None,
    evaluation: dict,
    decoding_row: bool,
    seed: int = 0,
) -> dict:
    """The recipe settings of one demo run (laid over its recipe); with the decoding row, the cross-lingual SFT
    run's callback also evaluates every checkpoint with DECODE_SMARTER (fine-tune and decode smarter)."""
    every = max(1, steps // 2) if full and parent_dir is None else steps
    settings = {
        "run_dir": str(out / key),
        "training_args": {"max_steps": steps, "save_steps": every},
        "evaluation": copy.deepcopy(evaluation),
    }
    if seed:  # the story's seed (0: each recipe's own training seed, as the committed numbers were made)
        settings["training_args"]["seed"] = seed
    if parent_dir is not None:
        settings["model"] = str(parent_dir / "final")
    if decoding_row and key == "crosslingual_sft":
        settings["evaluation"]["variants"] = [copy.deepcopy(DECODE_SMARTER)]
    return settings


def evaluation_settings(suite: str, suite_settings: dict) -> dict:
    """Every run's evaluation block: the demo's suite and its settings; no step-0 pass (the shared baseline's)."""
    return {"suite": suite, "suite_overrides": copy.deepcopy(suite_settings), "at_start": False}


def table_spec(
    out: Path,
    runs: dict[str, Path],
    base: Path,
    full: bool,
    decoding_row: bool,
    task: dict[tuple[str, str | None], Path] | None = None,
) -> TableSpec:
    """The mitigation table's spec (Table 11 layout), written to out/table.yaml as the record, checked. `task`:
    {(run key or "base", decoding variant or None): the folder of its task pass} (`task_passes`): those rows get
    the task columns."""
    done = mlft.load_run(base).done
    rows = [RowSpec("base", run=str(base), step=0)]
    if full:
        rows += [
            RowSpec(
                f"+{f.variant}" if f.variant != "Q/A template" else "+Q/A template",
                run=str(base),
                step=0,
                variant=f.variant,
            )
            for f in FEWSHOT
        ]
    name = DECODE_SMARTER.variant
    if decoding_row and (0, name) in done:
        rows.append(RowSpec(name, run=str(base), step=0, variant=name))
    rows += [RowSpec(r.label, run=str(runs[r.key])) for r in RUNS if r.key in runs]
    if decoding_row and "crosslingual_sft" in runs:  # fine-tune and decode smarter: the callback's variant pass
        rows.append(RowSpec(f"+Cross-lingual SFT {name}", run=str(runs["crosslingual_sft"]), variant=name))
    spec = TableSpec(
        rows, title="Language confusion mitigation on SmolLM2-135M-Instruct (CPU demo, Table 11 layout, %)", base="base"
    )
    if any(key in runs for key in RL_RUNS):  # the second judge beside fastText, scored in each row's own pass
        spec.capability = judge_columns(SECOND_JUDGE)
    if task:
        _attach_task(spec.rows, runs, base, task)
        spec.capability += task_columns()
    if full and "crosslingual_sft" in runs:
        spec.quantization = [RowSpec("base", run=str(base), step=0, variants=["model", *QUANTIZATION_SCHEMES])]
    return mlft.save_spec(spec, out / "table.yaml")  # table.yaml: the user's record (`mlft table` rebuilds it)


def _row_key(row: RowSpec, runs: dict[str, Path], base: Path) -> tuple[str, str | None] | None:
    """(run key or "base", decoding variant or None) of a mitigation row; None for a few-shot row (a prompting
    change the task suite's prompts do not carry)."""
    keys = {str(base): "base", **{str(d): k for k, d in runs.items()}}
    key = keys.get(str(row.run))
    if key is None or (row.variant not in ("model", DECODE_SMARTER.variant)):
        return None
    return key, None if row.variant == "model" else row.variant


def _attach_task(rows: list[RowSpec], runs: dict[str, Path], base: Path, task: dict) -> None:
    for row in rows:
        folder = task.get(_row_key(row, runs, base))
        if folder is not None:
            row.capability_rows_file = str(folder / "scores.jsonl")


def task_passes(
    out: Path, runs: dict[str, Path], decoding_row: bool, seed: int = 0
) -> tuple[dict[tuple[str, str | None], Path], float]:
    """The task axis: each row's model on the verifiable suite (TASK_SUITE with TASK_SETTINGS), the base model and
    every run's final model, and with the decoding row its DECODE_SMARTER variant on the base and the
    cross-lingual SFT models. Resumable (finished completions are reused). Returns ({(run key, variant): folder},
    seconds spent)."""
    t0 = time.time()
    jobs = [("base", BASE_MODEL, None), *[(k, str(d / "final"), None) for k, d in runs.items()]]
    if decoding_row:
        jobs += [(k, ref, DECODE_SMARTER) for k, ref, _ in jobs if k in ("base", "crosslingual_sft")]
    folders = {}
    for key, model_ref, variant in jobs:
        s = copy.deepcopy(TASK_SETTINGS)
        if seed:  # the decoding seed (greedy decoding: only the keyed draws, not the prompts, depend on it)
            s["decoding"]["seed"] = seed
        name = variant.variant if variant else "model"
        s["variants"] = [{"name": name, "interventions": copy.deepcopy(variant.interventions) if variant else []}]
        folder = out / "task" / (key if variant is None else f"{key}+decoding")
        log.info("\n=== task axis: %s%s on %s", key, f" {name}" if variant else "", TASK_SUITE)
        mlft.evaluate(model_ref, TASK_SUITE, settings=s, out=folder, progress=True, report_page=False)
        folders[(key, variant.variant if variant else None)] = folder
    return folders, time.time() - t0


def _outside_lcb(out: Path, runs: dict[str, Path], max_new_tokens: int | None) -> list[str]:
    """The base model and each RL run's final model on eval/outside_lcb_prompts.jsonl (languages outside LCB's 15
    that the RL mix never asked for), no intervention; one table (paired tests against base, the guard, both
    judges). Resumable: finished completions are reused. Returns the tables."""
    settings = {"variants": [{"name": "base", "interventions": []}]}
    if max_new_tokens:
        settings["decoding"] = {"max_new_tokens": max_new_tokens}
    rows = []
    for key, model_ref, label in [
        ("base", BASE_MODEL, "base"),
        *[(r.key, str(runs[r.key] / "final"), r.label) for r in RUNS if r.key in RL_RUNS and r.key in runs],
    ]:
        folder = out / "outside_lcb" / key
        log.info("\n=== %s on prompts outside LCB's languages (%s)", label, OUTSIDE_SUITE)
        mlft.evaluate(model_ref, OUTSIDE_SUITE, settings=settings, out=folder, progress=True, report_page=False)
        rows.append(RowSpec(label, rows_file=str(folder / "scores.jsonl"), suite_variant="base"))
    spec = TableSpec(
        rows,
        title="GRPO on languages outside LCB's 15 and outside the RL mix (cs, fi, bg, bn, uk; %)",
        base="base",
        capability=judge_columns(SECOND_JUDGE),
    )
    built = mlft.mitigation_tables(mlft.save_spec(spec, out / "outside_lcb" / "table.yaml"))
    (out / "outside_lcb.md").write_text(built.table("markdown"), encoding="utf-8")
    return built


def _command(args) -> str:
    """The `mlft demo` command line that gives these settings (defaults left out)."""
    parts = ["mlft demo"]
    for flag, default in (
        ("out", "runs/demo"),
        ("sft_steps", 32),
        ("dpo_steps", 12),
        ("rl_steps", 16),
        ("suite", "lcb_demo"),
        ("max_new_tokens", None),
        ("samples", None),
        ("seed", 0),
        ("decode_seed", None),
    ):
        if getattr(args, flag) != default:
            parts.append(f"--{flag.replace('_', '-')} {getattr(args, flag)}")
    parts += [f"--{flag}" for flag in ("full", "rl") if getattr(args, flag)]
    if not getattr(args, "task", True):
        parts.append("--no-task")
    if args.decoding_row is not None:
        parts.append("--decoding-row" if args.decoding_row else "--no-decoding-row")
    return " ".join(parts)


def demo_config(args, suite_settings: dict, runs: dict[str, Path], lcb_files: dict[str, Path]) -> dict:
    """What a demo's numbers depend on, for its results.json: the command and settings, the evaluation suite
    (its sample, seeds, decoding and replies per prompt), every run's recipe, steps and seeds, and the sha256
    of the LCB files it read."""
    suite = load_suite(args.suite, settings=suite_settings).options
    run_seeds = {}
    for r in RUNS:
        key, recipe = r.key, r.recipe
        if key not in runs:
            continue
        try:
            saved = json.loads((runs[key] / "results.json").read_text(encoding="utf-8"))["config"]["recipe"]
        except (OSError, KeyError, json.JSONDecodeError):
            saved = {}
        targs = saved.get("training_args", {})
        run_seeds[key] = {
            "recipe": recipe,
            "run_dir": str(runs[key]),
            "max_steps": targs.get("max_steps"),
            "seed": targs.get("seed", 42),
            "mix": saved.get("mix"),
        }  # 42: transformers' default
    settings = {k: v for k, v in vars(args).items() if k != "func" and not callable(v)}
    return {
        "command": _command(args),
        "settings": settings,
        "suite": {
            "name": args.suite,
            "settings": suite_settings,
            "tasks": suite.tasks,
            "sources": suite.sources,
            "per_language": suite.per_language,
            "seed": suite.seed,
            "decoding": dataclasses.asdict(suite.decoding),
            "samples_per_prompt": suite.samples,
        },
        "runs": run_seeds,
        **({"task_suite": {"name": TASK_SUITE, "settings": TASK_SETTINGS}} if getattr(args, "task", True) else {}),
        "lcb_files": {name: (_sha256(p) if p.is_file() else "folder") for name, p in lcb_files.items()},
    }


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def decode_seed(args) -> int:
    """Every pass's decoding seed: --decode-seed, else the story's --seed."""
    d = getattr(args, "decode_seed", None)
    return args.seed if d is None else d


def suite_settings(args) -> dict:
    """The suite settings of every pass: max_new_tokens, replies per prompt, the decoding seed, the judge."""
    out: dict = {}
    if args.max_new_tokens:
        out.setdefault("decoding", {})["max_new_tokens"] = args.max_new_tokens
    if args.samples is not None:
        out["samples"] = args.samples
    if decode_seed(args):
        out.setdefault("decoding", {})["seed"] = decode_seed(args)
    if args.rl:
        out["judge"] = SECOND_JUDGE
    return out


def run(args) -> int:
    t0 = time.time()
    lcb_files = _ensure_lcb_data(args.full)
    out = Path(args.out)
    settings = suite_settings(args)
    evaluation = evaluation_settings(args.suite, settings)
    decoding_row = args.full if args.decoding_row is None else args.decoding_row
    base = out / "base"
    _baseline(base, args.suite, settings, args.full, decoding_row)
    runs: dict[str, Path] = {}
    for r in RUNS:
        rl = r.key in RL_RUNS
        if rl and not (args.rl and args.rl_steps > 0):
            continue
        if not rl and (not (r.default or args.full) or (r.parent is not None and args.dpo_steps <= 0)):
            continue
        if r.parent is not None and r.parent not in runs:
            continue
        steps = args.rl_steps if rl else args.dpo_steps if r.parent else args.sft_steps
        recipe_settings = run_settings(
            out, r.key, steps, args.full, runs[r.parent] if r.parent else None, evaluation, decoding_row, args.seed
        )
        if not r.parent:
            _share_baseline(base, out / r.key)
        runs[r.key] = _train(r.recipe, recipe_settings)

    log.info("\n=== curves")
    loaded = mlft.load_runs(list(runs.values()))
    log.info("%s", loaded.table())
    png = loaded.plot(out / "curves.png")
    heatmaps = loaded.heatmaps(out)
    log.info("wrote %s and %d heatmaps", png, len(heatmaps))
    rl = {key: runs[key] for key in RL_RUNS if key in runs}
    if rl:
        log.info(
            "wrote %s (GRPO reward terms per step)",
            mlft.plot_reward_curves(list(rl.values()), out / "rewards.png"),
        )
    task, task_s = ({}, 0.0)
    if args.task:
        task, task_s = task_passes(out, runs, decoding_row, decode_seed(args))
    page = mlft.report_page([base, *runs.values()], out)  # every checkpoint's replies, one page
    log.info("\n=== mitigation table")
    spec = table_spec(out, runs, base, args.full, decoding_row, task)
    built = mlft.mitigation_tables(spec)
    (out / "mitigation.md").write_text(built.table("markdown"), encoding="utf-8")
    table_png = built.plot(out / "mitigation.png")
    log.info("%s", built.table())
    results_tables = {"mitigation": built}
    if rl:
        outside = _outside_lcb(out, runs, args.max_new_tokens)
        log.info("%s", outside.table())
        results_tables["outside_lcb"] = outside
    passes = [dict(p, run=name) for name, d in {"base": base, **runs}.items() for p in mlft.load_run(d).passes]
    in_training = [p for p in passes if p["mode"] in ("in-process", "separate-process")]
    train_wall = sum(json.loads((d / "complete").read_text())["wall_s"] for d in runs.values())
    timing = {
        "wall_s": round(time.time() - t0, 1),
        "train_wall_s": round(train_wall, 1),
        "callback_s": round(sum(p["seconds"] for p in in_training), 1),
        "baseline_s": round(sum(p["seconds"] for p in passes if p["mode"] == "baseline"), 1),
        "eval_passes": passes,
    }
    timing["callback_share"] = round(timing["callback_s"] / train_wall, 3) if train_wall else None
    if task:  # the task axis's cost: its passes against the suite's own passes of the same rows
        suite_s = [p["seconds"] for p in passes if p["variant"] == "model" and p["seconds"]]
        per_pass = task_s / len(task)
        timing["task_s"] = round(task_s, 1)
        timing["task_passes"] = len(task)
        timing["task_share"] = round(per_pass / (sum(suite_s) / len(suite_s)), 3) if suite_s else None
        log.info(
            "task axis: %d passes of %s in %.0f s (%.0f s a pass = %.0f %% of a %s pass)",
            len(task),
            TASK_SUITE,
            task_s,
            per_pass,
            100 * (timing["task_share"] or 0),
            args.suite,
        )
    (out / "timings.json").write_text(json.dumps(timing, indent=2), encoding="utf-8")
    results = mlft.write_results(
        out, demo_config(args, settings, runs, lcb_files), t0, time.time() - t0, "demo", results_tables
    )
    log.info(
        "eval passes (s): %s",
        ", ".join(f"{p['run']}@{p['step']}/{p['variant']}={p['seconds']:.0f}" for p in passes if p["seconds"]),
    )
    log.info(
        "demo wall time: %.0f s (training runs %.0f s, of which the eval callback %.0f s = %.0f %%; shared "
        "step-0 passes %.0f s); wrote %s, %s, %s, %s, %s, %s",
        timing["wall_s"],
        train_wall,
        timing["callback_s"],
        100 * (timing["callback_share"] or 0),
        timing["baseline_s"],
        out / "mitigation.md",
        table_png,
        png,
        out / "timings.json",
        results,
        page or "no report page",
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python recipes/demo.py [flags]`: the same as `mlft demo [flags]`, with this file's experiment."""
    parser = argparse.ArgumentParser(
        prog="demo.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    mlft.setup_logging()
    try:
        return int(run(args) or 0)
    except MlftError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("demo: interrupted (finished work is kept; rerun to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

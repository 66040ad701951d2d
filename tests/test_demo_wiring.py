"""The demo's wiring without running it (the full demo is the README's main job, ~14 min): the experiment script
recipes/demo.py behind `mlft demo`; the decoding row's callback variant reaches the cross-lingual SFT recipe
intact and validated, and the table spec gets the three rows fine-tune / decode smarter / both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from mlft.cli import parse_args
from mlft.commands.demo import experiment, script_path
from mlft.io import curve_file
from mlft.reports.table_spec import load_spec, spec_record
from mlft.training.passes import passes_for
from mlft.training.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]
demo = experiment()
DECODE_SMARTER = demo.DECODE_SMARTER


def test_mlft_demo_is_the_front_door_of_the_shipped_script():
    """`mlft demo` runs recipes/demo.py (the shipped copy): the same flags, the same `run`; the script also runs
    on its own (`python recipes/demo.py --help`)."""
    assert script_path() == ROOT / "recipes" / "demo.py" and Path(demo.__file__) == script_path()
    args = parse_args(["demo", "--max-new-tokens", "16", "--samples", "2", "--seed", "3", "--rl", "--no-decoding-row"])
    assert (args.max_new_tokens, args.samples, args.seed, args.rl, args.decoding_row) == (16, 2, 3, True, False)
    assert args.out == "runs/demo" and args.sft_steps == 32 and args.dpo_steps == 12 and args.rl_steps == 16
    assert demo._command(args) == "mlft demo --max-new-tokens 16 --samples 2 --seed 3 --rl --no-decoding-row"
    assert demo.suite_settings(args) == {
        "decoding": {"max_new_tokens": 16, "seed": 3},
        "samples": 2,
        "judge": demo.SECOND_JUDGE,
    }
    # the training seed and the decoding seed apart: --decode-seed moves every pass's draws, not the runs' seed
    apart = parse_args(["demo", "--seed", "3", "--decode-seed", "0"])
    assert demo._command(apart) == "mlft demo --seed 3 --decode-seed 0"
    assert "decoding" not in demo.suite_settings(apart) and demo.decode_seed(apart) == 0
    assert (
        demo.run_settings(Path("r"), "english_sft", 4, False, None, {}, False, apart.seed)["training_args"]["seed"] == 3
    )
    moved = parse_args(["demo", "--decode-seed", "7"])
    assert demo.suite_settings(moved) == {"decoding": {"seed": 7}} and moved.seed == 0
    own = subprocess.run(
        [sys.executable, str(script_path()), "--help"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert own.returncode == 0 and "--max-new-tokens" in own.stdout and "--decoding-row" in own.stdout


def test_decoding_row_becomes_a_validated_callback_pass_of_the_crosslingual_sft_run(tmp_path):
    evaluation = demo.evaluation_settings("lcb_demo", {})
    settings = demo.run_settings(
        tmp_path, "crosslingual_sft", steps=4, full=False, parent_dir=None, evaluation=evaluation, decoding_row=True
    )
    recipe = load_recipe(ROOT / "recipes/cpu/crosslingual_sft.yaml", settings=settings)  # validates the interventions
    extra = [p for p in passes_for(recipe.evaluation) if p.variant == DECODE_SMARTER.variant]
    assert len(extra) == 1 and [dict(i) for i in extra[0].interventions] == DECODE_SMARTER.interventions
    assert recipe.run_dir == str(tmp_path / "crosslingual_sft") and recipe.evaluation.at_start is False
    assert recipe.training_args["max_steps"] == recipe.training_args["save_steps"] == 4
    plain = demo.run_settings(
        tmp_path, "english_sft", steps=4, full=False, parent_dir=None, evaluation=evaluation, decoding_row=True
    )
    assert "variants" not in plain["evaluation"]  # only the cross-lingual SFT run
    off = demo.run_settings(
        tmp_path, "crosslingual_sft", steps=4, full=False, parent_dir=None, evaluation=evaluation, decoding_row=False
    )
    assert "variants" not in off["evaluation"] and "variants" not in evaluation  # nothing shared is changed


def test_table_spec_has_finetune_decode_and_both(tmp_path):
    base, sft = tmp_path / "base", tmp_path / "crosslingual_sft"
    row = {"task": "crosslingual", "language": "avg", "metric": "lpr", "value": 0.5, "low": 0.4, "high": 0.6}
    for run, step, variant in (
        (base, 0, "model"),
        (base, 0, DECODE_SMARTER.variant),
        (sft, 4, "model"),
        (sft, 4, DECODE_SMARTER.variant),
    ):
        curve_file.append_pass(run, step, variant, [dict(row, step=step, variant=variant)], 1.0, "test")
    spec = demo.table_spec(tmp_path, {"crosslingual_sft": sft}, base, False, True)
    got = [(r.label, r.variant) for r in spec.rows]
    name = DECODE_SMARTER.variant
    assert got == [
        ("base", "model"),
        (name, name),
        ("+Cross-lingual SFT", "model"),
        (f"+Cross-lingual SFT {name}", name),
    ]
    record = yaml.safe_load((tmp_path / "table.yaml").read_text())  # the user's record: `mlft table` reads it back
    assert [(r["label"], r.get("variant", "model")) for r in record["rows"]] == got
    assert record == spec_record(load_spec(tmp_path / "table.yaml")) == spec_record(spec)
    assert record["rows"][0] == {"label": "base", "run": str(base), "step": 0}  # defaults left out, as before
    without = demo.table_spec(tmp_path, {"crosslingual_sft": sft}, base, False, False)
    assert [r.label for r in without.rows] == ["base", "+Cross-lingual SFT"]


def test_rl_rows_validate_and_get_the_second_judge_column(tmp_path):
    """`mlft demo --rl`: the GRPO recipes take the demo's overrides (the GRPO-on-SFT run starts from the SFT run's
    final/), and the table gains GRPO rows beside SFT with the langdetect LPR read from each row's own pass."""
    RL_RUNS, RUNS, SECOND_JUDGE = demo.RL_RUNS, demo.RUNS, demo.SECOND_JUDGE

    args = parse_args(["demo", "--rl"])
    ev = demo.evaluation_settings("lcb_demo", demo.suite_settings(args))
    recipes = {run.key: (run.recipe, run.parent) for run in RUNS}
    assert set(RL_RUNS) <= set(recipes) and recipes["grpo_on_sft"][1] == "crosslingual_sft"
    r = load_recipe(
        ROOT / recipes["grpo"][0],
        settings=demo.run_settings(
            tmp_path, "grpo", steps=4, full=False, parent_dir=None, evaluation=ev, decoding_row=False
        ),
    )
    assert r.trainer == "grpo" and r.training_args["max_steps"] == 4
    assert r.evaluation.suite_overrides == {"judge": SECOND_JUDGE}
    base, sft, grpo = tmp_path / "base", tmp_path / "crosslingual_sft", tmp_path / "grpo_on_sft"
    row = {"task": "crosslingual", "language": "avg", "metric": "lpr", "value": 0.5, "low": 0.4, "high": 0.6}
    for run, step in ((base, 0), (sft, 4), (grpo, 4)):
        curve_file.append_pass(run, step, "model", [dict(row, step=step, variant="model")], 1.0, "test")
    spec = demo.table_spec(tmp_path, {"crosslingual_sft": sft, "grpo_on_sft": grpo}, base, False, False)
    assert [r.label for r in spec.rows] == ["base", "+Cross-lingual SFT", "+Cross-lingual SFT +GRPO"]
    assert [c.metric for c in spec.capability] == [f"lpr@{SECOND_JUDGE}"] * 2
    assert all(c.variant is None for c in spec.capability)  # each row's own pass
    record = yaml.safe_load((tmp_path / "table.yaml").read_text())
    assert all(c["variant"] is None for c in record["capability"])  # kept in the record: not the default


def test_rl_outside_lcb_table_has_base_and_rl_rows_both_judges_and_the_outside_languages(tmp_path, monkeypatch):
    """`mlft demo --rl`'s second table: base and each RL run's final model on the suite outside LCB's languages,
    without its interventions, with the demo's max_new_tokens; rows from each model's scores, the langdetect
    columns, and per-language columns for cs / fi (languages outside LCB's 15)."""
    calls = []

    def fake_run_suite(suite, target, out_dir, *, progress):
        model_ref = target.model_ref
        opts = suite.options
        calls.append((suite.name, [v.name for v in opts.variants], opts.decoding.max_new_tokens, model_ref))
        out_dir.mkdir(parents=True, exist_ok=True)
        good = model_ref != demo.BASE_MODEL
        rows = [
            {
                "suite": suite.name,
                "variant": "base",
                "task": task,
                "language": lang,
                "metric": metric,
                "value": value,
                "low": value,
                "high": value,
                "n": 10,
            }
            for task in ("monolingual", "crosslingual")
            for lang, value in (
                ("cs", 0.9 if good else 0.5),
                ("fi", 0.8 if good else 0.4),
                ("avg", 0.85 if good else 0.45),
            )
            for metric in ("lpr", "lpr@langdetect")
        ]
        (out_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    monkeypatch.setattr("mlft.evals.runner.run_suite", fake_run_suite)  # what mlft.evaluate runs
    runs = {"grpo": tmp_path / "grpo", "crosslingual_sft": tmp_path / "crosslingual_sft"}
    text = "\n".join(t.render("table") for t in demo._outside_lcb(tmp_path, runs, max_new_tokens=16))
    assert calls == [
        (demo.OUTSIDE_SUITE, ["base"], 16, demo.BASE_MODEL),
        (demo.OUTSIDE_SUITE, ["base"], 16, str(tmp_path / "grpo" / "final")),
    ]
    md = (tmp_path / "outside_lcb.md").read_text(encoding="utf-8")
    assert "| +GRPO (correct x gated language) | 85.0 ±0.0 |" in md and "| base | 45.0 ±0.0 |" in md
    assert "Cross LPR (langdetect)" in md and "| | cs | fi | avg |" in md.replace("|  |", "| |")
    assert "+GRPO (correct x gated language)" in text

"""`mlft demo` wiring without running it (the full demo is the README's main job, ~14 min): the decoding row's
callback variant reaches the cross-lingual SFT recipe intact and validated, and the table spec gets the three
rows fine-tune / decode smarter / both."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mlft.commands.demo import DECODE_SMARTER, _table_spec, run_overrides
from mlft.io import curve_file
from mlft.training.passes import passes_for
from mlft.training.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]


def test_decoding_row_becomes_a_validated_callback_pass_of_the_crosslingual_sft_run(tmp_path):
    overrides = run_overrides(tmp_path, "crosslingual_sft", steps=4, full=False, parent_dir=None,
                              ev_args=["evaluation.suite=lcb_demo", "evaluation.at_start=false"], decoding_row=True)
    recipe = load_recipe(ROOT / "recipes/cpu/crosslingual_sft.yaml", overrides)  # validates the interventions
    extra = [p for p in passes_for(recipe.evaluation) if p.variant == DECODE_SMARTER["variant"]]
    assert len(extra) == 1 and [dict(i) for i in extra[0].interventions] == DECODE_SMARTER["interventions"]
    plain = run_overrides(tmp_path, "english_sft", steps=4, full=False, parent_dir=None, ev_args=[],
                          decoding_row=True)
    assert not any(o.startswith("evaluation.variants=") for o in plain)  # only the cross-lingual SFT run
    off = run_overrides(tmp_path, "crosslingual_sft", steps=4, full=False, parent_dir=None, ev_args=[],
                        decoding_row=False)
    assert not any(o.startswith("evaluation.variants=") for o in off)


def test_table_spec_has_finetune_decode_and_both(tmp_path):
    base, sft = tmp_path / "base", tmp_path / "crosslingual_sft"
    row = {"task": "crosslingual", "language": "avg", "metric": "lpr", "value": 0.5, "low": 0.4, "high": 0.6}
    for run, step, variant in ((base, 0, "model"), (base, 0, DECODE_SMARTER["variant"]), (sft, 4, "model"),
                               (sft, 4, DECODE_SMARTER["variant"])):
        curve_file.append_pass(run, step, variant, [dict(row, step=step, variant=variant)], 1.0, "test")
    spec = yaml.safe_load(_table_spec(tmp_path, {"crosslingual_sft": sft}, base, False, True).read_text())
    got = [(r["label"], r.get("variant", "model")) for r in spec["rows"]]
    name = DECODE_SMARTER["variant"]
    assert got == [("base", "model"), (name, name), ("+Cross-lingual SFT", "model"),
                   (f"+Cross-lingual SFT {name}", name)]
    without = yaml.safe_load(_table_spec(tmp_path, {"crosslingual_sft": sft}, base, False, False).read_text())
    assert [r["label"] for r in without["rows"]] == ["base", "+Cross-lingual SFT"]
    assert json.loads(json.dumps(DECODE_SMARTER)) == DECODE_SMARTER  # the override is JSON (YAML flow)

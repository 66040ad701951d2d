"""Evidence in the reports: Table 11 cells carry ± intervals, rows that differ from the base row are marked
(paired over the same prompts), a degenerate row is flagged by the guard, `mlft compare` finds a planted
difference, and curves draw continued runs after their parent with bands."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from mlft.cli import main
from mlft.evals.lcb import metric_rows
from mlft.io import curve_file
from mlft.stats import Outcome, save_outcomes

LANGS = ("ar", "de", "ja", "ko", "ru", "zh")


def _outcomes(p_line_error: float, p_counted: float = 1.0, seed: int = 0, degenerate: float = 0.0):
    rng = random.Random(seed)
    out = []
    for task in ("monolingual", "crosslingual"):
        for lang in LANGS:
            for i in range(40):
                counted = rng.random() < p_counted
                out.append(
                    Outcome(
                        f"{task}/s/{lang}/{i}",
                        task,
                        "s",
                        lang,
                        counted,
                        counted and rng.random() < p_line_error,
                        False,
                        rng.random() < degenerate,
                    )
                )
    return out


def _run(tmp: Path, name: str, steps: dict[int, list], start_model: str | None = None) -> Path:
    run = tmp / name
    for step, outs in steps.items():
        rel = Path("evals") / f"step-{step:06d}" / "model" / "default" / "outcomes.jsonl"
        save_outcomes(run / rel, outs)
        rows = [
            {"step": step, "variant": "model", "suite": "s", "suite_variant": "default", **r, "outcomes": str(rel)}
            for r in metric_rows("default", outs, 0.95, 500)
        ]
        for r in rows:
            r.pop("variant", None)
            r["variant"] = "model"
        curve_file.append_pass(run, step, "model", rows, 1.0, "in-process")
    if start_model:
        (run / "recipe.yaml").write_text(f"model: {start_model}\n")
    (run / "complete").write_text(json.dumps({"global_step": max(steps)}))
    return run


@pytest.fixture
def runs(tmp_path):
    base = _outcomes(0.5, seed=1)
    good = _outcomes(0.5, seed=1)  # the same prompts, a planted improvement on every prompt's line error
    good = [
        Outcome(
            o.id,
            o.task,
            o.source,
            o.language,
            o.counted,
            o.line_error and random.Random(o.id).random() < 0.3,
            o.word_error,
            o.degenerate,
        )
        for o in good
    ]
    garbage = _outcomes(0.0, p_counted=0.1, seed=2, degenerate=0.9)  # LPR ~100 % by scoring almost nothing
    sft = _run(tmp_path, "sft", {0: base, 10: good})
    dpo = _run(tmp_path, "dpo", {5: garbage}, start_model=str(sft / "final"))
    return tmp_path, sft, dpo


def test_table_marks_significant_rows_and_flags_degenerate_ones(runs, capsys):
    tmp, sft, dpo = runs
    spec = tmp / "t.yaml"
    spec.write_text(
        f"rows:\n  - {{label: base, run: {sft}, step: 0}}\n  - {{label: +good, run: {sft}}}\n"
        f"  - {{label: +garbage, run: {dpo}}}\nper_language: [{{task: crosslingual, metric: lpr}}]\n"
    )
    png = tmp / "t.png"
    assert main(["show", "table", str(spec), "--format", "markdown", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    good = next(x for x in out.splitlines() if x.startswith("| +good |"))
    garbage = next(x for x in out.splitlines() if x.startswith("| +garbage"))
    base = next(x for x in out.splitlines() if x.startswith("| base |"))
    assert "±" in base and "*" not in base
    assert good.split("|")[2].strip().endswith("*")  # mono LPR up, paired test significant
    assert "⚠" in garbage  # coverage collapsed: the guard flags it although its LPR is high
    assert float(garbage.split("|")[2].split("±")[0]) > 90
    assert "⚠ +garbage" in out and "coverage" in out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_compare_finds_the_planted_difference_and_not_a_null(runs, capsys):
    tmp, sft, _ = runs
    assert main(["compare", f"{sft}@0", f"{sft}@10", "--metric", "lpr", "--format", "json", "--resamples", "2000"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    avg = [r for r in rows if r["language"] == "avg"]
    assert all(r["diff"] > 0.15 and r["p"] < 0.01 and r["ci_low"] > 0 for r in avg)
    assert main(["compare", f"{sft}@0", f"{sft}@0", "--metric", "lpr", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert all(r["diff"] == 0 and r["p"] > 0.5 for r in rows)


def test_curves_continue_the_parent_run_with_bands(runs, capsys):
    tmp, sft, dpo = runs
    png = tmp / "c.png"
    assert main(["show", "curves", str(sft), str(dpo), "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert any(x.split()[:3] == ["dpo", "model", "15"] for x in out.splitlines())  # 10 (sft) + 5
    assert png.stat().st_size > 20_000 and (sft / "heatmap_lpr.png").is_file()


def test_fluency_guard_flags_a_row_whose_replies_got_less_fluent():
    from mlft.reports.table_rows import _fluency_flags

    base = [dataclasses.replace(o, nll=1.0 + (hash(o.id) % 7) / 10) for o in _outcomes(0.5, seed=1)]
    up9 = [dataclasses.replace(o, nll=o.nll * 1.09) for o in base]
    up30 = [dataclasses.replace(o, nll=o.nll * 1.3 if o.task == "crosslingual" else o.nll) for o in base]
    assert _fluency_flags(up9, base, 500) == []  # within the +10 % limit
    flags = _fluency_flags(up30, base, 500)
    assert len(flags) == 1 and flags[0].startswith("crosslingual: fluency NLL") and "+30.0%" in flags[0]


def test_a_resumed_variant_keeps_its_time_per_prompt(tmp_path):
    from mlft.evals.lcb import _timing

    assert _timing(tmp_path, 5.0, 0) is None  # nothing generated, nothing timed
    assert _timing(tmp_path, 10.0, 4) == 2.5  # first session: 4 prompts in 10 s
    assert _timing(tmp_path, 0.01, 0) == 2.5  # resumed with everything cached: the stored cost
    assert _timing(tmp_path, 2.0, 2) == 2.0  # a second session added 2 prompts in 2 s: 12 s / 6
    (tmp_path / "timing.json").write_text("{not json")
    assert _timing(tmp_path, 3.0, 1) == 3.0  # unreadable: counted again from this session

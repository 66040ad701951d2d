"""Curve files, `mlft curves` and `mlft table` on synthetic run directories (no model)."""

from __future__ import annotations

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.generation.target import Target
from mlft.io import curve_file
from mlft.training.passes import EvalPass, EvaluationOptions, PromptVariant, Step, evaluate_step, passes_for


def _rows(step, variant, lpr_mono, lpr_cross, suite_variant="default"):
    out = []
    for task, lpr in (("monolingual", lpr_mono), ("crosslingual", lpr_cross)):
        for lang, v in (("avg", lpr), ("ja", lpr / 2), ("de", 1.0)):
            out.append(
                {
                    "step": step,
                    "variant": variant,
                    "suite": "lcb_demo",
                    "suite_variant": suite_variant,
                    "task": task,
                    "language": lang,
                    "metric": "lpr",
                    "value": v,
                }
            )
        out.append(
            {
                "step": step,
                "variant": variant,
                "suite": "lcb_demo",
                "suite_variant": suite_variant,
                "task": task,
                "language": "avg",
                "metric": "wpr",
                "value": 0.9,
            }
        )
        out.append(
            {
                "step": step,
                "variant": variant,
                "suite": "lcb_demo",
                "suite_variant": suite_variant,
                "task": task,
                "language": "avg",
                "metric": "lcpr",
                "value": 0.8,
            }
        )
    return out


@pytest.fixture()
def two_runs(tmp_path):
    eng, mul = tmp_path / "english_sft", tmp_path / "multilingual_sft"
    for d, final in ((eng, 0.40), (mul, 0.70)):
        d.mkdir()
        curve_file.append_pass(d, 0, "model", _rows(0, "model", 0.9, 0.5), 1.0, "in-process")
        curve_file.append_pass(d, 20, "model", _rows(20, "model", 0.9, final), 1.0, "in-process")
    curve_file.append_pass(mul, 20, "w8", _rows(20, "w8", 0.8, 0.6), 1.0, "in-process")
    curve_file.append_pass(eng, 0, "1-shot", _rows(0, "1-shot", 0.95, 0.55), 1.0, "in-process")
    return eng, mul


def test_curve_file_skips_torn_tail_and_knows_done_passes(tmp_path):
    curve_file.append_pass(tmp_path, 0, "model", _rows(0, "model", 1, 1), 2.0, "in-process")
    with open(tmp_path / curve_file.CURVES, "a") as fh:
        fh.write('{"step": 5, "variant": "mod')  # a crash mid-write
    assert curve_file.done(tmp_path) == {(0, "model")}
    curve_file.append_pass(tmp_path, 5, "model", _rows(5, "model", 1, 1), 2.0, "in-process")
    assert len(curve_file.read_curves(tmp_path)) == 2 * len(_rows(0, "model", 1, 1))
    assert [p["step"] for p in curve_file.read_passes(tmp_path)] == [0, 5]


def test_evaluate_step_runs_only_missing_passes(tmp_path, monkeypatch):
    calls = []

    def fake_run_pass(p, run_dir, step, target, **kw):  # stand-in for generation + scoring
        calls.append((step, p.variant, target.model_ref))
        return _rows(step, p.variant, 0.5, 0.5)

    monkeypatch.setattr("mlft.training.passes.run_pass", fake_run_pass)
    ev = EvaluationOptions(
        suite="lcb_tiny",
        fewshot=True,
        quantized=["w8", "w4"],
        fewshot_variants=[PromptVariant("1-shot", "lcb_tiny", {"prompting": {"shots": 1}})],
    )
    assert [p.variant for p in passes_for(ev)] == ["model", "1-shot", "w8", "w4"]
    assert passes_for(ev)[1].settings == {"prompting": {"shots": 1}}  # the variant's settings, a mapping
    assert passes_for(ev)[2] == EvalPass(
        "w8", "lcb_tiny", {}, ({"name": "quantize", "scheme": "w8"},), at_ends_only=True
    )
    target = Target(model_ref="ckpt-10")
    evaluate_step(tmp_path, ev, Step(10, is_end=False), target)
    assert calls == [(10, "model", "ckpt-10"), (10, "1-shot", "ckpt-10")]  # quantized only at the ends
    evaluate_step(tmp_path, ev, 10, target)  # a plain step number: an end
    assert calls[2:] == [(10, "w8", "ckpt-10"), (10, "w4", "ckpt-10")]
    evaluate_step(tmp_path, ev, Step(10, is_end=True), target)
    assert len(calls) == 4  # resume: nothing twice
    keys = [(r["step"], r["variant"], r["task"], r["language"], r["metric"]) for r in curve_file.read_curves(tmp_path)]
    assert len(keys) == len(set(keys)) == 4 * 10


def test_mlft_curves_plots_and_prints(two_runs, tmp_path, capsys):
    eng, mul = two_runs
    png = tmp_path / "c.png"
    assert main(["show", "curves", str(eng), str(mul), "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    line = next(x for x in out.splitlines() if x.startswith("multilingual_sft") and " w8 " in x)
    assert line.split()[2:5] == ["20", "80.0", "90.0"]  # step, mono LPR, mono WPR (%)
    assert any(x.startswith("english_sft") and "1-shot" in x for x in out.splitlines())


def test_mlft_table_layout_per_language_and_quantization(two_runs, tmp_path, capsys):
    eng, mul = two_runs
    spec = tmp_path / "t.yaml"
    spec.write_text(f"""
rows:
  - {{label: base, run: {eng}, step: 0}}
  - {{label: +1-shot, run: {eng}, step: 0, variant: 1-shot}}
  - {{label: +English SFT, run: {eng}}}
  - {{label: +Multilingual SFT, run: multilingual_sft, step: last}}
quantization:
  - {{label: +Multilingual SFT, run: {mul}, variants: [model, w8]}}
per_language: [{{task: crosslingual, metric: lpr}}]
""")
    assert main(["show", "table", str(spec), "--format", "markdown", "--out", str(tmp_path / "t.md")]) == 0
    out = capsys.readouterr().out
    assert "| +English SFT | 90.0 | 90.0 | 40.0 | 90.0 | 80.0 | – / – | – / – | – / – |" in out
    assert "| +Multilingual SFT | 90.0 | 90.0 | 70.0 | 90.0 | 80.0 |" in out
    assert "| +1-shot | 95.0 | 90.0 | 55.0 | 90.0 | 80.0 |" in out
    assert "| | de | ja | avg |" in out.replace("|  |", "| |")
    assert "| +Multilingual SFT | 100.0 | 35.0 | 70.0 |" in out  # ja = 0.70 / 2
    assert "| +Multilingual SFT | w8 | 80.0 | 90.0 | 60.0 | 90.0 |" in out
    assert (tmp_path / "t.md").read_text() in out


def test_per_language_table_shows_languages_outside_lcb_after_lcbs(tmp_path):
    """A user's prompt file in languages outside LCB's 15 (cs, fi: eval/outside_lcb_prompts.jsonl) gets a column
    per language in the A18/A19 detail, after LCB's languages (it used to show only the average)."""
    from mlft.reports.mitigation import per_language
    from mlft.reports.table_spec import PerLanguage, load_spec

    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {
            "step": 0,
            "variant": "model",
            "suite": "s",
            "suite_variant": "default",
            "task": "crosslingual",
            "language": lang,
            "metric": "lpr",
            "value": v,
        }
        for lang, v in (("fi", 0.25), ("de", 0.5), ("cs", 0.75), ("avg", 0.5))
    ]
    curve_file.append_pass(run, 0, "model", rows, 1.0, "in-process")
    spec = tmp_path / "t.yaml"
    spec.write_text(f"rows:\n  - {{label: base, run: {run}, step: 0}}\n")
    table = per_language(load_spec(spec), PerLanguage("crosslingual", "lpr"))
    assert table.header == ["", "de", "cs", "fi", "avg"]
    assert table.body == [["base", "50.0", "75.0", "25.0", "50.0"]]


def test_table_spec_errors_name_the_row(two_runs, tmp_path):
    from mlft.reports.table_spec import load_spec

    spec = tmp_path / "bad.yaml"
    spec.write_text("rows:\n  - {label: base, run: nowhere}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: row 0 \('base'\): run: not found: nowhere"):
        load_spec(spec)
    spec.write_text("rows:\n  - {label: base, runn: x}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'runn' \(did you mean 'run'\?\)"):
        load_spec(spec)
    eng, _ = two_runs
    spec.write_text(f"rows:\n  - {{label: x, run: {eng}, variant: w4}}\n")
    assert main(["show", "table", str(spec)]) == 2

"""The task axis beside LPR in the rows mlft reports for a mitigation: `mlft compare` gives the task score's paired
difference and flags a drop, the mitigation table's task columns carry the paired test and the guard's flag, and
the paired test itself holds its level on a null and finds a planted drop."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from mlft.cli import main
from mlft.evals.lcb import LcbOptions, metric_rows, task_rows
from mlft.io.jsonl import write_jsonl
from mlft.reports.task_axis import paired_task_test
from mlft.stats import Outcome, save_outcomes, sign_flip_p

LANGS = ("de", "fr", "ru", "zh", "hi")


def _verdicts(p_correct: float, seed: int) -> dict:
    rng = random.Random(seed)
    return {
        (task, lang, f"{task}/{lang}/{i}", 0): rng.random() < p_correct
        for task in ("monolingual", "crosslingual")
        for lang in LANGS
        for i in range(10)
    }


def test_the_paired_task_test_finds_a_planted_drop_and_holds_on_a_null():
    base = _verdicts(0.6, 0)
    worse = {k: v and random.Random(hash(k[2]) % 1000).random() < 0.3 for k, v in base.items()}
    res = paired_task_test(base, worse, "monolingual", n=4000)
    assert res.a > res.b and res.diff == pytest.approx(res.b - res.a)
    assert res.diff < -0.2 and res.ci_high < 0 and res.p_value < 0.001 and res.n_pairs == 50
    same = paired_task_test(base, dict(base), "monolingual", n=4000)
    assert same.diff == 0 and same.p_value == 1.0
    # exact under few differing prompts: 3 prompts each +1 -> only the identity and its mirror reach |T|
    p, patterns, exact = sign_flip_p(np.array([1.0, 1.0, 1.0, 0.0]), n=10000)
    assert exact and patterns == 8 and p == pytest.approx(2 / 8)
    # the level: under "same model" (independent draws of one p) p < 0.05 about 5 % of the time
    hits = sum(
        paired_task_test(_verdicts(0.5, s), _verdicts(0.5, 1000 + s), "crosslingual", n=999, seed=s).p_value < 0.05
        for s in range(60)
    )
    assert hits <= 8


def _variant(folder: Path, name: str, p_correct: float, seed: int) -> list:
    """One variant of an eval folder: outcomes (LPR) and task verdicts, as the lcb kind writes them."""
    rng = random.Random(seed)
    outs, records, key = [], [], {}
    for task in ("monolingual", "crosslingual"):
        for lang in LANGS:
            for i in range(10):
                pid = f"{task}/mlft_arithmetic/{lang}/{i}"
                outs.append(Outcome(pid, task, "mlft_arithmetic", lang, True, rng.random() < 0.2, False, False))
                key[pid] = 7.0
                reply = "7" if rng.random() < p_correct else "no idea"
                records.append({"id": pid, "task": task, "language": lang, "completion": reply})
    vdir = folder / name
    save_outcomes(vdir / "outcomes.jsonl", outs)
    write_jsonl(
        vdir / "completions.jsonl",
        [
            dict(r, source="mlft_arithmetic", model=name, prompt="Lukas hat 3 Äpfel und kauft 4. Wie viele?")
            for r in records
        ],
    )
    rows = [
        dict(r.to_dict(), outcomes=f"{name}/outcomes.jsonl", variant=name) for r in metric_rows(name, outs, 0.95, 200)
    ]
    return rows + [r.to_dict() for r in task_rows(name, records, key, LcbOptions(), vdir)]


@pytest.fixture()
def eval_folder(tmp_path):
    folder = tmp_path / "ev"
    rows = _variant(folder, "base", 0.7, 1) + _variant(folder, "fix", 0.15, 2) + _variant(folder, "same", 0.7, 1)
    write_jsonl(folder / "scores.jsonl", rows)
    return folder, rows


def test_compare_gives_the_task_score_and_flags_its_drop(eval_folder, capsys):
    folder, _ = eval_folder
    args = ["compare", f"{folder}:base", f"{folder}:fix", "--resamples", "2000"]
    assert main([*args, "--metric", "lpr,task", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    task = {(r["task"], r["language"]): r for r in rows if r["metric"] == "task"}
    assert {r["metric"] for r in rows} == {"lpr", "task"}
    mono = task[("monolingual", "avg")]
    assert mono["a"] > 0.5 and mono["b"] < 0.3 and mono["ci_high"] < 0 and mono["p"] < 0.001
    assert mono["task_drop"] and mono["n_pairs"] == 50 and mono["method"] == "permutation"
    assert {lang for (t, lang) in task if t == "crosslingual"} == {*LANGS, "avg"}
    assert main([*args, "--metric", "task"]) == 0
    out = capsys.readouterr().out
    assert "the fix costs answers" in out and "⚠" in out
    assert main(["compare", f"{folder}:base", f"{folder}:same", "--metric", "task", "--format", "json"]) == 0
    same = json.loads(capsys.readouterr().out)["rows"]
    assert same and all(r["diff"] == 0 and not r["task_drop"] for r in same)


def test_compare_reads_the_extraction_axis(eval_folder, capsys):
    """eval/task_axis.yaml's extractive questions write their verdicts under the metric `extraction` (the suite's
    two variants: `task` and `extraction`): `--metric extraction` compares them, names its rows so and flags a
    drop. Before, compare read only rows of the metric `task` and refused the extraction variants ("a side has no
    task verdicts")."""
    folder, rows = eval_folder
    renamed = [dict(r, metric="extraction") if r.get("metric") == "task" else r for r in rows]
    write_jsonl(folder / "scores.jsonl", renamed)
    args = ["compare", f"{folder}:base", f"{folder}:fix", "--resamples", "2000", "--format", "json"]
    assert main([*args, "--metric", "extraction"]) == 0
    got = json.loads(capsys.readouterr().out)["rows"]
    mono = next(r for r in got if (r["task"], r["language"]) == ("monolingual", "avg"))
    assert {r["metric"] for r in got} == {"extraction"} and mono["task_drop"] and mono["p"] < 0.001
    assert main([*args, "--metric", "task"]) == 2  # no arithmetic verdicts on these sides: refused, naming it
    assert "--metric task: a side has no task verdicts" in capsys.readouterr().err


def test_the_mitigation_tables_task_column_is_tested_and_a_drop_flagged(eval_folder):
    from mlft.reports.mitigation import variant_table

    folder, rows = eval_folder
    table = variant_table(rows, folder, ["base", "fix"], {}, "t", task=True)
    cols = table.header.index("Mono task"), table.header.index("Cross task")
    fix = next(r for r in table.body if r[0].startswith("fix"))
    assert fix[0] == "fix ⚠" and all(fix[c].endswith("*") for c in cols)
    flags = [n for n in table.notes if n.startswith("⚠ fix:")]
    assert len(flags) == 2 and all("the fix costs answers" in n for n in flags)  # one per task column, once
    assert flags[0].startswith("⚠ fix: task Mono task: -")
    same = variant_table(rows, folder, ["base", "same"], {}, "t", task=True)  # same verdicts: no star, no flag
    assert not any(n.startswith("⚠ same") for n in same.notes)
    assert not any(same.body[1][c].endswith("*") for c in cols) and same.body[1][0] == "same"
    record = next(r for r in table.data if r["label"] == "fix")["capability"]["Mono task"]
    assert record["value"] < 0.3 and record["p_vs_base"] < 0.001
    # the record holds each task cell's discordant problems (what the seeds' estimate needs): counted from the
    # verdict files themselves, they give the cell's difference
    from mlft.reports.task_axis import discordant, load_verdicts

    a, b = (load_verdicts(folder / v / "task.jsonl") for v in ("base", "fix"))
    got = discordant(a, b, "monolingual")
    assert record["discordant"] == got and got["n"] == 50 and got["down"] > got["up"]
    base_cell = next(r for r in table.data if r["label"] == "base")["capability"]["Mono task"]
    assert (got["up"] - got["down"]) / got["n"] == pytest.approx(record["value"] - base_cell["value"])
    same_cell = next(r for r in same.data if r["label"] == "same")["capability"]["Cross task"]
    assert same_cell["discordant"] == {"up": 0, "down": 0, "n": 50}


def test_discordant_counts_only_one_verdict_a_side():
    """Two verdicts of a prompt a side (K = 2) give fractional differences: no discordant counts."""
    base = _verdicts(0.6, 0)
    two = {**base, **{(t, lang, pid, 1): v for (t, lang, pid, _), v in _verdicts(0.4, 5).items()}}
    from mlft.reports.task_axis import discordant

    assert discordant(two, {k: not v for k, v in two.items()}, "monolingual") is None
    flipped = {k: not v for k, v in base.items()}
    assert discordant(base, flipped, "crosslingual") == {
        "up": sum(not v for k, v in base.items() if k[0] == "crosslingual"),
        "down": sum(v for k, v in base.items() if k[0] == "crosslingual"),
        "n": 50,
    }


def test_the_report_page_shows_the_task_score_and_each_replys_verdict(eval_folder, tmp_path, shared):  # word list
    from mlft.reports.page import write_page

    folder, _ = eval_folder
    _, page = write_page([folder], tmp_path / "page.html")
    view = next(v for v in page.views if v.label.endswith("fix"))
    task = {(m["task"], m["language"]): m for m in view.metrics if m["metric"] == "task"}
    assert task[("monolingual", "avg")]["value"] < 0.3 and task[("monolingual", "avg")]["n"] == 50
    verdicts = [r[15] for r in view.replies]
    assert all(v is not None for v in verdicts) and len(verdicts) == 100
    right = [v for r, v in zip(view.replies, verdicts) if r[8][0][0] == "7"]
    wrong = [v for r, v in zip(view.replies, verdicts) if r[8][0][0] != "7"]
    assert right and wrong and all(v == [True, 7.0, 7.0] for v in right) and all(v == [False, None, 7.0] for v in wrong)
    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert '"task"' in html.split('id="index">')[1].split("</script>")[0]  # among the page's metrics


def test_curves_carry_the_task_score_and_compare_reads_it_from_a_run(tmp_path, capsys):
    from mlft.io import curve_file
    from mlft.reports.curves import curve_table, load_runs

    run = tmp_path / "run"
    for step, p_correct in ((0, 0.7), (10, 0.1)):
        rel = Path("evals") / f"step-{step:06d}" / "model"
        rows = [
            dict(
                r,
                step=step,
                variant="model",
                suite="arithmetic",
                suite_variant="default",
                outcomes=str(rel / r["outcomes"]) if r.get("outcomes") else None,
            )
            for r in _variant(run / rel, "default", p_correct, step)
        ]
        curve_file.append_pass(run, step, "model", rows, 1.0, "in-process")
    (run / "complete").write_text(json.dumps({"global_step": 10}))
    table = curve_table(load_runs([run]))
    head = next(line for line in table.splitlines() if "monol task" in line)
    assert "cross task" in head  # the task axis's columns, where the suite checks answers
    assert main(["compare", f"{run}@0", f"{run}@10", "--metric", "task", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    avg = [r for r in rows if r["language"] == "avg"]
    assert len(avg) == 2 and all(r["task_drop"] and r["diff"] < -0.3 for r in avg)


def test_the_demo_gives_every_row_a_cheap_task_pass_and_its_table_the_task_columns(tmp_path, monkeypatch):
    """`mlft demo`'s task axis without running models: base and each run's final model (and the decoding row's
    variant) on the task axis suite (arithmetic + extraction), 5 languages x 10 problems per task, greedy, 48 new
    tokens; each table row reads its task score from its own pass."""
    from mlft.commands.demo import experiment
    from mlft.io import curve_file
    from mlft.reports.mitigation import select

    demo = experiment()
    calls = []

    def fake_run_suite(suite, target, out_dir, *, progress):
        from mlft.evals.task_axis_kind import part_suites

        model_ref = target.model_ref
        parts = part_suites(suite.options, suite.name)  # each part gets the demo's settings
        assert [p.name for p in parts.values()] == ["arithmetic", "extraction"]
        assert len({repr(p.options.decoding) + repr(p.options.variants) for p in parts.values()}) == 1
        o = parts["extraction"].options
        calls.append((suite.name, o.languages, o.per_language, o.decoding.temperature, o.decoding.max_new_tokens))
        calls[-1] += ([v.name for v in o.variants], [len(v.interventions) for v in o.variants], model_ref)
        rows = _variant(out_dir, o.variants[0].name, 0.2 if "sft" in model_ref else 0.6, len(calls))
        write_jsonl(out_dir / "scores.jsonl", [dict(r, suite=suite.name) for r in rows])

    monkeypatch.setattr("mlft.evals.runner.run_suite", fake_run_suite)  # what mlft.evaluate runs
    base, sft = tmp_path / "base", tmp_path / "crosslingual_sft"
    folders, seconds = demo.task_passes(tmp_path, {"crosslingual_sft": sft}, decoding_row=True)
    smarter = demo.DECODE_SMARTER.variant
    assert set(folders) == {
        ("base", None),
        ("crosslingual_sft", None),
        ("base", smarter),
        ("crosslingual_sft", smarter),
    }
    assert (
        all(c[:5] == ("task_axis", demo.TASK_LANGUAGES, 10, 0.0, 48) for c in calls) and len(demo.TASK_LANGUAGES) == 5
    )
    assert [(c[5], c[6], c[7]) for c in calls] == [
        (["model"], [0], demo.BASE_MODEL),
        (["model"], [0], str(sft / "final")),
        ([smarter], [2], demo.BASE_MODEL),
        ([smarter], [2], str(sft / "final")),
    ]
    row = {"task": "crosslingual", "language": "avg", "metric": "lpr", "value": 0.5, "low": 0.4, "high": 0.6}
    for run, step in ((base, 0), (sft, 4)):
        curve_file.append_pass(run, step, "model", [dict(row, step=step, variant="model")], 1.0, "test")
    spec = demo.table_spec(tmp_path, {"crosslingual_sft": sft}, base, False, False, folders)
    assert [c.header for c in spec.capability] == ["Mono task", "Cross task", "Mono extraction", "Cross extraction"]
    assert [r.capability_rows_file for r in spec.rows] == [
        str(folders[("base", None)] / "scores.jsonl"),
        str(folders[("crosslingual_sft", None)] / "scores.jsonl"),
    ]
    values = [select(r, capability=spec.capability).values[("monolingual", "avg", "task")] for r in spec.rows]
    assert values[0].value > 0.4 > 0.3 > values[1].value and Path(values[1].outcomes).name == "task.jsonl"


def test_results_blocks_render_the_task_score_of_a_row():
    """The docs' numbers come from results files: `cell LABEL TASK task` reads the row's task column, the
    headline table gains a task column where the rows have one (and none where they do not)."""
    from devtools.blocks import headline_table, render_view

    lpr = {"value": 0.5, "low": 0.4, "high": 0.6, "n": 100}
    lcb = {"monolingual": {"lpr": lpr}, "crosslingual": {"lpr": lpr}}
    rows = [
        {"label": "base", "base": True, "flags": [], "tasks": lcb},
        {"label": "+fix", "base": False, "flagged": True, "flags": ["task Cross task: -40.0 pp"], "tasks": lcb},
    ]
    rows[0]["capability"] = {"Mono task": {"value": 0.1, "low": 0.05, "high": 0.2}, "Cross task": dict(lpr)}
    rows[1]["capability"] = {"Cross task": {"value": 0.1, "low": 0.04, "high": 0.16, "p_vs_base": 0.001}}
    record = {"name": "demo", "tables": {"mitigation": {"rows": rows, "confidence": 0.95, "test": "permutation"}}}
    assert render_view(record, "cell", ["+fix", "crosslingual", "task"]) == "10.0 ±6.0"
    assert render_view(record, "diff", ["+fix", "crosslingual", "task"]) == "-40.0 pp"
    table = headline_table(record)
    assert "Task mono / cross" in table and "– / 10.0 ±6.0*" in table and "10.0 ±7.5 / 50.0 ±10.0" in table
    for r in rows:
        del r["capability"]
    assert "Task" not in headline_table(record)


def test_a_rows_task_verdicts_resolve_from_a_spec_with_relative_paths(tmp_path, monkeypatch):
    """The demo writes its table spec with paths relative to where it runs (`runs/demo/...`): a row's task verdicts,
    resolved against its capability rows' folder, must not be prefixed again with the row's own run folder (the
    demo's first table with the task axis lost its paired tests to that)."""
    from mlft.io.jsonl import write_jsonl
    from mlft.reports.table_rows import select
    from mlft.reports.table_spec import Capability, RowSpec

    monkeypatch.chdir(tmp_path)
    row = {"suite": "s", "variant": "model", "task": "crosslingual", "language": "avg", "n": 2}
    write_jsonl(Path("runs/base/scores.jsonl"), [dict(row, metric="lpr", value=0.5)])
    write_jsonl(Path("runs/task/base/scores.jsonl"), [dict(row, metric="task", value=0.5, outcomes="model/task.jsonl")])
    write_jsonl(Path("runs/task/base/model/task.jsonl"), [{"id": "a"}])
    spec = RowSpec("base", rows_file="runs/base/scores.jsonl", capability_rows_file="runs/task/base/scores.jsonl")
    found = select(spec, None, [Capability("crosslingual", "task", variant=None)])
    path = found.outcomes_file(("crosslingual", "avg", "task"))
    assert path is not None and path.is_file() and path.samefile(tmp_path / "runs/task/base/model/task.jsonl")

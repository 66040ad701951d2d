"""The public Python API (mlft/api, named by mlft/__init__.py): `import mlft` loads nothing heavy; every result
saves and loads back to an equal object that renders the same; the CLI commands over it print what the API
returns; mitigation_table's steps compose to the table."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import mlft
from mlft.io import curve_file

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "pandas", "trl")
DE = "Das ist eine kurze Antwort auf Deutsch, die lang genug ist und viele Wörter enthält."
EN = "This is a short answer in English that is long enough to be counted by the scorer."


def heavy_after_import(package_root: Path) -> list[str]:
    """The heavy libraries in sys.modules after `import mlft` (and a look at its public names) in a fresh
    interpreter whose `mlft` is the package under `package_root`."""
    code = (
        "import sys, mlft; dir(mlft); mlft.__all__; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    env = {"PYTHONPATH": str(package_root), "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-c", code]
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120, cwd=package_root)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().replace("'", '"'))


def test_import_mlft_loads_no_torch_transformers_pandas_or_trl():
    assert heavy_after_import(ROOT) == []


def test_the_import_check_finds_a_planted_eager_import(tmp_path):
    """The same check on a copy of mlft/__init__.py with an eager import of a heavy library (the mistake the lazy
    names prevent; pandas, the quickest of them to import): it shows up."""
    planted = tmp_path / "mlft"
    planted.mkdir()
    text = (ROOT / "mlft" / "__init__.py").read_text(encoding="utf-8")
    # the copy's submodules are the real ones; the planted line is the eager import
    text = text.replace("import importlib\n", f"import importlib\n\n__path__ = [{str(ROOT / 'mlft')!r}]\n", 1)
    (planted / "__init__.py").write_text(text + "\nimport pandas as _pd\n", "utf-8")
    assert heavy_after_import(tmp_path) == ["pandas"]


def test_every_public_name_resolves_and_is_listed():
    for name in mlft.__all__:
        assert getattr(mlft, name) is not None
    assert {"score", "evaluate", "train", "compare", "load_run"} <= set(mlft.__all__) <= set(dir(mlft))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mlft.nope  # noqa: B018


# ---------------------------------------------------------------- results: save, load, render


def records(n: int = 6) -> list[dict]:
    out = []
    for i in range(n):
        for task in ("monolingual", "crosslingual"):
            text = DE if i % 3 else EN  # a third of the replies in the wrong language
            out.append({"id": f"{task}/okapi/de/{i}", "task": task, "source": "okapi", "language": "de",
                        "model": "m", "completion": text})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def scored():
    return mlft.score(records(), workers=1, details=True)


def test_score_gives_the_official_numbers_of_records_and_a_dataframe(scored):
    assert scored.lpr(task="monolingual") == pytest.approx(4 / 6)
    assert scored.lpr(task="crosslingual", language="de") == pytest.approx(4 / 6)
    assert len(scored.details) == 12 and scored.guard is not None
    rows = scored.records()
    assert {r["language"] for r in rows} == {"de", "all"} and all("coverage" in r for r in rows)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(records())
    assert mlft.score(frame, workers=1).lpr(task="monolingual") == pytest.approx(4 / 6)
    assert list(scored.to_pandas()["lpr"]) == [r["lpr"] for r in rows]


def test_score_refuses_a_record_without_its_fields():
    with pytest.raises(mlft.DataError, match="record 1: missing field 'task'"):
        mlft.score([{"source": "okapi", "language": "de", "completion": DE}])


def test_score_result_saves_and_loads_back_equal_and_renders_the_same(scored, tmp_path):
    path = scored.save(tmp_path / "scores.json")
    back = mlft.ScoreResult.load(path)
    assert back == scored and mlft.load_result(path) == scored
    for fmt in ("table", "markdown", "tsv", "csv", "json"):
        assert back.table(fmt) == scored.table(fmt)
    assert str(back) == scored.table() and back._repr_markdown_() == scored.table("markdown")
    changed = json.loads(path.read_text())
    changed["data"]["rows"][0]["lpr"] = 0.5  # a changed number is a different result
    path.write_text(json.dumps(changed))
    assert mlft.ScoreResult.load(path) != scored
    with pytest.raises(mlft.DataError, match="a saved score result, not a run one"):
        mlft.Run.load(tmp_path / "scores.json")


def test_the_cli_prints_what_the_api_returns(scored, tmp_path, capsys):
    from mlft.cli import main

    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in records()), encoding="utf-8")
    for fmt in ("table", "json", "tsv"):
        assert main(["score", str(f), "--format", fmt, "--workers", "1"]) == 0
        assert capsys.readouterr().out == mlft.score(str(f), workers=1).table(fmt)


def run_dir(tmp_path: Path, name: str, values: dict[int, float]) -> Path:
    d = tmp_path / name
    for step, value in values.items():
        rows = [
            {"step": step, "variant": "model", "suite": "s", "task": task, "language": "avg", "metric": "lpr",
             "value": value, "low": value - 0.1, "high": value + 0.1, "n": 10}
            for task in ("monolingual", "crosslingual")
        ]  # fmt: skip
        curve_file.append_pass(d, step, "model", rows, 1.0, "test")
    (d / "checkpoints" / "checkpoint-10").mkdir(parents=True)
    (d / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    return d


def test_run_curves_and_tables_save_and_load_back_equal(tmp_path):
    base, sft = run_dir(tmp_path, "base", {0: 0.5}), run_dir(tmp_path, "sft", {0: 0.5, 4: 0.8})
    run = mlft.load_run(sft)
    assert [r["value"] for r in run.curves if r["task"] == "crosslingual"] == [0.5, 0.8]
    assert run.checkpoints == [str(sft / "checkpoints" / f"checkpoint-{n}") for n in (2, 10)]
    assert run.done == {(0, "model"), (4, "model")} and len(run.passes) == 2
    assert "50.0" in run.table() and "80.0" in run.table()
    curves = mlft.load_runs([base, sft])
    assert [r["run"] for r in curves.records()].count("sft") == 4
    spec = mlft.TableSpec([mlft.RowSpec("base", run=str(base), step=0), mlft.RowSpec("+SFT", run=str(sft))])
    tables = mlft.mitigation_tables(mlft.save_spec(spec, tmp_path / "table.yaml"))
    assert [r["label"] for r in tables.records()] == ["base", "+SFT"]
    assert "| +SFT | 80.0 ±10.0 |" in tables.table("markdown") and "| base | 50.0 ±10.0 |" in tables.table("markdown")
    assert (tmp_path / "table.yaml").is_file() and len(list(tables)) == len(tables)
    for result in (run, curves, tables):
        path = result.save(tmp_path / f"{result.KIND}.json")
        back = mlft.load_result(path)
        assert type(back) is type(result) and back == result and back.table() == result.table()
    copied = run.copy_pass(tmp_path / "other", step=4)
    assert copied.done == {(4, "model")} and copied.passes[0]["mode"] == f"copied from {sft}"
    assert mlft.load_run(sft).copy_pass(tmp_path / "other", step=4).passes == copied.passes  # once


def test_eval_result_reads_its_folder_and_reloads_equal(tmp_path):
    rows = [{"suite": "s", "variant": "default", "task": "crosslingual", "language": "avg", "metric": "lpr",
             "value": 0.7, "low": 0.6, "high": 0.8, "n": 20}]  # fmt: skip
    (tmp_path / "scores.jsonl").write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    result = mlft.EvalResult.from_folder(tmp_path, kind="lcb")
    assert result.value("lpr", "crosslingual") == 0.7 and result.suite == "s"
    assert mlft.load_result(result.save(tmp_path / "eval.json")) == result
    with pytest.raises(mlft.DataError, match="no scores.jsonl"):
        mlft.EvalResult.from_folder(tmp_path / "nothing")


def test_comparison_of_two_completions_files_reloads_equal(tmp_path, capsys):
    from mlft.cli import main

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in records(8)), encoding="utf-8")
    b.write_text("".join(json.dumps(dict(r, completion=DE)) + "\n" for r in records(8)), encoding="utf-8")
    c = mlft.compare(str(a), str(b), metrics=("lpr",), resamples=2000)
    lpr = c.diff("lpr", "monolingual")
    assert lpr["a"] == pytest.approx(5 / 8) and lpr["b"] == 1.0 and lpr["diff"] == pytest.approx(3 / 8)
    assert mlft.load_result(c.save(tmp_path / "c.json")) == c
    assert main(["compare", str(a), str(b), "--metric", "lpr", "--resamples", "2000"]) == 0
    assert capsys.readouterr().out == c.table() + "\n"


# ---------------------------------------------------------------- the commands are thin


THIN = ("score", "compare", "eval", "train")


def library_imports_of_run(source: str) -> list[str]:
    """The mlft modules a command's `run` imports other than the API (`mlft`, `mlft.api...`) and the command line's
    own helpers (`mlft.generation.cli_flags`)."""
    tree = ast.parse(source)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    found = []
    for node in ast.walk(run):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        found += [n for n in names if n.startswith("mlft.") and not n.startswith(("mlft.api", "mlft.generation.cli"))]
    return found


def test_the_score_compare_eval_and_train_commands_parse_call_the_api_and_print():
    for name in THIN:
        source = (ROOT / "mlft" / "commands" / f"{name}.py").read_text(encoding="utf-8")
        assert library_imports_of_run(source) == [], name
    planted = "def run(args):\n    from mlft.reports.score_tables import matrix_tables\n    return 0\n"
    assert library_imports_of_run(planted) == ["mlft.reports.score_tables"]


def test_mitigation_tables_steps_compose_to_the_table(tmp_path):
    from mlft.reports.mitigation import (
        mitigation_cells,
        mitigation_flags,
        mitigation_notes,
        mitigation_table,
        mitigation_tests,
    )
    from mlft.reports.table_rows import select

    base, sft = run_dir(tmp_path, "base", {0: 0.5}), run_dir(tmp_path, "sft", {4: 0.8})
    rows = [select(mlft.RowSpec("base", run=str(base), step=0)), select(mlft.RowSpec("+SFT", run=str(sft)))]
    tests = mitigation_tests(rows, rows[0], 2000)
    flags = mitigation_flags(tests)
    header, body, _ = mitigation_cells(rows, tests, flags)
    table = mitigation_table(rows, "base", "t", 2000)
    assert (table.header, table.body, table.notes) == (header, body, mitigation_notes(tests, flags, 2000))
    assert body[1][:4] == ["+SFT", "80.0 ±10.0", "–", "80.0 ±10.0"]


def test_evaluate_runs_a_suite_and_the_eval_command_prints_its_report(tmp_path, capsys):
    """mlft.evaluate on a backend without weights (the toy backend of tests/test_registry.py): its rows, its
    report, its folder; `mlft eval` prints the same report and a suite's dotted keyword overrides reach the suite."""
    from test_registry import ToyBackend

    from mlft.cli import main
    from mlft.generation.backends import REGISTRY

    REGISTRY.add("toy", ToyBackend)
    try:
        e = mlft.evaluate(
            None, "lcb_tiny", backend="toy", out=tmp_path / "api", progress=False, **{"decoding.max_new_tokens": 7}
        )
        assert main(["eval", "lcb_tiny", "--backend", "toy", "--no-progress", "--max-new-tokens", "7",
                     "--out", str(tmp_path / "cli")]) == 0  # fmt: skip
    finally:
        REGISTRY.remove("toy")
    out = capsys.readouterr().out
    assert e.kind == "lcb" and e.suite == "lcb_tiny" and e.out == str(tmp_path / "api")
    assert e.report and out.startswith(e.report) and f"lcb_tiny: {len(e.rows)} metric rows" in out
    assert json.loads((tmp_path / "api" / "results.json").read_text())["config"]["suite"]["settings"] == {
        "decoding": {"max_new_tokens": 7}
    }
    assert 0 <= e.value("lpr", "crosslingual") <= 1 and (tmp_path / "api" / "report.html").is_file()
    assert e.scores.lpr(task="crosslingual") == e.value("lpr", "crosslingual")
    assert mlft.load_result(e.save(tmp_path / "e.json")) == e

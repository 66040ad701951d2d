"""lm-evaluation-harness both ways: harness tasks inside mlft suites (the `lm_eval` kind) and mlft's LCB tasks
inside lm-eval (mlft/harness/tasks), scored like `mlft score`."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from mlft.errors import ConfigError  # noqa: E402
from mlft.harness import lm_eval_command  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

TINY_MC = """task: tiny_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: choices
doc_to_target: answer
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""
DOCS = [
    {"question": "The capital of France is", "choices": [" Paris", " a bicycle"], "answer": 0},
    {"question": "Two plus two equals", "choices": [" purple", " four"], "answer": 1},
    {"question": "The sun rises in the", "choices": [" east", " refrigerator"], "answer": 0},
    {"question": "Water freezes at zero degrees", "choices": [" spaghetti", " Celsius"], "answer": 1},
]


def _tiny_task(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "tiny.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    (folder / "tiny_mc.yaml").write_text(TINY_MC.format(data=data), encoding="utf-8")
    return folder


def test_mlft_task_folder_matches_the_generator():
    """The shipped YAMLs are what mlft.harness.lcb_task writes (edit the generator, not the files)."""
    from mlft.harness import tasks_dir
    from mlft.harness.lcb_task import task_files

    folder = tasks_dir() / "lcb"
    for name, text in task_files().items():
        assert (folder / name).read_text(encoding="utf-8") == text, name
    assert len([n for n in task_files() if n.startswith("lcb_") and n.count("_") == 2]) == 15 + 14
    from mlft.harness import polyglot_mc

    for name, text in polyglot_mc.task_files().items():
        assert (tasks_dir() / "mlft_polyglot_mc" / name).read_text(encoding="utf-8") == text, name


def test_mlft_tasks_are_known_without_lm_evals_index():
    from mlft.harness import check_tasks

    tm = check_tasks(["lcb", "lcb_crosslingual_de", "mlft_polyglot_mc"], [])
    assert {"lcb", "lcb_monolingual", "lcb_crosslingual"} <= set(tm.all_groups)
    assert "arc_easy" not in tm.all_tasks  # lm-eval's defaults were not needed


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
def test_unknown_task_is_an_error_before_any_model(tmp_path):
    from mlft.evals.suite import build_suite

    with pytest.raises(ConfigError, match=r"unknown lm-eval task\(s\): 'lcb_crosslingual_xx'.*did you mean"):
        build_suite({"kind": "lm_eval", "tasks": ["lcb_crosslingual_xx"]}, "s.yaml")
    with pytest.raises(ConfigError, match="include_path: folder not found"):
        build_suite({"kind": "lm_eval", "tasks": ["tiny_mc"], "include_path": [str(tmp_path / "no")]}, "s.yaml")
    with pytest.raises(ConfigError, match="limit"):
        build_suite({"kind": "lm_eval", "tasks": ["lcb"], "limit": 0}, "s.yaml")


def test_result_rows_carry_stderr_intervals():
    from mlft.evals.lm_eval_kind import result_rows

    res = {
        "results": {
            "t": {
                "alias": "t",
                "acc,none": 0.5,
                "acc_stderr,none": 0.1,
                "lpr,none": 0.8,
                "lpr_stderr,none": "N/A",
                "exact_match,strict": 0.25,
                "exact_match_stderr,strict": 0.05,
            }
        },
        "groups": {"g": {"alias": "g", "acc,none": 0.4, "acc_stderr,none": 0.02, "sample_len": 9}},
        "n-samples": {"t": {"original": 10, "effective": 4}},
    }
    rows = {(r["task"], r["metric"]): r for r in result_rows(res)}
    acc = rows[("t", "acc")]
    assert acc["low"] == pytest.approx(0.5 - 1.959964 * 0.1, abs=1e-5) and acc["n"] == 4
    assert acc["high"] == pytest.approx(0.5 + 1.959964 * 0.1, abs=1e-5)
    assert rows[("t", "lpr")]["low"] is None and rows[("t", "lpr")]["value"] == 0.8
    assert rows[("t", "exact_match/strict")]["value"] == 0.25
    assert rows[("g", "acc")]["n"] == 9


def test_lcb_aggregation_is_the_official_scorers():
    """process_results + agg_* on a few replies = mlft score on the same completions (per language and source mix)."""
    from mlft.benchmarks.lcb.scoring import score_completions
    from mlft.completions import Completion
    from mlft.harness import lcb_task as lcb

    replies = {
        "ja": [
            "これは日本語の文章です。今日はとても良い天気ですね。私は公園に行きました。",
            "This reply is in English and has enough words to count for sure.",
            "日本語で答えます。東京はとても大きな都市で、人がたくさん住んでいます。 computer",
            "",
        ],
        "de": [
            "Das ist eine deutsche Antwort mit genug Wörtern für die Zählung.",
            "This is an English answer with more than five words in it.",
            "ja ja ja ja ja ja",
        ],
    }
    docs, comps = [], []
    for lang, texts in replies.items():
        for i, text in enumerate(texts):
            src = ["okapi", "sharegpt"][i % 2]
            doc = {
                "id": f"crosslingual/{src}/{lang}/{i}",
                "task": "crosslingual",
                "source": src,
                "language": lang,
                "prompt": "p",
            }
            docs.append((doc, text))
            comps.append(Completion(doc["id"], "m", "crosslingual", src, lang, text))
    report = score_completions(comps)
    for lang in replies:
        items = [lcb.process_results(d, [t]) for d, t in docs if d["language"] == lang]
        want = next(r for r in report.rows if r["source"] == "all" and r["language"] == lang)
        assert lcb.agg_lpr([x["lpr"] for x in items]) == want["lpr"]
        if lang == "ja":
            assert lcb.agg_wpr([x["wpr"] for x in items]) == want["wpr"]
            assert lcb.agg_lcpr([x["lcpr"] for x in items]) == pytest.approx(want["lcpr"])
        else:
            assert "wpr" not in items[0]
    cov = lcb.agg_coverage([lcb.process_results(d, [t])["coverage"] for d, t in docs if d["language"] == "ja"])
    assert cov == pytest.approx((1 / 2 + 2 / 2) / 2)  # okapi: 1 of 2 replies counted (one empty); sharegpt 2/2


def test_lcb_docs_interleave_sources_for_limit():
    from mlft.harness.lcb_task import lcb_docs

    docs = lcb_docs("crosslingual", "de")
    assert len(docs) == len({d["id"] for d in docs})
    assert len({d["source"] for d in docs[:3]}) == 3  # --limit 3 sees every cross-lingual source


def test_samples_to_completions_names_bad_lines(tmp_path):
    from mlft.errors import DataError
    from mlft.harness.lcb_task import samples_to_completions

    good = {
        "doc": {
            "id": "crosslingual/okapi/de/0",
            "task": "crosslingual",
            "source": "okapi",
            "language": "de",
            "prompt": "p",
        },
        "resps": [["Hallo Welt"]],
        "filtered_resps": ["Hallo Welt"],
    }
    path = tmp_path / "samples_lcb.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({"doc": {}}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 2: not an lm-eval LCB sample"):
        samples_to_completions([path])
    path.write_text(json.dumps(good) + "\n", encoding="utf-8")
    assert samples_to_completions([path])[0]["completion"] == "Hallo Welt"


@pytest.mark.slow
def test_harness_task_runs_inside_an_mlft_suite(tmp_path, embedded_model):
    """A harness task on a local JSONL file, in an mlft suite, on the live embedded model: rows in scores.jsonl."""
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import build_suite
    from mlft.generation.target import Target

    folder = _tiny_task(tmp_path / "tasks")
    suite = build_suite(
        {"kind": "lm_eval", "tasks": ["tiny_mc"], "include_path": [str(folder)], "limit": 3}, "tiny.yaml"
    )
    import random

    import torch

    model, tok = embedded_model
    out = tmp_path / "out"
    state = (random.getstate(), torch.get_rng_state())
    result = run_suite(suite, Target(model=model, tokenizer=tok), out, progress=False)
    assert random.getstate() == state[0] and torch.equal(torch.get_rng_state(), state[1])  # training unaffected
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    acc = next(r for r in rows if r["task"] == "tiny_mc" and r["metric"] == "acc")
    assert acc["n"] == 3 and acc["value"] in (0.0, 1 / 3, 2 / 3, 1.0)
    assert acc["stderr"] is not None and acc["low"] == pytest.approx(acc["value"] - 1.959964 * acc["stderr"], 1e-4)
    assert result.value("acc", "tiny_mc") == acc["value"]
    samples = [json.loads(x) for x in (out / "samples" / "tiny_mc.jsonl").read_text().splitlines()]
    assert len(samples) == 3 and acc["value"] == pytest.approx(sum(s["acc"] for s in samples) / 3)


@pytest.mark.slow
def test_lm_eval_lcb_task_matches_mlft_score(shared, tmp_path):  # LCB's test sets and word list
    """Parity: `lm_eval --include_path <mlft> --tasks lcb_crosslingual_de,lcb_crosslingual_ja --limit 3` on the
    embedded model prints the LPR (and WPR / LCPR) that `mlft score` gives the logged samples."""
    from mlft.generation.models import resolve

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    path = resolve("smollm2-135m-instruct").path
    out = tmp_path / "lm"
    tasks = "lcb_crosslingual_de,lcb_crosslingual_ja"
    cmd = lm_eval_command(path, tasks, out, limit=3, batch_size=8, extra=("--gen_kwargs", "max_gen_toks=40"))
    subprocess.run(cmd, check=True, env=env, capture_output=True, text=True, timeout=900)
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    samples = sorted(str(p) for p in out.rglob("samples_lcb_*.jsonl"))
    comp = tmp_path / "c.jsonl"
    subprocess.run(
        [sys.executable, "-m", "mlft", "harness", "completions", *samples, "--out", str(comp)],
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    scored = subprocess.run(
        [sys.executable, "-m", "mlft", "score", str(comp), "--format", "json"],
        check=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    rows = json.loads(scored[: scored.rindex("]") + 1] if scored.lstrip().startswith("[") else scored)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    by_lang = {r["language"]: r for r in rows if r["source"] == "all"}
    for lang in ("de", "ja"):
        assert results[f"lcb_crosslingual_{lang}"]["lpr,none"] == by_lang[lang]["lpr"]
    assert results["lcb_crosslingual_ja"]["wpr,none"] == by_lang["ja"]["wpr"]
    assert math.isclose(results["lcb_crosslingual_ja"]["lcpr,none"], by_lang["ja"]["lcpr"])


def test_table11_capability_columns_flag_a_drop_beyond_the_interval(tmp_path):
    """Capability columns from lm_eval rows: a row whose interval lies below the base value is flagged (⚠, ↓);
    a row whose interval still covers it is not."""
    from mlft.reports.mitigation import build
    from mlft.reports.table_spec import load_spec

    def lcb(v):
        return [
            {
                "variant": "default",
                "task": t,
                "language": "avg",
                "metric": "lpr",
                "value": v,
                "low": v - 0.05,
                "high": v + 0.05,
                "n": 50,
            }
            for t in ("monolingual", "crosslingual")
        ]

    def cap(v, se):
        return [
            {
                "variant": "default",
                "task": "mlft_polyglot_mc_shared",
                "language": "avg",
                "metric": "acc",
                "value": v,
                "low": v - 1.96 * se,
                "high": v + 1.96 * se,
                "n": 280,
                "stderr": se,
            }
        ]

    for name, lpr, acc in (("base", 0.5, 0.60), ("kept", 0.7, 0.56), ("forgot", 0.8, 0.45)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lcb(lpr)))
        (tmp_path / f"{name}_cap.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cap(acc, 0.03)))
    spec = tmp_path / "t.yaml"
    spec.write_text(
        "rows:\n"
        + "".join(
            f"  - {{label: {n}, rows_file: {n}.jsonl, capability_rows_file: {n}_cap.jsonl}}\n"
            for n in ("base", "kept", "forgot")
        )
        + "per_language: []\ncapability:\n  - {task: mlft_polyglot_mc_shared, metric: acc, label: Facts acc}\n"
    )
    text = build(load_spec(spec), "markdown")
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "Facts acc" in text
    assert "60.0 ±5.9" in lines["base"]
    assert "56.0 ±5.9" in lines["kept"] and "↓" not in lines["kept"]
    assert "forgot ⚠" in lines and "45.0 ±5.9 ↓" in lines["forgot ⚠"]
    assert "capability Facts acc: 45.0 [39.1, 50.9] vs base 60.0" in text


def test_capability_rows_reach_the_trackers():
    from mlft.training.tracking import scalars

    rows = [
        {
            "variant": "capability",
            "task": "mlft_polyglot_mc_shared",
            "language": "avg",
            "metric": "acc",
            "value": 0.6,
            "low": 0.54,
            "high": 0.66,
            "harness": True,
        },
        {"variant": "capability", "task": "x", "language": "avg", "metric": "acc", "value": 0.1},
    ]
    got = scalars(rows)
    assert got == {
        "harness/capability/mlft_polyglot_mc_shared/acc": 0.6,
        "harness/capability/mlft_polyglot_mc_shared/acc_low": 0.54,
        "harness/capability/mlft_polyglot_mc_shared/acc_high": 0.66,
    }


def test_openai_backend_maps_to_lm_evals_api_models(tmp_path, monkeypatch, polyglot_data):
    """On the openai backend the suite talks to the same server through lm-eval's API models, with mlft's key
    (never exported to the environment); a chat endpoint refuses log-likelihood tasks before any request."""
    from mlft.evals.lm_eval_kind import _check_outputs, _task_manager, make_lm
    from mlft.evals.runner import EvalContext
    from mlft.evals.suite import build_suite
    from mlft.generation.target import Target

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_KEY", "sk-test")
    target = Target("openai", {"base_url": "http://127.0.0.1:9/v1/", "api_key_env": "MY_KEY"}, model_ref="served")
    ctx = EvalContext(tmp_path, target)
    suite = build_suite({"kind": "lm_eval", "tasks": ["lcb_crosslingual_de"]}, "s.yaml")
    lm = make_lm(suite.options, ctx)
    assert type(lm).__mro__[1].__name__ == "LocalChatCompletion"
    assert lm.base_url == "http://127.0.0.1:9/v1/chat/completions" and lm.model == "served"
    assert lm.api_key == "sk-test" and "OPENAI_API_KEY" not in os.environ
    _check_outputs(_task_manager(suite.options), suite.options, ctx)  # generation task: fine
    mc = build_suite({"kind": "lm_eval", "tasks": ["mlft_polyglot_mc_de"]}, "s.yaml")
    with pytest.raises(ConfigError, match="mlft_polyglot_mc_de score log-likelihoods.*api=completions"):
        _check_outputs(_task_manager(mc.options), mc.options, ctx)
    comp = build_suite({"kind": "lm_eval", "tasks": ["mlft_polyglot_mc_de"], "api": "completions"}, "s.yaml")
    with pytest.raises(ConfigError, match="set `tokenizer`"):
        make_lm(comp.options, ctx)


def test_paired_capability_test_on_lm_eval_samples(tmp_path):
    """Per-document samples pair up by (task, doc_id): a planted 30-point drop is found, a copy is not."""
    import random

    from mlft.harness.samples import paired_samples_test

    rng = random.Random(0)
    base = [{"task": t, "doc_id": i, "acc": float(rng.random() < 0.7)} for t in ("a", "b") for i in range(60)]
    worse = [{**x, "acc": x["acc"] if rng.random() < 0.55 else 0.0} for x in base]
    for name, recs in (("base", base), ("same", base), ("worse", worse)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in recs))
    d, lo, hi, p, pairs = paired_samples_test(tmp_path / "base.jsonl", tmp_path / "worse.jsonl", "acc")
    want = (sum(x["acc"] for x in worse) - sum(x["acc"] for x in base)) / len(base)
    assert pairs == 120 and d == pytest.approx(want) and hi < 0 and p < 0.01
    d, lo, hi, p, _ = paired_samples_test(tmp_path / "base.jsonl", tmp_path / "same.jsonl", "acc")
    assert d == 0 and p == 1.0


def test_mlft_harness_path_and_tasks(capsys):
    from mlft.cli import main

    assert main(["harness", "path"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert (folder / "lcb" / "lcb.yaml").is_file() and (folder / "mlft_polyglot_mc" / "utils.py").is_file()
    assert main(["harness", "tasks", "--prefix", "lcb"]) == 0
    listed = dict(line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert listed["lcb"] == "group" and listed["lcb_crosslingual_hi"] == "task" and len(listed) == 15 + 14 + 3

"""The evaluation house: kinds refuse backends they cannot use, interventions are recorded in completions and in
the resume guard, backends refuse interventions they cannot apply, and every eval folder gets results.json."""

from __future__ import annotations

import json

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.evals.runner import run_suite
from mlft.evals.suite import load_suite
from mlft.generation.target import Target


def test_polyglot_on_openai_is_refused_before_anything_runs(tmp_path, capsys, polyglot_placeholders):
    code = main(
        [
            "eval",
            "polyglot_quick",
            "--backend",
            "openai",
            "--model",
            "served",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--api-key",
            "k",
            "--out",
            str(tmp_path / "p"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "a polyglot suite cannot run on the openai backend" in err and "it runs on: hf" in err
    assert not (tmp_path / "p").exists()


def test_backend_flags_are_generated_and_checked(capsys):
    code = main(["eval", "lcb_tiny", "--concurrency", "4"])  # an openai flag with the hf backend
    assert code == 2 and "--concurrency is an option of the openai backend, not hf" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    help_text = capsys.readouterr().out
    assert "--base-url" in help_text and "--max-batch-tokens" in help_text and "--backoff" in help_text


def test_interventions_a_remote_backend_cannot_apply_are_refused(tmp_path, capsys):
    code = main(
        [
            "generate",
            "--out",
            str(tmp_path / "c.jsonl"),
            "--backend",
            "openai",
            "--model",
            "m",
            "--api-key",
            "k",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--intervention",
            "{name: ban_tokens, strings: [Sure]}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "intervention 'ban_tokens' on the openai backend" in err
    assert "only script_gate runs on a server" in err  # the gate does, through mlft's vLLM plugin


def test_bad_interventions_are_named_in_the_suite():
    with pytest.raises(ConfigError, match=r"interventions\[0\]: ban_tokens needs `strings` or `token_ids`"):
        load_suite("lcb_tiny", ["interventions=[{name: ban_tokens}]"])
    with pytest.raises(ConfigError, match=r"interventions\[0\]: unknown key 'scheem' \(did you mean 'scheme'"):
        load_suite("lcb_tiny", ["interventions=[{name: quantize, scheem: w8}]"])


@pytest.mark.slow
def test_intervention_recorded_applied_and_refused_on_resume_when_changed(
    embedded_model, shared, tmp_path, monkeypatch
):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    model, tok = embedded_model
    overrides = ["decoding.temperature=0", "decoding.max_new_tokens=8", "languages=[de]"]
    plain = run_suite(
        load_suite("lcb_tiny", overrides), Target(model=model, tokenizer=tok), tmp_path / "plain", progress=False
    )
    first = [json.loads(x) for x in (tmp_path / "plain" / "default" / "completions.jsonl").read_text().splitlines()]
    assert all(r["interventions"] == [] for r in first)
    # ban the first generated token of every greedy reply: the replies must change
    starts = sorted({tok(r["completion"], add_special_tokens=False)["input_ids"][0] for r in first})
    banned = [*overrides, f"interventions=[{{name: ban_tokens, token_ids: {starts}}}]"]
    out = tmp_path / "banned"
    run_suite(load_suite("lcb_tiny", banned), Target(model=model, tokenizer=tok), out, progress=False)
    recs = [json.loads(x) for x in (out / "default" / "completions.jsonl").read_text().splitlines()]
    assert all(r["interventions"] == [{"name": "ban_tokens", "strings": [], "token_ids": starts}] for r in recs)
    assert all(tok(r["completion"], add_special_tokens=False)["input_ids"][0] not in starts for r in recs)
    # the resume guard: same folder, other intervention options -> refused, nothing appended
    before = (out / "default" / "completions.jsonl").read_text()
    changed = [*overrides, f"interventions=[{{name: ban_tokens, token_ids: {starts[:1]}}}]"]
    with pytest.raises(ConfigError, match="other settings \\(interventions"):
        run_suite(load_suite("lcb_tiny", changed), Target(model=model, tokenizer=tok), out, progress=False)
    assert (out / "default" / "completions.jsonl").read_text() == before
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["suite"]["interventions"][0]["name"] == "ban_tokens"
    assert results["environment"]["versions"]["transformers"] and results["wall_s"] > 0
    assert plain.rows and "model" in results["config"]

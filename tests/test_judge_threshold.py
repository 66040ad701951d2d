"""A PMI threshold belongs to the model it was fitted on: 25.24 nats is SmolLM2-135M-Instruct's; a bare
number or a calibration file for another judge model is refused, naming both, before any model loads (before,
`judge_model` took any model and applied 25.24 to it silently); `mlft build judge calibrate` writes a threshold with
its model, and the answer term takes that file."""

import argparse
import json

import pytest

from mlft.errors import ConfigError
from mlft.generation.judge_calibration import best_threshold, load_labelled
from mlft.generation.relevance import DEFAULT_THRESHOLD, FITTED_ON, fitted_threshold
from mlft.training import answer_reward
from mlft.training.rewards import RewardSpec, validate_rewards

OTHER = "HuggingFaceTB/SmolLM2-360M-Instruct"


@pytest.fixture
def no_model(monkeypatch):
    """Any model load fails the test: the checks come first."""

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(answer_reward, "_judge_model", boom)
    monkeypatch.setattr("mlft.generation.models.load", boom)


def _calibration(tmp_path, model, value=31.5, judge="pmi"):
    path = tmp_path / f"{judge}.json"
    path.write_text(json.dumps({"judge": judge, "model": model, "threshold": value}), encoding="utf-8")
    return str(path)


def test_the_default_threshold_is_the_embedded_models(no_model):
    assert fitted_threshold(DEFAULT_THRESHOLD, None) == 25.24 and FITTED_ON == "smollm2-135m-instruct"
    assert fitted_threshold(DEFAULT_THRESHOLD, "smollm2-135m-instruct") == 25.24
    with pytest.raises(
        ConfigError, match=rf"25.24 nats was fitted on smollm2-135m-instruct, but the judge model is {OTHER}"
    ):
        fitted_threshold(DEFAULT_THRESHOLD, OTHER)
    with pytest.raises(ConfigError, match="fitted on smollm2-135m-instruct, but the judge model is org/x"):
        fitted_threshold(30.0, "org/x")  # a bare number is on the embedded model's scale too


def test_a_calibration_file_carries_its_model(tmp_path, no_model):
    mine = _calibration(tmp_path, OTHER)
    assert fitted_threshold(mine, OTHER) == 31.5
    with pytest.raises(ConfigError, match=rf"31.5 nats was fitted on {OTHER}, but the judge model is smollm2-135m"):
        fitted_threshold(mine, None)
    with pytest.raises(ConfigError, match="not a PMI calibration file"):
        fitted_threshold(_calibration(tmp_path, OTHER, judge="llm"), OTHER)
    with pytest.raises(ConfigError, match="not a PMI calibration file"):
        fitted_threshold(str(tmp_path / "missing.json"), OTHER)


def test_the_recipe_check_refuses_a_threshold_for_another_judge_before_any_model_loads(tmp_path, no_model):
    spec = RewardSpec("answered_language", 1.0, {"source": "auto", "judge_model": OTHER})
    with pytest.raises(ConfigError, match=rf"rewards\[0\]\.options: threshold: 25.24 nats was fitted on .* {OTHER}"):
        validate_rewards([spec], "rewards")
    ok = RewardSpec("answered_language", 1.0, {"judge_model": OTHER, "threshold": _calibration(tmp_path, OTHER)})
    assert validate_rewards([ok], "rewards") == [ok]
    # a verifiable-only term never runs the judge: no threshold to check
    assert validate_rewards([RewardSpec("answered", 1.0, {"source": "answer", "judge_model": OTHER})], "r")


def test_the_best_threshold_agrees_best():
    scores, truth = [1.0, 5.0, None, 9.0, 3.0], [False, True, False, True, False]
    cut, agree = best_threshold(scores, truth, [True] * 5)
    assert 3.0 < cut <= 5.0 and agree == 1.0
    _, agree = best_threshold(scores, truth, [True, True, True, False, True])  # 9.0 an echo: never an answer
    assert agree == 0.8


def test_labelled_rows_are_checked(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "reply": "r", "language": "xx", "label": "answer"}) + "\n", "utf-8")
    with pytest.raises(ConfigError, match="line 1: language 'xx'"):
        load_labelled(bad)
    bad.write_text(json.dumps({"prompt": "p", "reply": "r", "language": "en", "label": "maybe"}) + "\n", "utf-8")
    with pytest.raises(ConfigError, match="label 'maybe' is not one of answer, not_answer"):
        load_labelled(bad)


@pytest.mark.slow
def test_calibrate_writes_the_threshold_with_its_model_and_the_term_takes_it(tmp_path, shared):
    """`mlft build judge calibrate` on 24 labelled rows with the embedded model: the file names the model, and the
    answer term runs with it (and refuses it for another judge model)."""
    from mlft.commands import judge as command

    rows = [json.loads(x) for x in open(command.LABELLED, encoding="utf-8")]
    small = tmp_path / "small.jsonl"
    pick = [r for r in rows if r["language"] in ("en", "de")][:24]
    small.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in pick), encoding="utf-8")
    ap = argparse.ArgumentParser()
    command.add_parser(ap.add_subparsers(dest="cmd"))
    out = tmp_path / "pmi.json"
    assert command.run(ap.parse_args(["judge", "calibrate", "--labelled", str(small), "--out", str(out)])) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["judge"] == "pmi" and result["model"] == FITTED_ON and result["n"] == 24
    assert result["agreement"] >= result["always_not_answer"]  # fitted in-sample: never below the constant
    assert fitted_threshold(str(out), None) == result["threshold"]
    with pytest.raises(ConfigError, match=f"fitted on {FITTED_ON}, but the judge model is {OTHER}"):
        fitted_threshold(str(out), OTHER)

"""Rewards that do not tie: a GRPO recipe over open prompts whose answer term asks the PMI relevance judge (which
does not separate answers from non-answers: docs/results/relevance_judge.json) is refused at `mlft train --check`
unless it is marked a control (`control:`, printed by the check); the demo's RL rows train on verifiable prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.training import open_prompts
from mlft.training.recipe import load_recipe

ROOT = Path(__file__).resolve().parent.parent
CPU = ROOT / "recipes" / "cpu"
OPEN = ["mix=data_mixes/cpu/grpo_prompts.yaml"]


def _write(tmp_path, body: str) -> Path:
    path = tmp_path / "open.yaml"
    path.write_text(f"include: {CPU / '_grpo.yaml'}\nrun_dir: {tmp_path / 'run'}\n{body}", encoding="utf-8")
    return path


def test_an_open_prompt_recipe_on_the_pmi_judge_without_a_control_marker_is_refused_at_check(tmp_path, capsys):
    recipe = _write(tmp_path, "")  # _grpo.yaml: answered_language, source auto, over the open seed prompts
    assert main(["train", str(recipe), "--check"]) != 0
    err = capsys.readouterr().err
    assert "'answered_language' pays answering by the 'pmi' relevance judge" in err
    assert "grpo_prompts.yaml" in err and "seed_crosslingual" in err and "no `answer` column" in err
    assert "does not separate answers from non-answers" in err and "control:" in err
    # source: judge refuses even over verifiable prompts; source: answer there is accepted
    judged = "rewards: [{name: answered_language, weight: 1.0, options: {source: judge}}]\n"
    with pytest.raises(ConfigError, match="relevance judge on the open prompts"):
        load_recipe(_write(tmp_path, f"mix: data_mixes/cpu/arithmetic_prompts.yaml\n{judged}"))
    checked = judged.replace("judge}", "answer}")
    load_recipe(_write(tmp_path, f"mix: data_mixes/cpu/arithmetic_prompts.yaml\n{checked}"))


def test_a_control_marker_lets_it_through_and_the_check_prints_it(tmp_path, capsys):
    recipe = _write(tmp_path, 'control: "kept to compare against the verifiable reward"\n')
    assert main(["train", str(recipe), "--check"]) == 0
    out = capsys.readouterr().out
    assert "a CONTROL recipe" in out and "kept to compare against the verifiable reward" in out
    with pytest.raises(ConfigError, match="control: say why"):
        load_recipe(_write(tmp_path, 'control: "  "\n'))


def test_a_judge_that_passes_its_separation_check_is_accepted(tmp_path, monkeypatch):
    """The refusal is the PMI judge's: a judge whose registered check passes trains on open prompts; one without a
    registered check is refused, naming the registry."""
    good = "rewards: [{name: answered, weight: 1.0, options: {source: auto}}]\n"
    with pytest.raises(ConfigError, match="'pmi' relevance judge"):
        load_recipe(_write(tmp_path, good))
    monkeypatch.setitem(open_prompts.SEPARATION_CHECKS, "pmi", lambda options: None)
    load_recipe(_write(tmp_path, good))
    assert open_prompts.judge_of({"judge": "llm"}) == "llm" and open_prompts.judge_of({}) == "pmi"


def test_every_shipped_grpo_recipe_trains_on_a_separating_signal_or_is_a_control():
    found = {}
    for path in sorted([*CPU.glob("grpo_*.yaml"), *(ROOT / "recipes").glob("grpo_*.yaml")]):
        overrides = ["model=smollm2-135m-instruct"] if "on_sft" in path.name else []  # its SFT parent need not exist
        r = load_recipe(path, overrides)
        found[path.relative_to(ROOT).as_posix()] = r.control
    controls = {k for k, v in found.items() if v}
    assert controls == {
        "recipes/cpu/grpo_gated.yaml",
        "recipes/cpu/grpo_on_sft.yaml",
        "recipes/cpu/grpo_language_only_control.yaml",
        "recipes/cpu/grpo_summed_control.yaml",
        "recipes/grpo_crosslingual.yaml",
    }
    assert {"recipes/cpu/grpo_verifiable.yaml", "recipes/grpo_verifiable.yaml", "recipes/cpu/grpo_answered.yaml"} <= {
        k for k, v in found.items() if not v
    }
    # without its marker, the demo's earlier RL row is refused
    with pytest.raises(ConfigError, match="relevance judge on the open prompts"):
        load_recipe(CPU / "grpo_gated.yaml", ["control=null"])


def test_the_demos_rl_rows_train_on_verifiable_prompts():
    from mlft.commands.demo import experiment

    demo = experiment()
    for run in demo.RUNS:
        if run.key not in demo.RL_RUNS:
            continue
        overrides = ["model=smollm2-135m-instruct"] if run.parent else []
        r = load_recipe(ROOT / run.recipe, overrides)
        assert r.control is None and r.mix.endswith("data_mixes/cpu/arithmetic_prompts.yaml"), run
        assert [(t.name, t.options["source"]) for t in r.rewards] == [("answered_language", "answer")]

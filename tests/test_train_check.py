"""measurements/gpu/train_check.py, the training check to run first on a GPU machine: the full mode refuses a
machine without CUDA (exit 2); the reduced mode runs every stage on the CPU and passes; and each stage fails on a
fault planted in it (the stage's own checks see it, its verdict is FAIL or ERROR, the command exits 1):

- sft: a pass that moves a live weight; and the packed run's regression, rows joined into one padding-free row on
  sdpa (what timed out on the H100: a dense mask over the joined row) with mlft's refusal taken away;
- users_command: the probe's folder missing from PYTHONPATH (run.sh's old `benchmarks/gpu/probe`);
- lora: an evaluation that copies the base weights;
- quantized: a refusal that does not name what is missing.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "measurements/gpu/train_check.py"


@pytest.fixture
def tc(monkeypatch, shared):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    spec = importlib.util.spec_from_file_location("train_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "SETTINGS", copy.deepcopy(module.SETTINGS))
    return module


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("train_check")  # the model is built once and shared by the module's tests


def _run(tc, work: Path, stages: str, *extra) -> dict:
    out = work / f"{stages.replace(',', '_')}.json"
    code = tc.main(["--cpu-reduced", "--stages", stages, "--work", str(work), "--out", str(out), *extra])
    report = json.loads(out.read_text())
    report["exit"] = code
    return report


def test_the_full_mode_refuses_a_machine_without_cuda(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "x.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "--cpu-reduced" in proc.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_reduced_mode_passes_every_stage(tc, work):
    """The reduced mode, compiled decoding as on the GPU: every stage PASS, with its numbers."""
    report = _run(tc, work, "sft,quantized,lora,users_command")
    assert report["exit"] == 0, report["verdicts"]
    assert report["verdicts"] == dict.fromkeys(["sft", "quantized", "lora", "users_command"], "PASS")
    sft = report["stages"]["sft"]
    assert sft["losses"][-1] < sft["losses"][0]
    assert [p["weights_changed"] for p in sft["passes"]] == [0, 0, 0]
    assert sft["passes"][0]["graphs_compiled"] >= 1 and [p["graphs_compiled"] for p in sft["passes"][1:]] == [0, 0]
    assert sft["reload_identical"] == sft["last_pass_rows"] > 0
    assert 0 < sft["widest_training_mask"] <= 128 and sft["tokens_per_s"] > 0
    lora = report["stages"]["lora"]
    assert all(x["weights_not_shared"] == 0 for x in lora["eval_mode_calls"])
    assert all(n > 0 for n in lora["replies_changed_between_checkpoints"])
    users = report["stages"]["users_command"]
    assert users["pass_modes"] == ["separate-process"] and len(users["children"]) >= 2
    quantized = report["stages"]["quantized"]
    if importlib.util.find_spec("bitsandbytes"):  # it runs on the CPU too: the passes record the weights' format
        assert quantized["w4"]["dtype"] == ["nf4"] and quantized["w8"]["dtype"] == ["int8"]
        assert quantized["w4"]["rows"] == quantized["w8"]["rows"] > 0
    else:
        assert all("bitsandbytes" in quantized[s]["refused"] for s in ("w4", "w8"))


@pytest.mark.slow
def test_sft_fails_when_a_pass_moves_a_live_weight(tc, work, monkeypatch):
    from mlft.training.callback import EvalCallback

    original = EvalCallback._evaluate

    def moving(self, args, state, model, model_ref):
        original(self, args, state, model, model_ref)
        if model is not None:
            with __import__("torch").no_grad():
                next(model.parameters()).view(-1)[0] += 1.0

    monkeypatch.setattr(EvalCallback, "_evaluate", moving)
    report = _run(tc, work / "moving", "sft", "--decode", "eager")
    assert report["exit"] == 1 and report["verdicts"]["sft"] == "FAIL"
    assert any("live weight tensors changed across the pass" in f for f in report["stages"]["sft"]["failures"])


@pytest.mark.slow
def test_sft_fails_on_the_packed_runs_regression_rows_joined_on_sdpa(tc, work, monkeypatch):
    """The packed run that timed out on the H100 (RESULTS.md, 2026-11-24): trl's bfd packing turns padding-free on
    and joins a micro-batch's packed rows into one row; on sdpa transformers builds a dense block-diagonal mask over
    it (rows x max_length wide; at 8 x 2,048: a 16,384 x 16,384 mask and 8x the attention work per layer). mlft
    refuses it at validation (check_joined_rows); with that refusal planted away, the stage's mask spy sees the
    joined row and fails."""
    from mlft.training import recipe as recipe_module

    monkeypatch.setattr(recipe_module, "check_joined_rows", lambda *a, **k: None)
    tc.SETTINGS["reduced"]["packing_strategy"] = "bfd"
    report = _run(tc, work / "joined", "sft", "--decode", "eager")
    assert report["exit"] == 1 and report["verdicts"]["sft"] == "FAIL", report["verdicts"]
    sft = report["stages"]["sft"]
    assert sft["widest_training_mask"] > 128  # the packed rows of a micro-batch, joined into one (233 tokens here)
    assert any("rows joined on sdpa" in f for f in sft["failures"])


@pytest.mark.slow
def test_users_command_fails_without_the_probe(tc, work, monkeypatch):
    """run.sh's old PYTHONPATH named a missing probe folder: no child reports its device, and the stage says so. The
    run made smaller than the passing one's (one step, no pass at step 0, no w8 pass: the fault is in what the
    children report)."""
    monkeypatch.setattr(tc, "HERE", work / "no_such_folder")
    monkeypatch.setattr(tc, "SUITE", REPO / "measurements/gpu/lcb_tiny_noja.yaml")
    tc.SETTINGS["reduced"]["user_steps"] = 1
    built = tc.Context.__init__

    def without_bnb(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.bnb = False

    monkeypatch.setattr(tc.Context, "__init__", without_bnb)
    written = tc.write_recipe

    def one_pass(*args, **changes):  # no pass at step 0: one evaluation child, the one at the end
        changes["evaluation"] = {**changes["evaluation"], "at_start": False}
        return written(*args, **changes)

    monkeypatch.setattr(tc, "write_recipe", one_pass)
    report = _run(tc, work / "noprobe", "users_command")
    assert report["exit"] == 1 and report["verdicts"]["users_command"] == "FAIL", report["stages"]
    # none of the children reports (one ran: a probe that worked would have said 1)
    assert any(f.startswith("0 evaluation child process") for f in report["stages"]["users_command"]["failures"])


@pytest.mark.slow
def test_lora_fails_when_the_pass_copies_the_base_weights(tc, work, monkeypatch):
    from mlft.generation import models

    @contextlib.contextmanager
    def copying(model):
        yield copy.deepcopy(model)

    monkeypatch.setattr(models, "eval_mode", copying)
    report = _run(tc, work / "copying", "lora")
    assert report["exit"] == 1 and report["verdicts"]["lora"] == "FAIL", report["stages"]
    assert any("base weight matrices copied" in f for f in report["stages"]["lora"]["failures"])


@pytest.mark.slow
def test_quantized_fails_on_a_refusal_that_names_nothing(tc, work, monkeypatch):
    """A machine without bitsandbytes passes only with mlft's refusal naming it; any other failure is not a pass."""
    from mlft.errors import ModelError
    from mlft.generation.interventions import quantize

    base = work / "quant"
    base.mkdir(exist_ok=True)
    sft = work / "sft"
    if not (sft / "checkpoints").is_dir():
        pytest.skip("needs the reduced run's sft checkpoint (test_reduced_mode_passes_every_stage)")
    for name in ("model", "sft", "sft.yaml"):
        target = base / name
        if not target.exists():
            target.symlink_to(work / name)

    def broken(ref, scheme):
        raise ModelError("could not load the checkpoint")

    monkeypatch.setattr(quantize, "load_quantized", broken)
    report = _run(tc, base, "quantized")
    assert report["exit"] == 1 and report["verdicts"]["quantized"] == "FAIL", report["stages"]
    assert len(report["stages"]["quantized"]["failures"]) == 2

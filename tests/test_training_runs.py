"""Real training runs on CPU: `accelerate launch` with 2-process DDP, DeepSpeed ZeRO-2 and ZeRO-3, a resume
after a kill, and a DPO run — each 2 optimizer steps on the embedded model with the eval callback on the
tiny suite. Every run has a timeout, so a hang fails instead of blocking CI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from mlft.training import curves
from tests.training_helpers import REPO, TINY, accelerate, env, mlft, noisy_lines, run

pytestmark = pytest.mark.slow
SFT = "recipes/cpu/multilingual_sft.yaml"


def _keys(rows):
    return [(r["step"], r["variant"], r["suite_variant"], r["task"], r["language"], r["metric"]) for r in rows]


def _check_run(run_dir: Path, steps: list[int], variants=("model",)) -> dict:
    marker = json.loads((run_dir / "complete").read_text())
    rows = curves.read_curves(run_dir)
    keys = _keys(rows)
    assert len(keys) == len(set(keys)), "duplicate curve rows"
    assert sorted({(r["step"], r["variant"]) for r in rows}) == sorted((s, v) for s in steps for v in variants)
    for step in steps:  # LCB headline rows for both tasks, values in [0, 1]
        for task in ("monolingual", "crosslingual"):
            for metric in ("lpr", "wpr", "lcpr"):
                (row,) = [r for r in rows if (r["step"], r["variant"], r["task"], r["language"], r["metric"])
                          == (step, "model", task, "avg", metric)]
                assert 0.0 <= row["value"] <= 1.0
    assert (run_dir / "final" / "adapter_config.json").is_file()
    assert (run_dir / "recipe.yaml").is_file()
    assert list((run_dir / "mix").iterdir())  # the data helper's mix files and stats
    return marker


@pytest.mark.parametrize("config, expect_mode, via_recipe", [
    ("configs/accelerate/cpu_ddp.yaml", "in-process", False),
    ("configs/accelerate/cpu_zero2.yaml", "in-process", True),
    ("configs/accelerate/cpu_zero3.yaml", "separate-process", False),
])
def test_two_process_launch_with_eval_callback(shared, tmp_path, config, expect_mode, via_recipe):
    run_dir = tmp_path / "run"
    overrides = [*TINY, f"run_dir={run_dir}", "evaluation.at_start=false", "training_args.save_steps=2"]
    if via_recipe:  # `mlft train` re-launches itself with the recipe's accelerate_config
        cmd = mlft("train", SFT, *overrides, f"accelerate_config={config}", "--no-progress")
    else:  # the documented `accelerate launch --config_file ... -m mlft [train] RECIPE ...`
        cmd = accelerate(config, SFT, *overrides, short="zero3" in config)
    proc = run(cmd, shared, timeout=420)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert ("mlft train: launching:" in proc.stdout) == via_recipe
    marker = _check_run(run_dir, steps=[2])
    assert marker["world_size"] == 2 and marker["global_step"] == 2
    assert {p["mode"] for p in curves.read_passes(run_dir)} == {expect_mode}


def test_resume_after_kill_has_no_duplicate_curve_points(shared, tmp_path):
    run_dir = tmp_path / "run"
    cmd = mlft("train", SFT, *TINY, f"run_dir={run_dir}", "training_args.max_steps=3", "--no-progress")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(shared), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    try:
        while (1, "model") not in curves.done(run_dir):  # checkpoint-1 saved and evaluated
            assert proc.poll() is None, "training ended before it could be interrupted"
            assert time.time() < deadline, "no checkpoint within 300 s"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (run_dir / "complete").exists()
    before = curves.read_curves(run_dir)
    resumed = run(cmd, shared, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    assert noisy_lines(resumed.stdout, resumed.stderr) == []  # a quiet console: training + eval callback
    _check_run(run_dir, steps=[0, 1, 2, 3])
    after = curves.read_curves(run_dir)
    assert after[:len(before)] == before  # finished rows kept as they were
    assert Counter(p["step"] for p in curves.read_passes(run_dir) if p["error"] is None) == \
        {0: 1, 1: 1, 2: 1, 3: 1}
    # re-evaluating the finished run adds nothing
    again = run(mlft("evaluate-run", str(run_dir), "--no-progress"), shared, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert curves.read_curves(run_dir) == after


def test_dpo_run_with_quantized_variant(shared, tmp_path):
    run_dir = tmp_path / "dpo"
    proc = run(mlft("train", "recipes/cpu/multilingual_dpo.yaml", *TINY, f"run_dir={run_dir}",
                    "model=smollm2-135m-instruct", "evaluation.at_start=false", "training_args.save_steps=2",
                    "evaluation.quantized=[w8a8]", "--no-progress"), shared, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    marker = _check_run(run_dir, steps=[2], variants=("model", "w8a8"))
    assert marker["global_step"] == 2 and marker["train_loss"] > 0
    rows = curves.read_curves(run_dir)
    assert {r["model"] for r in rows} == {str(run_dir / "checkpoints" / "checkpoint-2")}

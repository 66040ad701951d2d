"""Real training runs on CPU: two processes under DeepSpeed ZeRO-2 (`mlft train` re-launching itself) and ZeRO-3
(`accelerate launch`), a resume after a kill, and a DPO run with a quantized variant, each 1-3 optimizer steps with
the eval callback on the tiny suite. They test a run's mechanics, on a 2-layer random model with the embedded
model's tokenizer (tests/training_helpers.py: tiny_model); the embedded model's own runs are in
tests/test_training_chain.py, tests/test_training_grpo.py and the README's snippets. Every run has a timeout, so a
hang fails instead of blocking CI."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from mlft.io import curve_file
from tests.training_helpers import (
    REPO,
    TINY,
    accelerate,
    env,
    kill_after_first_checkpoint,
    mlft,
    noisy_lines,
    run,
    templateless_base,
)

pytestmark = pytest.mark.slow
# the multi-process runs (two ranks take both cores) one at a time, after the parallel part (they time nothing: beside
# the vLLM tests); the one-process runs (the resume after a kill, the DPO run) beside the other tests
MULTI_PROCESS = pytest.mark.multiprocess
SFT = "recipes/cpu/multilingual_sft.yaml"


def _keys(rows):
    return [(r["step"], r["variant"], r["suite_variant"], r["task"], r["language"], r["metric"]) for r in rows]


def _check_run(run_dir: Path, steps: list[int], variants=("model",)) -> dict:
    marker = json.loads((run_dir / "complete").read_text())
    rows = curve_file.read_curves(run_dir)
    keys = _keys(rows)
    assert len(keys) == len(set(keys)), "duplicate curve rows"
    assert sorted({(r["step"], r["variant"]) for r in rows}) == sorted((s, v) for s in steps for v in variants)
    for step in steps:  # LCB headline rows for both tasks, values in [0, 1]
        for task in ("monolingual", "crosslingual"):
            for metric in ("lpr", "wpr", "lcpr"):
                (row,) = [
                    r
                    for r in rows
                    if (r["step"], r["variant"], r["task"], r["language"], r["metric"])
                    == (step, "model", task, "avg", metric)
                ]
                assert 0.0 <= row["value"] <= 1.0
    if marker["final"] == "merged":  # a LoRA run on a local model: merged weights in final/, its adapter beside
        assert (run_dir / "final" / "config.json").is_file()
        assert (run_dir / "final_adapter" / "adapter_config.json").is_file()
    else:
        assert (run_dir / "final" / "adapter_config.json").is_file()
    assert (run_dir / "recipe.yaml").is_file()
    assert list((run_dir / "mix").iterdir())  # the data helper's mix files and stats
    return marker


# The three accelerate configs each launch two processes once in this file (each launch costs 1-3 min of CI): ZeRO-2
# by `mlft train` re-launching itself with the recipe's accelerate_config (the data-parallel evaluation test below),
# ZeRO-3 by the short `accelerate launch ... -m mlft RECIPE` with its separate-process evaluation (the ZeRO-3 test
# below), DDP by the documented `accelerate launch --config_file ... -m mlft train RECIPE` on two fake nodes
# (tests/test_training_launch.py).
@MULTI_PROCESS
def test_zero3_lora_checkpointing_and_step0_child_on_a_templateless_base(shared, tmp_path, tiny):
    """ZeRO-3 evaluates in a separate process. At step 0 the child loads the base model, whose tokenizer
    has no chat template; it must use the run's (the in-process pass would). LoRA + activation
    checkpointing under ZeRO-3 (trl forces reentrant checkpointing) trains its steps. Launched the short way
    (`accelerate launch ... -m mlft RECIPE`, no `train`)."""
    run_dir = tmp_path / "run"
    from mlft.generation.models import load

    base = templateless_base(tmp_path / "base", *load(str(tiny), device="cpu"))
    overrides = [
        *TINY,
        f"run_dir={run_dir}",
        f"model={base}",
        "training_args.max_steps=1",
        "chat_template=mlft/training/templates/chatml_training.jinja",
        "training_args.activation_checkpointing=true",
    ]
    proc = run(accelerate("configs/accelerate/cpu_zero3.yaml", SFT, *overrides, short=True), shared, timeout=480)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "mlft train: launching:" not in proc.stdout  # launched by accelerate, not re-launched by mlft
    marker = _check_run(run_dir, steps=[0, 1])
    assert marker["world_size"] == 2 and marker["global_step"] == 1 and marker["train_loss"] > 0
    assert marker["final"] == "merged"  # merged on rank 0 alone inside the ZeRO-3 job (it used to deadlock)
    passes = curve_file.read_passes(run_dir)
    assert [(p["step"], p["mode"], p["error"]) for p in passes] == [
        (0, "separate-process", None),
        (1, "separate-process", None),
    ]
    (completions,) = (run_dir / "evals" / "step-000000" / "model").rglob("completions.jsonl")
    records = [json.loads(line) for line in completions.read_text().splitlines()]
    assert records and {(r["device"], r["dtype"]) for r in records} == {("cpu", "float32")}
    assert all(r["messages"] for r in records)  # chat prompts, rendered with the run's template
    assert (run_dir / "chat_template.jinja").read_text() == (
        REPO / "mlft/training/templates/chatml_training.jinja"
    ).read_text()


# Test instrumentation loaded by every Python process of a launch (PYTHONPATH): rank 0's evaluation first sleeps
# (longer than the recipe's ddp_timeout), and each data-parallel rank reports how many prompts it generated.
SITECUSTOMIZE = r"""
import os, time
import mlft.training.passes as passes
import mlft.generation.data_parallel as data_parallel
_step, _serve = passes.evaluate_step, data_parallel.serve
def evaluate_step(*args, **kwargs):
    time.sleep(float(os.environ.get("MLFT_TEST_EVAL_SLEEP", "0")))
    return _step(*args, **kwargs)
def serve(*args, **kwargs):
    n = _serve(*args, **kwargs)
    with open(os.path.join(os.environ["MLFT_TEST_SERVED"], f"rank{os.environ.get('RANK')}.txt"), "a") as fh:
        fh.write(f"{n}\n")
    return n
passes.evaluate_step, data_parallel.serve = evaluate_step, serve
"""


def _instrumented(shared: Path, tmp_path: Path, sleep: float) -> dict:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    out = env(shared)
    out.update(
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        MLFT_TEST_EVAL_SLEEP=str(sleep),
        MLFT_TEST_SERVED=str(tmp_path),
    )
    return out


@MULTI_PROCESS
def test_data_parallel_evaluation_survives_a_short_group_timeout_and_matches_one_rank(shared, tmp_path, tiny):
    """Ranks 1..N-1 wait for rank 0's evaluation in a collective; with the recipe's ddp_timeout (5 s)
    shorter than the evaluation (rank 0 sleeps 12 s first), the group's timeout must have been raised above
    evaluation.timeout_s. Both ranks generate (data-parallel) and write the same step-0 rows as one
    rank. global_batch_size gives the same optimizer steps on 1 and 2 processes. The two ranks run DeepSpeed
    ZeRO-2, launched by `mlft train` re-launching itself with the recipe's accelerate_config."""
    common = [
        "evaluation.suite_overrides.batch_size=2",  # lcb_tiny's 6 prompts in 3 chunks: work for both ranks
        "training_args.max_steps=-1",
        "training_args.num_train_epochs=1",
        "global_batch_size=4",
        "training_args.per_device_train_batch_size=1",
        "training_args.save_steps=2",
        "training_args.max_length=128",
        "evaluation.suite=lcb_tiny",
        "mix_overrides=[total=8]",  # one epoch: 2 optimizer steps of 4 rows
        "training_args.ddp_timeout=5",
        "evaluation.timeout_s=60",
        f"model={tiny}",
    ]
    two, one = tmp_path / "two", tmp_path / "one"
    zero2 = "accelerate_config=configs/accelerate/cpu_zero2.yaml"
    cmd = mlft("train", SFT, *common, f"run_dir={two}", zero2, "--no-progress")
    proc = subprocess.run(
        cmd, cwd=REPO, env=_instrumented(shared, tmp_path, sleep=12), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "mlft train: launching:" in proc.stdout  # re-launched with the recipe's accelerate_config
    marker = _check_run(two, steps=[0, 2])
    assert marker["world_size"] == 2 and marker["global_step"] == 2
    assert marker["gradient_accumulation_steps"] == 2  # 4 rows = 1 per device x 2 ranks x 2
    assert marker["process_group_timeout_s"] == 60 + 600  # raised above evaluation.timeout_s
    assert [p["mode"] for p in curve_file.read_passes(two)] == ["data-parallel", "data-parallel"]
    served = [int(x) for x in (tmp_path / "rank1.txt").read_text().split()]
    assert len(served) == 2 and all(n > 0 for n in served)  # rank 1 generated its share at both steps

    proc = run(mlft("train", SFT, *common, f"run_dir={one}", "--no-progress"), shared, timeout=480)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    single = _check_run(one, steps=[0, 2])
    assert single["global_step"] == 2 and single["gradient_accumulation_steps"] == 4

    def step0(run_dir):
        rows = [r for r in curve_file.read_curves(run_dir) if r["step"] == 0]
        return sorted((r["task"], r["language"], r["metric"], r["value"], r["low"], r["high"]) for r in rows)

    def texts(run_dir):
        (path,) = (run_dir / "evals" / "step-000000" / "model").rglob("completions.jsonl")
        return {json.loads(x)["id"]: json.loads(x)["completion"] for x in path.read_text().splitlines()}

    assert step0(two) == step0(one)
    assert texts(two) == texts(one)
    walls = {name: [p["seconds"] for p in curve_file.read_passes(d)] for name, d in (("2 ranks", two), ("1 rank", one))}
    print(f"step-0 / step-2 pass wall time (s): {walls}")


def test_resume_after_kill_has_no_duplicate_curve_points(shared, tmp_path, tiny):
    run_dir = tmp_path / "run"
    cmd = mlft("train", SFT, *TINY, f"run_dir={run_dir}", f"model={tiny}", "training_args.max_steps=3", "--no-progress")
    kill_after_first_checkpoint(cmd, run_dir, shared, timeout=300)
    assert not (run_dir / "complete").exists()
    before = curve_file.read_curves(run_dir)
    resumed = run(cmd, shared, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    assert noisy_lines(resumed.stdout, resumed.stderr) == []  # a quiet console: training + eval callback
    _check_run(run_dir, steps=[0, 1, 2, 3])
    after = curve_file.read_curves(run_dir)
    assert after[: len(before)] == before  # finished rows kept as they were
    assert Counter(p["step"] for p in curve_file.read_passes(run_dir) if p["error"] is None) == {0: 1, 1: 1, 2: 1, 3: 1}
    # re-evaluating the finished run adds nothing
    again = run(mlft("evaluate-run", str(run_dir), "--no-progress"), shared, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert curve_file.read_curves(run_dir) == after


def test_dpo_run_with_quantized_variant(shared, tmp_path, tiny):
    run_dir = tmp_path / "dpo"
    proc = run(
        mlft(
            "train",
            "recipes/cpu/multilingual_dpo.yaml",
            *TINY,
            f"run_dir={run_dir}",
            f"model={tiny}",
            "evaluation.at_start=false",
            "training_args.save_steps=2",
            "evaluation.quantized=[w8a8]",
            "--no-progress",
        ),
        shared,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    marker = _check_run(run_dir, steps=[2], variants=("model", "w8a8"))
    assert marker["global_step"] == 2 and marker["train_loss"] > 0
    rows = curve_file.read_curves(run_dir)
    assert {r["model"] for r in rows} == {str(run_dir / "checkpoints" / "checkpoint-2")}

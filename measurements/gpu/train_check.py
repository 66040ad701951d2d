"""mlft's training path on a GPU, checked in one command (the training twin of decode_check.py):

    PYTHONUNBUFFERED=1 python3 measurements/gpu/train_check.py           # one H100/H200: about 6-7 min (below)
    python3 measurements/gpu/train_check.py --cpu-reduced                # any CPU: a tiny model, ~2-3 min
    (tests/test_train_check.py runs the reduced mode in CI, and plants a fault in each stage)

A random-weight model of SmolLM2-1.7B's geometry (24 layers, hidden 2,048, MLP 8,192, 32 heads, vocabulary 49,152,
tied embeddings; no weights are downloaded) with the real SmolLM2 tokenizer (.gpu_assets/tokenizer from prepare.sh,
else the embedded SmolLM2-135M-Instruct's: the same 49,152-token vocabulary) trains on mlft's offline seed mix
through `mlft train` itself (mlft.training.train.train / `accelerate launch -m mlft train`). Without CUDA the full
mode refuses (exit 2). Every stage prints one verdict line (PASS / FAIL / SKIP / ERROR) and the command exits 1
when any stage fails, errors or is skipped (a check that did not run did not pass). `--out` (default
$OUT/train_check.json, else ./train_check.json) is rewritten after every stage.

Stages, each a failure when its checks do not hold:
- sft: full fine-tune, bf16 weights (the GPU recipes' dtype), trl packing (bfd: padding-free) into 2,048-token
  rows, 8 rows a step, 20 steps, in-process evaluations with compiled decoding (the hf backend, `decode: compiled`)
  at the start, the middle (step 10) and the end. Checks: the loss falls (the last logged loss under the first);
  the live weights are bit-identical before and after each pass; the passes after the first compile no dynamo
  graph and skip no CUDA graph; no attention mask wider than max_length reaches the attention (a padding-free row
  on sdpa would bring a dense L x L mask: the packed run's timeout, docs/gpu.md); the last pass's replies equal a
  pass over the saved checkpoint, reloaded. Reported: tokens/s (trl's num_tokens over the steps' time), MFU
  against the card's dense bf16 peak and against a measured bf16 matmul, peak memory, the first (compiling) and
  later pass seconds, the callback's share of wall time, and that share extrapolated to an evaluation every 100
  steps.
- users_command: the users' command, `accelerate launch --config_file configs/accelerate/zero3.yaml
  --num_processes 1 -m mlft train RECIPE` (4 steps, short rows): completes; its evaluations ran in separate
  processes (curves.jsonl's mode) on CUDA (measurements/gpu/probe: each child records whether it used CUDA); a w8
  variant recorded with its real dtype (the completions' `dtype`: the quantized weights', not the run's bf16).
- lora: a LoRA run (r 16, all-linear), 4 steps, in-process passes at steps 0, 2 and 4: the pass generates from the
  live model without a copy of the base weights (storage shared; on CUDA the memory held during the pass under
  10 % of the weights), the live weights bit-identical across it, and the replies change between checkpoints.
- quantized: bitsandbytes w4 (NF4) and w8 (LLM.int8) passes on the sft stage's saved checkpoint (the `quantize`
  intervention): each generates, and its completions record a quantized dtype (int8 / nf4, not the embeddings'
  16/32 bits); in the reduced mode, on a machine without bitsandbytes, a refusal that names the package passes
  (anything else is a FAIL). bitsandbytes runs on the CPU too, so where it is installed the reduced mode runs both.

The reduced mode (`--cpu-reduced`): the same stages and checks on the CPU at toy scale (2 layers, hidden 64, the
real tokenizer, 128-token rows, 4 + 2 steps): FlexAttention has no backward on the CPU (torch 2.13) and mlft
refuses padding-free rows on sdpa, so its rows are packed `wrapped` (no joined row); the users' command runs under
configs/accelerate/cpu_zero3.yaml. Only a GPU can show the bfd-packed step's speed, MFU, CUDA graphs, peak memory
and the children's CUDA.

Sized for 8 minutes on one H100 (the reasoning, to check against each stage's seconds in the JSON; `budget_s`
440 s: a stage that would start after it is a SKIP, and the command's exit 1): building and saving the model ~20 s
(3.4 GB of bf16 safetensors), the matmul ~2 s; sft ~200 s: tokenizing and packing 6,000 seed rows in 8 processes
~15 s, FlexAttention's compile of its forward and backward ~40-60 s, 20 steps of 16,384 tokens at 0.4 s (MFU 40 %)
to 1.6 s (10 %), three passes of lcb_tiny_noja (6 prompts x 16 new tokens) of which the first compiles the decode step
(~50 s, the H200's decode_check measured 35-47 s) and the others take ~5 s, three saves of 3.4 GB ~15 s, the
reload pass ~20 s (the same shapes: dynamo's graphs take the new model's weights as inputs; ~50 s if it
recompiles); quantized ~50 s (w4 and w8 each: bitsandbytes quantizing at load ~10 s, an eager pass ~10 s);
lora ~50 s (4 steps, three eager passes); users_command ~120 s (DeepSpeed's start ~30 s, 400 short seed rows, two
evaluation children of ~25 s each and the w8 variant at both ends ~20 s each). About 430-490 s in all: at the edge of
8 minutes, which is why the stages run in this order (the quantized stage needs sft's checkpoint; the users' command,
the slowest to start, goes last), so a slow card loses the last stage (a SKIP), not the first. Should it be cut off,
`--stages users_command` alone (~120 s) completes the set in a second call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for _path in (REPO, HERE):  # mlft from this checkout; geometry.py beside this script
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from geometry import GEOMETRY  # noqa: E402 (measurements/gpu/geometry.py, beside this script)

SETTINGS = {
    "full": {
        "max_length": 2048,
        "rows": 8,  # per step (accumulation 1): 16,384 tokens a step
        "steps": 20,
        "mix_rows": 6000,  # seed rows of ~84 tokens: ~250 packed 2,048-token rows (160 used)
        "lora_steps": 4,
        "user_steps": 4,
        "packing_strategy": "bfd",  # padding-free: a varlen attention (flash-attn, else FlexAttention)
        "accelerate": "configs/accelerate/zero3.yaml",
        "budget_s": 440,
        "new_tokens": 16,
    },
    "reduced": {
        "max_length": 128,
        "rows": 2,
        "steps": 4,
        "mix_rows": 60,
        "lora_steps": 2,
        "user_steps": 2,
        "packing_strategy": "wrapped",  # FlexAttention: no backward on the CPU; sdpa joined rows are refused
        "accelerate": "configs/accelerate/cpu_zero3.yaml",
        "budget_s": 1500,  # a busy 2-core machine; DeepSpeed compiles its CPU Adam once (~7 min) on first use
        "new_tokens": 4,
    },
}
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12}  # dense bf16 tensor-core FLOP/s
SUITE = HERE / "lcb_tiny_noja.yaml"
QUANT = ("w4", "w8")
DECODE = ["compiled"]  # the sft stage's decoding (--decode eager: the tests' planted faults, no compile)


class Failed(Exception):
    """A stage's check did not hold."""


def peak_flops(name: str) -> float | None:
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def tokenizer_path() -> str:
    carried = REPO / ".gpu_assets/tokenizer"
    if carried.is_dir():
        return str(carried)
    from mlft.generation.models import resolve

    return resolve("smollm2-135m-instruct").path


def build_model(mode: str, path: Path, dtype: str, device: str) -> dict:
    """A random-weight Llama of `mode`'s geometry saved at `path` with the real tokenizer; its numbers."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_path())
    config = LlamaConfig(
        vocab_size=len(tok),
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        rope_theta=130000,
        **GEOMETRY[mode],
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    params = sum(p.numel() for p in model.parameters())
    del model
    return {"parameters": params, "config": config.to_dict()}


def write_recipe(path: Path, model: Path, run_dir: Path, mode: str, **changes) -> Path:
    """A recipe over recipes/multilingual_sft.yaml (the GPU recipes' base: bf16, full fine-tune) for this check."""
    import yaml

    s = SETTINGS[mode]
    cpu = mode == "reduced"
    args = {
        "max_steps": s["steps"],
        "save_steps": s["steps"] // 2,
        "logging_steps": 1,
        "per_device_train_batch_size": s["rows"],
        "max_length": s["max_length"],
        "packing": True,
        "packing_strategy": s["packing_strategy"],
        "save_only_model": True,
        "save_total_limit": None,
        "dataset_num_proc": None if cpu else 8,
        "lr_scheduler_type": "constant",
        "learning_rate": 1e-3 if cpu else 3e-4,  # random weights: a loss that falls within 20 steps
        "warmup_steps": 0,
        "use_liger_kernel": False,
    }
    if cpu:
        args.update(use_cpu=True, bf16=False)
    elif s["packing_strategy"] == "bfd":
        import importlib.util

        attn = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "flex_attention"
        args["model_init_kwargs"] = {"attn_implementation": attn}
    recipe = {
        "include": str(REPO / "recipes/multilingual_sft.yaml"),
        "model": str(model),
        "dtype": "float32" if cpu else "bfloat16",
        "mix": "data_mixes/cpu/multilingual_sft.yaml",
        "mix_overrides": [f"total={s['mix_rows']}"],
        "run_dir": str(run_dir),
        "accelerate_config": None,
        "global_batch_size": s["rows"],
        "training_args": args,
        "evaluation": {
            "suite": str(SUITE),
            "suite_overrides": {"decoding": {"max_new_tokens": s["new_tokens"]}},
            "at_start": True,
            "quantized": [],
            "in_process": "auto",
            "backend_options": {"decode": DECODE[0]},
        },
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(recipe.get(key), dict):
            recipe[key] = {**recipe[key], **value}
        else:
            recipe[key] = value
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def completions(run_dir: Path, step: int, variant: str = "model") -> dict[str, dict]:
    """{id: record} of the completions of one (step, variant) pass."""
    from mlft.io.jsonl import read_jsonl

    out = {}
    for folder in (run_dir / "evals").glob("step-*"):
        if int(folder.name.split("-")[1]) != step:
            continue
        for f in sorted((folder / variant).rglob("completions.jsonl")):
            for row in read_jsonl(f):
                if "completion" in row and "id" in row:
                    out[f"{row['id']}#{row.get('sample', 0)}"] = row
    return out


def compile_counts() -> dict:
    from torch._dynamo.utils import counters

    return {"graphs": counters["stats"]["unique_graphs"], "cudagraph_skips": counters["inductor"]["cudagraph_skips"]}


class PassProbe:
    """Wraps EvalCallback._evaluate: for each pass, whether the live weights stayed bit-identical, the dynamo graphs
    compiled and CUDA graphs skipped inside it, its seconds; and a spy on the first attention layer's mask width."""

    def __init__(self, cuda: bool):
        self.cuda, self.passes, self.mask_widths = cuda, [], []

    def __enter__(self):
        from mlft.training.callback import EvalCallback

        self._original = EvalCallback._evaluate
        probe = self

        def evaluate(cb, args, state, model, model_ref):
            import torch

            live = [p.detach().clone() for p in model.parameters()] if model is not None else []
            before, started = compile_counts(), time.perf_counter()
            probe._original(cb, args, state, model, model_ref)
            if probe.cuda:
                torch.cuda.synchronize()
            after = compile_counts()
            changed = sum(not torch.equal(a, p.detach()) for a, p in zip(live, model.parameters())) if live else 0
            probe.passes.append(
                {
                    "step": state.global_step,
                    "seconds": round(time.perf_counter() - started, 2),
                    "weights_changed": changed,
                    "graphs_compiled": after["graphs"] - before["graphs"],
                    "cudagraph_skips": after["cudagraph_skips"] - before["cudagraph_skips"] if probe.cuda else 0,
                }
            )
            del live

        EvalCallback._evaluate = evaluate
        return self

    def __exit__(self, *exc):
        from mlft.training.callback import EvalCallback

        EvalCallback._evaluate = self._original
        return False

    def attention_spy(self):
        """A TrainerCallback hooking the first decoder layer's attention: the widest mask it is given in training."""
        from transformers import TrainerCallback

        probe = self

        class Spy(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kwargs):
                layer = next(m for n, m in model.named_modules() if n.endswith("layers.0.self_attn"))

                def hook(_module, _args, kwargs):
                    if not _module.training:
                        return
                    mask = kwargs.get("attention_mask")
                    if hasattr(mask, "shape") and mask is not None:  # a dense mask (a BlockMask has .shape too)
                        dense = type(mask).__name__ == "Tensor"
                        probe.mask_widths.append((int(mask.shape[-1]), dense))

                layer.register_forward_pre_hook(hook, with_kwargs=True)

        return Spy()


def step_timer(cuda: bool, times: dict):
    """A TrainerCallback writing each optimizer step's seconds (on_step_begin -> on_step_end, CUDA synced: the
    evaluation passes, run from on_save after on_step_end, are not in it) into `times` {step: seconds}."""
    from transformers import TrainerCallback

    def now():
        if cuda:
            import torch

            torch.cuda.synchronize()
        return time.perf_counter()

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t = now()

        def on_step_end(self, args, state, control, **kwargs):
            times[state.global_step] = now() - self.t

    return Timer()


def matmul_flops(cuda: bool) -> float | None:
    """A measured bf16 matmul's FLOP/s (8,192^3, 20 runs): the card's reachable peak."""
    if not cuda:
        return None
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    return 20 * 2 * 8192**3 / (time.perf_counter() - t)


# --- stages: each returns (its JSON, its verdict detail) or raises Failed -----------------------------------------


def stage_sft(ctx):
    import torch

    from mlft.training.recipe import load_recipe
    from mlft.training.train import train

    s = SETTINGS[ctx.mode]
    run_dir = ctx.work / "sft"
    shutil.rmtree(run_dir, ignore_errors=True)  # a run of its own (a finished one would not train again)
    path = write_recipe(ctx.work / "sft.yaml", ctx.model, run_dir, ctx.mode)
    recipe = load_recipe(path)
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    times: dict[int, float] = {}
    with PassProbe(ctx.cuda) as probe:
        train(recipe, progress=False, callbacks=[probe.attention_spy(), step_timer(ctx.cuda, times)])
    wall = time.perf_counter() - started
    marker = json.loads((run_dir / "complete").read_text())
    history = _log_history(run_dir, s["steps"], times)
    losses = [h["loss"] for h in history if "loss" in h]
    out = {"passes": probe.passes, "losses": losses, "wall_s": round(wall, 1), "eval_s": marker["eval_s"]}
    bad = []
    if len(losses) < 2 or not losses[-1] < losses[0]:
        bad.append(f"the loss did not fall ({losses[:1]} -> {losses[-1:]})")
    if len(probe.passes) < 3:
        bad.append(f"{len(probe.passes)} evaluation passes, expected start, middle and end")
    for p in probe.passes:
        if p["weights_changed"]:
            bad.append(f"step {p['step']}: {p['weights_changed']} live weight tensors changed across the pass")
    for p in probe.passes[1:]:
        if p["graphs_compiled"] or p["cudagraph_skips"]:
            bad.append(
                f"step {p['step']}: {p['graphs_compiled']} dynamo graph(s) compiled, {p['cudagraph_skips']} CUDA "
                "graph(s) skipped after the first pass"
            )
    widest = max((w for w, _ in probe.mask_widths), default=0)
    out["widest_training_mask"] = widest
    if widest > s["max_length"]:
        bad.append(f"a {widest}-wide attention mask in training (rows of {s['max_length']}): rows joined on sdpa")
    last = max(p["step"] for p in probe.passes) if probe.passes else s["steps"]
    live = completions(run_dir, last)
    reload = _reload_pass(ctx, recipe, run_dir, last)
    same = sum(live[k]["completion"] == reload.get(k, {}).get("completion") for k in live)
    out.update(last_pass_rows=len(live), reload_identical=same)
    if not live or same != len(live):
        bad.append(f"the last pass's replies vs a reload of the checkpoint: {same}/{len(live)} identical")
    # throughput: trl's num_tokens (packed positions) over the steps' time, the first step (compile) left out
    steps = [h for h in history if "num_tokens" in h and "step_s" in h]
    tokens = [b["num_tokens"] - a["num_tokens"] for a, b in zip(steps, steps[1:])]
    seconds = [b["step_s"] for b in steps[1:]]
    tps = sum(tokens) / sum(seconds) if seconds and sum(seconds) > 0 else None
    n = ctx.parameters
    out["tokens_per_s"] = round(tps, 1) if tps else None
    if tps:
        out["mfu_peak"] = round(6 * n * tps / ctx.peak, 4) if ctx.peak else None
        out["mfu_matmul"] = round(6 * n * tps / ctx.matmul, 4) if ctx.matmul else None
    if ctx.cuda:
        out["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    out["first_pass_s"] = probe.passes[0]["seconds"] if probe.passes else None
    out["later_pass_s"] = [p["seconds"] for p in probe.passes[1:]]
    out["callback_share"] = round(marker["eval_s"] / wall, 3)
    later = sum(out["later_pass_s"]) / max(len(out["later_pass_s"]), 1)
    step_s = sum(seconds) / len(seconds) if seconds else None
    if step_s:  # an evaluation every 100 steps, each as long as a later (compiled) pass: extrapolated
        out["callback_share_every_100_extrapolated"] = round(later / (later + 100 * step_s), 4)
    ctx.sft_run = run_dir
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    mfu = f", MFU {out['mfu_peak']:.1%} of peak" if out.get("mfu_peak") else ""
    return out, (
        f"loss {losses[0]:.2f} -> {losses[-1]:.2f}, {len(probe.passes)} passes bit-identical, no recompile after the "
        f"first, reload = last pass ({same} rows), {out['tokens_per_s']} tok/s{mfu}, callback "
        f"{out['callback_share']:.0%} of wall"
    )


def _log_history(run_dir: Path, steps: int, times: dict) -> list[dict]:
    """trl's log history (the last checkpoint's), each logged step with its seconds (step_timer's)."""
    ckpt = run_dir / "checkpoints" / f"checkpoint-{steps}" / "trainer_state.json"
    history = json.loads(ckpt.read_text())["log_history"] if ckpt.is_file() else []
    for h in history:
        if h.get("step") in times:
            h["step_s"] = times[h["step"]]
    return history


def _reload_pass(ctx, recipe, run_dir: Path, step: int) -> dict[str, dict]:
    """The evaluation pass over the saved checkpoint of `step`, loaded anew (another run folder)."""
    from mlft.training.passes import Step, evaluate_step, evaluation_target

    ckpt = run_dir / "checkpoints" / f"checkpoint-{step}"
    other = ctx.work / "reload"
    shutil.rmtree(other, ignore_errors=True)
    target = evaluation_target(recipe.evaluation, run_dir).with_model(str(ckpt))
    evaluate_step(other, recipe.evaluation, Step(step, True, "separate-process"), target, progress=False)
    return completions(other, step)


def stage_users_command(ctx):
    from mlft.training.launch import read_accelerate_config

    s = SETTINGS[ctx.mode]
    run_dir = ctx.work / "users"
    shutil.rmtree(run_dir, ignore_errors=True)
    probe = ctx.work / "probe.jsonl"
    probe.unlink(missing_ok=True)
    path = write_recipe(
        ctx.work / "users.yaml",
        ctx.model,
        run_dir,
        ctx.mode,
        accelerate_config=str(REPO / s["accelerate"]),
        mix_overrides=["total=400"],  # short seed rows: 4 steps need few
        training_args={
            "max_steps": s["user_steps"],
            "save_steps": s["user_steps"],
            "packing": False,
            "max_length": 256,
            "per_device_train_batch_size": 2,
            "logging_steps": 1,
            "save_only_model": True,
            "dataset_num_proc": None,
            **({"use_cpu": True, "bf16": False} if ctx.mode == "reduced" else {}),
        },
        # the recipe is checked against the config's world size (8 GPUs; the CPU one: 2), launched on 1 process
        global_batch_size=2 * int(read_accelerate_config(REPO / s["accelerate"]).num_processes or 1),
        evaluation={
            "suite": str(SUITE),
            "suite_overrides": {"decoding": {"max_new_tokens": 4}},
            "at_start": True,
            "quantized": ["w8"] if ctx.bnb else [],
            "in_process": "auto",
            "timeout_s": 300,
        },
    )
    env = {**os.environ, "MLFT_BENCH_PROBE": str(probe), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE / "probe"), str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(REPO / s["accelerate"])]
    cmd += ["--num_processes", "1", "-m", "mlft", "train", str(path), "--no-progress"]
    left = max(60, ctx.deadline - time.monotonic())
    proc = subprocess.Popen(
        cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=left)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the launcher's whole group: the training process and its evaluation children
        output, _ = proc.communicate()
        (ctx.work / "users.log").write_text(output)
        raise TimeoutError(f"the users' command did not finish in {left:.0f} s: {output[-300:]}") from None
    (ctx.work / "users.log").write_text(output)
    out, bad = {"rc": proc.returncode}, []
    if proc.returncode != 0:
        raise Failed(f"accelerate launch exited {proc.returncode}: {output[-600:]}")
    from mlft.io import curve_file

    modes = sorted({p.get("mode") for p in curve_file.read_passes(run_dir)} - {None})
    out["pass_modes"] = modes
    if modes != ["separate-process"]:
        bad.append(f"evaluation modes {modes}, expected separate-process only (ZeRO-3 shards the weights)")
    children = [json.loads(x) for x in probe.read_text().splitlines()] if probe.is_file() else []
    children = [c for c in children if "evaluate-run" in c.get("argv", [])]
    out["children"] = [{"cuda_used": c.get("cuda_used"), "peak_gib": c.get("cuda_peak_gib")} for c in children]
    if len(children) < 2:
        bad.append(f"{len(children)} evaluation child process(es) recorded by the probe, expected step 0 and the end")
    if ctx.cuda and not all(c.get("cuda_used") for c in children):
        bad.append(f"an evaluation child did not use CUDA: {out['children']}")
    if ctx.bnb:
        dtypes = {r.get("dtype") for r in completions(run_dir, s["user_steps"], "w8").values()}
        out["w8_dtype"] = sorted(map(str, dtypes))
        if not dtypes or dtypes & {"bfloat16", "float32", "float16", None}:
            bad.append(f"the w8 pass recorded dtype {out['w8_dtype']}, not its quantized weights'")
    else:
        out["w8"] = "not run: bitsandbytes is not installed here"
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    where = "CUDA" if ctx.cuda else "the CPU"
    return out, f"ZeRO-3, 1 process: {len(children)} separate-process passes on {where}" + (
        f", w8 recorded as {out['w8_dtype']}" if ctx.bnb else ", w8 not run (no bitsandbytes)"
    )


def stage_lora(ctx):
    import torch

    from mlft.generation import models
    from mlft.training.recipe import load_recipe
    from mlft.training.train import train

    s = SETTINGS[ctx.mode]
    run_dir = ctx.work / "lora"
    shutil.rmtree(run_dir, ignore_errors=True)
    if not (ctx.work / "sft.yaml").is_file():  # its settings are the sft stage's (run alone: written here)
        write_recipe(ctx.work / "sft.yaml", ctx.model, ctx.work / "sft", ctx.mode)
    path = write_recipe(
        ctx.work / "lora.yaml",
        ctx.model,
        run_dir,
        ctx.mode,
        lora={"enabled": True, "r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"},
        training_args={
            **_args(ctx.work / "sft.yaml"),
            "max_steps": s["lora_steps"],
            "save_steps": s["lora_steps"] // 2,
            "learning_rate": 5e-3,
        },
        evaluation={**_evaluation(ctx.work / "sft.yaml"), "backend_options": {"decode": "eager"}},
    )
    recipe = load_recipe(path)
    seen: list[dict] = []
    original = models.eval_mode

    def spying(model):
        cm = original(model)

        class Spy:
            def __enter__(self):
                base = {n: p for n, p in model.named_parameters() if "lora_" not in n}
                self.ptrs = {p.data_ptr() for p in base.values()}
                self.bytes = sum(p.numel() * p.element_size() for p in base.values())
                self.start = torch.cuda.memory_allocated() if ctx.cuda else 0
                live = cm.__enter__()
                foreign = [
                    n
                    for n, p in live.named_parameters()
                    if "lora_" not in n and p.dim() > 1 and p.data_ptr() not in self.ptrs
                ]
                held = torch.cuda.memory_allocated() - self.start if ctx.cuda else None
                seen.append({"weights_not_shared": len(foreign), "held_bytes": held, "weight_bytes": self.bytes})
                return live

            def __exit__(self, *exc):
                return cm.__exit__(*exc)

        return Spy()

    from mlft.generation import target as target_module

    with PassProbe(ctx.cuda) as probe:
        target_module.eval_mode = spying  # where the in-process pass enters it
        try:
            train(recipe, progress=False)
        finally:
            target_module.eval_mode = original
    steps = sorted(p["step"] for p in probe.passes)
    replies = [completions(run_dir, st) for st in steps]
    changed = [
        sum(a[k]["completion"] != b.get(k, {}).get("completion") for k in a) for a, b in zip(replies, replies[1:])
    ]
    out = {"passes": probe.passes, "eval_mode_calls": seen, "replies_changed_between_checkpoints": changed}
    bad = []
    if len(steps) < 2:
        bad.append(f"{len(steps)} passes")
    if not seen:
        bad.append("no pass generated from the live model (eval_mode never entered)")
    for p in probe.passes:
        if p["weights_changed"]:
            bad.append(f"step {p['step']}: {p['weights_changed']} live tensors changed across the pass")
    for x in seen:
        if x["weights_not_shared"]:
            bad.append(f"{x['weights_not_shared']} base weight matrices copied for a pass")
        if x["held_bytes"] is not None and x["held_bytes"] > 0.1 * x["weight_bytes"]:
            bad.append(f"{x['held_bytes'] / 2**20:.0f} MiB held in a pass against {x['weight_bytes'] / 2**20:.0f}")
    if not changed or not all(changed):
        bad.append(f"replies changed between checkpoints: {changed} rows (a pass that ignores the adapter?)")
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    return out, f"{len(steps)} live passes, no weight copy, weights bit-identical, replies changed {changed} rows"


def _args(recipe_path: Path) -> dict:
    import yaml

    return yaml.safe_load(recipe_path.read_text())["training_args"]


def _evaluation(recipe_path: Path) -> dict:
    import yaml

    return yaml.safe_load(recipe_path.read_text())["evaluation"]


def stage_quantized(ctx):
    from mlft.errors import MlftError
    from mlft.training.passes import evaluation_target, passes_for, run_pass
    from mlft.training.recipe import load_recipe

    run_dir = getattr(ctx, "sft_run", None) or ctx.work / "sft"
    ckpts = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    if not ckpts:
        raise Failed("no saved checkpoint of the sft stage to quantize (run the sft stage first)")
    ckpt = ckpts[-1]
    step = int(ckpt.name.split("-")[1])
    recipe = load_recipe(ctx.work / "sft.yaml", settings={"evaluation": {"quantized": list(QUANT)}})
    ev = recipe.evaluation
    out, bad = {}, []
    for scheme in QUANT:
        other = ctx.work / f"quant_{scheme}"
        shutil.rmtree(other, ignore_errors=True)
        target = evaluation_target(ev, run_dir, options={"decode": "eager"}).with_model(str(ckpt))
        try:
            (p,) = [x for x in passes_for(ev) if x.variant == scheme]
            other.mkdir(parents=True, exist_ok=True)
            run_pass(p, other, step, target, progress=False)
        except (MlftError, ImportError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            out[scheme] = {"refused": message[:400]}
            if ctx.mode == "full" or "bitsandbytes" not in str(exc):
                bad.append(f"{scheme}: {message[:200]}")
            continue
        rows = completions(other, step, scheme) or completions(other, step)
        dtypes = sorted({str(r.get("dtype")) for r in rows.values()})
        out[scheme] = {"rows": len(rows), "dtype": dtypes}
        if not rows:
            bad.append(f"{scheme}: no completions")
        elif set(dtypes) & {"bfloat16", "float32", "float16", "None"}:
            bad.append(f"{scheme}: completions record dtype {dtypes}, not the quantized weights'")
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    return out, "; ".join(
        f"{k}: {v['rows']} rows, dtype {v['dtype']}" if "rows" in v else f"{k}: refused ({v['refused'][:90]})"
        for k, v in out.items()
    )


# in the order they run: the quantized stage reads the sft stage's checkpoint
STAGES = {"sft": stage_sft, "quantized": stage_quantized, "lora": stage_lora, "users_command": stage_users_command}


class Context:
    def __init__(self, mode: str, work: Path, deadline: float):
        import importlib.util

        import torch

        self.mode, self.work, self.deadline = mode, work, deadline
        self.cuda = mode == "full"
        self.device = "cuda" if self.cuda else "cpu"
        self.bnb = importlib.util.find_spec("bitsandbytes") is not None
        self.model = work / "model"
        self.peak = peak_flops(torch.cuda.get_device_name()) if self.cuda else None
        self.matmul = None
        self.parameters = 0
        self.sft_run = None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-reduced", action="store_true", help="CPU, tiny model, few steps (the tests' mode)")
    parser.add_argument("--out", default=None, help="the JSON file (default: $OUT/train_check.json, else ./)")
    parser.add_argument("--work", default=None, help="working folder (default: a fresh temporary one)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    parser.add_argument("--decode", default="compiled", choices=["compiled", "eager"], help="the passes' decoding")
    args = parser.parse_args(argv)
    DECODE[0] = args.decode
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        parser.error(f"--stages: unknown stage(s) {', '.join(unknown)} (known: {', '.join(STAGES)})")
    import torch

    t0 = time.monotonic()
    mode = "reduced" if args.cpu_reduced else "full"
    if mode == "full" and not torch.cuda.is_available():
        print(
            f"[train_check] refused: no CUDA device (torch {torch.__version__}, built for CUDA {torch.version.cuda}). "
            "The full mode trains a 1.7B model on the GPU; on a CPU run --cpu-reduced.",
            file=sys.stderr,
        )
        return 2
    if mode == "reduced":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    import tempfile

    import transformers

    work = Path(args.work or tempfile.mkdtemp(prefix="mlft-train-check-"))
    work.mkdir(parents=True, exist_ok=True)
    out_path = Path(args.out or Path(os.environ.get("OUT", ".")) / "train_check.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    ctx = Context(mode, work, t0 + SETTINGS[mode]["budget_s"])
    report: dict = {
        "mode": mode,
        "device": torch.cuda.get_device_name() if ctx.cuda else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "work": str(work),
        "stages": {},
        "verdicts": {},
    }

    def save():
        report["elapsed_s"] = round(time.monotonic() - t0, 1)
        out_path.write_text(json.dumps(report, indent=1))

    if not (ctx.model / "config.json").is_file():
        built = build_model(mode, ctx.model, "float32" if mode == "reduced" else "bfloat16", ctx.device)
    else:
        built = {"parameters": None}
    ctx.parameters = built["parameters"] or _count(ctx.model)
    ctx.matmul = matmul_flops(ctx.cuda)
    report.update(
        parameters_b=round(ctx.parameters / 1e9, 4),
        peak_flops=ctx.peak,
        matmul_flops=ctx.matmul,
        bitsandbytes=ctx.bnb,
    )
    save()
    print(
        f"[train_check] {report['device']}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{report['parameters_b']} B parameters ({mode}), work {work}",
        flush=True,
    )
    failed = []
    for name in stages:
        started = time.monotonic()
        try:
            if time.monotonic() > ctx.deadline:
                raise TimeoutError(f"out of time (budget {SETTINGS[mode]['budget_s']} s)")
            data, detail = STAGES[name](ctx)
            verdict = "FAIL" if data.get("failures") else "PASS"
        except TimeoutError as exc:
            data, detail, verdict = {"skipped": str(exc)}, str(exc), "SKIP"
        except Failed as exc:
            data, detail, verdict = {"failures": [str(exc)]}, str(exc), "FAIL"
        except Exception as exc:  # noqa: BLE001 — a stage's error is its verdict; the others still run
            data, detail, verdict = {"error": f"{type(exc).__name__}: {exc}"}, f"{type(exc).__name__}: {exc}", "ERROR"
        seconds = round(time.monotonic() - started, 1)
        report["stages"][name] = data
        report["stages"][name + "_s"] = seconds
        report["verdicts"][name] = verdict
        if verdict != "PASS":
            failed.append(name)
        save()
        print(f"[train_check] {name:<14} {verdict}  {detail[:600]}  ({seconds} s)", flush=True)
    report["ok"] = not failed
    save()
    if failed:
        print(f"[train_check] FAILED: {', '.join(failed)} ({report['elapsed_s']} s) -> {out_path}", flush=True)
        return 1
    print(f"[train_check] all {len(stages)} stages PASS ({report['elapsed_s']} s) -> {out_path}", flush=True)
    return 0


def _count(path: Path) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    sys.exit(main())

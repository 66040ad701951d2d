"""The per-checkpoint eval callback: LCB (or any suite) at train start and after every checkpoint save.

- Rank 0 evaluates and writes; the other ranks wait at a barrier (so nobody deadlocks on a collective). The
  process group's timeout is raised above `evaluation.timeout_s` (mlft.training.train).
- In-process: the live model generates in eval mode (KV cache on), then train mode is restored. With several
  ranks and replicated weights, the other ranks generate their share of the chunks (mlft.generation.data_parallel):
  an N-GPU job evaluates ~N times faster and writes the same completions.
- Sharded weights (DeepSpeed ZeRO-3, FSDP): in-process generation would need every rank, so rank 0 evaluates
  the *saved* checkpoint in a separate `mlft evaluate-run` process instead, on rank 0's device, in the training
  dtype, with the run's chat template and a sane thread count.
- Quantized variants always load the saved checkpoint separately.
- Passes already in curves.jsonl are skipped, so resuming never duplicates curve points.
- A failing evaluation is reported and recorded, never allowed to kill or hang training.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from mlft.console import get_logger
from mlft.generation import data_parallel
from mlft.generation.models import default_device
from mlft.generation.rng import preserved_rng
from mlft.io import curve_file
from mlft.reports.page import PAGE, write_report_page
from mlft.training.passes import Step, evaluate_step, evaluation_target
from mlft.training.recipe import Recipe
from mlft.training.tracking import log_samples, log_scalars, scalars

log = get_logger(__name__)
# Variables that would make a child process think it is one rank of the training job.
_DIST_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "CROSS_RANK",
    "CROSS_SIZE",
)


def child_env() -> dict:
    """The environment of a separate-process evaluation: not a rank of the job; its CPU threads are this node's
    cores shared by the node's ranks (torchrun sets OMP_NUM_THREADS=1 for training ranks) or MLFT_EVAL_THREADS."""
    env = {
        k: v for k, v in os.environ.items() if k not in _DIST_ENV and not k.startswith(("ACCELERATE_", "TORCHELASTIC_"))
    }
    env["MLFT_LAUNCHED"] = "1"
    local_world = max(int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    threads = os.environ.get("MLFT_EVAL_THREADS") or str(max(1, (os.cpu_count() or 1) // local_world))
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = threads
    return env


def eval_placement(recipe: Recipe, model=None) -> dict:
    """Placement options (of a backend with `placement_options`) for evaluating a saved checkpoint as this rank
    trains: its device (cuda:i when the process trains on a GPU) and the training dtype (the recipe's, else
    bfloat16 for a bf16/fp16 run on a GPU)."""
    import torch

    device = None
    param = next(model.parameters(), None) if model is not None else None
    if param is not None and param.device.type == "cuda":
        device = f"cuda:{param.device.index or 0}"
    elif torch.cuda.is_available():
        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else default_device()
    dtype = recipe.dtype
    if dtype == "auto" and device is not None:
        args = recipe.training_args
        dtype = "bfloat16" if args.get("bf16") else "float16" if args.get("fp16") else "auto"
    return {"device": device or "cpu", "dtype": dtype}


def gpu_for_child() -> dict:
    """Before a child-process evaluation on a backend that places itself (`own_devices`, e.g. vLLM): free this
    process's cached CUDA blocks, and return the environment that puts the child on this process's GPU with a
    memory share capped to what is free (MLFT_VLLM_MAX_GPU_UTILIZATION, read by the vllm backend)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    import gc

    gc.collect()
    torch.cuda.empty_cache()
    device = torch.cuda.current_device()
    free, total = torch.cuda.mem_get_info(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else None
    return {
        "CUDA_VISIBLE_DEVICES": ids[device] if ids and device < len(ids) else str(device),
        "MLFT_VLLM_MAX_GPU_UTILIZATION": f"{max(0.05, 0.9 * free / total):.3f}",
    }


class EvalCallback(TrainerCallback):
    def __init__(self, recipe: Recipe, run_dir: Path, tokenizer, in_process: bool, progress: bool = True):
        self.recipe = recipe
        self.ev = recipe.evaluation
        self.run_dir = Path(run_dir)
        self.tokenizer = tokenizer
        self.in_process = in_process
        self.progress = progress
        self.trainer = None  # set by the trainer setup, to log headline numbers through report_to
        self.seconds = 0.0
        # what is evaluated, built once (the recipe's backend and options); each step puts its model in it
        self.target = evaluation_target(self.ev) if self.ev.enabled else None

    # -- events --------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.ev.enabled and self.ev.at_start and state.global_step == 0:
            self._evaluate(args, state, model, model_ref=self.recipe.model)

    def on_save(self, args, state, control, model=None, **kwargs):
        if self.ev.enabled:
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            self._evaluate(args, state, model, model_ref=str(ckpt))

    def on_train_end(self, args, state, control, **kwargs):
        """The run's report page (every checkpoint's curves and replies), beside curves.jsonl."""
        if self.ev.enabled and state.is_world_process_zero:
            try:
                write_report_page([self.run_dir], self.run_dir / PAGE)
            except Exception as exc:  # noqa: BLE001 — the page can be rebuilt; it must never fail the run
                log.warning(
                    "[mlft eval] no report page (%s: %s); rebuild it with `mlft show report %s`",
                    type(exc).__name__,
                    exc,
                    self.run_dir,
                )

    # -- work ----------------------------------------------------------------------------------------
    def _evaluate(self, args, state, model, model_ref: str) -> None:
        with preserved_rng():  # sampling during evaluation must not move training's random streams
            self._evaluate_step(args, state, model, model_ref)

    def _evaluate_step(self, args, state, model, model_ref: str) -> None:
        step = state.global_step
        is_end = step == 0 or step >= state.max_steps
        t0 = time.time()
        # the live model when this process evaluates in place (the target says whether its backend takes one);
        # else its saved checkpoint, in a separate process
        target = self.target.with_model(model_ref, model if self.in_process else None, self.tokenizer)
        live = target.live
        caps = target.capabilities
        shared = live and caps.data_parallel and self.ev.data_parallel and data_parallel.world_size() > 1
        if state.is_world_process_zero:
            try:
                if live:
                    with data_parallel.coordinate(shared):
                        mode = "data-parallel" if shared else "in-process"
                        rows = evaluate_step(
                            self.run_dir, self.ev, Step(step, is_end, mode), target, progress=self.progress
                        )
                else:
                    rows = self._evaluate_in_child(step, model_ref, is_end, model)
                self._log(rows, step)
            except Exception as exc:  # noqa: BLE001 — evaluation must never kill training
                log.error(
                    "[mlft eval] step %s: evaluation failed (%s: %s); training continues; rerun `mlft "
                    "evaluate-run` on the run directory later",
                    step,
                    type(exc).__name__,
                    exc,
                    exc_info=True,
                )
                curve_file.append_pass(self.run_dir, step, "model", [], time.time() - t0, "failed", error=str(exc))
        elif shared:
            try:
                data_parallel.serve(model, self.tokenizer)
            except Exception as exc:  # noqa: BLE001 — a broken collective is reported; the barrier decides
                log.error(
                    "[mlft eval] step %s: rank %s: data-parallel evaluation failed (%s: %s)",
                    step,
                    state.process_index if hasattr(state, "process_index") else "?",
                    type(exc).__name__,
                    exc,
                )
        self.seconds += time.time() - t0
        _barrier()

    def _evaluate_in_child(self, step: int, model_ref: str, is_end: bool, model=None) -> list[dict]:
        before = len(curve_file.read_curves(self.run_dir))
        cmd = [
            sys.executable,
            "-m",
            "mlft",
            "evaluate-run",
            str(self.run_dir),
            "--step",
            str(step),
            "--model",
            model_ref,
        ]
        caps = self.target.capabilities
        if caps.placement_options:  # rank 0's device and the training dtype (own_devices: the environment below)
            placement = eval_placement(self.recipe, model)
            cmd += ["--device", placement["device"], "--dtype", placement["dtype"]]
        if not is_end:
            cmd.append("--not-end")
        if not self.progress:
            cmd.append("--no-progress")
        _free_accelerator_cache()
        why = "weights are sharded" if caps.live_model else f"the {self.ev.backend} backend takes no live model"
        log.info("[mlft eval] step %s: %s; evaluating %s in a separate process", step, why, model_ref)
        env = child_env()
        if caps.own_devices:
            env.update(gpu_for_child())
        proc = subprocess.run(cmd, env=env, timeout=self.ev.timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` exited with {proc.returncode}")
        return curve_file.read_curves(self.run_dir)[before:]

    def _log(self, rows: list, step: int) -> None:  # MetricRows (in-process) or curve dicts (child)
        """Per-language numbers, intervals and sample completions to the trainer's trackers (report_to)."""
        if not (self.ev.log_to_trainer and self.trainer is not None and rows):
            return

        logs = scalars(rows)
        if logs:
            log_scalars(self.trainer, logs, step)
        log_samples(self.trainer, self.run_dir, rows, step)


def _free_accelerator_cache() -> None:
    """Give the allocator's cached blocks back before a child process loads a model onto the same GPU."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()

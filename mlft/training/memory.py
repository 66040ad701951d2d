"""The memory a training run needs on one GPU, planned from the model's config on the `meta` device (no weights are
allocated) and checked against the card before anything is loaded.

What rank 0 holds at its peak, the largest of:
- training: weights + gradients + optimizer state (+ DeepSpeed's fp32 master copy under bf16/fp16 weights), each
  divided by the world size where ZeRO shards it (stage 1: optimizer and master; 2: + gradients; 3: + weights),
  + the activations of one micro-batch (per_device_train_batch_size x max_length tokens; Korthikanti et al.'s
  34·h bytes per token and layer at 16 bits, the input of each layer only under activation checkpointing) + the
  fp32 logits and their gradient;
- an evaluation pass at the end of a run: weights + optimizer state (trl frees the gradients after each step)
  + the hf backend's KV cache (max_batch_tokens of prompts + batch_size x max_new_tokens of replies) + the largest
  quantized copy the recipe asks for on the same GPU (w8: int8 linear weights, w4: NF4 ones, the embeddings kept in
  16 bits; w8a8: torchao quantizes a full bf16 copy it loads first).

An estimate, not a measurement: the allocator's fragmentation, CUDA context (~0.5 GiB) and kernels' workspaces come
on top (`HEADROOM` of the card is kept free). A plan over the card is refused with its numbers (ConfigError) before
the trainer is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlft.errors import ConfigError
from mlft.generation.backends import capabilities
from mlft.training.recipe import per_device_batch

GIB = 2**30
HEADROOM = 0.05  # of the card: CUDA context, allocator fragmentation, workspaces
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
KV_DEFAULTS = {"batch_size": 256, "max_batch_tokens": 32768}  # the hf backend's defaults (HFOptions)


@dataclass
class MemoryPlan:
    parameters: int
    parts: dict[str, int] = field(default_factory=dict)  # training-time parts, bytes
    eval_parts: dict[str, int] = field(default_factory=dict)  # evaluation-time parts, bytes

    @property
    def training(self) -> int:
        return sum(self.parts.values())

    @property
    def evaluation(self) -> int:
        return sum(self.eval_parts.values())

    @property
    def peak(self) -> int:
        return max(self.training, self.evaluation)

    def describe(self) -> str:
        def fmt(parts):
            return ", ".join(f"{k} {v / GIB:.1f}" for k, v in parts.items())

        return (
            f"training {self.training / GIB:.1f} GiB ({fmt(self.parts)}); evaluation {self.evaluation / GIB:.1f} GiB "
            f"({fmt(self.eval_parts)})"
        )


def count_parameters(config) -> tuple[int, int]:
    """(all parameters, those of the Linear layers but lm_head) of a model built from `config` on the meta device."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    linear = sum(
        m.weight.numel() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "lm_head" not in n
    )
    return total, linear


def _lora_parameters(config, r: int) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(
        r * (m.in_features + m.out_features)
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "lm_head" not in n
    )


def plan_memory(
    config,
    *,
    dtype: str,
    rows: int,
    max_length: int,
    world_size: int = 1,
    zero_stage: int | None = None,
    activation_checkpointing: bool = False,
    lora_r: int | None = None,
    quantized: tuple[str, ...] = (),
    eval_options: dict | None = None,
    max_new_tokens: int = 100,
) -> MemoryPlan:
    """The plan of one rank (see the module's docstring); `zero_stage` None: no DeepSpeed."""
    total, linear = count_parameters(config)
    b = DTYPE_BYTES.get(dtype) or DTYPE_BYTES.get(str(getattr(config, "dtype", "float32")).removeprefix("torch."), 4)
    world = max(world_size, 1)
    stage = zero_stage or 0
    trainable = _lora_parameters(config, lora_r) if lora_r else total
    deepspeed = zero_stage is not None
    plan = MemoryPlan(parameters=total)
    weights = total * b / (world if stage >= 3 else 1)
    grads = trainable * (4 if lora_r else b) / (world if stage >= 2 else 1)
    # Adam's two moments: fp32 under DeepSpeed (and for LoRA's fp32 adapters); torch AdamW keeps the params' dtype
    moments = trainable * (8 if deepspeed or lora_r else 2 * b) / (world if stage >= 1 else 1)
    master = trainable * 4 / (world if stage >= 1 else 1) if deepspeed and b < 4 and not lora_r else 0
    h, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    tokens = rows * max_length
    per_layer = h * b if activation_checkpointing else 34 * h * b / 2
    activations = tokens * layers * per_layer + (34 * h * b / 2 * tokens if activation_checkpointing else 0)
    logits = tokens * vocab * 4 * 2
    plan.parts = {
        "weights": int(weights),
        "gradients": int(grads),
        "optimizer": int(moments + master),
        "activations": int(activations + logits),
    }
    opts = {**KV_DEFAULTS, **(eval_options or {})}
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    kv_tokens = int(opts["max_batch_tokens"]) + int(opts["batch_size"]) * max_new_tokens
    kv = kv_tokens * layers * 2 * heads * head_dim * b
    other = total - linear
    copies = {"w8": linear * 1 + other * 2, "w4": linear // 2 + other * 2, "w8a8": total * 2}
    quant = max((copies[q] for q in quantized if q in copies), default=0)
    plan.eval_parts = {"weights": int(weights), "optimizer": int(moments + master), "kv_cache": int(kv)}
    if quant:
        plan.eval_parts["quantized_copy"] = int(quant)
    return plan


def check_fits(plan: MemoryPlan, card_bytes: int, where: str, card: str = "the GPU") -> None:
    """ConfigError with the plan's numbers when its peak passes the card's memory less HEADROOM."""
    usable = card_bytes * (1 - HEADROOM)
    if plan.peak <= usable:
        return
    raise ConfigError(
        f"{where}: the run does not fit {card} ({card_bytes / GIB:.1f} GiB, {usable / GIB:.1f} usable): planned "
        f"peak {plan.peak / GIB:.1f} GiB for {plan.parameters / 1e9:.2f} B parameters -- {plan.describe()}. "
        "Lower per_device_train_batch_size or max_length, turn activation_checkpointing on, shard with ZeRO "
        "(accelerate_config), use evaluation.backend_options {batch_size, max_batch_tokens} for a smaller KV cache, "
        "or drop a quantized variant (evaluation.quantized)"
    )


def recipe_plan(recipe, config, world_size: int = 1, zero_stage: int | None = None) -> MemoryPlan:
    """The plan of `recipe` (its training_args, LoRA, evaluation) on `config`."""
    args = recipe.training_args
    ev = recipe.evaluation
    checkpointing = bool(args.get("activation_checkpointing", args.get("gradient_checkpointing", False)))
    # a backend that generates with the live model evaluates on the training GPU: its KV cache and quantized copies
    in_gpu_eval = ev.enabled and capabilities(ev.backend).live_model
    return plan_memory(
        config,
        dtype=recipe.dtype,
        rows=per_device_batch(recipe),
        max_length=int(args.get("max_length") or 1024),
        world_size=world_size,
        zero_stage=zero_stage,
        activation_checkpointing=checkpointing,
        lora_r=recipe.lora.r if recipe.lora.enabled else None,
        quantized=tuple(ev.quantized) if in_gpu_eval else (),
        eval_options={k: v for k, v in ev.backend_options.items() if k in KV_DEFAULTS} if in_gpu_eval else None,
    )

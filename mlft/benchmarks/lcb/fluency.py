"""Fluency proxy: mean token negative log-likelihood (nats) of a reply under a fixed reference causal LM.

Scored conditionally on the reply's prompt, the way it was generated: chat messages go through the
tokenizer's chat template with the generation prompt added; a plain string is raw text (the tokenizer adds its
usual special tokens, e.g. BOS). The reply is tokenized on its own (no special tokens) and appended, so the
split between prompt and reply is exact; no end-of-turn token is scored. A context that tokenizes to nothing
gets BOS (else EOS) so the first reply token has something to condition on. A reply that is empty or only
whitespace gets None (nothing to judge; the guard counts it as degenerate).

Lower is more fluent *for that reference model*: compare runs under the same reference model and prompts
only. It catches word salad and loops that LPR cannot see (`itititit` and shuffled words score far above
normal text), but a repetitive loop can also become cheap after a few copies, so read it with the guard.

Batches are sorted by length, padded on the right or the left with padding masked out of attention and
position ids counted from each sequence's first real token, so a batch gives the one-by-one numbers.
The model's weights are not touched; it runs in eval mode under `torch.inference_mode` (its previous mode
is restored).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from mlft.errors import ConfigError, ModelError

Prompt = str | list | None  # raw text, chat messages [{"role", "content"}], or None (no context)


def _context_ids(tokenizer, prompt: Prompt) -> list[int]:
    if isinstance(prompt, list):  # as the generation backend encodes it (mlft.generation.backends.hf)
        if not getattr(tokenizer, "chat_template", None):
            raise ModelError("the reference model's tokenizer has no chat template: give prompts as raw text")
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt or "", add_special_tokens=True)["input_ids"]
    if not ids:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if start is None:
            raise ConfigError("empty prompt and the tokenizer has neither a BOS nor an EOS token to start from")
        ids = [start]
    return list(ids)


def reply_nll(
    model,
    tokenizer,
    prompts: Sequence[Prompt],
    replies: Sequence[str],
    *,
    batch_size: int = 8,
    padding_side: str = "right",
) -> list[float | None]:
    """Mean NLL per reply token of each reply given its prompt (None for an empty reply); see module docs."""
    import torch

    if len(prompts) != len(replies):
        raise ConfigError(f"{len(prompts)} prompts but {len(replies)} replies")
    if padding_side not in ("right", "left"):
        raise ConfigError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    items = []  # (index, context ids, reply ids)
    for i, (prompt, reply) in enumerate(zip(prompts, replies)):
        if reply and reply.strip():
            items.append((i, _context_ids(tokenizer, prompt), tokenizer(reply, add_special_tokens=False)["input_ids"]))
    out: list[float | None] = [None] * len(replies)
    items.sort(key=lambda t: len(t[1]) + len(t[2]), reverse=True)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    keep_arg = "logits_to_keep" in inspect.signature(model.forward).parameters
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for b in range(0, len(items), batch_size):
                batch = items[b : b + batch_size]
                for (i, _, _), value in zip(batch, _batch_nll(model, batch, pad, padding_side, device, keep_arg)):
                    out[i] = value
    finally:
        model.train(was_training)
    return out


def _batch_nll(model, batch, pad: int, side: str, device, keep_arg: bool) -> list[float]:
    import torch

    lengths = [len(c) + len(r) for _, c, r in batch]
    width = max(lengths)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    spans = []  # (row, first reply position, end)
    for row, ((_, ctx, rep), size) in enumerate(zip(batch, lengths)):
        off = 0 if side == "right" else width - size
        ids[row, off : off + size] = torch.tensor(ctx + rep)
        mask[row, off : off + size] = 1
        spans.append((row, off + len(ctx), off + size))
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    first = min(s for _, s, _ in spans) - 1  # earliest position whose logits predict a reply token
    kwargs = {"logits_to_keep": width - first} if keep_arg else {}
    logits = model(
        input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), **kwargs
    ).logits
    base = width - logits.shape[1]  # logits[:, j] belongs to position base + j
    values = []
    for row, start, end in spans:
        pred = logits[row, start - 1 - base : end - 1 - base].float()
        target = ids[row, start:end].to(pred.device)
        nll = torch.nn.functional.cross_entropy(pred, target, reduction="mean")
        values.append(float(nll))
    return values

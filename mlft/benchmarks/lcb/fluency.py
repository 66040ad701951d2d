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
A context is run once for all the replies scored under it where the model takes a key/value cache (its forward
names one and returns plain full-attention layers): the distinct contexts go through the model left-padded, their
keys and values are kept, and the replies, sorted by length and padded on the right, run on the cached keys and
values of their own context (the judge scores many replies under one chat prompt or one neutral turn). The
numbers are the plain path's up to float rounding; any other model takes the plain path (`padding_side` is its).
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
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    keep_arg = "logits_to_keep" in inspect.signature(model.forward).parameters
    was_training = model.training
    model.eval()
    cache_arg = _cache_arg(model)
    try:
        with torch.inference_mode():
            if cache_arg and _shared_nll(model, items, out, pad, batch_size, device, keep_arg, cache_arg):
                return out
            items.sort(key=lambda t: len(t[1]) + len(t[2]), reverse=True)
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


WINDOW = 4  # batches of distinct contexts whose keys and values are held at once: bounds the memory they take


def _cache_arg(model) -> str | None:
    """The name under which the model's forward takes a key/value cache (`cache` since transformers 5.25), or None."""
    params = inspect.signature(model.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in params), None)


class _Contexts:
    """Keys and values of distinct contexts, left-padded to one width (pad columns zeroed), per layer."""

    def __init__(self, keys: list, values: list, lengths, last):
        self.keys, self.values = keys, values  # per layer: (contexts, heads, width, head dim)
        self.lengths = lengths  # (contexts,) real tokens of each
        self.last = last  # (contexts, vocab) logits at each context's last token: they predict a reply's first


def _contexts(model, contexts: list[list[int]], pad: int, batch_size: int, device, keep_arg: bool, cache_arg: str):
    """Run the contexts (longest first) through the model and keep their caches; None where the model's cache is not
    plain full-attention layers (sliding windows, linear or quantised layers cannot be padded and sliced so)."""
    import torch
    from transformers.cache_utils import DynamicCache, DynamicLayer

    width = max(len(c) for c in contexts)
    keys, values, last = [], [], []
    for b in range(0, len(contexts), batch_size):
        chunk = contexts[b : b + batch_size]
        w = max(len(c) for c in chunk)
        ids = torch.full((len(chunk), w), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), w), dtype=torch.long)
        for row, ctx in enumerate(chunk):
            ids[row, w - len(ctx) :] = torch.tensor(ctx)
            mask[row, w - len(ctx) :] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=True,
            **({"logits_to_keep": 1} if keep_arg else {}),
        )
        cache = getattr(out, cache_arg, None)
        if not isinstance(cache, DynamicCache) or not all(
            type(layer) is DynamicLayer and layer.is_initialized and layer.keys.shape[-2] == w for layer in cache.layers
        ):
            return None
        last.append(out.logits[:, -1].float())
        # zeroed pad columns: masked out, but a non-finite value there would still poison the weighted sum
        real = mask.to(device).bool()[:, None, :, None]
        for i, layer in enumerate(cache.layers):
            k = torch.nn.functional.pad(torch.where(real, layer.keys, 0), (0, 0, width - w, 0))
            v = torch.nn.functional.pad(torch.where(real, layer.values, 0), (0, 0, width - w, 0))
            if b == 0:
                keys.append([k])
                values.append([v])
            else:
                keys[i].append(k)
                values[i].append(v)
    lengths = torch.tensor([len(c) for c in contexts], device=device)
    return _Contexts([torch.cat(k) for k in keys], [torch.cat(v) for v in values], lengths, torch.cat(last))


def _cached_batch_nll(model, held: _Contexts, batch, pad: int, device, cache_arg: str) -> list[float]:
    """NLL of each (context index, reply ids) of `batch`, the reply run on its context's cached keys and values."""
    import torch
    from transformers.cache_utils import DynamicCache

    index = torch.tensor([k for k, _ in batch], device=device)
    lengths = held.lengths[index]
    span = int(lengths.max())  # cached columns this batch needs: its longest context's, left-padded
    width = max(len(r) for _, r in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    reply_mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (_, rep) in enumerate(batch):
        ids[row, : len(rep)] = torch.tensor(rep)
        reply_mask[row, : len(rep)] = 1
    context_mask = torch.arange(span, device=device)[None, :] >= (span - lengths)[:, None]
    mask = torch.cat([context_mask.long(), reply_mask.to(device)], 1)
    positions = lengths[:, None] + torch.arange(width, device=device)[None, :]
    cache = DynamicCache()
    for i, (k, v) in enumerate(zip(held.keys, held.values)):
        cache.update(k[index, :, -span:], v[index, :, -span:], i)
    logits = model(
        input_ids=ids.to(device), attention_mask=mask, position_ids=positions, use_cache=True, **{cache_arg: cache}
    ).logits
    values = []
    for row, (k, rep) in enumerate(batch):
        pred = torch.cat([held.last[k : k + 1], logits[row, : len(rep) - 1].float()])
        target = ids[row, : len(rep)].to(pred.device)
        values.append(float(torch.nn.functional.cross_entropy(pred, target, reduction="mean")))
    return values


def _shared_nll(model, items, out: list, pad: int, batch_size: int, device, keep_arg: bool, cache_arg: str) -> bool:
    """Fill `out` with each item's NLL, each distinct context run once per window; False (nothing filled) where the
    model's cache cannot be shared so."""
    groups: dict[tuple, list] = {}
    for i, ctx, rep in items:
        groups.setdefault(tuple(ctx), []).append((i, rep))
    contexts = sorted(groups, key=len, reverse=True)  # similar lengths share a context batch: little padding
    step = WINDOW * batch_size
    for w in range(0, len(contexts), step):
        window = contexts[w : w + step]
        held = _contexts(model, [list(c) for c in window], pad, batch_size, device, keep_arg, cache_arg)
        if held is None:
            return False
        members = [(k, rep, i) for k, ctx in enumerate(window) for i, rep in groups[ctx]]
        members.sort(key=lambda t: len(t[1]), reverse=True)  # replies of like length share a batch
        # the one short batch takes the longest replies, where padding costs most (no more batches than chunks)
        first = len(members) % batch_size or batch_size
        for start in [0, *range(first, len(members), batch_size)]:
            batch = members[start : start + batch_size if start else first]
            values = _cached_batch_nll(model, held, [(k, rep) for k, rep, _ in batch], pad, device, cache_arg)
            for (_, _, i), value in zip(batch, values):
                out[i] = value
    return True

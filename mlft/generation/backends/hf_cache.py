"""The transformers backend's KV caches and decode modes (`HFBackend` takes them as a base class): which path a
batch decodes on (`decode_mode`: eager, static or compiled, `auto` resolved for the device, the interventions and the
pass's size), the static cache allocated at the planned length and reused while a compiled pass stays in one shape
bucket, and the shared-prompt-prefix cache computed once per prefix. Kept apart from the generation loop
(`mlft.generation.backends.hf`), which asks these for a batch's cache and `generate` arguments: the loop reads as
the loop, and the cache rules (and their torch / transformers version checks) read in one place.

`KVCaches` holds no state of its own: it reads the backend's model, tokenizer settings (`pad_id`), options
(`decode`, `prefix_cache`, `compile_min_steps`) and `pass_steps`, and keeps the prefix cache (`_prefix`) and the
compiled path's reused cache (`_pool`) on the backend.
"""

from __future__ import annotations

from mlft.console import get_logger
from mlft.generation.batching import length_bucket

log = get_logger(__name__)

# The first torch whose `torch._dynamo.mark_static_address` does not guard the tensor's address by default
# (pytorch#162208, fixing #156377; release 2.9 still guards: #166153, its backport #166821 was not taken).
# transformers marks every StaticCache tensor with it; where it guards, each new cache (a new shape bucket) is a
# full recompile, and after 8 (`recompile_limit`) dynamo falls back to eager: minutes compiled for nothing.
STATIC_ADDRESS_UNGUARDED_FROM = "2.10"
_warned_guarded = False


def static_address_guarded() -> str | None:
    """The installed torch's version when its mark_static_address guards addresses by default (torch < 2.10:
    compiled decoding would recompile per cache), else None."""
    import torch
    from packaging.version import Version

    version = str(torch.__version__)
    return version if Version(Version(version).base_version) < Version(STATIC_ADDRESS_UNGUARDED_FROM) else None


def _cache_kwarg(model) -> str:
    """The KV-cache argument of `model.generate`: `cache` since transformers 5.2x (`past_key_values` before,
    deprecated since: passing it warns once per process and per generate call). A peft model (a LoRA evaluated
    unmerged) takes **kwargs and hands them to its base model: the base model's name."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _flash_attention(model) -> str | None:
    """The model's attention implementation when it is a flash-attention kind (flash_attention_2/3, kernels'
    flash variants), else None."""
    kind = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return kind if isinstance(kind, str) and "flash" in kind else None


def _cache_of(output):
    """The KV cache of a forward pass's output (`cache`; `past_key_values` in older transformers)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


class KVCaches:
    """The decode modes and KV caches of `HFBackend` (its base class; module docstring)."""

    MIN_PREFIX = 8

    def _shared_prefix(self, encoded: list[list[int]], decoding, interventions) -> list[int]:
        """The longest prefix every row shares (at least MIN_PREFIX tokens, each row keeping one token of its
        own), or [] when prefix caching does not apply (off, beam search, forward hooks that change the
        prompt's states)."""
        if (
            not self.prefix_cache
            or decoding.num_beams > 1
            or any("hooks" in iv.applies_via and not iv.prefix_safe for iv in interventions)
        ):
            return []
        n = min(len(e) for e in encoded) - 1
        first = encoded[0]
        for e in encoded[1:]:
            k = 0
            while k < n and e[k] == first[k]:
                k += 1
            n = k
        return first[:n] if n >= self.MIN_PREFIX else []

    def decode_mode(self, device, decoding, interventions=()) -> str:
        """eager / static / compiled: the `decode` option, with auto resolved for this device, batch and pass."""
        if decoding.num_beams > 1:  # beams reorder the cache each step: transformers' own (dynamic) path
            return "eager"
        mode = self.decode if self.decode != "auto" else self._auto_mode(device, decoding, interventions)
        if mode == "compiled" and (version := static_address_guarded()):
            global _warned_guarded
            if not _warned_guarded:
                _warned_guarded = True
                log.warning(
                    "hf backend: decoding eagerly instead of compiled on torch %s: before torch %s, "
                    "mark_static_address guards each static cache's address (pytorch#156377), so every new cache "
                    "recompiles and after 8 recompiles dynamo falls back to eager; install torch >= %s to compile",
                    version,
                    STATIC_ADDRESS_UNGUARDED_FROM,
                    STATIC_ADDRESS_UNGUARDED_FROM,
                )
            return "eager"
        return mode

    def _auto_mode(self, device, decoding, interventions) -> str:
        if device.type != "cuda" or any("hooks" in iv.applies_via for iv in interventions):
            return "eager"  # a CPU runs op by op anyway; hooks' Python state would recompile every step
        if _flash_attention(self.model):
            return "eager"  # flash-attention's unpadding (nonzero, item) breaks the graph in every layer
        steps = self.pass_steps(decoding)
        if steps is not None and steps < self.compile_min_steps:
            return "eager"  # a short pass: compiling and recording would cost more than its steps save
        return "compiled"

    def _cache_length(self, mode: str, length: int) -> int | None:
        """The static cache's length for a batch needing `length` positions: exact (static), its bucket
        (compiled: a few shapes per pass), None (eager: transformers' growing cache)."""
        return None if mode == "eager" else length_bucket(length) if mode == "compiled" else length

    def _static_cache(self, rows: int, length: int, reuse: bool = False):
        """An empty StaticCache of `rows` x `length`; with `reuse` (compiled decoding), the one of the last batch
        when it had this shape (reset: the same tensors, so the same compiled graph and CUDA-graph inputs), else a
        new one replacing it (one cache held at a time)."""
        from transformers import StaticCache

        if reuse and self._pool is not None and self._pool[0] == (rows, length):
            cache = self._pool[1]
            cache.reset()
            return cache
        self._pool = None  # the previous bucket's tensors go before the next ones are allocated
        cache = StaticCache(config=self.model.config, max_cache_len=length)
        if reuse:
            self._pool = ((rows, length), cache)
        return cache

    def _held_bytes(self) -> int:
        """Bytes of the compiled path's reused cache (allocated, but the next batch reuses or frees it)."""
        if self._pool is None:
            return 0
        return sum(
            t.numel() * t.element_size()
            for layer in self._pool[1].layers
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
            if t is not None
        )

    def _static_kwargs(self, mode: str, own_cache: bool) -> dict:
        """`generate` arguments of the static-cache path: transformers allocates the cache itself when no prefix
        cache is passed; it compiles the decode step (on a GPU) unless `mode` is static."""
        kw: dict = {"cache_implementation": "static"} if own_cache else {}
        if mode == "static":
            kw["disable_compile"] = True
        else:
            from transformers import CompileConfig

            config = CompileConfig(fullgraph=False)
            config._compile_all_devices = True  # `compiled` asked for explicitly compiles on any device (a CPU too)
            kw["compile_config"] = config
        return kw

    def _prefix_kv(self, prefix: list[int], rows: int, static_len: int | None = None, reuse: bool = False):
        """A copy of the prefix's KV cache, repeated for `rows` rows (computed once per prefix); with
        `static_len`, a static cache of that length holding the prefix (`reuse`: the compiled path's cache)."""
        import copy

        import torch

        key = tuple(prefix)
        if self._prefix is None or self._prefix[0] != key:
            ids = torch.tensor([prefix], device=next(self.model.parameters()).device)
            self._prefix = (key, _cache_of(self.model(input_ids=ids, use_cache=True, logits_to_keep=1)))
        if self._prefix[1] is None:
            return None
        if static_len is not None:
            return self._static_prefix(self._prefix[1], rows, static_len, reuse)
        cache = copy.deepcopy(self._prefix[1])
        cache.batch_repeat_interleave(rows)
        return cache

    def _static_prefix(self, prefix_cache, rows: int, length: int, reuse: bool = False):
        """A StaticCache of `length` positions whose first ones hold the prefix's keys and values, per row."""
        cache = self._static_cache(rows, length, reuse)
        if len(cache.layers) != len(prefix_cache.layers):
            return None  # not one layer per decoder layer: the plain path
        for static, layer in zip(cache.layers, prefix_cache.layers):
            static.update(layer.keys.repeat_interleave(rows, dim=0), layer.values.repeat_interleave(rows, dim=0))
        return cache

    def _unprefixed(self, encoded: list[list[int]], width: int, device):
        """Plain left-padded input_ids and mask (no shared-prefix layout)."""
        import torch

        ids = torch.tensor([[self.pad_id] * (width - len(e)) + e for e in encoded], device=device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=device)
        return ids, mask

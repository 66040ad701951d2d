"""The static-cache decode paths, proven on a CPU with a tiny random Llama:

1. The static cache is sized per call, never inherited: transformers sizes the cache it allocates to the larger
   of this call and `model._previous_max_cache_length` (a short batch after a long one held the long length:
   more memory than the batch plan counted); the hf backend allocates its own, as planned.
2. Compiled decoding compiles and records a bounded number of times: batches are padded to shape buckets (rows
   and cache length rounded up) and each bucket reuses one cache (the same tensors: on CUDA, the same CUDA-graph
   inputs), so a pass of many lengths compiles at most once per bucket and decodes what eager decoding does.
3. flash-attention models are not compiled under `decode: auto` (its unpadding breaks the graph in every layer),
   and an explicit `decode: compiled` with flash-attention is refused; neither is anything before torch 2.10, whose
   mark_static_address guards each cache's address (a recompile per cache): eager, said once.
(4. the newline stop: tests/test_newline_stop.py.)
"""

from __future__ import annotations

import pytest
import torch

from mlft.errors import ConfigError
from mlft.generation.decoding import Decoding
from tests.device_helpers import tiny_model

pytestmark = pytest.mark.slow

WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen".split()


def varied_requests(n: int):
    """`n` prompts of many different lengths (8 ... ~60 words)."""
    from mlft.generation.requests import Request

    return [
        Request(
            f"q{i}",
            messages=[{"role": "user", "content": " ".join(WORDS[: 1 + (i * 5) % 14] * (1 + i % 4))}],
            language="en",
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


class CacheSpy:
    """Records, per `generate` call, the static cache the model decoded with (its length, rows and tensors)."""

    def __init__(self, model):
        self.calls: list[dict] = []
        self.handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        cache = kwargs.get("cache") or kwargs.get("past_key_values")
        layer = cache.layers[0] if cache is not None and hasattr(cache, "layers") else None
        if layer is None or not hasattr(layer, "max_cache_len") or getattr(layer, "keys", None) is None:
            return  # not a static cache, or not allocated yet (the prefill allocates it)
        entry = {
            "length": layer.max_cache_len,
            "rows": layer.keys.shape[0],
            "ptr": layer.keys.data_ptr(),
            "bytes": sum(t.numel() * t.element_size() for ly in cache.layers for t in (ly.keys, ly.values)),
        }
        if not self.calls or self.calls[-1]["ptr"] != entry["ptr"] or self.calls[-1]["length"] != entry["length"]:
            self.calls.append(entry)

    def close(self):
        self.handle.remove()


# --- 1. the static cache is sized per call ------------------------------------------------------------------


@pytest.mark.parametrize("prefix_cache", [False, True])
def test_a_short_batch_after_a_long_one_plans_and_allocates_the_short_length(tiny, prefix_cache):
    """Before: without a shared prefix, transformers allocated the short batch's cache at the long batch's
    length (`_previous_max_cache_length`): 4x the planned KV bytes here."""
    from mlft.generation.backends.hf import HFBackend

    model, tok = tiny
    reqs = varied_requests(16)
    backend = HFBackend(model, tok, batch_size=1, decode="static", prefix_cache=prefix_cache)
    lengths = {r.id: backend.prompt_length(r) for r in reqs}
    long, short = (f(reqs, key=lambda r: lengths[r.id]) for f in (max, min))
    decoding = Decoding(temperature=0.0, max_new_tokens=4)
    spy = CacheSpy(model)
    try:
        list(backend.generate([long], decoding))
        list(backend.generate([short], decoding))
    finally:
        spy.close()
    assert [c["length"] for c in spy.calls] == [lengths[long.id] + 4, lengths[short.id] + 4], spy.calls
    planned = backend.budget(decoding).kv_bytes(1, lengths[short.id])
    assert spy.calls[-1]["bytes"] == planned


# --- 2. compiled decoding: bounded compiles and recordings ------------------------------------------------


def test_a_compiled_pass_compiles_at_most_once_per_bucket_and_decodes_as_eager(tiny):
    """Before: every batch got a new cache of its exact length (a new CUDA-graph recording per batch on a GPU),
    and the cache length was whatever transformers inherited. 40 prompts of varied lengths in 5 batches (the
    last one short: padded to its row bucket)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.batching import length_bucket, row_bucket

    model, tok = tiny
    reqs = varied_requests(37)
    decoding = Decoding(temperature=0.0, max_new_tokens=6)
    eager = {r.id: r.completion for r in HFBackend(model, tok, batch_size=8, decode="eager").generate(reqs, decoding)}
    compiled = HFBackend(model, tok, batch_size=8, decode="compiled", prefix_cache=False)
    plan = compiled.plan(reqs, decoding)
    buckets = {(row_bucket(len(b), 8), length_bucket(max(map(compiled.prompt_length, b)) + 6)) for b in plan}
    torch._dynamo.reset()
    counters.clear()
    spy = CacheSpy(model)
    try:
        got = {r.id: r.completion for r in compiled.generate(reqs, decoding)}
        graphs = counters["stats"]["unique_graphs"]
    finally:
        spy.close()
        torch._dynamo.reset()
    print(
        f"\ncompiled pass: {len(reqs)} prompts, {len(plan)} batches {[len(b) for b in plan]}, "
        f"{len(buckets)} buckets {sorted(buckets)}, {graphs} graphs compiled, "
        f"{len(spy.calls)} distinct caches (CUDA-graph recordings on a GPU)"
    )
    assert got == eager
    assert 1 <= graphs <= len(buckets)
    assert len(spy.calls) == len(buckets) < len(plan)  # one cache per bucket, reused by its batches
    assert {(c["rows"], c["length"]) for c in spy.calls} == buckets


def test_buckets_are_few_and_tight():
    from mlft.generation.batching import length_bucket, row_bucket

    lengths = {length_bucket(n) for n in range(1, 4097)}
    assert len(lengths) <= 40
    assert all(n <= length_bucket(n) <= max(16, 1.25 * n) for n in range(1, 4097))
    assert [row_bucket(r, 256) for r in (1, 3, 5, 100, 200, 256)] == [1, 4, 8, 128, 256, 256]
    assert row_bucket(70, 100) == 100 and row_bucket(101, 100) == 101  # the cap is a bucket; over it: as is
    assert len({row_bucket(r, 256) for r in range(1, 257)}) == 9


def test_compiled_batches_are_planned_at_their_bucket(tiny):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.batching import length_bucket, row_bucket

    model, tok = tiny
    decoding = Decoding(max_new_tokens=100)
    cuda = torch.device("cuda")
    backend = HFBackend(model, tok, batch_size=64, memory_budget_gib=1.0)
    budget = backend._budget_on(cuda, decoding)
    assert budget.buckets
    kv = budget.kv_bytes_per_token
    assert budget.kv_bytes(33, 30) == row_bucket(33, 64) * length_bucket(130) * kv == 64 * 160 * kv
    assert (
        not HFBackend(model, tok, batch_size=64, decode="eager", memory_budget_gib=1.0)
        ._budget_on(cuda, decoding)
        .buckets
    )


# --- 3. flash-attention is not compiled ------------------------------------------------------------------


def test_flash_attention_is_not_compiled(tiny, monkeypatch):
    """Before: `decode_mode` ignored the attention kind: auto compiled a flash_attention_2 model on a GPU."""
    from mlft.generation.backends.hf import HFBackend

    model, tok = tiny
    cuda = torch.device("cuda")
    backend = HFBackend(model, tok)
    assert backend.decode_mode(cuda, Decoding()) == "compiled"
    monkeypatch.setattr(model.config, "_attn_implementation", "flash_attention_2")
    assert backend.decode_mode(cuda, Decoding()) == "eager"
    with pytest.raises(ConfigError, match="flash"):
        HFBackend(model, tok, decode="compiled").check(Decoding())
    HFBackend(model, tok, decode="static").check(Decoding())  # no compile: allowed


def test_compiled_decoding_runs_eagerly_before_torch_2_10_and_says_so_once(tiny, monkeypatch):
    """Before: on torch < 2.10 (mark_static_address guards by default, pytorch#156377) `compiled` compiled anyway:
    each new bucket cache a full recompile, and after 8 dynamo fell back to eager, minutes spent for nothing."""
    import logging

    from torch._dynamo.utils import counters

    import mlft.generation.backends.hf as hf
    import mlft.generation.backends.hf_cache as hf_cache
    from tests.device_helpers import requests

    model, tok = tiny
    cuda = torch.device("cuda")
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger(hf_cache.__name__).addHandler(handler)
    monkeypatch.setattr(hf_cache, "_warned_guarded", False, raising=False)  # absent before the fix
    try:
        monkeypatch.setattr(torch, "__version__", "2.9.1+cu128")
        forced = hf.HFBackend(model, tok, decode="compiled")
        assert forced.decode_mode(cuda, Decoding()) == "eager"
        assert hf.HFBackend(model, tok).decode_mode(cuda, Decoding()) == "eager"  # auto: what it would compile
        assert hf.HFBackend(model, tok, decode="static").decode_mode(cuda, Decoding()) == "static"  # no compile
        counters.clear()
        replies = list(forced.generate(requests(3), Decoding(max_new_tokens=4)))
        assert len(replies) == 3 and not any(r.error for r in replies)
        assert counters["stats"]["unique_graphs"] == 0  # nothing compiled
        assert len(seen) == 1, seen  # once per process, not per batch or backend
        assert "torch 2.9.1+cu128" in seen[0] and "before torch 2.10" in seen[0] and "156377" in seen[0]
        for version in ("2.10.0+cu128", "2.13.0+cpu"):
            monkeypatch.setattr(torch, "__version__", version)
            assert forced.decode_mode(cuda, Decoding()) == "compiled"
            assert hf.HFBackend(model, tok).decode_mode(cuda, Decoding()) == "compiled"
        assert len(seen) == 1
    finally:
        logging.getLogger(hf_cache.__name__).removeHandler(handler)


def test_padding_rows_change_no_sampled_reply(tiny):
    """A compiled batch of 3 requests runs as 4 rows (the last request copied, stopped after one token); draws
    are keyed per request, so the seeded sampled replies are the eager ones."""
    from mlft.generation.backends.hf import HFBackend
    from tests.device_helpers import requests

    model, tok = tiny
    reqs = requests(11)
    decoding = Decoding(max_new_tokens=6)
    runs = {
        mode: {r.id: r.completion for r in HFBackend(model, tok, batch_size=8, decode=mode).generate(reqs, decoding)}
        for mode in ("eager", "compiled")
    }
    assert [len(b) for b in HFBackend(model, tok, batch_size=8).plan(reqs, decoding)] == [8, 3]
    assert runs["compiled"] == runs["eager"] and len(set(runs["eager"].values())) > 1

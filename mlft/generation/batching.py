"""Generation batches sized by memory: the KV cache a batch will hold, and the tokens one prefill forward sees.

A batch of r rows padded to a prompt width w that generates up to n new tokens holds r x (w + n) tokens of KV
cache at the end: 2 (keys, values) x layers x kv heads x head dim x the cache dtype's bytes per token (~192 KiB
for a 1.7B model in bf16, ~23 KiB for SmolLM2-135M). `plan_batches` sorts the requests by prompt length (padding
stays small) and fills each batch while it fits its `BatchBudget`: at most `max_rows` requests, at most
`max_prefill_tokens` padded prompt tokens in the prefill forward, and a KV cache within `memory_bytes` (on CUDA:
a share of the device's free memory, measured when a generate call starts; on CPU: a configured budget).
A request that does not fit alone still gets a batch of its own (nothing smaller exists).

Compiled decoding (`BatchBudget.buckets`) pads a batch to a shape bucket: its rows rounded up to a power of two
(at most `max_rows`, itself a bucket) and its cache length (width + new tokens) rounded up by at most a quarter
(`length_bucket`), so that a pass of many prompt lengths compiles and records CUDA graphs for a few shapes only;
the plan counts the bucket's rows and length in memory, as the backend allocates them, and the requests' rows in
the prefill cap (`BatchBudget.fits`: buckets do not shrink batches).

Each decode step also holds vocabulary-sized temporaries per row (`step_bytes_per_row`): generate's fp32 copy of
the last logits, the step log's log-softmax, the sampler's top-k over the vocabulary (an int64 index and fp32
values) and its fp32 temporaries, and each intervention's own (`Intervention.step_bytes_per_row`): at 256 rows
and a 262k vocabulary they are gigabytes, so the budget counts them next to the KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

KV_SHARE = 0.8  # of the free device memory (plus PyTorch's cached free blocks) a batch's KV cache may use
CPU_BUDGET_GIB = 4.0  # KV-cache budget per batch on CPU unless configured


@dataclass(frozen=True)
class BatchBudget:
    max_rows: int  # requests per batch (the backend's batch_size)
    max_prefill_tokens: int  # padded prompt tokens of one prefill forward (rows x width)
    new_tokens: int = 0  # tokens each row generates at most (decoding.max_new_tokens)
    kv_bytes_per_token: int = 0  # KV cache bytes of one token of one row; 0: no memory limit
    memory_bytes: int | None = None  # KV cache bytes one batch may hold; None: no memory limit
    row_factor: int = 1  # model rows per request (beams, contrast rows)
    buckets: bool = False  # compiled decoding: rows and cache length padded to their shape bucket
    step_bytes_per_row: int = 0  # vocabulary-sized temporaries of one decode step, per model row

    def shape(self, rows: int, width: int) -> tuple[int, int]:
        """(requests, cache length) the backend allocates for `rows` requests padded to `width` prompt tokens:
        the exact ones, or with `buckets` the bucket's."""
        length = width + self.new_tokens
        if self.buckets:
            return row_bucket(rows, self.max_rows), length_bucket(length)
        return rows, length

    def kv_bytes(self, rows: int, width: int) -> int:
        """KV cache bytes of `rows` requests padded to `width` prompt tokens, once every new token is in."""
        rows, length = self.shape(rows, width)
        return rows * self.row_factor * length * self.kv_bytes_per_token

    def step_bytes(self, rows: int) -> int:
        """Per-step temporaries of `rows` requests (their model rows, padded to the bucket when compiled)."""
        padded = row_bucket(rows, self.max_rows) if self.buckets else rows
        return padded * self.row_factor * self.step_bytes_per_row

    def memory(self, rows: int, width: int) -> int:
        """What a batch holds at its last step: its KV cache and one step's temporaries."""
        return self.kv_bytes(rows, width) + self.step_bytes(rows)

    def prefill_tokens(self, rows: int, width: int) -> int:
        """The padded prompt tokens `max_prefill_tokens` caps: the requests' model rows x width, padding rows
        apart (see `fits`)."""
        return rows * self.row_factor * width

    def fits(self, rows: int, width: int) -> bool:
        """`rows` requests padded to `width` fit one batch: at most `max_rows`, their prefill within
        `max_prefill_tokens`, and what the batch allocates (with `buckets`: the bucket's rows and length) within
        `memory_bytes`.

        The prefill cap counts the requests, not a bucket's padding rows: it is a soft bound on one prefill
        forward's transient activations, which the memory budget does not count, while the padding rows' lasting
        cost (their KV cache and step temporaries, for every step) is counted in memory at the bucket's size. A
        bucket holds fewer than twice its requests, so a compiled prefill runs under twice the cap. Counting the
        bucket there cut a batch just past a power of two back to the power below: decode_check's speed pass
        (measurements/bucket_plan.py) took 6 generate calls compiled against 4 eager, each call max_new_tokens
        decode steps."""
        if rows > self.max_rows or self.prefill_tokens(rows, width) > self.max_prefill_tokens:
            return False
        return self.memory_bytes is None or self.memory(rows, width) <= self.memory_bytes


# Bytes per row and vocabulary entry of one decode step, at least what tests/test_step_bytes.py measures (the peak
# of live tensors inside each call, on the accelerator's sync-free path): the model's last logits (up to fp32),
# generate's fp32 copy, the step log's log-softmax (measured 4); the sampler's top-k over the vocabulary (int64
# index, fp32 values), its keyed Gumbel noise (int64 hashes) and fp32 temporaries (measured 45); token_stats'
# entropy and nucleus size (measured 16).
LOGITS_STEP_BYTES = 4 + 4 + 4
SAMPLER_STEP_BYTES = 48
TOKEN_STATS_STEP_BYTES = 20


def decode_step_bytes(vocab: int, decoding=None, token_stats: bool = False) -> int:
    """Bytes per row of one decode step's vocabulary-sized temporaries in the hf backend (interventions apart)."""
    per = LOGITS_STEP_BYTES + (TOKEN_STATS_STEP_BYTES if token_stats else 0)
    if decoding is not None and getattr(decoding, "sampling", False):
        per += SAMPLER_STEP_BYTES
    return per * vocab


def row_bucket(rows: int, max_rows: int) -> int:
    """The requests a compiled batch of `rows` is padded to: the next power of two, at most `max_rows` (a bucket
    of its own; a batch is never wider)."""
    bucket = 1 << max(rows - 1, 0).bit_length()
    return max(rows, min(bucket, max_rows))


def length_bucket(length: int) -> int:
    """The static cache length of a compiled batch that needs `length` positions: the next m x 2^e with m in
    5..8 (at most a quarter more; four buckets an octave), at least 16."""
    if length <= 16:
        return 16
    step = 1 << ((length - 1).bit_length() - 3)
    return -(-length // step) * step


def plan_batches(lengths: Sequence[int], budget: BatchBudget) -> list[list[int]]:
    """Indices of `lengths` (prompt lengths) sorted by length (stable), cut into the largest batches that fit
    `budget` (a batch's width is its longest prompt: the last one, as they come sorted)."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batches and budget.fits(len(batches[-1]) + 1, lengths[i]):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def kv_bytes_per_token(config, dtype_bytes: int) -> int:
    """KV cache bytes per token and row of a transformers model config: 2 x layers x kv heads x head dim x bytes
    (the text config of a multimodal model; head dim from `head_dim`, else hidden size / heads)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return 2 * text.num_hidden_layers * kv_heads * head_dim * dtype_bytes


def memory_budget(device, budget_gib: float | None) -> int:
    """Bytes one batch may hold: `budget_gib` when set; on CUDA, KV_SHARE of the device's free memory once
    PyTorch's unused cached blocks are released (the blocks of CUDA-graph pools stay reserved: they are not
    free, though `memory_reserved - memory_allocated` counts them); else CPU_BUDGET_GIB."""
    if budget_gib is not None:
        return int(budget_gib * 2**30)
    if getattr(device, "type", str(device)) == "cuda":
        import torch

        torch.cuda.empty_cache()  # the default pool's free blocks back to the driver: `free` then counts them
        free, _ = torch.cuda.mem_get_info(device)
        return int(KV_SHARE * free)
    return int(CPU_BUDGET_GIB * 2**30)

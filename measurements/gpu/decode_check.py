"""The hf backend's decode paths on a GPU, checked in one command: run this first on a new GPU machine.

    PYTHONUNBUFFERED=1 python3 measurements/gpu/decode_check.py            # a GPU: about 6-8 min (estimate below)
    python3 measurements/gpu/decode_check.py --reduced                     # any CPU: tiny geometry, ~1 min
    (tests/test_decode_check.py runs the reduced mode in CI)

No install step, no network, nothing carried but the repository: torch and transformers as the machine has them
(peft for the LoRA stage), a random-weight model of SmolLM2-1.7B's geometry (24 layers, hidden 2,048, 32 heads,
vocabulary 49,152) and a synthetic word-level tokenizer. Without CUDA the full mode refuses (exit 2) instead of
building a 1.7B model in fp32 on the CPU.

Every stage prints one verdict line (PASS / FAIL / SKIP) and the command exits 1 when any stage fails, errors or
is skipped for time (a check that did not run did not pass). `--out` (default $OUT/decode_check.json, else
./decode_check.json) is rewritten after every stage, so a cut-off run still says what it finished.

Stages and their checks (each a failure when it does not hold):
- correctness: fp32, greedy replies of eager = static = compiled decoding, prefix cache on and off, every row
  identical; more than one distinct reply (a model that says one thing checks nothing).
- batch_invariance: mlft's own part of "a reply depends on its request, never its batch": its sampler draws the
  same tokens for a row over fixed logits whatever batch the row is in, and fp32 replies never differ across
  batchings while the model's logits do not drift. Reported beside it: the model's own logit drift across
  batchings (fp32, bf16) and the replies' identical shares (fp32 greedy with and without the prefix cache, fp32
  sampled, bf16 greedy and sampled). On a GPU, kernels chosen by batch shape make logits drift by rounding, so
  replies of near-tied models differ there: measured, not promised (docs/gpu.md).
- lora: an in-process LoRA evaluation (`mlft.generation.models.eval_mode`) generates without a second copy of the
  base weights (shared storage; on CUDA, the memory held inside the pass) and leaves the live weights bit-identical.
- syncs: host syncs per decode step that mlft adds over plain `model.generate` (eager): under 0.5 a step (a sync
  made every step adds at least 1; a one-off in one window reads as 1/16), eager (mlft's counter, any device;
  CUDA's sync warnings) and compiled (CUDA's sync warnings); each window (4 and 20 steps) runs once before it is
  counted, so no compile or CUDA-graph recording lands in the count.
- cross_pass: a short batch after a long one allocates its own planned static cache (static and compiled), not the
  longest one seen.
- speed: 512 prompts (30-300 words, a shared system prompt), batch 256, the paper's sampling, eager then compiled:
  compiled makes as many generate calls as eager (buckets do not shrink batches); a call in a shape bucket seen
  before compiles no graph; at most one graph per bucket plus one; dynamo never hits its recompile limit (it would
  fall back to eager); on CUDA no CUDA graph skipped (inductor's `cudagraph_skips`) and each call's peak memory
  within its plan (KV cache + step temporaries + the prefill's activations, 10 % slack).

Estimate of the full mode on one H100 / H200 (the reasoning, to check against `elapsed_s` in the JSON): building the
model ~10 s; correctness: 6 passes of 16 rows x 24 tokens, ~1 s each eager, plus one fp32 compile of the decode step
(~60 s: dynamo traces 24 layers, inductor compiles) ~90 s; batch_invariance: 8 eager passes of 16 rows x 24 tokens
~15 s; lora: a 4-layer model, one pass ~10 s; syncs: 8 eager passes and a bf16 recompile for 8 rows ~80 s;
cross_pass: new length buckets (one dynamic-shape compile) ~60 s; speed: eager 2-3 calls x 100 steps at ~0.1 s
~40 s, compiled one more compile + CUDA-graph recordings + 2-3 calls at ~0.02-0.04 s/step ~90 s. About 6-7 min;
`budget_s` (460 s) skips what would not fit, as a SKIP.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, Path(__file__).resolve().parent):  # mlft from this checkout; geometry.py beside this script
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from geometry import GEOMETRY as SHAPES  # noqa: E402 (measurements/gpu/geometry.py, beside this script)

# the reduced model with a wide init, so that its random logits are far from ties (decoding paths compared exactly)
GEOMETRY = {"full": SHAPES["full"], "reduced": {**SHAPES["reduced"], "initializer_range": 0.5}}
SETTINGS = {  # vocabulary, prompts (speed), batch, words per prompt, correctness prompts, new tokens, budget s
    "full": {
        "vocab": 49152,
        "prompts": 512,
        "batch": 256,
        "words": (30, 300),
        "check_prompts": 16,
        "check_tokens": 24,
        "budget_s": 460,
        "max_batch_tokens": 32768,  # the hf backend's default: binds at batch 256 for prompts over 128 tokens
    },
    "reduced": {
        "vocab": 512,
        "prompts": 24,
        "batch": 8,
        "words": (4, 40),
        "check_prompts": 8,
        "check_tokens": 6,
        "budget_s": 300,
        "max_batch_tokens": 200,  # binds as the full mode's does: the prefill cap, not batch, cuts the long batches
    },
}
SYSTEM_WORDS = 24  # the shared system prompt: the prefix cache's prefix
SYNC_ROWS = 8  # the syncs and cross-pass stages share one row bucket (the reduced correctness stage's too)
MEMORY_SLACK = 1.10  # a call's peak may pass its plan (KV + step temporaries + prefill activations) by this factor


class Failed(Exception):
    """A stage's check did not hold (its message is the verdict line's detail)."""


def synthetic_tokenizer(vocab: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"<unk>": 0, "<s>": 1, "<|im_end|>": 2, "\n": 3, **{f"w{i}": i for i in range(4, vocab)}}
    t = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=t, unk_token="<unk>", bos_token="<s>", eos_token="<|im_end|>", pad_token="<|im_end|>"
    )
    tok.chat_template = "{% for m in messages %}<s> {{m['content']}} <|im_end|> {% endfor %}<s>"
    return tok


def build(mode: str, device: str, dtype=None, layers: int | None = None):
    """The random-weight model of `mode`'s geometry (fp32 unless `dtype`), `layers` decoder layers if given."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    s = SETTINGS[mode]
    torch.manual_seed(0)
    geometry = dict(GEOMETRY[mode])
    if layers is not None:
        geometry["num_hidden_layers"] = layers
    config = LlamaConfig(
        vocab_size=s["vocab"],
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        **geometry,
    )
    with torch.device(device):
        model = LlamaForCausalLM(config)
    return model.to(dtype or torch.float32).eval(), synthetic_tokenizer(s["vocab"])


def prompts(mode: str, n: int, seed: int = 0, words: tuple[int, int] | None = None):
    from mlft.generation.requests import Request

    s = SETTINGS[mode]
    rng = random.Random(seed)
    system = " ".join(f"w{4 + i}" for i in range(SYSTEM_WORDS))
    lo, hi = words or s["words"]
    return [
        Request(
            f"p{i}",
            messages=[
                {"role": "system", "content": system},
                {
                    "role": "user",
                    "content": " ".join(f"w{rng.randint(4, s['vocab'] - 1)}" for _ in range(rng.randint(lo, hi))),
                },
            ],
        )
        for i in range(n)
    ]


class RecompileLimit(logging.Handler):
    """Counts dynamo's "hit config.recompile_limit" warnings (after it, dynamo runs the frame eagerly)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.hits: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if "hit config." in message:
            self.hits.append(message.splitlines()[0][:200])

    def __enter__(self):
        self.logger = logging.getLogger("torch._dynamo.convert_frame")
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        return False


def compile_counts() -> dict:
    """dynamo's graphs compiled and inductor's CUDA graphs skipped so far (process totals)."""
    from torch._dynamo.utils import counters

    return {
        "graphs": counters["stats"]["unique_graphs"],
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
    }


class Calls:
    """Per `model.generate` call: rows, width, static cache length and bytes, seconds, graphs compiled, CUDA
    graphs skipped, whether its cache is new (a CUDA-graph recording), peak memory over the call's start (CUDA)."""

    def __init__(self, model, cuda: bool):
        self.model, self.cuda, self.rows = model, cuda, []
        self._seen: set = set()

    def __enter__(self):
        import torch

        original = self.model.generate

        def generate(*args, **kwargs):
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start_mem = torch.cuda.memory_allocated() if self.cuda else 0
            before = compile_counts()
            started = time.perf_counter()
            out = original(*args, **kwargs)
            if self.cuda:
                torch.cuda.synchronize()
            after = compile_counts()
            cache = kwargs.get("cache") or kwargs.get("past_key_values")
            layer = cache.layers[0] if cache is not None and getattr(cache, "layers", None) else None
            key = None
            row = {
                "rows": int(kwargs["input_ids"].shape[0]),
                "width": int(kwargs["input_ids"].shape[1]),
                "seconds": round(time.perf_counter() - started, 3),
                "new_tokens": int(out.shape[1] - kwargs["input_ids"].shape[1]),
                "graphs_compiled": after["graphs"] - before["graphs"],
                "cudagraph_skips": after["cudagraph_skips"] - before["cudagraph_skips"],
            }
            if layer is not None and getattr(layer, "keys", None) is not None and hasattr(layer, "max_cache_len"):
                key = (layer.keys.data_ptr(), tuple(layer.keys.shape))
                row.update(
                    cache_len=layer.max_cache_len,
                    cache_bytes=sum(t.numel() * t.element_size() for ly in cache.layers for t in (ly.keys, ly.values)),
                )
            row["new_cache"] = key is not None and key not in self._seen
            self._seen.add(key)
            if self.cuda:
                row["peak_over_start_bytes"] = torch.cuda.max_memory_allocated() - start_mem
            self.rows.append(row)
            return out

        self.model.generate = generate
        return self

    def __exit__(self, *exc):
        del self.model.generate
        return False


def _replies(backend, reqs, decoding) -> dict[str, str]:
    return {r.id: r.completion for r in backend.generate(reqs, decoding)}


# --- stages: each returns (its JSON, its verdict detail) or raises Failed ----------------------------------------


def stage_correctness(ctx):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    s, model, tok = SETTINGS[ctx.mode], ctx.fp32, ctx.tok
    reqs = prompts(ctx.mode, s["check_prompts"], seed=1, words=(4, 24))
    decoding = Decoding(temperature=0.0, max_new_tokens=s["check_tokens"])
    replies, seconds = {}, {}
    for decode in ("eager", "static", "compiled"):
        for prefix in (True, False):
            name = f"{decode}/prefix={prefix}"
            backend = HFBackend(model, tok, batch_size=len(reqs), decode=decode, prefix_cache=prefix)
            started = time.perf_counter()
            replies[name] = _replies(backend, reqs, decoding)
            seconds[name] = round(time.perf_counter() - started, 2)
            backend.close()
    base = replies["eager/prefix=True"]
    pairs = {
        f"{name} vs eager/prefix=True": sum(got[k] == base[k] for k in base)
        for name, got in replies.items()
        if name != "eager/prefix=True"
    }
    distinct = len(set(base.values()))
    out = {"identical_rows": pairs, "rows": len(reqs), "distinct_replies": distinct, "seconds": seconds}
    bad = [f"{name}: {n}/{len(reqs)} identical" for name, n in pairs.items() if n != len(reqs)]
    if bad or distinct < 2:
        out["failures"] = bad + ([f"only {distinct} distinct reply: nothing is compared"] if distinct < 2 else [])
        return out, "; ".join(out["failures"])
    return out, f"fp32 greedy: eager = static = compiled, prefix on/off, {len(reqs)} rows x 5 pairs identical"


def _processor_tokens(logits, keys, steps: int, rows) -> dict[int, list[int]]:
    """mlft's sampler over fixed per-step logits for the rows `rows` of one batch: {row: its tokens}."""
    from mlft.generation.processors import NucleusSampler

    sampler = NucleusSampler(0.3, 0.75, None, keys=keys[rows])
    picked = [sampler(None, logits[step][rows]).argmax(dim=-1).tolist() for step in range(steps)]
    return {row: [picked[step][i] for step in range(steps)] for i, row in enumerate(rows)}


def _last_logits(model, tok, reqs, size: int):
    """The last prompt position's logits per request (fp32), the requests left-padded in batches of `size` in
    reversed order (positions from the mask, as generate sets them): the model's own batch dependence."""
    import torch

    from mlft.generation.backends import encode_request

    device = next(model.parameters()).device
    order = list(range(len(reqs)))[::-1] if size < len(reqs) else list(range(len(reqs)))
    out = {}
    with torch.inference_mode():
        for start in range(0, len(order), size):
            idx = order[start : start + size]
            enc = [encode_request(tok, reqs[i]) for i in idx]
            width = max(map(len, enc))
            ids = torch.tensor([[tok.pad_token_id] * (width - len(e)) + e for e in enc], device=device)
            mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc], device=device)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1).logits
            for i, row in zip(idx, logits[:, -1].float()):
                out[i] = row
    return torch.stack([out[i] for i in range(len(reqs))])


def stage_batch_invariance(ctx):
    """mlft's promise: a reply depends on its request, never on its batch, as far as mlft's own code goes (the
    keyed draws, the processors, the prefix layout). Whether replies are bitwise batch-invariant also depends on
    the model's kernels: a GPU's matmul and attention kernels change with the batch's shape (split-K, tiles,
    padding), so the same row's logits drift by rounding and a near-tied argmax can flip. Three measurements:
    (1) mlft's sampler over fixed logits, rows in one batch against other batches: identical tokens (a failure);
    (2) the model's last-position logits across batchings: the drift (reported); (3) the replies, fp32 and bf16,
    greedy and sampled (reported; a failure only when fp32 replies differ while the fp32 logits do not drift:
    then the dependence is mlft's)."""
    import torch

    from mlft.generation import sync_count
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.requests import draw_key

    s = SETTINGS[ctx.mode]
    reqs = prompts(ctx.mode, s["check_prompts"], seed=6, words=(4, 40))
    n, out, bad = len(reqs), {}, []

    # (1) the sampler's draws, on the device path (SYNC_FREE: the accelerator's path on a CPU too)
    gen = torch.Generator().manual_seed(11)
    steps = 8
    logits = [torch.randn(n, s["vocab"], generator=gen).to(ctx.device) for _ in range(steps)]
    keys = torch.tensor([draw_key(7, r.id) for r in reqs], dtype=torch.long, device=ctx.device)
    old = sync_count.SYNC_FREE
    sync_count.SYNC_FREE = True
    try:
        whole = _processor_tokens(logits, keys, steps, list(range(n)))
        parts = {}
        for size in (1, 3, 5):
            order = list(range(n))[::-1]
            for start in range(0, n, size):
                parts.update(_processor_tokens(logits, keys, steps, order[start : start + size]))
    finally:
        sync_count.SYNC_FREE = old
    same = sum(whole[i] == parts[i] for i in range(n))
    out["processors"] = {"identical": same, "rows": n, "steps": steps}
    if same != n:
        bad.append(f"mlft's sampler: {same}/{n} rows draw the same tokens over fixed logits in other batches")

    # (2) and (3): bf16 last (Module.to casts in place: the weights stay bf16-rounded; the next stages cast anyway)
    for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        model = ctx.fp32.to(dtype)  # cast here, not in the loop's tuple: Module.to casts in place
        ref = _last_logits(model, ctx.tok, reqs, n)
        top = ref.topk(2, dim=-1).values
        drift = {str(size): float((ref - _last_logits(model, ctx.tok, reqs, size)).abs().max()) for size in (1, 5)}
        out[f"{label}/logits"] = {
            "max_drift": drift,
            "min_top2_gap": float((top[:, 0] - top[:, 1]).min()),
            "median_top2_gap": float((top[:, 0] - top[:, 1]).median()),
            "logit_std": float(ref.std()),
        }
        for kind, decoding, prefix in (
            ("greedy", Decoding(temperature=0.0, max_new_tokens=s["check_tokens"]), True),
            ("greedy/no_prefix", Decoding(temperature=0.0, max_new_tokens=s["check_tokens"]), False),
            ("sampled", Decoding(max_new_tokens=s["check_tokens"], seed=7), True),
        ):
            if label == "bf16" and kind == "greedy/no_prefix":
                continue
            backend = HFBackend(model, ctx.tok, batch_size=n, decode="eager", prefix_cache=prefix)
            one = {r.id: r for r in backend.generate(reqs, decoding)}
            differ, nll_drift = set(), 0.0
            for size in (3, 5):  # other batch sizes, other neighbours (reversed), other left padding
                backend = HFBackend(model, ctx.tok, batch_size=size, decode="eager", prefix_cache=prefix)
                for r in backend.generate(reqs[::-1], decoding):
                    if r.completion != one[r.id].completion:
                        differ.add(r.id)
                    elif "nll" in r.extra:  # the same tokens: their log-probabilities show the decode steps' drift
                        nll_drift = max(nll_drift, abs(r.extra["nll"] - one[r.id].extra["nll"]))
            differ = sorted(differ, key=lambda rid: int(rid[1:]))
            out[f"{label}/{kind}"] = {"identical": n - len(differ), "rows": n, "differ": differ, "nll_drift": nll_drift}
            if label == "fp32" and differ and max(drift.values()) == 0.0 and nll_drift == 0.0:
                bad.append(f"fp32 {kind}: {len(differ)}/{n} replies differ across batchings with no logit drift")
    ctx.fp32 = model.to(torch.float32)  # bf16-rounded weights, fp32 again
    replies = ", ".join(
        f"{k} {v['identical']}/{v['rows']}" for k, v in out.items() if "identical" in v and k != "processors"
    )
    drifts = ", ".join(f"{d} {max(out[d + '/logits']['max_drift'].values()):.2g}" for d in ("fp32", "bf16"))
    detail = (
        f"mlft's sampler {same}/{n} rows invariant; model logit drift across batchings {drifts} "
        f"(min top-2 gap fp32 {out['fp32/logits']['min_top2_gap']:.2g}); replies identical: {replies}"
    )
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad) + f" ({detail})"
    return out, detail


def stage_lora(ctx):
    import torch
    from peft import LoraConfig, get_peft_model

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.models import eval_mode

    model, tok = build(ctx.mode, ctx.device, dtype=ctx.dtype, layers=min(4, GEOMETRY[ctx.mode]["num_hidden_layers"]))
    lora = get_peft_model(
        model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False, lora_dropout=0.0)
    )
    lora.train()
    base = {n: p for n, p in lora.named_parameters() if "lora_" not in n}
    weight_bytes = sum(p.numel() * p.element_size() for p in base.values())
    saved = {n: p.detach().clone() for n, p in base.items()}
    ptrs = {p.data_ptr() for p in base.values()}
    if ctx.cuda:
        torch.cuda.synchronize()
    start = torch.cuda.memory_allocated() if ctx.cuda else 0
    reqs = prompts(ctx.mode, 4, seed=8, words=(4, 12))
    with eval_mode(lora) as live:
        held = (torch.cuda.memory_allocated() - start) if ctx.cuda else None
        foreign = [
            n for n, p in live.named_parameters() if "lora_" not in n and p.data_ptr() not in ptrs and p.dim() > 1
        ]
        replies = _replies(
            HFBackend(live, tok, batch_size=4, decode="eager"), reqs, Decoding(temperature=0.0, max_new_tokens=4)
        )
    changed = [n for n, p in base.items() if not torch.equal(p.detach(), saved[n])]
    out = {
        "base_weight_bytes": weight_bytes,
        "held_in_pass_bytes": held,
        "weights_not_shared": len(foreign),
        "live_weights_changed": len(changed),
        "training_mode_restored": lora.training,
        "replies": len(replies),
    }
    bad = []
    if foreign:
        bad.append(f"{len(foreign)} weight matrices copied for the pass (e.g. {foreign[0]})")
    if held is not None and held > 0.1 * weight_bytes:
        bad.append(f"{held / 2**20:.0f} MiB held inside the pass against {weight_bytes / 2**20:.0f} MiB of weights")
    if changed:
        bad.append(f"{len(changed)} live weights changed by the pass (e.g. {changed[0]})")
    if not lora.training:
        bad.append("the live model was left in eval mode")
    del lora, model, saved
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    mem = f", {held / 2**20:.1f} MiB held against {weight_bytes / 2**20:.0f} MiB of weights" if held is not None else ""
    return out, f"LoRA pass on the live weights (no second copy{mem}); live weights bit-identical after"


def _plain_runner(model, tok, reqs):
    """Plain transformers `generate` of `reqs` (greedy): the syncs transformers' own loop makes."""
    import torch

    from mlft.generation.backends import encode_request

    enc = [encode_request(tok, r) for r in reqs]
    width = max(map(len, enc))
    device = next(model.parameters()).device
    ids = torch.tensor([[tok.pad_token_id] * (width - len(e)) + e for e in enc], device=device)
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc], device=device)

    def run(n):
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=n,
                min_new_tokens=n,
                pad_token_id=tok.pad_token_id,
                do_sample=False,
            )

    return run


SYNC_WINDOWS = (4, 20)  # decode steps of the two counted runs: a one-off sync in one of them reads as 1/16 a step
PER_STEP = 0.5  # a sync made every step adds >= 1 per step; less is a one-off (allocator, first use), not per step


def _cuda_syncs(run, windows=SYNC_WINDOWS) -> tuple[float, list[str]]:
    """CUDA sync warnings per extra decode step between the two windows; each window runs once first."""
    import torch

    for n in windows:
        run(n)  # compiles / records CUDA graphs for this window's shapes: not counted
    counts = {}
    for n in windows:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                run(n)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        counts[n] = [str(w.message).splitlines()[0][:120] for w in caught if "synchroniz" in str(w.message).lower()]
    short, long = windows
    return (len(counts[long]) - len(counts[short])) / (long - short), sorted(set(counts[long]))[:10]


def stage_syncs(ctx):
    from mlft.generation import sync_count
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    model, tok = ctx.model, ctx.tok
    reqs = prompts(ctx.mode, SYNC_ROWS, seed=2, words=(4, 24))
    out, bad = {}, []

    def mlft_runner(decode):
        backend = HFBackend(model, tok, batch_size=SYNC_ROWS, decode=decode)

        def run(n):
            model.generation_config.min_new_tokens = n
            try:
                list(backend.generate(reqs, Decoding(max_new_tokens=n)))  # the paper's sampling
            finally:
                model.generation_config.min_new_tokens = None

        return run

    old = sync_count.SYNC_FREE
    sync_count.SYNC_FREE = True  # the accelerator's path, on a CPU too
    try:  # mlft's counter (a TorchFunctionMode: the eager path only; compiled graphs hide their ops from it)
        plain = sync_count.per_step(_plain_runner(model, tok, reqs), model, *SYNC_WINDOWS, count_ops=False)
        mine = sync_count.per_step(mlft_runner("eager"), model, *SYNC_WINDOWS, count_ops=False)
    finally:
        sync_count.SYNC_FREE = old
    out["counter"] = {"plain_generate": plain["syncs"], "mlft_eager": mine["syncs"]}
    added = mine["total"] - plain["total"]
    out["counter"]["added_per_step"] = added
    if added >= PER_STEP:
        bad.append(f"mlft's eager path adds {added:g} host syncs per step (counter: {mine['syncs']})")
    detail = f"counter: {added:+g}/step over plain generate"
    if ctx.cuda:
        base, kinds = _cuda_syncs(_plain_runner(model, tok, reqs))
        out["cuda"] = {"plain_generate_per_step": base, "plain_kinds": kinds}
        for decode in ("eager", "compiled"):
            got, kinds = _cuda_syncs(mlft_runner(decode))
            out["cuda"][decode] = {"per_step": got, "added_per_step": got - base, "kinds": kinds}
            if got - base >= PER_STEP:
                bad.append(f"{decode}: {got - base:g} CUDA syncs per step over plain generate ({kinds[:3]})")
        detail += f"; CUDA sync warnings per step over plain eager generate ({base:g}): eager "
        detail += (
            f"{out['cuda']['eager']['added_per_step']:+g}, compiled {out['cuda']['compiled']['added_per_step']:+g}"
        )
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    return out, detail


def stage_cross_pass(ctx):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    model, tok = ctx.model, ctx.tok
    long = prompts(ctx.mode, SYNC_ROWS, seed=3, words=(120, 120))
    short = prompts(ctx.mode, SYNC_ROWS, seed=4, words=(4, 4))
    out, bad = {}, []
    for decode in ("static", "compiled"):
        for prefix in (False, True):
            backend = HFBackend(model, tok, batch_size=SYNC_ROWS, decode=decode, prefix_cache=prefix)
            decoding = Decoding(temperature=0.0, max_new_tokens=8)
            with Calls(model, ctx.cuda) as calls:
                list(backend.generate(long, decoding))
                list(backend.generate(short, decoding))
            planned = backend.budget(decoding).kv_bytes(SYNC_ROWS, max(map(backend.prompt_length, short)))
            got = calls.rows[-1].get("cache_bytes")
            name = f"{decode}/prefix={prefix}"
            out[name] = {
                "cache_len": [c.get("cache_len") for c in calls.rows],
                "short_cache_bytes": got,
                "short_planned_bytes": planned,
            }
            if got != planned:
                bad.append(f"{name}: short batch cache {got} bytes, planned {planned}")
            backend.close()
    out["transformers_previous_max_cache_length"] = getattr(model, "_previous_max_cache_length", None)
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    return out, "a short batch after a long one holds its planned cache (static and compiled, prefix on/off)"


def prefill_bytes(model, rows: int, width: int) -> int:
    """A bound on what a prefill forward holds beside the KV cache: the residual stream and attention projections
    (6 x hidden), the MLP's three intermediate tensors, the last position's logits (fp32, twice)."""
    config = model.config
    elem = next(model.parameters()).element_size()
    per_token = 6 * config.hidden_size + 3 * config.intermediate_size
    return rows * width * per_token * elem + rows * config.vocab_size * 4 * 2


def stage_speed(ctx):
    import torch

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    s, model, tok = SETTINGS[ctx.mode], ctx.model, ctx.tok
    reqs = prompts(ctx.mode, s["prompts"], seed=5)
    decoding = Decoding() if ctx.mode == "full" else Decoding(max_new_tokens=8)  # the paper's sampling
    out, bad = {}, []
    for decode in ("eager", "compiled"):
        if time.monotonic() > ctx.deadline:
            raise TimeoutError(f"out of time before the {decode} pass (budget {s['budget_s']} s)")
        backend = HFBackend(model, tok, batch_size=s["batch"], decode=decode, max_batch_tokens=s["max_batch_tokens"])
        budget = backend.budget(decoding)
        plan = backend.plan(reqs, decoding)
        started = time.perf_counter()
        with Calls(model, ctx.cuda) as calls, RecompileLimit() as limit:
            results = list(backend.generate(reqs, decoding))
        seconds = time.perf_counter() - started
        seen = set()
        for row, batch in zip(calls.rows, plan):
            width = max(map(backend.prompt_length, batch))
            row["requests"] = len(batch)
            row["planned_kv_bytes"] = budget.kv_bytes(len(batch), width)
            row["planned_bytes"] = budget.memory(len(batch), width) + prefill_bytes(model, row["rows"], row["width"])
            bucket = (row["rows"], row.get("cache_len"))
            if decode == "compiled" and bucket in seen and row["graphs_compiled"]:
                bad.append(f"compiled: a call in a seen bucket {bucket} compiled {row['graphs_compiled']} graph(s)")
            seen.add(bucket)
            if "peak_over_start_bytes" in row and row["peak_over_start_bytes"] > MEMORY_SLACK * row["planned_bytes"]:
                bad.append(
                    f"{decode}: a call of {row['rows']} x {row['width']} peaked at "
                    f"{row['peak_over_start_bytes'] / 2**30:.2f} GiB against a plan of "
                    f"{row['planned_bytes'] / 2**30:.2f} GiB"
                )
        tokens = sum(r.completion_tokens for r in results)
        later = calls.rows[1:]
        graphs = sum(r["graphs_compiled"] for r in calls.rows)
        buckets = len({(r["rows"], r.get("cache_len")) for r in calls.rows})
        out[decode] = {
            "seconds": round(seconds, 2),
            "new_tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 1),
            "tokens_per_s_after_first_call": round(
                sum(r["new_tokens"] * r["rows"] for r in later) / max(sum(r["seconds"] for r in later), 1e-9), 1
            )
            if later
            else None,
            "calls": calls.rows,
            "generate_calls": len(calls.rows),
            "decode_steps": sum(r["new_tokens"] for r in calls.rows),
            "graphs_compiled": graphs,
            "shape_buckets": buckets,
            "distinct_caches": sum(r["new_cache"] for r in calls.rows),
            # inductor also counts the CPU's skips (no CUDA graphs on a CPU): only CUDA's mean a lost graph
            "cudagraph_skips": sum(r["cudagraph_skips"] for r in calls.rows) if ctx.cuda else 0,
            "recompile_limit_hits": limit.hits,
            "memory_budget_bytes": budget.memory_bytes,
            "peak_over_plan": max(
                (r["peak_over_start_bytes"] / r["planned_bytes"] for r in calls.rows if "peak_over_start_bytes" in r),
                default=None,
            ),
        }
        if limit.hits:
            bad.append(f"{decode}: dynamo hit its recompile limit ({limit.hits[0]})")
        if out[decode]["cudagraph_skips"]:
            bad.append(f"{decode}: {out[decode]['cudagraph_skips']} CUDA graph(s) skipped (inductor cudagraph_skips)")
        if decode == "compiled" and graphs > buckets + 1:
            bad.append(f"compiled: {graphs} graphs compiled for {buckets} shape buckets")
        backend.close()
        if ctx.cuda:
            torch.cuda.empty_cache()
    eager, compiled = out["eager"], out["compiled"]
    if compiled["generate_calls"] > eager["generate_calls"]:
        bad.append(
            f"compiled made {compiled['generate_calls']} generate calls ({compiled['decode_steps']} steps) against "
            f"eager's {eager['generate_calls']} ({eager['decode_steps']}): buckets shrank the batches"
        )
    ratio = f"{compiled['tokens_per_s'] / eager['tokens_per_s']:.2f}x" if eager["tokens_per_s"] else "-"
    peak = compiled["peak_over_plan"] or eager["peak_over_plan"]
    detail = (
        f"eager {eager['tokens_per_s']:g} tok/s in {eager['generate_calls']} calls, compiled "
        f"{compiled['tokens_per_s']:g} tok/s ({ratio}) in {compiled['generate_calls']} calls, "
        f"{compiled['graphs_compiled']} graphs for {compiled['shape_buckets']} buckets, "
        f"{compiled['cudagraph_skips']} CUDA-graph skips"
        + (
            f", peak/plan <= {max(x for x in (eager['peak_over_plan'], compiled['peak_over_plan']) if x):.2f}"
            if peak
            else ""
        )
    )
    if bad:
        out["failures"] = bad
        return out, "; ".join(bad)
    return out, detail


STAGES = {
    "correctness": stage_correctness,
    "batch_invariance": stage_batch_invariance,
    "lora": stage_lora,
    "syncs": stage_syncs,
    "cross_pass": stage_cross_pass,
    "speed": stage_speed,
}
FP32_STAGES = ("correctness", "batch_invariance")  # run on the fp32 model, before it is cast for the rest


class Context:
    def __init__(self, mode, device, fp32, tok, deadline):
        import torch

        self.mode, self.device, self.fp32, self.tok, self.deadline = mode, device, fp32, tok, deadline
        self.cuda = device == "cuda"
        self.dtype = torch.bfloat16 if self.cuda else torch.float32  # the speed stages' dtype
        self.model = None  # the model cast to `dtype`, made after the fp32 stages


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="CPU, tiny geometry, few prompts (the test's mode)")
    parser.add_argument("--out", default=None, help="the JSON file (default: $OUT/decode_check.json, else ./)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    args = parser.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        parser.error(f"--stages: unknown stage(s) {', '.join(unknown)} (known: {', '.join(STAGES)})")
    import torch

    t0 = time.monotonic()
    mode = "reduced" if args.reduced else "full"
    if mode == "full" and not torch.cuda.is_available():
        print(
            f"[decode_check] refused: no CUDA device (torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}). The full mode builds a 1.7B model on the GPU; on a CPU run --reduced.",
            file=sys.stderr,
        )
        return 2
    import torch._dynamo
    import transformers

    device = "cuda" if mode == "full" else "cpu"
    if device == "cpu":
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    out_path = Path(args.out or Path(os.environ.get("OUT", ".")) / "decode_check.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "mode": mode,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "stages": {},
        "verdicts": {},
    }

    def save():
        report["elapsed_s"] = round(time.monotonic() - t0, 1)
        out_path.write_text(json.dumps(report, indent=1))

    fp32, tok = build(mode, device)
    report["parameters_b"] = round(sum(p.numel() for p in fp32.parameters()) / 1e9, 3)
    save()
    ctx = Context(mode, device, fp32, tok, t0 + SETTINGS[mode]["budget_s"])
    print(
        f"[decode_check] {report['device']}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{report['parameters_b']} B parameters ({mode})",
        flush=True,
    )
    failed = []
    for name in sorted(stages, key=lambda n: n not in FP32_STAGES):  # fp32 stages first, then one cast
        if name not in FP32_STAGES and ctx.model is None:
            if ctx.dtype != torch.float32:
                torch._dynamo.reset()  # the fp32 graphs: the cast model compiles its own
            ctx.model = ctx.fp32.to(ctx.dtype)
            ctx.fp32 = None
        started = time.monotonic()
        try:
            if name not in FP32_STAGES and time.monotonic() > ctx.deadline:
                raise TimeoutError(f"out of time (budget {SETTINGS[mode]['budget_s']} s)")
            data, detail = STAGES[name](ctx)
            verdict = "FAIL" if data.get("failures") else "PASS"
        except TimeoutError as exc:
            data, detail, verdict = {"skipped": str(exc)}, str(exc), "SKIP"
        except Exception as exc:  # noqa: BLE001 — a stage's error is its verdict; the others still run
            data, detail, verdict = (
                {"error": f"{type(exc).__name__}: {exc}"},
                f"error: {type(exc).__name__}: {exc}",
                "FAIL",
            )
        seconds = round(time.monotonic() - started, 1)
        report["stages"][name] = data
        report["stages"][name + "_s"] = seconds
        report["verdicts"][name] = verdict
        if verdict != "PASS":
            failed.append(name)
        save()
        print(f"[decode_check] {name:<16} {verdict}  {detail}  ({seconds} s)", flush=True)
    torch._dynamo.reset()
    report["ok"] = not failed
    save()
    if failed:
        print(f"[decode_check] FAILED: {', '.join(failed)} ({report['elapsed_s']} s) -> {out_path}", flush=True)
        return 1
    print(f"[decode_check] all {len(stages)} stages PASS ({report['elapsed_s']} s) -> {out_path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The hf backend's decode paths on a GPU, in one command of at most 8 minutes: run this first.

Nothing to carry but the repository: a random-weight model of SmolLM2-1.7B's geometry (24 layers, hidden 2,048,
32 heads, vocabulary 49,152; bf16) and a synthetic word-level tokenizer (as measurements/gpu_hf_speed.py), torch and
transformers only. One JSON (`--out`, default $OUT/decode_check.json or ./decode_check.json) is rewritten after
every stage, so a cut-off run still reports what it finished:

1. correctness: greedy replies of eager = static = compiled decoding, prefix cache on and off (identical rows per
   pair; random bf16 weights can flip a near-tie argmax between kernels: the share is reported, exact expected in
   fp32 / --reduced).
2. syncs: host syncs per decode step, eager and compiled (on CUDA `torch.cuda.set_sync_debug_mode("warn")`
   warnings; everywhere mlft's counter `mlft.generation.sync_count` on the eager path).
3. cross-pass cache: a short batch after a long one allocates the planned (short) static cache, static and
   compiled (transformers' own cache keeps the longest length seen: `_previous_max_cache_length`).
4. speed: 512 prompts (30-300 words, a shared system prompt), batch 256, the paper's sampling (T 0.3, top-p 0.75,
   100 new tokens), eager then compiled: per generate call rows, width, cache length, seconds, graphs compiled,
   distinct caches (CUDA-graph recordings: a new cache or shape re-records), peak memory over the call's start
   against the plan's KV bytes; new tokens/s with and without the first (compiling) call.

    python measurements/gpu/decode_check.py                  # a GPU: ~5-8 min
    python measurements/gpu/decode_check.py --reduced        # CPU, tiny geometry, few prompts
    (tests/test_decode_check.py)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GEOMETRY = {
    "full": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 64,
    },
    "reduced": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "initializer_range": 0.5,
    },
}
SETTINGS = {  # vocabulary, prompts (speed), batch, words per prompt, correctness prompts, new tokens, budget s
    "full": {
        "vocab": 49152,
        "prompts": 512,
        "batch": 256,
        "words": (30, 300),
        "check_prompts": 16,
        "check_tokens": 24,
        "budget_s": 460,
    },
    "reduced": {
        "vocab": 512,
        "prompts": 24,
        "batch": 8,
        "words": (4, 40),
        "check_prompts": 6,
        "check_tokens": 6,
        "budget_s": 300,
    },
}
SYSTEM_WORDS = 24  # the shared system prompt: the prefix cache's prefix


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


def build(mode: str, device: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    s = SETTINGS[mode]
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=s["vocab"],
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        **GEOMETRY[mode],
    )
    with torch.device(device):
        model = LlamaForCausalLM(config)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return model.to(dtype).eval(), synthetic_tokenizer(s["vocab"])


def prompts(mode: str, n: int, seed: int = 0, words: tuple[int, int] | None = None):
    from mlft.generation.backends import Request

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


class Calls:
    """Per `model.generate` call: rows, width, static cache length and tensors, seconds, graphs compiled, peak
    memory over the call's start (CUDA)."""

    def __init__(self, model, cuda: bool):
        self.model, self.cuda, self.rows = model, cuda, []
        self._seen: set = set()

    def __enter__(self):
        import torch
        from torch._dynamo.utils import counters

        original = self.model.generate

        def generate(*args, **kwargs):
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start_mem = torch.cuda.memory_allocated() if self.cuda else 0
            graphs = counters["stats"]["unique_graphs"]
            started = time.perf_counter()
            out = original(*args, **kwargs)
            if self.cuda:
                torch.cuda.synchronize()
            cache = kwargs.get("cache") or kwargs.get("past_key_values")
            layer = cache.layers[0] if cache is not None and getattr(cache, "layers", None) else None
            key = None
            row = {
                "rows": int(kwargs["input_ids"].shape[0]),
                "width": int(kwargs["input_ids"].shape[1]),
                "seconds": round(time.perf_counter() - started, 3),
                "new_tokens": int(out.shape[1] - kwargs["input_ids"].shape[1]),
                "graphs_compiled": counters["stats"]["unique_graphs"] - graphs,
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


def stage_correctness(mode, model, tok, device):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    s = SETTINGS[mode]
    reqs = prompts(mode, s["check_prompts"], seed=1, words=(4, 24))
    decoding = Decoding(temperature=0.0, max_new_tokens=s["check_tokens"])
    replies = {}
    for decode in ("eager", "static", "compiled"):
        for prefix in (True, False):
            backend = HFBackend(model, tok, batch_size=len(reqs), decode=decode, prefix_cache=prefix)
            started = time.perf_counter()
            replies[f"{decode}/prefix={prefix}"] = {r.id: r.completion for r in backend.generate(reqs, decoding)}
            replies[f"{decode}/prefix={prefix}/seconds"] = round(time.perf_counter() - started, 2)
    base = replies["eager/prefix=True"]
    pairs = {}
    for name, got in replies.items():
        if isinstance(got, dict) and name != "eager/prefix=True":
            pairs[f"{name} vs eager/prefix=True"] = sum(got[k] == base[k] for k in base) / len(base)
    return {
        "identical_rows": pairs,
        "seconds": {k: v for k, v in replies.items() if k.endswith("seconds")},
        "all_identical": all(v == 1.0 for v in pairs.values()),
        "rows": len(reqs),
        "distinct_replies": len(set(base.values())),
    }


def stage_syncs(mode, model, tok, device):
    import torch

    from mlft.generation import sync_count
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    reqs = prompts(mode, 8, seed=2, words=(4, 24))
    out = {}
    for decode in ("eager", "compiled"):
        backend = HFBackend(model, tok, batch_size=8, decode=decode)

        def run(n, backend=backend):
            model.generation_config.min_new_tokens = n
            try:
                list(backend.generate(reqs, Decoding(max_new_tokens=n)))
            finally:
                model.generation_config.min_new_tokens = None

        entry = {}
        if decode == "eager":  # the Python-level counter (TorchFunctionMode: not inside a compiled graph)
            old = sync_count.SYNC_FREE
            sync_count.SYNC_FREE = True
            try:
                got = sync_count.per_step(run, model, 4, 12, count_ops=False)
            finally:
                sync_count.SYNC_FREE = old
            entry["counter_per_step"] = got["syncs"]
            entry["counter_total_per_step"] = got["total"]
        if device == "cuda":
            run(4)  # compiles / records first
            counts = {}
            for n in (4, 12):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    torch.cuda.set_sync_debug_mode("warn")
                    try:
                        run(n)
                    finally:
                        torch.cuda.set_sync_debug_mode("default")
                counts[n] = [
                    str(w.message).splitlines()[0][:120] for w in caught if "synchroniz" in str(w.message).lower()
                ]
            entry["cuda_syncs_per_step"] = (len(counts[12]) - len(counts[4])) / 8
            entry["cuda_sync_kinds_12_tokens"] = sorted(set(counts[12]))[:10]
        out[decode] = entry
    return out


def stage_cross_pass(mode, model, tok, device):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    long, short = prompts(mode, 1, seed=3, words=(120, 120))[0], prompts(mode, 1, seed=4, words=(4, 4))[0]
    out = {}
    for decode in ("static", "compiled"):
        for prefix in (False, True):
            backend = HFBackend(model, tok, batch_size=1, decode=decode, prefix_cache=prefix)
            decoding = Decoding(temperature=0.0, max_new_tokens=8)
            with Calls(model, device == "cuda") as calls:
                list(backend.generate([long], decoding))
                list(backend.generate([short], decoding))
            planned = backend.budget(decoding).kv_bytes(1, backend.prompt_length(short))
            got = calls.rows[-1].get("cache_bytes")
            out[f"{decode}/prefix={prefix}"] = {
                "cache_len": [c.get("cache_len") for c in calls.rows],
                "short_cache_bytes": got,
                "short_planned_bytes": planned,
                "ok": got == planned,
            }
            backend.close()
    out["transformers_previous_max_cache_length"] = getattr(model, "_previous_max_cache_length", None)
    return out


def stage_speed(mode, model, tok, device, deadline):
    import torch

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    s = SETTINGS[mode]
    reqs = prompts(mode, s["prompts"], seed=5)
    decoding = Decoding() if mode == "full" else Decoding(max_new_tokens=8)  # the paper's sampling
    out = {}
    for decode in ("eager", "compiled"):
        if time.monotonic() > deadline:
            out[decode] = {"skipped": "out of time"}
            continue
        backend = HFBackend(model, tok, batch_size=s["batch"], decode=decode)
        budget = backend.budget(decoding)
        plan = backend.plan(reqs, decoding)
        started = time.perf_counter()
        with Calls(model, device == "cuda") as calls:
            results = list(backend.generate(reqs, decoding))
        seconds = time.perf_counter() - started
        for row, batch in zip(calls.rows, plan):
            row["requests"] = len(batch)
            row["planned_kv_bytes"] = budget.kv_bytes(len(batch), max(map(backend.prompt_length, batch)))
        tokens = sum(r.completion_tokens for r in results)
        later = calls.rows[1:]
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
            "graphs_compiled": sum(r["graphs_compiled"] for r in calls.rows),
            "distinct_caches": sum(r["new_cache"] for r in calls.rows),
            "memory_budget_bytes": budget.memory_bytes,
        }
        backend.close()
        if device == "cuda":
            torch.cuda.empty_cache()
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="CPU, tiny geometry, few prompts (the test's mode)")
    parser.add_argument("--out", default=None, help="the JSON file (default: $OUT/decode_check.json, else ./)")
    parser.add_argument("--stages", default="correctness,syncs,cross_pass,speed")
    args = parser.parse_args(argv)
    import torch
    import torch._dynamo

    t0 = time.monotonic()
    mode = "reduced" if args.reduced else "full"
    device = "cuda" if torch.cuda.is_available() and not args.reduced else "cpu"
    if device == "cpu":
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    out_path = Path(args.out or Path(os.environ.get("OUT", ".")) / "decode_check.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    import transformers

    report: dict = {
        "mode": mode,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "stages": {},
    }

    def save():
        report["elapsed_s"] = round(time.monotonic() - t0, 1)
        out_path.write_text(json.dumps(report, indent=1))

    model, tok = build(mode, device)
    report["parameters_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 3)
    save()
    deadline = t0 + SETTINGS[mode]["budget_s"]
    stages = {
        "correctness": stage_correctness,
        "syncs": stage_syncs,
        "cross_pass": stage_cross_pass,
        "speed": lambda *a: stage_speed(*a, deadline),
    }
    for name in args.stages.split(","):
        started = time.monotonic()
        try:
            report["stages"][name] = stages[name](mode, model, tok, device)
        except Exception as exc:  # noqa: BLE001 — one stage's failure is a result; the others still run
            report["stages"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        report["stages"][name + "_s"] = round(time.monotonic() - started, 1)
        save()
        print(f"[decode_check] {name}: {report['stages'][name + '_s']} s -> {out_path}", flush=True)
    torch._dynamo.reset()
    return report


if __name__ == "__main__":
    main()

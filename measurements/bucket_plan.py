"""Generate calls and decode steps of one pass, eager against compiled decoding (shape buckets), on the CPU.

The plan only (`HFBackend.plan`, no generation): decode_check's speed pass (measurements/gpu/decode_check.py) — 512
prompts of 30-300 words with a shared 24-word system prompt, a synthetic word-level tokenizer (a word a token),
batch 256, 100 new tokens — on a meta-device model of SmolLM2-1.7B's geometry in bf16 (192 KiB of KV cache a
token), with 59 GiB for a batch (80 % of an H100's free memory: the backend's budget on that GPU) and with 4 GiB
(a budget where memory, not the prefill cap, cuts the batches). A generate call decodes up to max_new_tokens steps
(a step costs about the same at 2 rows as at 256), so the steps are calls x 100.

    python measurements/bucket_plan.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's mlft, not an installed one
PROMPTS, BATCH, WORDS, SYSTEM_WORDS, NEW_TOKENS, VOCAB = 512, 256, (30, 300), 24, 100, 49152


def _decode_check():
    """measurements/gpu/decode_check.py as a module: its synthetic tokenizer and speed prompts are the ones planned."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("decode_check", Path(__file__).parent / "gpu" / "decode_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tokenizer():
    """decode_check's synthetic tokenizer: every word `w<i>` one token, a chat template of plain markers."""
    return _decode_check().synthetic_tokenizer(VOCAB)


def requests(seed: int = 5):
    """decode_check's speed prompts (its `prompts("full", 512, seed=5)`)."""
    return _decode_check().prompts("full", PROMPTS, seed=seed)


def model():
    """SmolLM2-1.7B's geometry on the meta device (no weights allocated), bf16."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    with torch.device("meta"):
        return LlamaForCausalLM(config).to(torch.bfloat16)


def plan_rows(memory_gib: float) -> dict[str, dict]:
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.batching import row_bucket
    from mlft.generation.decoding import Decoding

    m, tok, reqs = model(), tokenizer(), requests()
    decoding = Decoding(max_new_tokens=NEW_TOKENS)
    out = {}
    for decode in ("eager", "compiled"):
        backend = HFBackend(m, tok, batch_size=BATCH, decode=decode, memory_budget_gib=memory_gib)
        plan = backend.plan(reqs, decoding)
        budget = backend.budget(decoding)
        out[decode] = {
            "calls": len(plan),
            "steps": len(plan) * NEW_TOKENS,
            "requests": [len(b) for b in plan],
            "rows": [row_bucket(len(b), BATCH) if budget.buckets else len(b) for b in plan],
            "widths": [max(map(backend.prompt_length, b)) for b in plan],
            "max_kv_gib": round(
                max(budget.kv_bytes(len(b), max(map(backend.prompt_length, b))) for b in plan) / 2**30, 2
            ),
        }
    return out


def main() -> None:
    for gib in (59.0, 4.0):
        print(f"memory for a batch: {gib:g} GiB (max_batch_tokens 32768, batch {BATCH}, {NEW_TOKENS} new tokens)")
        for decode, r in plan_rows(gib).items():
            print(
                f"  {decode:9s} {r['calls']} calls, {r['steps']} decode steps; requests per call {r['requests']}, "
                f"rows {r['rows']}, widths {r['widths']}, largest KV cache {r['max_kv_gib']} GiB"
            )


if __name__ == "__main__":
    main()

"""Tokens/s of the hf backend on a GPU for a model of a given *shape* with random weights: what a full LCB pass
(6,586 prompts x 100 new tokens) costs with transformers `generate` under mlft's batching and the paper's
sampling, on a machine with a GPU but without the weights or vLLM (e.g. one that gets
64 MiB of files and no network: neither a checkpoint nor vLLM's CUDA wheels fit).

Random weights never emit EOS, so every reply runs the full max_new_tokens (an upper bound of a real pass's
decode work); the tokenizer is a synthetic word-level one over the same 49,152-token vocabulary, and prompts
are 30-300 tokens (LCB's okapi/aya/dolly prompts; the long sharegpt/complex_prompts ones are not modelled).

    python measurements/gpu_hf_speed.py [1.7b|135m] [PROMPTS] [BATCH_SIZES]     # default: 1.7b 512 64,256
"""

from __future__ import annotations

import random
import sys
import time

SHAPES = {  # SmolLM2's public configs (Llama architecture)
    "135m": {
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
    },
    "1.7b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
    },
}
VOCAB = 49152
LCB_PROMPTS = 6586


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "<|im_end|>": 2, **{f"w{i}": i + 3 for i in range(VOCAB - 3)}}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=t, unk_token="<unk>", bos_token="<s>", eos_token="<|im_end|>", pad_token="<|im_end|>"
    )
    tok.chat_template = "{% for m in messages %}<s> {{m['content']}} <|im_end|> {% endfor %}<s>"
    return tok


def main() -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.requests import Request

    shape = sys.argv[1] if len(sys.argv) > 1 else "1.7b"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    sizes = [int(b) for b in (sys.argv[3] if len(sys.argv) > 3 else "64,256").split(",")]
    tok = tokenizer()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = (
            LlamaForCausalLM(
                LlamaConfig(
                    vocab_size=VOCAB,
                    max_position_embeddings=8192,
                    head_dim=64,
                    tie_word_embeddings=True,
                    bos_token_id=1,
                    eos_token_id=2,
                    pad_token_id=2,
                    **SHAPES[shape],
                )
            )
            .to(torch.bfloat16)
            .eval()
        )
    rng = random.Random(0)
    requests = [
        Request(
            f"p{i}",
            messages=[
                {
                    "role": "user",
                    "content": " ".join(f"w{rng.randint(3, VOCAB - 1)}" for _ in range(rng.randint(30, 300))),
                }
            ],
        )
        for i in range(n)
    ]
    print(
        f"{shape}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters (random, bf16) on "
        f"{torch.cuda.get_device_name()}; {n} prompts x 100 new tokens, paper sampling",
        flush=True,
    )
    for bs in sizes:
        backend = HFBackend(model, tok, batch_size=bs, max_batch_tokens=10**9)
        list(backend.generate(requests[:bs], Decoding(max_new_tokens=4)))  # warm-up
        torch.cuda.synchronize()
        ordered = sorted(requests, key=backend.prompt_length)
        started, tokens = time.perf_counter(), 0
        for i in range(0, n, bs):
            tokens += sum(r.completion_tokens for r in backend.generate(ordered[i : i + bs], Decoding()))
        s = time.perf_counter() - started
        print(
            f"batch {bs}: {s:.1f} s {tokens} tokens {tokens / s:.0f} tok/s -> full LCB {LCB_PROMPTS}x100: "
            f"{s / n * LCB_PROMPTS / 60:.1f} min",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Prompts/s of one per-checkpoint evaluation pass of the demo, before and after in one run, on the same live
LoRA model (the callback evaluates the model being trained, adapters unmerged).

before: the old pass — the 29-prompt lcb_demo (1 prompt per (task, source, language), okapi + aya), one padded
        batch of 32, transformers' multinomial sampling over the whole vocabulary, no prefix reuse;
after:  today's pass — the powered lcb_demo (10 prompts per (task, language): 290 prompts), the live LoRA
        model (adapters unmerged), batches cut by length (max_batch_tokens), the shared chat prefix computed once,
        sampling among the nucleus only.

    OMP_NUM_THREADS=2 python measurements/eval_pass_speed.py
"""

from __future__ import annotations

import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import LogitsProcessorList

from mlft.evals.lcb_options import runs, select_prompts
from mlft.evals.suite import load_suite
from mlft.generation.backends.hf import HFBackend
from mlft.generation.models import eval_mode, load
from mlft.generation.processors import NucleusWarper
from mlft.generation.prompting import build_input
from mlft.generation.requests import Request

OLD_SUITE = ["sources=[okapi, aya]", "per_group=1", "per_language=null", "batch_size=32"]


def requests_of(overrides: list[str]):
    o = load_suite("lcb_demo", overrides).options
    (run,) = runs(o)
    prompts = select_prompts(o)
    return (
        [
            Request(p.id, language=p.language, **build_input(run.prompting, p.prompt, p.task, p.language))
            for p in prompts
        ],
        run.decoding,
        o.batch_size,
    )


def old_pass(model, tok, requests, decoding, batch_size: int) -> float:
    """The generation call of the old hf backend: left padding, one batch up to 32 rows, multinomial sampling."""
    backend = HFBackend(model, tok, batch_size=batch_size, max_batch_tokens=8192, prefix_cache=False)
    started = time.perf_counter()
    for idx in backend._batches([backend.encode(r) for r in requests]):
        enc = [backend.encode(requests[i]) for i in idx]
        width = max(map(len, enc))
        ids = torch.tensor([[backend.pad_id] * (width - len(e)) + e for e in enc])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
        model.generate(
            input_ids=ids,
            attention_mask=mask,
            pad_token_id=backend.pad_id,
            eos_token_id=backend.eos_ids,
            logits_processor=LogitsProcessorList([NucleusWarper(decoding.temperature, decoding.top_p)]),
            max_new_tokens=decoding.max_new_tokens,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
        )
    return time.perf_counter() - started


def new_pass(model, tok, requests, decoding, batch_size: int) -> float:
    """The callback's pass today: the live LoRA model in eval mode, adapters unmerged
    (mlft.generation.models.eval_mode), then the hf backend."""
    started = time.perf_counter()
    with eval_mode(model) as live:
        for _ in HFBackend(live, tok, batch_size=batch_size).generate(requests, decoding):
            pass
    return time.perf_counter() - started


def main() -> int:
    model, tok = load(None)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    model.eval()
    old_reqs, decoding, old_bs = requests_of(OLD_SUITE)
    new_reqs, decoding_new, new_bs = requests_of([])
    print(
        f"threads {torch.get_num_threads()}; before: {len(old_reqs)} prompts; after: {len(new_reqs)} prompts; "
        f"{decoding.max_new_tokens} new tokens, T={decoding.temperature}, top-p={decoding.top_p}",
        flush=True,
    )
    with torch.inference_mode():
        new_pass(model, tok, old_reqs[:4], decoding, 4)  # warm-up
        before = old_pass(model, tok, old_reqs, decoding, old_bs)
        print(f"before: {before:7.1f} s  {len(old_reqs) / before:5.2f} prompts/s", flush=True)
        after = new_pass(model, tok, new_reqs, decoding_new, new_bs)
        print(f"after:  {after:7.1f} s  {len(new_reqs) / after:5.2f} prompts/s", flush=True)
        same = new_pass(model, tok, old_reqs, decoding, new_bs)
        print(f"after, on the old 29 prompts: {same:7.1f} s  {len(old_reqs) / same:5.2f} prompts/s", flush=True)
    print(f"ratio (prompts/s, after / before): {(len(new_reqs) / after) / (len(old_reqs) / before):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Tokens/s of the hf backend: a one-prompt-at-a-time loop vs mlft's batched, length-sorted generation on the
same prompts (default: 64 LCB prompts, 100 new tokens, the paper's sampling).

    OMP_NUM_THREADS=2 python measurements/generate_speed.py [--prompts 64] [--max-new-tokens 100] [--batch-size 32]
        [--single-budget-s 300]   # on a busy machine: time the slow loop on the first prompts only
"""

from __future__ import annotations

import argparse
import time

from mlft.benchmarks.lcb.data import load_prompts, stratified_sample
from mlft.generation.backends.hf import HFBackend
from mlft.generation.decoding import Decoding
from mlft.generation.models import load
from mlft.generation.prompting import Prompting, build_input
from mlft.generation.requests import Request


def measure(
    backend: HFBackend, requests: list[Request], decoding: Decoding, budget_s: float | None = None
) -> tuple[float, int, int]:
    """(seconds, generated tokens, prompts done); with a budget, stops after the prompt that exceeds it."""
    started, tokens, done = time.perf_counter(), 0, 0
    step = backend.batch_size if budget_s else len(requests)
    for i in range(0, len(requests), step):
        tokens += sum(r.completion_tokens for r in backend.generate(requests[i : i + step], decoding))
        done = min(i + step, len(requests))
        if budget_s and time.perf_counter() - started > budget_s:
            break
    return time.perf_counter() - started, tokens, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--device", default=None)
    ap.add_argument(
        "--single-budget-s",
        type=float,
        default=None,
        help="stop the one-at-a-time loop after this many seconds (tokens/s over the prompts done)",
    )
    ap.add_argument("--data", default=None, help="LCB test_sets.zip (default: $MLFT_LCB_DATA / cache / download)")
    args = ap.parse_args()

    pool = stratified_sample(load_prompts(["monolingual"], path=args.data), 3, seed=0)
    prompts = pool[:: max(1, len(pool) // args.prompts)][: args.prompts]
    requests = [Request(p.id, **build_input(Prompting(), p.prompt, p.task, p.language)) for p in prompts]
    model, tok = load(args.model, dtype=args.dtype, device=args.device)
    decoding = Decoding(max_new_tokens=args.max_new_tokens)
    print(
        f"{len(requests)} prompts, {args.max_new_tokens} new tokens, T={decoding.temperature}, "
        f"top-p={decoding.top_p}, device {next(model.parameters()).device}, dtype {next(model.parameters()).dtype}"
    )
    rows = []
    for label, bs, budget in (
        (f"batched (batch {args.batch_size})", args.batch_size, None),
        ("one prompt at a time", 1, args.single_budget_s),
    ):
        seconds, tokens, done = measure(HFBackend(model, tok, batch_size=bs), requests, decoding, budget)
        rows.append(tokens / seconds)
        print(
            f"{label:<28} {seconds:8.1f} s  {done:3d}/{len(requests)} prompts  {tokens:6d} tokens  "
            f"{tokens / seconds:8.1f} tokens/s",
            flush=True,
        )
    print(f"speed-up of batched over one-at-a-time: {rows[0] / rows[1]:.1f}x")


if __name__ == "__main__":
    main()

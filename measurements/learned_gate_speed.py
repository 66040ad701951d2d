"""Step-time cost of the learned gate: the same prompts generated without and with `learned_gate`, alternating
(base, gate, base, gate, ...) so that both see the same machine load. Default: the cross-lingual lcb_demo prompts
(okapi), the embedded model on the hf backend, the paper's sampling (T=0.3, p=0.75, seeded), 32 new tokens.

    OMP_NUM_THREADS=1 python measurements/learned_gate_speed.py --gate gates/smollm2-seed.safetensors [--prompts 32]
        [--rounds 3] [--batch-size 16]

Prints per round the seconds per prompt of each, the median ratio gate / base, and the share of generated tokens
at which the gate masked (`learned_gate_steps`) and at which it changed the most likely token (`learned_gate_top1`).
"""

from __future__ import annotations

import argparse
import statistics
import time

from mlft.evals.lcb_options import select_prompts
from mlft.evals.suite import load_suite
from mlft.generation.backends import create_backend
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import build_interventions
from mlft.generation.prompting import Prompting, build_input
from mlft.generation.requests import Request


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gate", required=True, help="gate file of `mlft gate train`")
    ap.add_argument("--prompts", type=int, default=32, help="the first N cross-lingual prompts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    args = ap.parse_args()

    suite = load_suite("lcb_demo", ["tasks=[crosslingual]", "sources=[okapi]"])
    prompts = select_prompts(suite.options)[: args.prompts]
    requests = [
        Request(p.id, language=p.language, **build_input(Prompting(), p.prompt, p.task, p.language)) for p in prompts
    ]
    decoding = Decoding(max_new_tokens=args.max_new_tokens)
    backend = create_backend("hf", {"dtype": "float32"}, batch_size=args.batch_size)
    gate = build_interventions([{"name": "learned_gate", "gate": args.gate}], "--gate")
    print(
        f"{len(requests)} cross-lingual prompts, {args.max_new_tokens} new tokens, batch {args.batch_size}, "
        f"T={decoding.temperature} p={decoding.top_p}"
    )
    ratios, tokens, steps, top1 = [], 0, 0, 0
    for rnd in range(args.rounds):
        seconds = {}
        for name, ivs in (("base", []), ("gate", gate)):
            started = time.perf_counter()
            results = list(backend.generate(requests, decoding, ivs))
            seconds[name] = (time.perf_counter() - started) / len(requests)
            if name == "gate" and rnd == 0:
                tokens = sum(r.completion_tokens or 0 for r in results)
                steps = sum(r.extra["intervention_stats"]["learned_gate_steps"] for r in results)
                top1 = sum(r.extra["intervention_stats"]["learned_gate_top1"] for r in results)
        ratios.append(seconds["gate"] / seconds["base"])
        print(
            f"round {rnd + 1}: base {seconds['base']:.3f} s/prompt, gate {seconds['gate']:.3f} s/prompt "
            f"(x{ratios[-1]:.3f})"
        )
    print(
        f"median gate/base time: x{statistics.median(ratios):.3f}; gated at {steps} of {tokens} generated tokens "
        f"({100 * steps / max(tokens, 1):.2f} %), most likely token changed at {top1} "
        f"({100 * top1 / max(tokens, 1):.2f} %)"
    )


if __name__ == "__main__":
    main()

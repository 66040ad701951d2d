"""The script gate's `scope` on a GPU: no host sync inside the gate's processor at any decode step (CUDA's sync debug
mode set to 'error' around each call; eager and compiled decoding), the syncs per decode step of mlft's counter with
and without a scope, and the scope's decisions on the GPU equal to the CPU's. A tiny random Llama over SmolLM2's
tokenizer, prompts that open, close or hold no reasoning trace. On a CPU it runs the same checks but the first
(CUDA's debug mode needs CUDA).

    python measurements/gate_scope_device.py [--tokenizer PATH]   # default: the embedded model's tokenizer

Prints one line per check; exits 1 when a check fails (a sync inside the processor raises).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

from mlft.generation import sync_count  # noqa: E402
from mlft.generation.backends.hf import HFBackend  # noqa: E402
from mlft.generation.decoding import Decoding  # noqa: E402
from mlft.generation.interventions import build_interventions  # noqa: E402
from mlft.generation.interventions import gate as gate_mod  # noqa: E402
from mlft.generation.requests import Request  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the embedded model's)")
args = ap.parse_args()
if args.tokenizer is None:
    from mlft.generation.models import resolve

    args.tokenizer = resolve(None).path
DEV = "cuda" if torch.cuda.is_available() else "cpu"
print(torch.__version__, DEV, torch.cuda.get_device_name(0) if DEV == "cuda" else "", flush=True)
tok = AutoTokenizer.from_pretrained(args.tokenizer)
torch.manual_seed(0)
cfg = LlamaConfig(
    vocab_size=len(tok),
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=True,
    initializer_range=0.5,
    bos_token_id=tok.bos_token_id,
    eos_token_id=tok.eos_token_id,
    pad_token_id=tok.pad_token_id,
)
model = LlamaForCausalLM(cfg).eval().to(DEV)
model.generation_config.eos_token_id = tok.eos_token_id
reqs = [
    Request(f"r{i}", text=t, language=lang)
    for i, (t, lang) in enumerate(
        [
            ("Q: Привет\n<think>\nThe user", "ru"),
            ("Q: 你好\n<think>\nx\n</think>\n", "zh"),
            ("Q: Hallo\n", "de"),
            ("Q: مرحبا\n<think>\n", "ar"),
        ]
        * 2
    )
]
# 1. no sync inside the processor, on the GPU, every step
calls = [0]
orig = gate_mod.GateProcessor.__call__


def strict(self, input_ids, scores):
    if DEV == "cuda":
        torch.cuda.set_sync_debug_mode("error")
    try:
        return orig(self, input_ids, scores)
    finally:
        if DEV == "cuda":
            torch.cuda.set_sync_debug_mode(0)
        calls[0] += 1


gate_mod.GateProcessor.__call__ = strict
variants = [
    None,
    {"mode": "hard"},
    {"mode": "hard", "scope": "answer"},
    {"mode": "needed", "scope": "trace"},
    {"mode": "soft", "scope": "trace"},
]
for eager in ("eager", "compiled") if DEV == "cuda" else ("eager",):
    backend = HFBackend(model, tok, batch_size=len(reqs), decode=eager)
    for v in variants:
        ivs = build_interventions([{"name": "script_gate", **v}], "gpu") if v else []
        t = time.perf_counter()
        out = list(backend.generate(reqs, Decoding(max_new_tokens=12), ivs))
        print(eager, v, "ok", len(out), f"{time.perf_counter() - t:.1f}s", flush=True)
print("processor calls under sync debug 'error':", calls[0], flush=True)
gate_mod.GateProcessor.__call__ = orig
# 2. syncs per decode step (mlft's counter), plain chain vs scoped gate
backend = HFBackend(model, tok, batch_size=len(reqs), decode="eager")


def runner(ivs):
    def run(n):
        model.generation_config.min_new_tokens = n
        try:
            list(backend.generate(reqs, Decoding(max_new_tokens=n), ivs))
        finally:
            model.generation_config.min_new_tokens = None

    return run


for v in variants:
    ivs = build_interventions([{"name": "script_gate", **v}], "gpu") if v else []
    got = sync_count.per_step(runner(ivs), model, 2, 6, count_ops=False)
    print("syncs/step", v, got["total"], dict(got["syncs"]), flush=True)
# 3. the scope's decisions on the GPU = on the CPU (a batch of 3 prompts, then 3 steps)
(iv,) = build_interventions([{"name": "script_gate", "mode": "hard", "scope": "trace"}], "gpu")


def enc(s):
    return tok(s, add_special_tokens=False)["input_ids"]


prompts = [enc("Q: Привет\n<think>\n"), enc("Q: Привет\n<think>\nx\n</think>\n"), enc("Q: Привет\n")]
w = max(map(len, prompts))
base = torch.tensor([[tok.eos_token_id] * (w - len(p)) + p for p in prompts])
steps = [enc("</think>"), enc(" a b"), enc("<think>")]
res = {}
for dev in ("cpu", DEV):
    scope, ids, seen = iv.trace_scope(tok), base.to(dev), []
    seen.append(scope.active(ids).tolist())
    for t in range(3):
        ids = torch.cat([ids, torch.tensor([[steps[0][t]], [steps[1][min(t, 1)]], [steps[2][t]]], device=dev)], 1)
        seen.append(scope.active(ids).tolist())
    res[dev] = seen
print("scope decisions cpu == " + DEV + ":", res["cpu"] == res[DEV], res[DEV])
sys.exit(0 if res["cpu"] == res[DEV] else 1)

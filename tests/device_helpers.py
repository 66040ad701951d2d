"""A tiny random Llama with SmolLM2's tokenizer and vocabulary, and a small working spec of every registered
intervention (the ones needing a built file get one, built on the tiny model): shared by the device tests and
measurements/decode_syncs.py."""

from __future__ import annotations

from pathlib import Path

PROMPTS = [
    ("Schreibe einen Satz über Katzen.", "de"),
    ("Réponds en français, s'il te plaît.", "fr"),
    ("日本語で答えてください。", "ja"),
    ("Напиши одно предложение.", "ru"),
    ("Write one sentence.", "en"),
    ("Was ist die Hauptstadt von Frankreich?", "de"),
    ("한국어로 대답해 주세요.", "ko"),
    ("Dime algo bonito.", "es"),
]


def tiny_model(layers: int = 2, hidden: int = 64, init: float = 0.5, seed: int = 0):
    """(model, tokenizer): a random `layers` x `hidden` Llama over SmolLM2-135M's tokenizer (49k tokens). `init`
    (the weights' std) large enough for peaked next-token distributions, as a trained model has."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from mlft.generation.models import resolve

    tok = AutoTokenizer.from_pretrained(resolve(None).path)
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        initializer_range=init,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok


def requests(n: int = 8, stop_at_newline: bool = False):
    from mlft.generation.requests import Request

    return [
        Request(
            f"r{i}",
            messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)][0]}],
            language=PROMPTS[i % len(PROMPTS)][1],
            stop_at_newline=stop_at_newline,
        )
        for i in range(n)
    ]


def intervention_specs(model, tok, folder: Path) -> dict[str, dict]:
    """{name: spec} for every registered intervention, files built on `model` into `folder`. A new intervention
    without an entry here makes the device tests fail (add its smallest working options)."""
    import torch

    from mlft.generation.interventions import REGISTRY
    from mlft.generation.interventions.learned_gate_training import Gate, gate_net, save_gate, token_families
    from mlft.generation.interventions.steer_vectors import build_vectors, save_vectors

    folder = Path(folder)
    vec_path, gate_path = folder / "vectors.safetensors", folder / "gate.safetensors"
    if not vec_path.is_file():
        texts = {
            "de": ["Guten Morgen, wie geht es dir?", "Das Wetter ist schön."],
            "en": ["Good morning, how are you?", "The weather is nice."],
            "fr": ["Bonjour, comment ça va ?", "Il fait beau."],
        }
        save_vectors(build_vectors(model, tok, texts, model_name="tiny"), vec_path)
    if not gate_path.is_file():
        torch.manual_seed(0)
        save_gate(
            Gate(gate_net(model.config.hidden_size), token_families(tok, model.config.vocab_size), "tiny"), gate_path
        )
    specs = {
        "ban_tokens": {"name": "ban_tokens", "strings": ["Sure", "The"]},
        "script_gate": {"name": "script_gate", "mode": "needed", "calibrate": 0.5},
        "language_prior": {"name": "language_prior"},
        "quantize": {"name": "quantize", "scheme": "w8"},
        "line_resample": {"name": "line_resample", "tries": 2},
        "steer": {"name": "steer", "vectors": str(vec_path), "alpha": 0.2, "source": "en"},
        "contrastive": {"name": "contrastive"},
        "learned_gate": {"name": "learned_gate", "gate": str(gate_path), "threshold": 0.6},
    }
    missing = sorted(set(REGISTRY) - set(specs))
    if missing:
        raise AssertionError(f"tests/device_helpers.py: add a spec for the new intervention(s) {missing}")
    return specs


def plain_runner(model, tok, reqs, sampling: bool):
    import torch

    from mlft.generation.backends import encode_request

    enc = [encode_request(tok, r) for r in reqs]
    width = max(map(len, enc))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(e)) + e for e in enc])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
    kw = {"do_sample": True, "temperature": 0.3, "top_p": 0.75, "top_k": 0} if sampling else {"do_sample": False}

    def run(n):
        torch.manual_seed(0)
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=n,
                min_new_tokens=n,
                pad_token_id=tok.pad_token_id,
                **kw,
            )

    return run


def mlft_runner(model, tok, reqs, decoding, interventions, token_stats=False, **options):
    import dataclasses

    from mlft.generation.backends.hf import HFBackend

    backend = HFBackend(model, tok, batch_size=len(reqs), token_stats=token_stats, **options)
    strategies = [iv for iv in interventions if "strategy" in iv.applies_via]
    others = [iv for iv in interventions if "strategy" not in iv.applies_via]
    generate = backend.generate
    for iv in strategies:
        generate = iv.wrap(generate, backend)

    def run(n):
        model.generation_config.min_new_tokens = n
        try:
            list(generate(reqs, dataclasses.replace(decoding, max_new_tokens=n), others))
        finally:
            model.generation_config.min_new_tokens = None

    return run


# the variants of an intervention worth running separately (its modes)
VARIANTS = {
    "script_gate": [
        {"mode": "hard"},
        {"mode": "soft"},
        {"mode": "needed", "calibrate": 0.5},
        # scoped to a part of a reasoning reply: the trace markers followed on the device (mlft's TraceScope)
        {"mode": "hard", "scope": "answer"},
        {"mode": "needed", "scope": "trace"},
    ]
}

"""Steering and language-contrastive decoding.

Fast (a tiny random Llama): the steer hooks change only the configured layers and positions, by exactly the
configured shift; a built vector file reloads bit-identical and its provenance checksum matches; the contrastive
processor's arithmetic and plausibility cut; options are validated; the openai backend refuses both up front.
Slow (the embedded model): alpha = 0 and lambda = 0 reproduce base completions exactly; the contrastive batch
(2n rows, one forward pass) gives the same greedy completions as two separate passes.
"""

import json

import pytest
import torch

from mlft.errors import ConfigError
from mlft.generation.backends import check_interventions
from mlft.generation.interventions import build_interventions
from mlft.generation.interventions.contrastive import ContrastiveProcessor
from mlft.generation.interventions.steer import SteerHooks, decoder_layers
from mlft.generation.interventions.steer_vectors import _sha256, build_vectors, load_vectors, save_vectors
from mlft.generation.requests import Request


def tiny_llama(layers=4, hidden=32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
    )
    return LlamaForCausalLM(cfg).eval()


class CharTokenizer:
    pad_token_id, eos_token_id = 0, 1

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [2 + ord(c) % 95 for c in text]}


def _states(model, ids, mask, past=None):
    """Every decoder layer's output as the next layer sees it (hooks registered after any steering hook) and
    the cache."""
    layers, seen = decoder_layers(model), {}
    handles = [
        layer.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out.clone()))
        for i, layer in enumerate(layers)
    ]
    try:
        out = model(input_ids=ids, attention_mask=mask, past_key_values=past, use_cache=True)
    finally:
        for h in handles:
            h.remove()
    return [seen[i] for i in range(len(layers))], out.past_key_values


@pytest.mark.parametrize("position", ["generated", "all"])
def test_hooks_touch_only_configured_layers_and_positions(position):
    model = tiny_llama()
    layers = decoder_layers(model)
    ids = torch.tensor([[0, 0, 5, 6, 7], [8, 9, 10, 11, 12]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    shift = torch.randn(2, 32)
    with torch.no_grad():
        base, past = _states(model, ids, mask)
        step_ids, step_mask = torch.tensor([[3], [4]]), torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1)
        base_step, _ = _states(model, step_ids, step_mask, past)
        with SteerHooks(layers, {1: shift}, mask if position == "all" else None) as hooks:
            steered, past2 = _states(model, ids, mask)
            steered_step, _ = _states(model, step_ids, step_mask, past2)
        assert hooks.handles == []  # removed on exit
        after, _ = _states(model, ids, mask)  # no hook left behind
    assert torch.equal(after[1], base[1])
    assert torch.equal(steered[0], base[0])  # layer 0: untouched, prompt and step
    assert torch.equal(steered_step[0], base_step[0])
    if position == "generated":  # the prompt is untouched at every layer
        for a, b in zip(steered, base):
            assert torch.equal(a, b)
    else:  # layer 1 shifted exactly at the real prompt positions, never at padding
        diff = steered[1] - base[1]
        assert torch.allclose(diff[1], shift[1].expand(5, -1), atol=1e-5)
        assert torch.allclose(diff[0, 2:], shift[0].expand(3, -1), atol=1e-5)
        assert torch.equal(diff[0, :2], torch.zeros(2, 32))
    if position == "generated":  # the step: layer 1 is its own output + the shift (same cache as base)
        assert torch.allclose(steered_step[1] - base_step[1], shift[:, None, :], atol=1e-5)
    assert not torch.allclose(steered_step[2], base_step[2], atol=1e-3)  # later layers see the shift


def test_built_vectors_reload_bit_identical(tmp_path):
    model, tok = tiny_llama(), CharTokenizer()
    texts = {
        "de": ["Guten Morgen", "Wie geht es dir?", "Danke schön"],
        "en": ["Good morning", "How are you?", "Thank you"],
        "fr": ["Bonjour", "Ça va ?", "Merci"],
    }
    for method in ("mean", "lda"):
        vec = build_vectors(model, tok, texts, method=method, model_name="tiny")
        assert vec.layers == ([0, 1, 2, 3] if method == "mean" else [2]) and vec.languages == ["de", "en", "fr"]
        assert vec.vectors.shape == (3, len(vec.layers), 32) and bool((vec.norms > 0).all())
        assert torch.allclose(vec.vectors.sum(0), torch.zeros(len(vec.layers), 32), atol=1e-4)  # centred
        path = save_vectors(vec, tmp_path / f"{method}.safetensors", provenance={"sources": [{"path": "x"}]})
        again = load_vectors(str(path))
        assert torch.equal(again.vectors, vec.vectors) and torch.equal(again.norms, vec.norms)
        assert again.layers == vec.layers and again.languages == vec.languages and again.method == method
        prov = json.loads((tmp_path / f"{method}.safetensors.provenance.json").read_text())
        assert prov["sha256"] == _sha256(path) and prov["sources"] == [{"path": "x"}]
        rebuilt = build_vectors(model, tok, texts, method=method, model_name="tiny")  # deterministic
        assert torch.equal(rebuilt.vectors, vec.vectors)


def test_steer_shift_size_source_and_skips(tmp_path):
    model, tok = tiny_llama(), CharTokenizer()
    texts = {"en": ["Good morning", "How are you?"], "fr": ["Bonjour", "Ça va ?"], "de": ["Hallo", "Danke"]}
    path = save_vectors(build_vectors(model, tok, texts, model_name="tiny"), tmp_path / "v.safetensors")
    [iv] = build_interventions(
        [{"name": "steer", "vectors": str(path), "alpha": 0.5, "layers": [2], "source": "en"}], "x"
    )
    reqs = [
        Request("a", text="Say hello", language="fr"),
        Request("b", text="Say hello", language="en"),
        Request("c", text="Say hello", language="ko"),
    ]
    shifts, pairs = iv.row_shifts(reqs, 32)
    vec = load_vectors(str(path))
    assert pairs == [("en", "fr"), None, None]  # en->en skipped, ko has no vector
    assert list(shifts) == [2]
    assert torch.allclose(shifts[2][0].norm(), 0.5 * vec.norms[2], rtol=1e-5)
    d = vec.vectors[2, 2] - vec.vectors[1, 2]  # languages sorted: de, en, fr
    assert torch.allclose(shifts[2][0] / shifts[2][0].norm(), d / d.norm(), atol=1e-5)
    assert torch.equal(shifts[2][1:], torch.zeros(2, 32))
    with pytest.raises(ConfigError, match="layers"):
        build_interventions([{"name": "steer", "vectors": str(path), "layers": [9]}], "x")
    with pytest.raises(ConfigError, match="mlft build steer"):
        build_interventions([{"name": "steer", "vectors": str(tmp_path / "none.safetensors")}], "x")
    with pytest.raises(ConfigError, match="no vector for 'ja'"):
        build_interventions([{"name": "steer", "vectors": str(path), "source": "ja"}], "x")


def test_contrastive_processor_and_refusals():
    main = torch.tensor([[2.0, 1.0, 0.0, -9.0], [0.0, 1.0, 2.0, 3.0]])
    other = torch.tensor([[3.0, 0.0, 0.0, -20.0], [1.0, 1.0, 1.0, 1.0]])
    proc = ContrastiveProcessor(torch.tensor([0.5, 0.0]), plausibility=0.1)
    proc.other = other
    out = proc(None, main)
    lp = torch.log_softmax(other[0], -1)
    assert torch.allclose(out[0, :3], main[0, :3] - 0.5 * lp[:3])
    assert out[0, 3] == float("-inf")  # implausible under the real prompt: never promoted
    assert torch.equal(out[1], main[1])  # weight 0: untouched
    assert int(out[0].argmax()) == 1  # the token the English prompt favours lost its lead
    [iv] = build_interventions([{"name": "contrastive", "weight": 0.3}], "x")
    req = Request("r", messages=[{"role": "user", "content": "Tell me a joke. Respond in Japanese."}], language="ja")
    (c,), w = iv.contrast_requests([req])
    assert c.messages[-1]["content"] == "Tell me a joke. Respond in English." and float(w[0]) == pytest.approx(0.3)
    mono = Request("m", messages=[{"role": "user", "content": "Raconte une blague."}], language="fr")
    eng = Request("e", messages=[{"role": "user", "content": "Tell a joke."}], language="en")
    (c1, c2), w = iv.contrast_requests([mono, eng])
    assert c1.messages[-1]["content"] == "Raconte une blague.\n\nAnswer in English." and c2 is eng
    assert w.tolist() == [pytest.approx(0.3), 0.0]
    for spec in ({"name": "contrastive", "weight": -1}, {"name": "contrastive", "template": "no slot"}):
        with pytest.raises(ConfigError):
            build_interventions([spec], "x")
    with pytest.raises(ConfigError, match="openai backend cannot apply"):
        check_interventions("openai", build_interventions([{"name": "contrastive"}], "x"), "x")


# --- the embedded model -------------------------------------------------------------------------------------

TEXTS = [
    ("Write one sentence about cats. Respond in French.", "fr"),
    ("What is the capital of Japan? Please answer in Japanese.", "ja"),
    ("Nenne drei Farben.", "de"),
    ("Explain what a tree is. Reply in Spanish.", "es"),
]


def _requests():
    return [
        Request(str(i), messages=[{"role": "user", "content": t}], language=lang) for i, (t, lang) in enumerate(TEXTS)
    ]


def _run(backend, decoding, interventions=()):
    return {r.id: (r.completion, r.completion_tokens) for r in backend.generate(_requests(), decoding, interventions)}


@pytest.fixture(scope="module")
def seed_vectors(embedded_model, tmp_path_factory):
    from mlft.generation.interventions.steer_vectors import parallel_texts

    model, tok = embedded_model
    texts, _ = parallel_texts("seed", per_language=6, languages=["de", "en", "es", "fr", "ja"])
    return str(
        save_vectors(
            build_vectors(model, tok, texts, model_name="smollm2"), tmp_path_factory.mktemp("v") / "seed.safetensors"
        )
    )


@pytest.mark.slow
def test_alpha_zero_and_lambda_zero_reproduce_base(embedded_model, seed_vectors):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    model, tok = embedded_model
    backend = HFBackend(model, tok, batch_size=4)
    dec = Decoding(max_new_tokens=12)  # paper sampling, seeded
    base = _run(backend, dec)
    zero_steer = build_interventions([{"name": "steer", "vectors": seed_vectors, "alpha": 0.0}], "x")
    assert _run(backend, dec, zero_steer) == base
    zero_lambda = build_interventions([{"name": "contrastive", "weight": 0.0}], "x")
    assert _run(backend, dec, zero_lambda) == base
    steered = _run(backend, dec, build_interventions([{"name": "steer", "vectors": seed_vectors, "alpha": 0.5}], "x"))
    assert steered != base  # a real shift changes replies


@pytest.mark.slow
def test_contrastive_batch_equals_two_separate_passes(embedded_model):
    """Greedy: the backend's one forward pass over 2n rows gives the tokens of a reference loop that runs the
    main and the contrastive prompts as two separate batches (each with its own cache) and combines them."""
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    model, tok = embedded_model
    [iv] = build_interventions([{"name": "contrastive", "weight": 0.5}], "x")
    dec = Decoding(max_new_tokens=10, temperature=0.0)
    backend = HFBackend(model, tok, batch_size=4, prefix_cache=False)
    got = {r.id: r.completion for r in backend.generate(_requests(), dec, [iv])}
    assert got != {r.id: r.completion for r in backend.generate(_requests(), dec, [])}  # it does something
    for req in _requests():  # reference: one row at a time, main and contrast in separate forward passes
        (contrast,), w = iv.contrast_requests([req])
        ids_main, ids_con = backend.encode(req), backend.encode(contrast)
        proc = iv.paired_processor(w)
        out, pm, pc = [], None, None
        a, b = torch.tensor([ids_main]), torch.tensor([ids_con])
        with torch.inference_mode():
            for _ in range(10):
                om = model(input_ids=a, past_key_values=pm, use_cache=True)
                oc = model(input_ids=b, past_key_values=pc, use_cache=True)
                pm, pc = om.past_key_values, oc.past_key_values
                proc.other = oc.logits[:, -1]
                token = int(proc(None, om.logits[:, -1]).argmax(-1))
                out.append(token)
                if token in backend.eos_ids:
                    break
                a = b = torch.tensor([[token]])
        want = tok.decode([t for t in out if t not in backend.eos_ids], skip_special_tokens=True)
        assert got[req.id] == want, req.id


def test_user_text_file_and_errors(tmp_path):
    from mlft.errors import DataError
    from mlft.generation.interventions.steer_vectors import parallel_texts

    good = tmp_path / "t.csv"
    good.write_text("id,text,language\n1,Hello there,en\n2,Bonjour,fr\n3,Salut,fr\n", encoding="utf-8")
    texts, records = parallel_texts(str(good))
    assert texts == {"en": ["Hello there"], "fr": ["Bonjour", "Salut"]} and records[0]["sha256"] == _sha256(good)
    bad = tmp_path / "b.csv"
    bad.write_text("id,text,language\n1,Hello,en\n2,,de\n", encoding="utf-8")
    with pytest.raises(DataError, match="row 3: missing or empty `text`"):
        parallel_texts(str(bad))
    with pytest.raises(ConfigError, match="not `seed`, `polyglot` or a file"):
        parallel_texts(str(tmp_path / "nope.csv"))
    jsonl = tmp_path / "t.jsonl"  # JSONL rows too (iter_objects yields (line, object) pairs)
    jsonl.write_text(
        '{"id": "a", "text": "Hello there", "language": "en"}\n\n'
        '{"id": "b", "text": "Ahoj", "language": "cs"}\n{"id": "c", "text": " ", "language": "cs"}\n',
        encoding="utf-8",
    )
    with pytest.raises(DataError, match="row 4: missing or empty `text`"):
        parallel_texts(str(jsonl))
    jsonl.write_text(
        '{"id": "a", "text": "Hello there", "language": "en"}\n{"id": "b", "text": "Ahoj", "language": "cs"}\n',
        encoding="utf-8",
    )
    assert parallel_texts(str(jsonl))[0] == {"en": ["Hello there"], "cs": ["Ahoj"]}


def test_steer_build_refuses_unknown_language_and_too_few_texts(tmp_path, capsys, monkeypatch):
    """`mlft build steer` stops before any model loads: a language code nobody knows (row named, did-you-mean,
    valid codes), too few texts per language for a vector (the minimum named), a too small --per-language."""
    from mlft import cli
    from mlft.errors import DataError
    from mlft.generation.interventions import steer_vectors as steering
    from mlft.generation.interventions.steer_vectors import MIN_TEXTS_PER_LANGUAGE, check_vector_texts, parallel_texts

    monkeypatch.setattr("mlft.generation.models.load", lambda *a, **k: pytest.fail("model loaded"))
    bad = tmp_path / "xx.csv"
    bad.write_text("id,text,language\n1,Hello there,en\n2,Bonjour,xx\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"row 3: `language`: language 'xx' is unknown .*valid: .*\bfr\b"):
        parallel_texts(str(bad))
    typo = tmp_path / "typo.csv"
    typo.write_text("id,text,language\n1,Hello there,en\n2,Bonjour,fr_\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="did you mean 'fr'"):
        parallel_texts(str(typo))
    assert cli.main(["build", "steer", "--from", str(bad), "--out", str(tmp_path / "v.safetensors")]) == 2
    assert "language 'xx' is unknown" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--languages: language 'xx' is unknown"):
        parallel_texts("seed", languages=["de", "xx"])

    one = tmp_path / "one.csv"  # one text per language: the old code built a "vector" from it
    one.write_text("id,text,language\n1,Hello there,en\n2,Bonjour,fr\n", encoding="utf-8")
    code = cli.main(["build", "steer", "--from", str(one), "--out", str(tmp_path / "v.safetensors")])
    err = capsys.readouterr().err
    assert code != 0 and "too few texts for a language vector (en: 1, fr: 1)" in err
    assert f"at least {MIN_TEXTS_PER_LANGUAGE} texts" in err and not (tmp_path / "v.safetensors").exists()
    code = cli.main(["build", "steer", "--from", "seed", "--per-language", "2", "--out", str(tmp_path / "v")])
    assert code != 0 and f"needs at least {MIN_TEXTS_PER_LANGUAGE} texts" in capsys.readouterr().err
    enough = {"en": ["a"] * MIN_TEXTS_PER_LANGUAGE, "fr": ["b"] * MIN_TEXTS_PER_LANGUAGE}
    check_vector_texts(enough, "x")  # the minimum itself passes
    with pytest.raises(DataError, match="fr: 4"):
        check_vector_texts({**enough, "fr": ["b"] * (MIN_TEXTS_PER_LANGUAGE - 1)}, "x")
    assert steering.MIN_TEXTS_PER_LANGUAGE <= 8  # the shipped builds (--per-language 8, 10 per outside language)

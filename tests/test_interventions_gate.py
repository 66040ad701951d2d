"""The script gate: the vocabulary classifier on hand-picked tokens of several scripts, a row always keeps an
allowed continuation (EOS included), and `needed` leaves a row untouched when its top-1 token is allowed."""

from __future__ import annotations

import pytest
import torch

from mlft.generation.interventions import build_interventions
from mlft.generation.interventions.vocab import byte_scripts, vocab_index


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from mlft.generation.models import resolve

    return AutoTokenizer.from_pretrained(resolve(None).path)


@pytest.mark.parametrize(
    "text, script",
    [
        (" the", "latin"),
        (" Привет", "cyrillic"),
        (" مرحبا", "arabic"),
        (" नमस्ते", "devanagari"),
        ("こんにちは", "kana"),
        ("世界", "han"),
        (" thế giới", "latin"),
        ("Ça", "latin"),
    ],
)
def test_tokens_of_a_script_are_classified_as_it(tok, text, script):
    v = vocab_index(tok)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    placed = [v.scripts[i] for i in ids if v.scripts[i] - {"fragment"}]
    assert placed and all(s - {"fragment"} == {script} for s in placed), [v.scripts[i] for i in ids]


def test_bytes_fragments_digits_and_specials(tok):
    assert byte_scripts("안".encode()[:1]) == {"fragment"}  # a lead byte alone: not yet placeable
    assert byte_scripts("안".encode()[:2]) == {"hangul"}  # 0xEC 0x95: Hangul syllables
    assert byte_scripts("é".encode()[:1]) == {"latin"} and byte_scripts("д".encode()[:1]) == {"cyrillic"}
    assert byte_scripts("न".encode()[:2]) == {"devanagari"} and byte_scripts("中".encode()[:2]) == {"han"}
    assert byte_scripts("বাংলা".encode()) == {"bengali"} and byte_scripts("ক".encode()[:2]) == {"bengali"}
    from mlft.generation.interventions.vocab import language_scripts

    assert language_scripts("bn") == {"bengali"}  # a target outside LCB's 15 the gate can keep in its script
    assert byte_scripts(b"2024, ok?") == {"latin"} and byte_scripts(b" 2024.") == frozenset()
    v = vocab_index(tok)
    assert v.scripts[tok.eos_token_id] == {"special"}
    assert sum(1 for s in v.scripts if s == {"latin"}) > 40_000  # SmolLM2: 96 % Latin-letter tokens


def _gate(tok, languages, **options):
    (iv,) = build_interventions([{"name": "script_gate", **options}], "test")
    (proc,) = iv.logits_processors(tok, languages)
    return proc


@pytest.mark.parametrize("lang", ["ko", "ja", "zh", "ru", "ar", "hi", "fr"])
def test_a_row_always_keeps_an_allowed_continuation(tok, lang):
    proc = _gate(tok, [lang], mode="hard")
    scores = torch.randn(1, len(tok)) * 5
    out = proc(None, scores)
    assert torch.isfinite(out[0, tok.eos_token_id])
    assert torch.isfinite(out).sum() > 100  # digits, punctuation, whitespace, fragments, specials at least
    latin = tok(" hello", add_special_tokens=False)["input_ids"][0]
    assert torch.isfinite(out[0, latin]) == (lang == "fr")


def test_needed_only_intervenes_when_top1_is_disallowed_and_an_alternative_is_near(tok):
    hello = tok(" hello", add_special_tokens=False)["input_ids"][0]
    korean = next(i for i, s in enumerate(vocab_index(tok).scripts) if s == {"hangul"})
    base = torch.zeros(3, len(tok))
    base[0, korean], base[0, hello] = 9.0, 8.0  # row 0: top-1 allowed -> untouched
    base[1, hello], base[1, korean] = 9.0, 8.0  # row 1: top-1 Latin, Hangul 2nd -> gated
    world = tok(" world", add_special_tokens=False)["input_ids"][0]
    base[2] = float("-inf")  # row 2: no allowed token in the top 2 -> untouched
    base[2, hello], base[2, world] = 9.0, 8.0
    proc = _gate(tok, ["ko", "ko", "ko"], mode="needed", top_k=2)
    out = proc(None, base.clone())
    assert torch.equal(out[0], base[0]) and torch.equal(out[2], base[2])
    assert out[1, hello] == float("-inf") and out[1, korean] == 8.0 and out[1].argmax() == korean
    assert proc.stats(1) == {"script_gate_steps": 1} and proc.stats(0) == {"script_gate_steps": 0}
    # untouched rows: identical; a Latin target row is never gated by Latin tokens
    fr = _gate(tok, ["fr"], mode="needed")
    row = torch.zeros(1, len(tok))
    row[0, hello] = 5.0
    assert torch.equal(fr(None, row.clone()), row)


# -- scope: the gate in one part of a reasoning reply ----------------------------------------------------------


def test_the_scope_follows_the_trace_markers_step_by_step(tok):
    """Three rows: a prompt that opens the trace, a prompt with a closed trace, a prompt without one; then steps
    that close the first row's trace and open the third's (the markers are several tokens here: `<`, `think`, `>`)."""
    (iv,) = build_interventions([{"name": "script_gate", "mode": "hard", "scope": "trace"}], "test")
    scope = iv.trace_scope(tok)
    enc = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompts = [enc("Q: Привет\n<think>\n"), enc("Q: Привет\n<think>\nx\n</think>\n"), enc("Q: Привет\n")]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tok.eos_token_id] * (width - len(p)) + p for p in prompts])  # left-padded
    assert scope.active(ids).tolist() == [True, False, False]
    steps = [enc("</think>"), enc(" a b"), enc("<think>")]  # row 0 closes its trace, row 2 opens one
    seen = []
    for t in range(3):
        ids = torch.cat([ids, torch.tensor([[steps[0][t]], [steps[1][min(t, 1)]], [steps[2][t]]])], dim=1)
        seen.append(scope.active(ids).tolist())
    assert seen == [[True, False, False], [True, False, False], [False, False, True]]


def test_a_gated_trace_can_close_and_a_bad_scope_is_named(tok):
    proc = _gate(tok, ["ko"], mode="hard", scope="trace")
    close = tok("</think>", add_special_tokens=False)["input_ids"]
    ids = torch.tensor([tok("<think>", add_special_tokens=False)["input_ids"]])
    out = proc(ids, torch.zeros(1, len(tok)))
    assert all(torch.isfinite(out[0, i]) for i in close)  # `think` is Latin, yet the marker stays allowed
    latin = tok(" hello", add_special_tokens=False)["input_ids"][0]
    assert not torch.isfinite(out[0, latin])
    from mlft.errors import ConfigError

    with pytest.raises(ConfigError, match=r"s\.yaml: interventions\[0\]\.scope: 'thinking' is not one of"):
        build_interventions([{"name": "script_gate", "scope": "thinking"}], "s.yaml: interventions")
    with pytest.raises(ConfigError, match=r"interventions\[0\]\.trace_markers: expected 'OPEN,CLOSE'"):
        build_interventions([{"name": "script_gate", "scope": "answer", "trace_markers": "<t>"}], "interventions")


def _reply(model, tok, prompt: str, scope: str | None, n: int = 16) -> tuple[str, int]:
    from transformers import LogitsProcessorList

    ids = tok(prompt, return_tensors="pt").input_ids
    procs = []
    if scope:
        (iv,) = build_interventions([{"name": "script_gate", "mode": "needed", "top_k": 50, "scope": scope}], "t")
        procs = iv.logits_processors(tok, ["ru"], model)
    out = model.generate(
        ids,
        max_new_tokens=n,
        do_sample=False,
        logits_processor=LogitsProcessorList(procs),
        pad_token_id=tok.pad_token_id,
    )
    return tok.decode(out[0, ids.shape[1] :]), (int(procs[0].fired[0]) if procs else 0)


def test_a_scoped_gate_acts_only_in_its_part(embedded_model):
    """The embedded model asked in Russian, its reply prefilled: inside an English-started trace the `trace` gate
    steers it to Cyrillic and the `answer` gate leaves it alone; after a closed trace, the other way round."""
    model, tok = embedded_model
    ask = tok.apply_chat_template(
        [{"role": "user", "content": "Расскажи о Москве."}], tokenize=False, add_generation_prompt=True
    )
    cyrillic = lambda text: sum("\u0400" <= ch <= "\u04ff" for ch in text)  # noqa: E731
    latin = lambda text: sum(ch.isascii() and ch.isalpha() for ch in text)  # noqa: E731
    for prefill, inside in (("<think>\nThe user", "trace"), ("<think>\nThe user asks.\n</think>\n", "answer")):
        outside = "answer" if inside == "trace" else "trace"
        plain, _ = _reply(model, tok, ask + prefill, None)
        untouched, fired_out = _reply(model, tok, ask + prefill, outside)
        gated, fired_in = _reply(model, tok, ask + prefill, inside)
        assert untouched == plain and fired_out == 0, (prefill, plain)
        assert fired_in > 0 and gated != plain, (prefill, gated)
        assert latin(plain) > cyrillic(plain) and cyrillic(gated) > latin(gated), (plain, gated)

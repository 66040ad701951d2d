"""CKA on the embedded model's tokenizer and model: first tokens, variants, ties, batching."""

import pytest

from mlft.benchmarks.polyglot.data import Fact
from mlft.evals.polyglot.cka import first_token_id, score_facts


@pytest.fixture(scope="module")
def tok(embedded_model):
    return embedded_model[1]


def test_first_token_has_the_leading_space(tok):
    spaced = first_token_id(tok, "Paris")
    assert tok.convert_ids_to_tokens(spaced) == "ĠParis"  # " Paris", not "Paris"
    assert spaced != tok("Paris", add_special_tokens=False)["input_ids"][0]
    assert first_token_id(tok, "Paris") == tok(" Paris", add_special_tokens=False)["input_ids"][0]
    # multi-token answers: only the first token counts, so "New York" and "New Delhi" share it
    assert first_token_id(tok, "New York") == first_token_id(tok, "New Delhi")
    assert tok.decode([first_token_id(tok, "Кигали")]).startswith(" ")


class _SentencePieceLike:
    """Emulates a Llama-style tokenizer: BOS, then a lone "▁" before the word's first piece."""

    all_special_ids = [1]
    pieces = {1: "<s>", 29871: "▁", 3681: "▁Paris", 42: "Par"}

    def __call__(self, text, add_special_tokens=True):
        ids = [29871, 3681] if text == " Paris" else [42]
        return {"input_ids": ([1] if add_special_tokens else []) + ids}

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids).replace("▁", " ")


def test_first_token_skips_bos_and_lone_word_marker():
    assert first_token_id(_SentencePieceLike(), "Paris") == 3681


def _fact(stem, true, false, false_stems=None):
    return Fact("id", "P1", true, tuple(false), stem, tuple(false_stems or [stem] * len(false)))


@pytest.mark.slow
def test_scores_ties_variants_and_batching(embedded_model):
    import torch

    model, tok = embedded_model

    def direct(stem, word):
        with torch.inference_mode():
            logits = model(**tok(stem, return_tensors="pt")).logits[0, -1]
        return torch.softmax(logits.float(), -1)[first_token_id(tok, word)].item()

    facts = [
        _fact("The capital of France is", "Paris", ["London", "Rome"]),
        _fact("The Eiffel Tower is located in the city of", "New York", ["New Delhi"]),  # same first token
        _fact(
            "Trailer Park Boys venait du",
            "Canada",
            ["Norvège", "Italie"],
            ["Trailer Park Boys venait de", "Trailer Park Boys venait d'"],
        ),  # per-entity variants
        _fact("The capital of France is", "Rome", ["Paris"]),  # stem shared
    ]
    scores = score_facts(model, tok, facts, batch_size=3, progress=False)
    assert scores[0].known and scores[0].p_true == pytest.approx(direct("The capital of France is", "Paris"), rel=1e-4)
    assert scores[0].p_false_mean == pytest.approx(
        (direct("The capital of France is", "London") + direct("The capital of France is", "Rome")) / 2, rel=1e-4
    )
    assert scores[1].p_true == scores[1].p_false_mean and not scores[1].known  # tie = not known
    assert scores[2].p_true == pytest.approx(direct("Trailer Park Boys venait du", "Canada"), rel=1e-4)
    assert scores[2].p_false == pytest.approx(
        (direct("Trailer Park Boys venait de", "Norvège"), direct("Trailer Park Boys venait d'", "Italie")), rel=1e-4
    )
    assert not scores[3].known
    # batch size does not change the probabilities (right padding, per-row last position)
    again = score_facts(model, tok, facts, batch_size=1, progress=False)
    assert [s.p_true for s in again] == pytest.approx([s.p_true for s in scores], rel=1e-4)

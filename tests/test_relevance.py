"""The relevance judge (mlft/generation/relevance.py) and its labelled set (tests/data/relevance_labelled.jsonl)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from mlft.generation.relevance import echo_share, judge, pmi, rotated

DATA = Path(__file__).resolve().parent / "data" / "relevance_labelled.jsonl"


def _rows():
    return [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_the_labelled_set_covers_every_failure_class_in_ten_languages():
    rows = _rows()
    assert len(rows) == 220 and len({r["id"] for r in rows}) == 220
    assert len({r["language"] for r in rows}) == 10
    classes = Counter(r["class"] for r in rows)
    for cls in ("refusal", "promise", "echo", "echo_translated", "off_topic", "wrong", "proverb", "nouns", "qa_turns"):
        assert classes[cls] >= 9, cls
        assert all(r["label"] == "not_answer" for r in rows if r["class"] == cls)
    assert classes["close_language"] == 10 and all(
        r["reply_language"] != r["language"] for r in rows if r["class"] == "close_language"
    )
    assert Counter(r["label"] for r in rows) == {"not_answer": 160, "answer": 60}
    assert all(r["distractor"] != r["prompt"] for r in rows)


def test_echo_share_and_rotated_distractors():
    prompt = "How can I keep cut flowers fresh for longer?"
    assert echo_share(prompt, prompt) == 1.0
    assert echo_share(prompt, "Trim the stems and change the water daily.") == 0.0
    assert echo_share("怎样煮米饭才能松软不粘？", "怎样煮米饭才能松软不粘") == 1.0  # character bigrams for zh
    assert echo_share(prompt, "") == 0.0
    assert rotated(["a", "a", "b", "b", "c"]) == ["b", "b", "c", "c", "a"]
    assert rotated(["a", "a"]) is None


@pytest.mark.slow
def test_pmi_ranks_an_answer_above_generic_and_off_topic_replies(embedded_model):
    """A small slice with the real embedded model (English and German, where a 135M model reads best): the honest
    reply's PMI (summed over its tokens) is above a refusal's, a proverb's and a canned paragraph's; an echo has
    the highest PMI of all and the echo check is what turns it down."""
    model, tok = embedded_model
    rows = [r for r in _rows() if r["id"].startswith(("en-A-", "de-B-"))]
    by = {r["id"]: r for r in rows}
    scores = dict(zip(by, pmi(model, tok, [r["prompt"] for r in rows], [r["reply"] for r in rows])))
    for lang in ("en-A", "de-B"):
        honest = scores[f"{lang}-honest-0"]
        for cls in ("refusal", "proverb", "off_topic", "qa_turns"):
            assert honest > scores[f"{lang}-{cls}-0"], (lang, cls, honest, scores[f"{lang}-{cls}-0"])
    assert scores["en-A-echo-0"] > scores["en-A-honest-0"]
    verdicts = judge(model, tok, [by["en-A-echo-0"]["prompt"]], [by["en-A-echo-0"]["reply"]], threshold=-1e9)
    assert verdicts[0].echo == 1.0 and not verdicts[0].answers
    assert pmi(model, tok, ["Hi"], [""]) == [None]


@pytest.mark.slow
@pytest.mark.parametrize("baseline", ["neutral", "contrast"])
def test_judge_baselines_run(embedded_model, baseline):
    model, tok = embedded_model
    prompts = ["How can I keep cut flowers fresh for longer?", "What can I do to sleep better at night?"]
    replies = ["Change the vase water every day.", "Keep a regular schedule and avoid caffeine in the evening."]
    out = judge(model, tok, prompts, replies, threshold=-1e9, baseline=baseline)
    assert [v.answers for v in out] == [True, True] and all(v.pmi is not None for v in out)

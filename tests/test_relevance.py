"""The relevance judge (mlft/generation/relevance.py) and its labelled set (mlft/resources/labelled.jsonl)."""

import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mlft.generation.relevance import echo_share, judge, pmi, rotated

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parents[1] / "mlft" / "resources" / "labelled.jsonl"
SCORES = ROOT / "measurements" / "relevance_judge_scores.json.gz"

_spec = importlib.util.spec_from_file_location("relevance_judge", ROOT / "measurements" / "relevance_judge.py")
rj = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rj)


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


def test_fit_logistic_is_the_penalised_maximum_likelihood():
    """The study's numpy fit: at its solution the penalised log-likelihood's gradient is zero, and it agrees with
    scikit-learn's (C = 1 / l2 on standardised columns, intercept unpenalised) where that is installed."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3)) * [1.0, 5.0, 0.2] + [0.0, 3.0, -1.0]
    y = (x @ [1.5, -0.3, 4.0] + rng.logistic(size=200) > -1.0).astype(float)
    mean, scale, w, b = rj.fit_logistic(x, y, l2=2.0)
    z = (x - mean) / scale
    p = 1 / (1 + np.exp(-(z @ w + b)))
    assert np.abs(z.T @ (p - y) + 2.0 * w).max() < 1e-6 and abs((p - y).sum()) < 1e-6
    assert np.allclose(rj.predict((mean, scale, w, b), x), p)
    assert 0.6 < ((p >= 0.5) == y).mean() < 1.0  # a fit, not a constant
    linear_model = pytest.importorskip("sklearn.linear_model")
    ref = linear_model.LogisticRegression(C=0.5, tol=1e-10, max_iter=10000).fit(z, y)
    assert np.allclose(ref.coef_[0], w, atol=1e-4) and abs(ref.intercept_[0] - b) < 1e-4


def _saved():
    return rj.read_scores(SCORES)


def test_the_committed_results_file_is_what_the_cached_scores_give(tmp_path):
    """docs/results/relevance_judge.json (docs/rl.md's judge paragraph and tables) is re-derived from the cached
    scores without the model: a changed study, split or cache fails here."""
    saved = _saved()
    out = tmp_path / "relevance_judge.json"
    rj.report(saved["rows"], None, out, {k: saved[k] for k in ("passes", "salad") if k in saved})
    got, committed = json.loads(out.read_text()), json.loads((ROOT / "docs/results/relevance_judge.json").read_text())
    assert got["section"] == committed["section"] and got["judge"] == committed["judge"]
    values = committed["section"]["p1"]["values"]
    assert values[0] < 90 and values[2] == pytest.approx(100 * 80 / 110, abs=1e-3)  # the goal is not met: said
    assert values[12] == 10 and values[13] > values[14]  # word salad: the length-and-NLL model pays it


def test_the_study_and_the_threshold_never_read_the_held_out_labels():
    """Flip every held-out label: the PMI threshold, the chosen feature set and the first-half columns stay; only
    the held-out agreement moves."""
    rows = _saved()["rows"]
    dev = rj.dev_half(rows)
    a = [r for r in rows if r["id"] in dev]
    b = [r for r in rows if r["id"] not in dev]
    flipped = [dict(r, label="answer" if r["label"] != "answer" else "not_answer") for r in b]
    lines, chosen = rj.study(a, b, rows)
    lines2, chosen2 = rj.study(a, flipped, a + flipped)
    assert chosen == chosen2 == ("neutral_sum", "nll", "log_tokens")
    assert [(x["cv_first"], x["first"]) for x in lines] == [(x["cv_first"], x["first"]) for x in lines2]
    assert all(x["held_out"] + y["held_out"] == pytest.approx(100) for x, y in zip(lines, lines2))
    assert rj.pick_threshold(a, "neutral_sum") == pytest.approx(25.2397, abs=1e-3)

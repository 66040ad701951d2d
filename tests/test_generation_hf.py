"""End to end on the embedded model (few prompts, few tokens): generate -> JSONL -> score; resume equals an
uninterrupted run; greedy is deterministic; beam search runs; token statistics are recorded."""

import json

import pytest
from generation_helpers import prompts

from mlft.completions import read_completions
from mlft.evals.runner import run_suite
from mlft.evals.suite import load_suite
from mlft.generation.backends.hf import HFBackend
from mlft.generation.decoding import Decoding
from mlft.generation.prompting import Prompting
from mlft.generation.requests import Request
from mlft.generation.runner import generate_completions
from mlft.generation.target import Target

pytestmark = pytest.mark.slow
TEXTS = [
    "Schreibe einen Satz über Katzen.",
    "Was ist die Hauptstadt von Frankreich?",
    "Nenne drei Farben.",
    "Wie spät ist es?",
    "Erkläre kurz, was ein Baum ist, und warum er wichtig ist.",
    "Hallo!",
]


def _strip(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


class _Crash:
    """Delegates to a backend, then dies (like Ctrl-C) on the second chunk."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0
        self.name, self.batch_size, self.prompt_length = inner.name, inner.batch_size, inner.prompt_length
        self.placement = inner.placement  # where it generates (recorded with each completion)

    def check(self, decoding, interventions=()):
        self.inner.check(decoding, interventions)

    def generate(self, requests, decoding, interventions=()):
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        return self.inner.generate(requests, decoding, interventions)


def test_resume_equals_uninterrupted_sampling(embedded_model, tmp_path):
    model, tok = embedded_model
    backend = HFBackend(model, tok, batch_size=2)
    dec, ps = Decoding(max_new_tokens=8), prompts(TEXTS)  # sampled at T=0.3, p=0.75: seeds must line up
    full = generate_completions(ps, backend, dec, Prompting(), tmp_path / "full.jsonl", "m", progress=False)
    out = tmp_path / "resumed.jsonl"
    with pytest.raises(KeyboardInterrupt):
        generate_completions(ps, _Crash(backend), dec, Prompting(), out, "m", progress=False)
    assert len(out.read_text().splitlines()) == 2
    with open(out, "a") as fh:
        fh.write('{"id": "torn')  # a crash in the middle of a write
    resumed = generate_completions(ps, backend, dec, Prompting(), out, "m", progress=False)
    assert _strip(resumed) == _strip(full)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == len(TEXTS) and len({r["id"] for r in lines}) == len(TEXTS)
    assert generate_completions(ps, backend, dec, Prompting(), out, "m", progress=False) == resumed  # no-op
    assert len(out.read_text().splitlines()) == len(TEXTS)
    rec = full[0]
    assert rec["decoding"]["top_p"] == 0.75 and rec["messages"][-1]["role"] == "user"
    assert rec["usage"]["completion_tokens"] <= 8 and rec["finish_reason"] in ("stop", "length")
    with pytest.raises(Exception, match="other settings"):
        generate_completions(ps, backend, Decoding(max_new_tokens=9), Prompting(), out, "m", progress=False)


def test_greedy_deterministic_beams_and_token_stats(embedded_model):
    model, tok = embedded_model
    reqs = [Request(str(i), messages=[{"role": "user", "content": t}]) for i, t in enumerate(TEXTS[:4])]
    greedy = Decoding(max_new_tokens=10, temperature=0)
    a = list(HFBackend(model, tok, batch_size=4).generate(reqs, greedy))
    b = list(HFBackend(model, tok, batch_size=4).generate(reqs, greedy))
    assert [r.completion for r in a] == [r.completion for r in b] and all(r.completion for r in a)
    assert sorted(r.id for r in a) == ["0", "1", "2", "3"]  # one result per request
    beams = list(
        HFBackend(model, tok, batch_size=2).generate(reqs, Decoding(max_new_tokens=10, temperature=0, num_beams=3))
    )
    assert all(r.completion and r.completion_tokens <= 10 for r in beams)
    raw = list(HFBackend(model, tok, batch_size=2).generate([Request("q", text="Q: What is 2+2?\nA:")], greedy))
    assert raw[0].completion and raw[0].prompt_tokens == len(tok("Q: What is 2+2?\nA:")["input_ids"])
    stats = list(HFBackend(model, tok, batch_size=4, token_stats=True).generate(reqs, Decoding(max_new_tokens=10)))
    for r in stats:
        s = r.extra["token_stats"]
        assert len(s["pieces"]) == len(s["entropy"]) == len(s["nucleus"]) == r.completion_tokens
        assert "".join(s["pieces"]) == r.completion.rstrip("\ufffd")
        assert all(n >= 1 for n in s["nucleus"]) and all(h >= 0 for h in s["entropy"])


def test_run_suite_generates_scores_and_reports(embedded_model, shared, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    model, tok = embedded_model
    suite = load_suite(
        "lcb_tiny",
        [
            "variants=[{name: greedy, decoding: {temperature: 0}}, {name: qa, prompting: {mode: qa}}]",
            "token_stats=true",
        ],
    )
    res = run_suite(suite, Target(model=model, tokenizer=tok), tmp_path, progress=False)
    recs = read_completions(tmp_path / "greedy" / "completions.jsonl")
    assert len(recs) == 6 and {c.language for c in recs} == {"de", "zh", "ar"}
    exported = {c.id: c.completion for c in read_completions(tmp_path / "qa" / "completions.csv")}
    jsonl = [json.loads(x) for x in (tmp_path / "qa" / "completions.jsonl").read_text().splitlines()]
    assert exported == {r["id"]: r["completion"] for r in jsonl}
    assert all("\nQ:" not in r["completion"] and r["input_text"].endswith("\nA:") for r in jsonl)
    for variant in ("greedy", "qa"):
        for task in ("monolingual", "crosslingual"):
            lpr = res.value("lpr", task, "avg", variant)
            langs = [res.value("lpr", task, lang, variant) for lang in ("ar", "de", "zh")]
            assert lpr == pytest.approx(sum(langs) / 3)
            assert res.value("wpr", task, "de", variant) is None  # Latin script: no WPR
    assert {tuple(sorted(r)) for r in res.rows} == {
        ("high", "language", "low", "metric", "n", "outcomes", "suite", "task", "value", "variant")
    }
    for r in res.rows:  # every metric row has its interval around the official value; the guard sits beside it
        if r["low"] is not None and r["metric"] != "nll":
            assert r["low"] - 1e-9 <= r["value"] <= r["high"] + 1e-9 and 0 <= r["low"] <= r["high"] <= 1
    metrics = {r["metric"] for r in res.rows}
    assert {"lpr", "wpr", "lcpr", "coverage", "degeneracy", "nll"} <= metrics
    outcomes = [json.loads(x) for x in (tmp_path / "greedy" / "outcomes.jsonl").read_text().splitlines()]
    assert len(outcomes) == 6 and all(o["nll"] is None or o["nll"] > 0 for o in outcomes)
    assert "| greedy |" in res.report and "Confusion points" in res.report
    assert (tmp_path / "sweep.png").stat().st_size > 1000
    assert len((tmp_path / "scores.jsonl").read_text().splitlines()) == len(res.rows)


def test_prefix_cache_uses_the_current_cache_api(embedded_model, recwarn, capfd):
    """The shared-prefix KV cache goes to generate through transformers' current argument (`cache` since 5.2x):
    no FutureWarning per batch and no "past_key_values ... deprecated" line; the completions are unchanged."""
    model, tok = embedded_model
    dec = Decoding(max_new_tokens=6, temperature=0)
    reqs = [Request(str(i), messages=[{"role": "user", "content": t}]) for i, t in enumerate(TEXTS[:4])]
    cached = {r.id: r.completion for r in HFBackend(model, tok, batch_size=4).generate(reqs, dec)}
    plain = {r.id: r.completion for r in HFBackend(model, tok, batch_size=4, prefix_cache=False).generate(reqs, dec)}
    assert cached == plain
    err = capfd.readouterr().err
    assert not [w for w in recwarn.list if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    assert "deprecated" not in err

"""One Registry for backends, eval kinds and interventions; a new backend is one module + one line: a toy backend
registered here is usable by `mlft eval` (flags generated from its Options), refused by a kind that needs weights,
and its completions give the same intervals under `mlft score --bootstrap` as in `mlft eval`'s scores."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field

import pytest
from data_helpers import matching_interval_rows
from generation_helpers import TextBackend

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.evals.registry import KINDS, get_kind
from mlft.generation.backends import REGISTRY, Capabilities, backend_class, provides
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


class ToyBackend(TextBackend):
    name = "toy"
    Options = ToyOptions
    capabilities = Capabilities(chat=True, hooks={"strategy"})

    def reply(self, request) -> str:
        wrong = zlib.crc32(request.id.encode()) % 1000 < 1000 * self.options.toy_wrong_share
        return ENGLISH if wrong else REPLIES.get(request.language, ENGLISH)


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
    code = main(
        [
            "eval",
            "lcb_tiny",
            "--backend",
            "toy",
            "--toy-wrong-share",
            "0.3",
            "--no-progress",
            "--out",
            str(out),
            "per_group=6",
            "languages=[de,zh,ar,ja]",
            "resamples=1000",
        ]
    )
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    ev = {(r["task"], r["language"], r["metric"]): r for r in rows}
    assert 0.4 < ev[("monolingual", "avg", "lpr")]["value"] < 0.95  # the toy's English share shows
    records = [json.loads(x) for x in (out / "default" / "completions.jsonl").read_text().splitlines()]
    assert len(records) == 42 and all(r["backend"] == "toy" for r in records)  # okapi: no monolingual ja
    capsys.readouterr()
    assert (
        main(
            [
                "score",
                str(out / "default" / "completions.jsonl"),
                "--bootstrap",
                "1000",
                "--format",
                "json",
                "-o",
                str(tmp_path / "score.json"),
            ]
        )
        == 0
    )
    score = json.loads((tmp_path / "score.json").read_text())["rows"]
    checked = matching_interval_rows(score, rows)
    assert checked >= 20  # per task: LPR / WPR / LCPR of each language and the task average


def test_a_kind_that_needs_weights_refuses_the_toy(toy, tmp_path, capsys, polyglot_placeholders):
    code = main(["eval", "polyglot", "--backend", "toy", "--no-progress", "--out", str(tmp_path / "p")])
    assert code == 2
    assert "needs weights, which the toy backend does not provide" in capsys.readouterr().err


def test_generate_and_eval_share_flags_and_pipeline(toy, tmp_path, capsys):
    """Decoding / prompting flags come from the dataclasses for both commands, and `mlft generate` runs the eval
    runner's pipeline: the same prompts and settings give the same records."""
    import dataclasses

    from mlft.generation.decoding import Decoding
    from mlft.generation.prompting import Prompting

    helps = {}
    for cmd in ("generate", "eval"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        helps[cmd] = capsys.readouterr().out
    for f in [*dataclasses.fields(Decoding), *dataclasses.fields(Prompting)]:
        flag = {"seed": "--decoding-seed", "mode": "--prompting"}.get(f.name, "--" + f.name.replace("_", "-"))
        assert flag in helps["generate"] and flag in helps["eval"], flag
    assert "--toy-wrong-share" in helps["generate"]  # the toy backend's Options became flags too
    common = [
        "--backend",
        "toy",
        "--no-progress",
        "--max-new-tokens",
        "7",
        "--temperature",
        "0",
        "--shots",
        "1",
        "--prompting",
        "qa",
    ]
    assert main(["eval", "lcb_tiny", *common, "--out", str(tmp_path / "ev")]) == 0
    assert (
        main(
            [
                "generate",
                "--source",
                "okapi",
                "--language",
                "de",
                "--language",
                "zh",
                "--language",
                "ar",
                "--per-group",
                "1",
                "--batch-size",
                "8",
                *common,
                "--out",
                str(tmp_path / "gen.jsonl"),
            ]
        )
        == 0
    )
    ev = [json.loads(x) for x in (tmp_path / "ev" / "default" / "completions.jsonl").read_text().splitlines()]
    gen = [json.loads(x) for x in (tmp_path / "gen.jsonl").read_text().splitlines()]
    assert ev[0]["decoding"]["max_new_tokens"] == 7 and ev[0]["decoding"]["temperature"] == 0

    def strip(rs):
        return sorted(({k: v for k, v in r.items() if k != "seconds"} for r in rs), key=lambda r: r["id"])

    assert strip(gen) == strip(ev)


def test_kinds_return_metric_rows_and_the_runner_hands_them_back(toy, tmp_path):
    """The lcb kind returns MetricRows (docs/extending.md); the runner names the suite in them, writes them to
    scores.jsonl and returns the same rows (one list, no conversion); a kind's dict rows are refused."""
    from mlft.evals.registry import KindOutput
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import load_suite
    from mlft.generation.target import Target
    from mlft.io.metric_rows import MetricRow

    suite = load_suite("lcb_tiny", ["per_group=2", "languages=[de]", "resamples=200"])
    result = run_suite(suite, Target("toy"), tmp_path, progress=False)
    written = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert result.rows and all(isinstance(r, MetricRow) and r.suite == "lcb_tiny" for r in result.rows)
    assert [r.to_dict() for r in result.rows] == written
    assert result.value("lpr", "crosslingual", "de") == next(
        r["value"] for r in written if (r["metric"], r["task"], r["language"]) == ("lpr", "crosslingual", "de")
    )
    with pytest.raises(TypeError, match="an eval kind returns MetricRows"):
        KindOutput([written[0]])

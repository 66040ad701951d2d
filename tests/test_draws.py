"""Draws that belong to the request: a sampled reply depends only on (model, prompt, decoding, seed, request id,
sample index), never on batch size, batch composition, memory budget, ranks, resume or order; and the keyed
sampler draws from the exact nucleus distribution of transformers' temperature + top-p warpers."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from generation_helpers import prompts

from mlft.generation.backends.hf import HFBackend
from mlft.generation.decoding import Decoding
from mlft.generation.processors import NucleusSampler, keyed_gumbel, mix32
from mlft.generation.prompting import Prompting
from mlft.generation.requests import Request, draw_id, draw_key, request_seed
from mlft.generation.runner import generate_completions

REPO = Path(__file__).resolve().parents[1]
TEXTS = [
    "Écris une courte histoire sur un chat.",
    "Beschreibe deine Lieblingsstadt.",
    "自己紹介をしてください。",
    "Describe the weather today in Spanish.",
    "Quel est ton plat préféré et pourquoi ?",
    "Wie spät ist es?",
    "Напиши короткое стихотворение о зиме.",
    "Explain photosynthesis to a child, in Italian.",
]


def test_the_hash_is_a_32_bit_bijection_free_of_overflow():
    x = torch.arange(0, 1 << 20, dtype=torch.long) * 4093 % (1 << 32)
    h = mix32(x)
    assert int(h.min()) >= 0 and int(h.max()) < (1 << 32)
    assert len(torch.unique(h)) == len(torch.unique(x))  # a bijection: no collisions
    ref = []  # the same function in plain Python integers
    for v in x[:64].tolist():
        v ^= v >> 16
        v = (v * 0x7FEB352D) & 0xFFFFFFFF
        v ^= v >> 15
        v = (v * 0x846CA68B) & 0xFFFFFFFF
        ref.append(v ^ (v >> 16))
    assert h[:64].tolist() == ref


def test_keyed_noise_is_a_function_of_key_step_and_token_and_gumbel_distributed():
    keys = torch.tensor([draw_key(0, f"p{i}") for i in range(4000)])
    tokens = torch.arange(8).expand(4000, 8)
    g = keyed_gumbel(keys, 3, tokens)
    assert torch.equal(g, keyed_gumbel(keys, 3, tokens))  # deterministic
    assert torch.equal(g[5:9], keyed_gumbel(keys[5:9], 3, tokens[5:9]))  # a row alone = the row in a batch
    assert not torch.equal(g, keyed_gumbel(keys, 4, tokens))  # another step, other noise
    assert torch.equal(keyed_gumbel(keys, 3, tokens.flip(-1)), g.flip(-1))  # keyed by token id, not position
    # Gumbel(0, 1): mean = Euler-Mascheroni 0.5772, variance pi^2 / 6 = 1.645
    assert abs(float(g.mean()) - 0.5772) < 0.02 and abs(float(g.var()) - 1.645) < 0.05
    assert abs(float(torch.corrcoef(torch.stack([g[:, 0], g[:, 1]]))[0, 1])) < 0.05


def test_draw_keys_and_seeds_depend_on_the_request_only():
    assert draw_id("monolingual/aya/fr/3", 0) == "monolingual/aya/fr/3" != draw_id("monolingual/aya/fr/3", 1)
    assert draw_key(0, "a") == draw_key(0, "a") != draw_key(1, "a") != draw_key(0, "b")
    assert draw_key(0, "a", "Bonjour\n") != draw_key(0, "a")  # a continued reply draws afresh
    assert 0 <= request_seed(0, "a") < 2**31


@pytest.fixture(scope="module")
def next_token_logits(embedded_model):
    """Real next-token logits of the embedded model: three prompts' first reply token, each row's 2,048 most
    likely tokens (the nucleus at T = 0.3, p = 0.75 holds a handful; the target below is computed from the same
    rows): the sampler's path is the same, 24x less work than the whole 49k vocabulary."""
    model, tok = embedded_model
    rows = []
    for text in TEXTS[:3]:
        ids = tok.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        with torch.inference_mode():
            rows.append(model(input_ids=ids).logits[0, -1].float().topk(2048).values)
    return torch.stack(rows)


def test_keyed_sampler_draws_the_exact_nucleus_distribution(next_token_logits):
    """20,000 keyed draws per row against transformers' TemperatureLogitsWarper + TopPLogitsWarper (T=0.3,
    p=0.75, the paper's): total-variation distance within sampling noise (<= 0.011 here)."""
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    draws, per_call = 20000, 2000
    for row in next_token_logits:
        warped = TopPLogitsWarper(0.75)(None, TemperatureLogitsWarper(0.3)(None, row[None].clone()))
        target = torch.softmax(warped[0], -1)
        counts = torch.zeros_like(target)
        for start in range(0, draws, per_call):
            keys = torch.tensor([draw_key(7, f"r{start + i}") for i in range(per_call)])
            sampler = NucleusSampler(0.3, 0.75, keys=keys)
            out = sampler(None, row.expand(per_call, -1).clone())
            counts += torch.bincount(out.argmax(-1), minlength=len(target)).float()
            assert not bool(sampler.invalid.any())
        tv = 0.5 * float((counts / draws - target).abs().sum())
        assert tv <= 0.011, (tv, int((target > 0).sum()))


def test_the_accelerator_path_draws_what_the_cpu_path_draws(next_token_logits, monkeypatch):
    """The sync-free path (one top-k / sort, no host read) and the CPU's probe path keep the same nucleus and key
    the noise by token id, so they draw the same token for the same key: the exactness above holds for both."""
    import mlft.generation.processors as processors

    rows = next_token_logits.repeat_interleave(100, 0)
    keys = torch.tensor([draw_key(3, f"r{i}") for i in range(len(rows))])
    picks = {}
    for sync_free in (False, True):
        monkeypatch.setattr(processors, "host_checks", lambda t, sf=sync_free: not sf)
        for top_k in (None, 20):
            sampler = NucleusSampler(0.3, 0.75, top_k=top_k, keys=keys)
            picks[(sync_free, top_k)] = sampler(None, rows.clone()).argmax(-1)
    assert torch.equal(picks[(False, None)], picks[(True, None)])
    assert torch.equal(picks[(False, 20)], picks[(True, 20)])
    assert len(set(picks[(False, None)].tolist())) > 3  # real draws, not one token


def test_a_row_without_a_finite_candidate_is_an_error_not_a_device_assert():
    scores = torch.randn(3, 50)
    scores[1] = float("nan")
    scores[2] = float("-inf")
    sampler = NucleusSampler(0.3, 0.75, keys=torch.tensor([draw_key(0, str(i)) for i in range(3)]))
    sampler(None, scores)
    assert sampler.invalid.tolist() == [False, True, True]


def _replies(backend, reqs, decoding):
    return {r.id: r.completion for r in backend.generate(reqs, decoding)}


def test_a_reply_is_the_same_alone_in_a_batch_of_64_and_under_another_memory_budget(embedded_model):
    model, tok = embedded_model
    decoding = Decoding(max_new_tokens=16)
    chosen = [
        Request(draw_id(f"p{i}", k), messages=[{"role": "user", "content": TEXTS[i]}]) for i in (0, 2) for k in (0, 1)
    ]
    filler = [Request(f"f{i}", messages=[{"role": "user", "content": f"{TEXTS[i % 8]} ({i})"}]) for i in range(60)]
    batch = _replies(HFBackend(model, tok, batch_size=64), filler[:30] + chosen + filler[30:], decoding)
    alone = {}
    for r in chosen:
        alone.update(_replies(HFBackend(model, tok, batch_size=1), [r], decoding))
    # the KV budget cuts the requests into several small batches, in another order (8 requests: each batch costs a
    # decode loop of its own, so more would add time, not cases)
    tight_backend, tight_reqs = HFBackend(model, tok, batch_size=64, memory_budget_gib=0.002), [*chosen, *filler[:4]]
    tight_reqs.reverse()
    assert len(tight_backend.plan(tight_reqs, decoding)) >= 3
    tight = _replies(tight_backend, tight_reqs, decoding)
    for r in chosen:
        assert alone[r.id] == batch[r.id] == tight[r.id], r.id
    assert batch[chosen[0].id] != batch[chosen[1].id]  # the prompt's two replies are two draws


DP_SCRIPT = r"""
import json, sys
import torch.distributed as dist
from datetime import timedelta
rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                        timeout=timedelta(seconds=120))
from mlft.generation import data_parallel
from mlft.generation.backends.hf import HFBackend, HFOptions
from mlft.generation.decoding import Decoding
from mlft.generation.models import load
from mlft.generation.prompting import Prompting
from mlft.generation.runner import generate_completions
sys.path.insert(0, sys.argv[4])
from generation_helpers import prompts
model, tok = load(sys.argv[6])
if rank == 0:
    backend = HFBackend.create(HFOptions(), model=model, tokenizer=tok, batch_size=2)
    with data_parallel.coordinate():
        recs = generate_completions(prompts(json.loads(sys.argv[5]), "fr"), backend, Decoding(max_new_tokens=24),
                                    Prompting(), out, "m", progress=False, samples=2)
else:
    print("served", data_parallel.serve(model, tok))
dist.destroy_process_group()
"""


@pytest.mark.multiprocess  # two gloo ranks
def test_replies_are_the_same_on_two_ranks_as_on_one(tiny, tmp_path):
    """Two gloo ranks share the pass (rank 1 generates every other batch): the completions file holds exactly the
    replies one rank writes with another batch size. The two-layer model (`tiny`): what is tested is where a
    reply's draws come from, which holds for any model."""
    from mlft.generation.models import load

    model, tok = load(str(tiny))
    texts = TEXTS[:6]
    one = generate_completions(
        prompts(texts, "fr"),
        HFBackend(model, tok, batch_size=16),
        Decoding(max_new_tokens=24),
        Prompting(),
        tmp_path / "one.jsonl",
        "m",
        progress=False,
        samples=2,
    )
    script = tmp_path / "dp.py"
    script.write_text(DP_SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    out = tmp_path / "two.jsonl"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(r),
                str(port),
                str(out),
                str(REPO / "tests"),
                json.dumps(texts),
                str(tiny),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in (0, 1)
    ]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    assert "served 0" not in logs[1]  # rank 1 generated its share
    two = [json.loads(x) for x in out.read_text().splitlines()]
    key = lambda r: (r["id"], r["sample"])  # noqa: E731
    assert {key(r): r["completion"] for r in two} == {key(r): r["completion"] for r in one}
    assert len(one) == 12 and {r["sample"] for r in one} == {0, 1}
    by = {key(r): r["completion"] for r in one}
    assert all(by[(i, 0)] and by[(i, 0)] != by[(i, 1)] for i, _ in by), by  # a prompt's two replies: two draws


def test_greedy_replies_equal_plain_generate_on_each_prompt_alone(embedded_model, shared):
    """What every number stands on: mlft's hf backend (length-sorted batches, the shared chat prefix computed once,
    its own processors) gives the same greedy replies as plain transformers `generate` on each prompt alone, on
    LCB prompts of mixed length and language."""
    from mlft.benchmarks.lcb.data import load_prompts, stratified_sample
    from mlft.generation.prompting import Prompting, build_input

    model, tok = embedded_model
    prompts = stratified_sample(
        load_prompts(["monolingual", "crosslingual"], ["okapi"], None, path=shared / "lcb" / "test_sets.zip"), 1, 0
    )[:14]
    assert len({p.language for p in prompts}) >= 10
    decoding = Decoding(max_new_tokens=20, temperature=0.0)
    reqs = [Request(p.id, **build_input(Prompting(), p.prompt, p.task, p.language)) for p in prompts]
    mine = {r.id: r.completion for r in HFBackend(model, tok, batch_size=8).generate(reqs, decoding)}
    for r in reqs:
        ids = tok.apply_chat_template(r.messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)[
            "input_ids"
        ]
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=20,
                do_sample=False,
                pad_token_id=tok.pad_token_id or tok.eos_token_id,
            )
        plain = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        assert mine[r.id] == plain, r.id


def test_greedy_or_beam_decoding_gives_one_reply_per_prompt_whatever_samples_says():
    from mlft.evals.lcb import replies_per_prompt
    from mlft.evals.lcb_options import LcbOptions

    o = LcbOptions(samples=4)
    assert replies_per_prompt(o, Decoding()) == 4
    assert replies_per_prompt(o, Decoding(temperature=0.0)) == 1
    assert replies_per_prompt(o, Decoding(temperature=0.0, num_beams=3)) == 1

"""The learned Language Confusion Gate (`learned_gate`, `mlft build gate`).

Fast: the processor masks only when needed (synthetic gate and logits: an allowed top-1 is left untouched, a
disallowed one is masked, nothing before the reply's first letter, nothing when the reply is already in that
family, nothing when no allowed token is near the top, nothing at threshold 0); the candidate sets; token families;
the hook reads the lm_head's input; self-distillation labels are the norm-adjusted candidates' families; a trained
gate reloads bit-identical with its provenance; bad options and files are refused, and so are the vllm and openai
backends. Slow (the embedded model): threshold 0 reproduces base completions exactly, a trained gate fires.
"""

import json

import pytest
import torch

from mlft.errors import ConfigError
from mlft.generation.backends import check_interventions
from mlft.generation.interventions import build_interventions
from mlft.generation.interventions.learned_gate import LearnedGateOptions, LearnedGateProcessor, _Capture
from mlft.generation.interventions.learned_gate_training import (
    FAMILIES,
    Gate,
    candidate_families,
    distill,
    family_of,
    family_shares,
    gate_net,
    load_gate,
    save_gate,
    train_gate,
)
from mlft.generation.requests import Request
from mlft.io.download import file_digest

F = {f: i for i, f in enumerate(FAMILIES)}
# token ids 0..9: families
VOCAB = torch.tensor(
    [
        F["latin"],
        F["latin"],
        F["cj"],
        F["cj"],
        F["symbol"],
        F["cyrillic"],
        F["fragment"],
        F["latin"],
        F["other"],
        F["symbol"],
    ]
)


class FixedGate:
    """A gate whose probabilities are given (one row per batch row)."""

    def __init__(self, probs):
        self.probs, self.families = torch.tensor(probs), VOCAB

    def predict(self, states):
        return self.probs[: len(states)]


def _probs(**allowed):
    p = [0.05] * len(FAMILIES)
    for f, v in allowed.items():
        p[F[f]] = v
    return p


def _processor(probs, **opts):
    cap = _Capture()
    cap.value = torch.zeros(len(probs), 4)
    return LearnedGateProcessor(FixedGate(probs), LearnedGateOptions(gate="x", **opts), cap)


def _logits(order):
    """Logits giving the tokens in `order` descending scores (the rest far below)."""
    out = torch.full((len(VOCAB),), -10.0)
    for rank, tok in enumerate(order):
        out[tok] = 5.0 - rank
    return out


def test_masks_only_when_needed():
    latin_only = _probs(latin=0.9)
    prompt = [4, 4, 4]
    rows = [  # (tokens generated so far, logits)
        ([0], _logits([1, 2, 7])),  # 0: top-1 latin (allowed), a cj token second
        ([0], _logits([2, 1, 3])),  # 1: top-1 cj (disallowed), latin second -> masked
        ([4], _logits([2, 1, 3])),  # 2: no letter generated yet -> never gated
        ([0, 3], _logits([2, 1, 3])),  # 3: the reply's last letter is cj -> cj allowed
        ([0], _logits([2, 3, 5, 1])),  # 4: no allowed (latin) token within the top alternative_k=2
    ]
    ids = torch.tensor([prompt + g + [4] * (2 - len(g)) for g, _ in rows])
    scores = torch.stack([s for _, s in rows])
    for needed in ("top1", "candidates"):  # candidates at T=1, p=0.95: the cj token of row 0 may be drawn
        proc = _processor([latin_only] * len(rows), needed=needed, alternative_k=2, temperature=1.0, top_p=0.95)
        proc.prompt_width = len(prompt)  # the first call's width is the prompt's
        out = proc(ids, scores.clone())
        cj_cyr = torch.tensor([2, 3, 5])
        assert torch.equal(out[1, cj_cyr], torch.full((3,), float("-inf")))  # top-1 disallowed: masked
        keep = torch.tensor([0, 1, 4, 6, 7, 8, 9])
        assert torch.equal(out[1, keep], scores[1, keep])  # the other families untouched
        assert int(out[1].argmax()) == 1  # the latin token now wins
        for r in (2, 3, 4):
            assert torch.equal(out[r], scores[r]), (needed, r)  # not needed: untouched
        if needed == "top1":  # top-1 allowed: the distribution is left alone
            assert torch.equal(out[0], scores[0])
        else:  # the paper: a disallowed family among the sampling candidates is masked
            assert out[0, 2] == float("-inf") and torch.equal(out[0, keep], scores[0, keep])
        assert proc.stats(1) == {"learned_gate_steps": 1, "learned_gate_top1": 1}
        assert proc.stats(0) == {"learned_gate_steps": int(needed == "candidates"), "learned_gate_top1": 0}
        assert proc.stats(2)["learned_gate_steps"] == 0
    sharp = _processor([latin_only] * len(rows), alternative_k=2)  # T=0.3, p=0.75: row 0 draws only its top-1
    sharp.prompt_width = len(prompt)
    out = sharp(ids, scores.clone())
    assert torch.equal(out[0], scores[0]) and out[1, 2] == float("-inf")
    off = _processor([latin_only] * len(rows), threshold=0.0)  # every family allowed: never masks
    off.prompt_width = len(prompt)
    assert torch.equal(off(ids, scores.clone()), scores) and off.stats(1)["learned_gate_steps"] == 0


def test_shortcuts_give_the_plain_rule():
    """The processor skips work (no letter yet, the top token alone fills the nucleus, nothing masked among the
    candidates): on random gates and logits it masks exactly where the plain rule, computed for every row, does."""
    gen = torch.Generator().manual_seed(3)
    for temperature, top_p in ((0.3, 0.75), (1.0, 0.95), (2.0, 0.99)):
        rows = 64
        probs = torch.rand(rows, len(FAMILIES), generator=gen)
        scores = torch.randn(rows, len(VOCAB), generator=gen) * 3
        gen_ids = torch.randint(0, len(VOCAB), (rows, 3), generator=gen)
        ids = torch.cat([torch.full((rows, 2), 4), gen_ids], 1)
        proc = _processor(probs.tolist(), temperature=temperature, top_p=top_p, alternative_k=3)
        proc.prompt_width = 2
        out = proc(ids, scores.clone())
        allowed, pred, may_gate = proc.allowed(probs, ids)  # the plain rule, every row
        to_mask = ~allowed & proc.maskable
        cand = candidate_families(scores / temperature, VOCAB, len(VOCAB), top_p)
        near = candidate_families(scores, VOCAB, 3, 1.0) | cand
        apply = (cand & to_mask).any(-1) & (near & pred).any(-1) & may_gate
        family_masks = torch.nn.functional.one_hot(VOCAB, len(FAMILIES)).T.float()  # [families, vocab]
        want = scores.masked_fill((to_mask.float() @ family_masks).bool() & apply[:, None], float("-inf"))
        assert torch.equal(out, want) and 0 < int(apply.sum()) < rows
        assert proc.fired.tolist() == apply.long().tolist()


def test_first_call_sets_prompt_width_and_argmax_family_always_allowed():
    proc = _processor([_probs(cj=0.3)])  # nothing >= 0.5: the most likely family (cj) is still allowed
    ids = torch.tensor([[4, 0]])
    out = proc(ids, _logits([2, 1])[None])
    assert proc.prompt_width == 2 and torch.equal(out, _logits([2, 1])[None])  # no reply token yet
    ids = torch.tensor([[4, 0, 3]])  # reply so far: a cj token
    out = proc(ids, _logits([5, 2])[None])  # cyrillic top-1, cj (allowed) second -> cyrillic masked
    assert out[0, 5] == float("-inf") and int(out[0].argmax()) == 2 and proc.stats(0)["learned_gate_top1"] == 1


def test_reply_prefix_counts_as_reply():
    """Line resampling continues a reply: its prefix (the prompt's last tokens) is the reply for `keep_last`."""
    ids, scores = torch.tensor([[4, 0, 3]]), _logits([1, 2])[None]  # prompt: symbol, latin; reply prefix: cj
    fresh = _processor([_probs(cj=0.9)])  # no prefix: no letter in the reply yet -> nothing gated
    assert torch.equal(fresh(ids, scores.clone()), scores)
    cont = _processor([_probs(cj=0.9)], needed="top1")
    cont.capture.prefix_tokens = [1]
    out = cont(ids, scores.clone())  # the reply so far is cj: the latin top-1 is masked, cj wins
    assert out[0, 1] == float("-inf") and int(out[0].argmax()) == 2
    before = _processor([_probs(cj=0.9)], needed="top1")
    before.capture.prefix_tokens = [1]  # reply prefix: a symbol; the cj letter before it is the prompt's
    ids2 = torch.tensor([[3, 4, 4]])
    assert torch.equal(before(ids2, scores.clone()), scores) and before.stats(0)["learned_gate_steps"] == 0


def test_candidate_families_and_token_families():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05, 0, 0, 0, 0, 0, 0]]) + 1e-12)
    # top_p 0.75: 0.5, then 0.3 (cumulative before it 0.5 < 0.75), then stop (0.8 >= 0.75)
    assert candidate_families(logits, VOCAB, 20, 0.75)[0].nonzero().flatten().tolist() == [F["latin"]]
    got = candidate_families(logits, VOCAB, 20, 0.9)[0]
    assert set(got.nonzero().flatten().tolist()) == {F["latin"], F["cj"]}
    assert candidate_families(logits, VOCAB, 1, 1.0)[0].nonzero().flatten().tolist() == [F["latin"]]
    assert family_of(frozenset({"latin"})) == "latin" and family_of(frozenset({"kana", "latin"})) == "cj"
    assert family_of(frozenset()) == "symbol" and family_of(frozenset({"special"})) == "symbol"
    assert family_of(frozenset({"fragment"})) == "fragment" and family_of(frozenset({"greek"})) == "other"
    assert family_of(frozenset({"greek", "latin"})) == "latin"
    assert family_shares(VOCAB)["latin"] == 30.0


def test_candidate_families_equal_the_full_sort():
    """The nucleus is looked up in the top 64 first: the same families as sorting the whole vocabulary."""
    fam = torch.randint(0, len(FAMILIES), (3000,), generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    for scale in (0.05, 1.0, 6.0):  # flat (the nucleus goes far beyond 64 tokens) to peaked
        logits = torch.randn(8, 3000, generator=gen) * scale
        for k, p in ((5, 1.0), (20, 0.95), (3000, 0.75), (3000, 0.999), (200, 0.5)):
            top, idx = logits.topk(k)
            probs = (top - torch.logsumexp(logits, -1, keepdim=True)).exp()
            keep = (probs.cumsum(-1) - probs) < p
            keep[:, 0] = True
            want = (torch.nn.functional.one_hot(fam[idx], len(FAMILIES)).bool() & keep[..., None]).any(1)
            assert torch.equal(candidate_families(logits, fam, k, p), want), (scale, k, p)


# --- distillation, training and files on a tiny random Llama ------------------------------------------------


def tiny_llama(hidden=32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
    )
    return LlamaForCausalLM(cfg).eval()


class CharTokenizer:
    pad_token_id, eos_token_id, chat_template = 0, 1, None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [2 + ord(c) % 95 for c in text]}

    def __len__(self):
        return 97


ROWS = [
    {"id": str(i), "language": "xx", "text": t}
    for i, t in enumerate(
        ["Guten Morgen", "How are you today?", "Bonjour à tous", "abc", "Привет мир", "日本語のテキスト"]
    )
]
FAMS = torch.randint(0, len(FAMILIES), (97,), generator=torch.Generator().manual_seed(1))


def test_distill_labels_are_the_norm_adjusted_candidates():
    model, tok = tiny_llama(), CharTokenizer()
    data = distill(model, tok, ROWS, FAMS, top_k=5, top_p=0.9, batch_size=4, progress=False)
    lengths = [len(tok(r["text"])["input_ids"]) for r in ROWS]
    assert data.states.shape == (sum(lengths), 32) and data.labels.shape == (sum(lengths), len(FAMILIES))
    assert sorted(torch.bincount(data.rows).tolist()) == sorted(lengths)  # every real position, no padding
    # reference for one row, run alone: last hidden state and labels of its positions
    row = 1
    ids = torch.tensor([tok(ROWS[row]["text"])["input_ids"]])
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    norms = model.lm_head.weight.norm(dim=-1)
    want = candidate_families(out.logits[0] / norms, FAMS, 5, 0.9)
    mine = data.rows == row
    assert torch.allclose(data.states[mine], out.hidden_states[-1][0], atol=1e-5)  # the lm_head's input
    assert torch.equal(data.labels[mine], want)
    raw = distill(model, tok, ROWS[:2], FAMS, top_k=5, top_p=0.9, norm_adjust=False, progress=False)
    assert raw.labels.shape[0] == sum(lengths[:2])


def test_trained_gate_reloads_bit_identical_with_provenance(tmp_path):
    model, tok = tiny_llama(), CharTokenizer()
    data = distill(model, tok, ROWS, FAMS, top_k=5, progress=False)
    gate = train_gate(data, FAMS, model="tiny", top_k=5, epochs=3, batch_size=16, progress=False)
    again_trained = train_gate(data, FAMS, model="tiny", top_k=5, epochs=3, batch_size=16, progress=False)
    assert torch.equal(again_trained.net[0].weight, gate.net[0].weight)  # deterministic for a seed
    assert len(gate.history) == 3 and gate.history[-1] < gate.history[0]  # it learns
    path = save_gate(gate, tmp_path / "g.safetensors", provenance={"sources": [{"path": "x"}], "rows": 6})
    back = load_gate(str(path))
    assert torch.equal(back.net[0].weight, gate.net[0].weight) and torch.equal(back.net[2].weight, gate.net[2].weight)
    assert torch.equal(back.families, FAMS) and (back.model, back.top_k, back.top_p) == ("tiny", 5, 0.95)
    assert torch.equal(back.predict(data.states), gate.predict(data.states))
    prov = json.loads((tmp_path / "g.safetensors.provenance.json").read_text())
    assert prov["sha256"] == file_digest(path) and prov["sources"] == [{"path": "x"}] and prov["rows"] == 6
    assert prov["families"] == list(FAMILIES) and prov["hidden_size"] == 32 and prov["train_loss"] == gate.history
    assert set(prov["family_shares"]) == set(FAMILIES) and "versions" in prov and "git_commit" in prov
    # the intervention loads it; options and files are checked before any model loads
    [iv] = build_interventions([{"name": "learned_gate", "gate": str(path), "threshold": 0.3}], "x")
    assert iv.options.threshold == 0.3 and iv.prefix_safe
    for spec, msg in (
        ({"gate": str(path), "threshold": 1.5}, "threshold"),
        ({}, "mlft build gate"),
        ({"gate": str(tmp_path / "none.safetensors")}, "not found"),
        ({"gate": str(path), "top_p": 0}, "top_p"),
        ({"gate": str(path), "needed": "x"}, "needed"),
    ):
        with pytest.raises(ConfigError, match=msg):
            build_interventions([{"name": "learned_gate", **spec}], "x")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ConfigError, match="not a safetensors gate file"):
        build_interventions([{"name": "learned_gate", "gate": str(bad)}], "x")
    with pytest.raises(ConfigError, match="hidden size 32"):
        iv.logits_processors(tok, ["de"], tiny_llama(hidden=64))
    for backend in ("vllm", "openai"):  # it reads the model's hidden state: refused before any generation
        with pytest.raises(ConfigError, match=f"{backend} backend cannot apply"):
            check_interventions(backend, [iv], "--intervention")


def test_gate_on_a_live_model_reads_the_last_hidden_state(tmp_path):
    """On the hf backend with a tiny model: the hook hands the processor the lm_head's input of the last position,
    and with threshold 0 the completions equal the base ones."""
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    model = tiny_llama()
    gate = Gate(gate_net(32), FAMS, "tiny")
    path = save_gate(gate, tmp_path / "g.safetensors")
    [iv] = build_interventions([{"name": "learned_gate", "gate": str(path), "threshold": 0.0}], "x")
    [proc] = iv.logits_processors(CharTokenizer(), ["de"], model)
    seen = []
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad(), iv.hooks_batch(model, []):
        out = model(input_ids=ids, output_hidden_states=True)
        seen.append(iv._capture.value.clone())
        proc(ids, out.logits[:, -1])
    assert torch.allclose(seen[0], out.hidden_states[-1][:, -1], atol=1e-6)
    assert iv._capture.value is None  # released on exit
    assert model.lm_head._forward_pre_hooks == {}

    class Tok(CharTokenizer):
        def decode(self, ids, skip_special_tokens=True):
            return "".join(chr(i) for i in ids)

    backend = HFBackend(model, Tok(), batch_size=2, prefix_cache=False)
    reqs = [Request("a", text="hello", language="de"), Request("b", text="bonjour!", language="fr")]
    dec = Decoding(max_new_tokens=6)
    base = {r.id: r.completion for r in backend.generate(reqs, dec)}
    gated = list(backend.generate(reqs, dec, [iv]))
    assert {r.id: r.completion for r in gated} == base
    assert all(r.extra["intervention_stats"]["learned_gate_steps"] == 0 for r in gated)


def test_cli_refuses_bad_input(tmp_path, capsys):
    from mlft.cli import main

    assert main(["build", "gate", "--out", str(tmp_path / "g.bin")]) == ConfigError.exit_code
    assert "--out: a .safetensors file" in capsys.readouterr().err
    assert main(["build", "gate", "--out", str(tmp_path / "g.safetensors"), "--from", "nope.csv"]) != 0
    assert "not `seed`, `polyglot` or a file" in capsys.readouterr().err
    assert main(["build", "gate", "--out", str(tmp_path / "g.safetensors"), "--languages", "xx"]) != 0
    assert "--languages: xx not in the seed data" in capsys.readouterr().err


# --- the embedded model -------------------------------------------------------------------------------------

TEXTS = [
    ("Write one sentence about cats. Respond in French.", "fr"),
    ("What is the capital of Japan? Please answer in Japanese.", "ja"),
    ("Расскажи о Москве.", "ru"),
    ("Explain what a tree is. Reply in Chinese.", "zh"),
]


@pytest.fixture(scope="module")
def seed_gate(embedded_model, tmp_path_factory):
    from mlft.generation.interventions.learned_gate_training import seed_rows, token_families

    model, tok = embedded_model
    families = token_families(tok, model.get_output_embeddings().weight.shape[0])
    rows = seed_rows(languages=["en", "ja", "ru", "zh"], items=3)
    data = distill(model, tok, rows, families, progress=False)
    gate = train_gate(data, families, model="smollm2", epochs=3, progress=False)
    return str(save_gate(gate, tmp_path_factory.mktemp("g") / "gate.safetensors")), families


@pytest.mark.slow
def test_embedded_families_cover_the_vocabulary(seed_gate):
    _, families = seed_gate
    shares = family_shares(families)
    assert len(families) == 49152 and abs(sum(shares.values()) - 100) < 0.01
    assert shares["latin"] > 95 and shares["cj"] > 0.3 and shares["cyrillic"] > 0.1 and shares["hangul"] > 0


@pytest.mark.slow
def test_threshold_zero_reproduces_base_and_a_gate_fires(embedded_model, seed_gate):
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.decoding import Decoding

    model, tok = embedded_model
    path, _ = seed_gate
    reqs = [
        Request(str(i), messages=[{"role": "user", "content": t}], language=lang) for i, (t, lang) in enumerate(TEXTS)
    ]
    backend = HFBackend(model, tok, batch_size=4)
    dec = Decoding(max_new_tokens=16)  # paper sampling, seeded

    def run(ivs=()):
        return {r.id: r for r in backend.generate(reqs, dec, ivs)}

    base = run()
    off = run(build_interventions([{"name": "learned_gate", "gate": path, "threshold": 0.0}], "x"))
    assert {k: (r.completion, r.completion_tokens) for k, r in off.items()} == {
        k: (r.completion, r.completion_tokens) for k, r in base.items()
    }
    assert all(r.extra["nll"] == base[k].extra["nll"] for k, r in off.items())
    on = run(build_interventions([{"name": "learned_gate", "gate": path, "threshold": 0.5}], "x"))
    steps = [r.extra["intervention_stats"]["learned_gate_steps"] for r in on.values()]
    assert all(0 <= s <= r.completion_tokens for s, r in zip(steps, on.values()))
    changed = [k for k in on if on[k].completion != base[k].completion]
    assert all(on[k].extra["intervention_stats"]["learned_gate_steps"] > 0 for k in changed)  # only where it fired

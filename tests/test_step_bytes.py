"""The batch budget's per-step vocabulary-sized bytes are at least what the processors hold:
the peak of live tensor bytes created inside one call (the sampler on the accelerator's sync-free path, the step
log, each logits-processor intervention), measured on a CPU per row and vocabulary entry, against the declared
constants (`mlft.generation.batching`, `Intervention.step_bytes_per_row`)."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from mlft.generation import batching, sync_count
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import build_interventions
from tests.device_helpers import intervention_specs, requests, tiny_model

pytestmark = pytest.mark.slow
ROWS = 8


class PeakBytes(TorchDispatchMode):
    """The peak of live bytes of the tensors the ops inside the block create (views of a seen storage not
    counted twice; a tensor's bytes count until it is freed)."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if key in self._seen or size == 0:
                continue
            self._seen.add(key)
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(t, self._free, key, size)
        return out

    def _free(self, key, size):
        self.live -= size
        self._seen.discard(key)


def per_vocab(proc, scores, ids) -> float:
    proc(ids, scores)  # first call: tables built once per batch are not per step
    with PeakBytes() as p:
        proc(ids, scores)
    return p.peak / scores.shape[0] / scores.shape[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model, tok = tiny_model()
    return model, tok, intervention_specs(model, tok, tmp_path_factory.mktemp("files"))


@pytest.fixture
def sync_free(monkeypatch):
    monkeypatch.setattr(sync_count, "SYNC_FREE", True)


def test_the_sampler_and_step_log_hold_no_more_than_declared(tiny, sync_free, capsys):
    from mlft.generation.processors import NucleusSampler, StepLog

    model, tok, _ = tiny
    vocab = model.config.vocab_size
    torch.manual_seed(0)
    scores, ids = torch.randn(ROWS, vocab) * 3, torch.zeros(ROWS, 4, dtype=torch.long)
    keys = torch.randint(0, 2**31, (ROWS, 2))
    sampler = per_vocab(NucleusSampler(0.3, 0.75, keys=keys), scores, ids)
    log = per_vocab(StepLog(Decoding()), scores, ids)
    stats = per_vocab(StepLog(Decoding(), token_stats=True), scores, ids)
    with capsys.disabled():
        print(
            f"\nbytes per row per vocabulary entry, measured: sampler {sampler:.1f}, step log {log:.1f}, "
            f"with token_stats {stats:.1f}; declared: sampler {batching.SAMPLER_STEP_BYTES}, logits + step log "
            f"{batching.LOGITS_STEP_BYTES}, token_stats + {batching.TOKEN_STATS_STEP_BYTES}"
        )
    assert sampler <= batching.SAMPLER_STEP_BYTES
    assert 4 + log <= batching.LOGITS_STEP_BYTES  # + generate's fp32 copy of the last logits
    assert stats - log <= batching.TOKEN_STATS_STEP_BYTES


@pytest.mark.parametrize(
    "name,variant",
    [
        ("script_gate", {"mode": "needed"}),
        ("script_gate", {"mode": "hard"}),
        ("script_gate", {"mode": "soft"}),
        ("language_prior", {}),
        ("ban_tokens", {}),
        ("contrastive", {}),
        ("learned_gate", {}),
    ],
)
def test_each_processor_intervention_holds_no_more_than_it_declares(tiny, sync_free, name, variant):
    from mlft.generation.interventions.contrastive import PairedRows

    model, tok, specs = tiny
    (iv,) = build_interventions([{**specs[name], **variant}], "test")
    vocab = model.config.vocab_size
    torch.manual_seed(0)
    scores, ids = torch.randn(ROWS, vocab) * 3, torch.zeros(ROWS, 4, dtype=torch.long)
    langs = ["de", "ja", "en", "ru"] * (ROWS // 4)
    if "rows" in iv.applies_via:  # contrastive: half the rows are the contrast rows
        _, weights = iv.contrast_requests(requests(ROWS // 2))
        procs = [iv.paired_processor(weights)]
        chain = PairedRows(procs, ROWS // 2, procs[0])
        got = per_vocab(chain, scores, ids)
    else:
        (proc,) = iv.logits_processors(tok, langs, model)
        with iv.hooks_batch(model, requests(ROWS), None), torch.inference_mode():  # the gate reads the hidden state
            model(input_ids=torch.randint(5, 1000, (ROWS, 6)))
            got = per_vocab(proc, scores, ids)
    declared = iv.step_bytes_per_row(vocab) / vocab
    print(f"{name} {variant}: measured {got:.1f}, declared {declared:.1f} bytes per row per vocabulary entry")
    assert got <= declared

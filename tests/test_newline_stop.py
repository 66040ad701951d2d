"""The newline stop criterion is a boolean lookup table: torch.isin against the thousands of
newline ids of a byte-level vocabulary takes its sort / unique path, a sync per step on a GPU."""

from __future__ import annotations

import pytest
import torch

from tests.device_helpers import tiny_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def test_newline_stop_is_a_lookup_without_isin(tiny, monkeypatch):
    """Before: torch.isin(last, ids) over thousands of newline ids (its sort / unique path: a sync per step)."""
    from mlft.generation import sync_count
    from mlft.generation.backends.hf import HFBackend
    from mlft.generation.processors import NewlineStop

    model, tok = tiny
    ids = sorted(HFBackend(model, tok)._newline_ids())
    assert len(ids) > 100
    stop = NewlineStop(ids, [True, True, False, True, True])
    vocab = model.config.vocab_size
    last = torch.tensor([ids[0], 5, ids[-1], ids[len(ids) // 2], vocab - 1])
    called = []
    monkeypatch.setattr(torch, "isin", lambda *a, **k: called.append(1) or pytest.fail("isin"))
    with sync_count.SyncCounter() as counter:
        flags = stop(torch.cat([torch.zeros(5, 3, dtype=torch.long), last[:, None]], 1), None)
    assert flags.tolist() == [True, False, False, True, (vocab - 1) in ids] and not called
    assert counter.total == 0, counter.syncs
    assert counter.ops <= 8
    monkeypatch.undo()
    rand = torch.randint(0, vocab, (4096,))  # the same flags as the isin it replaces
    assert torch.equal(
        NewlineStop(ids, [True] * 4096)(rand[:, None], None), torch.isin(rand, torch.tensor(ids))
    )  # select, clamp, index_select, and, or (+ views)


def test_padding_rows_are_done_at_once():
    from mlft.generation.processors import NewlineStop

    stop = NewlineStop([7], [True, False, True], done=[False, False, True])
    assert stop(torch.tensor([[7], [7], [3]]), None).tolist() == [True, False, True]

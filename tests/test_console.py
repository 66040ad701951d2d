"""The console drops known third-party noise at its source, message by message, and only that."""

import io
import logging

from mlft.console import quiet_bitsandbytes

BNB = "bitsandbytes.autograd._functions"


def _emitted(monkeypatch, verbose: str) -> str:
    log = logging.getLogger(BNB)
    monkeypatch.setattr(log, "filters", [])
    monkeypatch.setenv("MLFT_VERBOSE", verbose)
    quiet_bitsandbytes()
    quiet_bitsandbytes()  # idempotent: one filter
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    log.addHandler(handler)
    try:
        log.warning("MatMul8bitLt: inputs will be cast from %s to float16 during quantization", "torch.float32")
        log.warning("a new bitsandbytes message")
    finally:
        log.removeHandler(handler)
    assert len(log.filters) == (0 if verbose == "1" else 1)
    return out.getvalue()


def test_the_int8_layers_notice_is_dropped_and_nothing_else(monkeypatch):
    assert _emitted(monkeypatch, "") == "a new bitsandbytes message\n"


def test_verbose_keeps_the_notice(monkeypatch):
    assert "MatMul8bitLt" in _emitted(monkeypatch, "1")

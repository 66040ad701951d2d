"""docs/api.md is the API reference rendered from the code (mlft/api/reference.py: every public name's signature
and docstring), so it cannot drift: a changed docstring or signature fails here until the page is regenerated
(`python -m mlft.api.reference > docs/api.md`). The docstrings' runnable examples run too."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import mlft
from mlft.api import reference

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"


def test_the_reference_page_is_rendered_from_the_docstrings():
    text = PAGE.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# Python API reference" and "A reference page" in text.splitlines()[2]
    assert text == reference.render(), "docs/api.md is stale: python -m mlft.api.reference > docs/api.md"


def test_a_changed_docstring_makes_the_page_stale(monkeypatch):
    monkeypatch.setattr(mlft.ScoreResult.lpr, "__doc__", "Something else.")
    assert reference.render() != PAGE.read_text(encoding="utf-8")


def test_every_public_name_is_on_the_page_and_every_verb_has_an_example():
    text = PAGE.read_text(encoding="utf-8")
    assert all(f"`mlft.{name}`" in text for name in mlft.__all__ if name != "__version__")
    for name in ("score", "evaluate", "train", "compare", "load_run", "ScoreResult", "Run", "Comparison"):
        assert ">>> " in (getattr(mlft, name).__doc__ or ""), name


@pytest.mark.parametrize("module", ["mlft.api.score"])
def test_the_docstring_examples_run(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0

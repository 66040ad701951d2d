"""`mlft.load_result`: any saved result, as the type it was saved from."""

from __future__ import annotations

from pathlib import Path

from mlft.api.evaluate import EvalResult
from mlft.api.results import Comparison, Result, ScoreResult, read_saved
from mlft.api.runs import Curves, Run
from mlft.api.tables import MitigationTables
from mlft.errors import DataError


def result_types() -> dict[str, type[Result]]:
    return {c.KIND: c for c in (ScoreResult, EvalResult, Comparison, Run, Curves, MitigationTables)}


def load_result(path: str | Path) -> Result:
    """Any saved result (`Result.save`), as the type it was saved from.

    >>> import mlft
    >>> r = mlft.load_result("scores.json")  # doctest: +SKIP
    """
    kind = read_saved(path)["mlft_result"]
    types = result_types()
    if kind not in types:
        raise DataError(f"{path}: unknown result type {kind!r} (known: {', '.join(types)})")
    return types[kind].load(path)

"""A mix source's rows as the mixer samples them (built by mlft/data/sources.py and mlft/data/parallel_corpus.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Pool:
    """A source's rows: `languages[k]` is row k's LCB code (None: not an LCB language); `example(k)` is
    (row id, normalised example or None when the row is empty/malformed)."""

    name: str
    languages: list[str | None]
    example: Callable[[int], tuple[str, dict | None]]

    def __len__(self) -> int:
        return len(self.languages)

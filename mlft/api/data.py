"""`mlft.ensure_lcb_data`: the LCB files a program needs (the test sets, the word list, the few-shot examples),
found or fetched the way `mlft data lcb` and the demo find them."""

from __future__ import annotations

import os
from pathlib import Path

from mlft import paths
from mlft.benchmarks.lcb.fetch import ENV_VAR, FEW_SHOT_FILE, TEST_SETS, TEST_SETS_FOLDER, WORDS, lcb_cache, require
from mlft.generation.prompting import locate_examples


def ensure_lcb_data(what: str = "this program", few_shot: bool = False) -> dict[str, Path]:
    """{name: local path} of the LCB test sets and word list (WPR), with `few_shot` the few-shot examples too;
    from $MLFT_LCB_DATA, the cache (`mlft lcb --from PATH` imports them there), ../shared/lcb beside a checkout
    that has it (the developers' offline copy; $MLFT_LCB_DATA is set to it for this process), else a
    checksum-checked download into the cache. Raises MissingDataError (naming `mlft lcb --from PATH` and
    MLFT_LCB_DATA, and `what` needs them) when none of these has them.

    >>> import mlft
    >>> files = mlft.ensure_lcb_data("my experiment")  # doctest: +SKIP
    >>> sorted(files)  # doctest: +SKIP
    ['test_sets.zip', 'words']
    """

    needs = (TEST_SETS, WORDS)
    cached = all((lcb_cache() / r.name).is_file() for r in needs) or (lcb_cache() / TEST_SETS_FOLDER).is_dir()
    shared = paths.shared_dir()
    if (
        paths.lcb_data_path() is None
        and not cached
        and shared is not None
        and (shared / "lcb" / TEST_SETS.name).is_file()
    ):
        os.environ[ENV_VAR] = str(shared / "lcb")
    extra = {FEW_SHOT_FILE: locate_examples} if few_shot else {}
    return require(what, needs, extra)

"""Obtain LCB files like a user would: download into the cache with a checksum, or import a local copy.

Lookup order for each file: an explicit path (`--from`), the environment variable `MLFT_LCB_DATA`
(a folder holding the files, or the zip itself), the cache, then a download from the official repository.
"""

from __future__ import annotations

from pathlib import Path

from mlft.io.download import RemoteFile, download, file_digest
from mlft.io.download import locate as _locate
from mlft.paths import cache_dir

__all__ = ["RemoteFile", "download", "file_digest", "locate", "REPO_RAW", "TEST_SETS", "WORDS", "FEW_SHOT",
           "ENV_VAR"]

REPO_RAW = "https://raw.githubusercontent.com/for-ai/language-confusion/0cfdbb4a64502648938c456b2fa9689968f22298"

TEST_SETS = RemoteFile("test_sets.zip", f"{REPO_RAW}/test_sets.zip",
                       "3425337489fa65ff15d977e981e9748c86ce8e88ef0f4457ecdb4a65d8702712")
# The English word list the official scorer uses for WPR (its compute_metrics.py names this gist).
WORDS = RemoteFile("words", "https://gist.githubusercontent.com/wchargin/8927565/raw/"
                   "d9783627c731268fb2935a731a618aa8e95cf465/words",
                   "1ec8230beef2a7c955742b089fc3cea2833866cf5482bf018d7c4124eef104bd")
# The paper's few-shot demonstrations: dict literals in the official few_shot_prompting.py (read as data).
FEW_SHOT = RemoteFile("few_shot_prompting.py", f"{REPO_RAW}/few_shot_prompting.py",
                      "993439da40fa468887b6fe95bcab1cefc8aec3538ba990629f032648c65b44d7")
ENV_VAR = "MLFT_LCB_DATA"
OFFLINE_HINT = f"offline, import a local copy with --from PATH or set {ENV_VAR}=PATH"


def locate(remote: RemoteFile, explicit: str | Path | None = None, verify: bool = True) -> Path:
    """Path of a local, verified copy of `remote`: `explicit` (a file, or a folder holding it), else
    `$MLFT_LCB_DATA`, else the cache, else a download into the cache."""
    return _locate(remote, explicit, verify, env_var=ENV_VAR, cache=cache_dir() / "lcb", offline_hint=OFFLINE_HINT)

"""Where mlft keeps downloads and converted models, and where the read-only shared data may live."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$MLFT_CACHE`, else `$XDG_CACHE_HOME/mlft`, else `~/.cache/mlft`."""
    if os.environ.get("MLFT_CACHE"):
        root = Path(os.environ["MLFT_CACHE"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mlft"
    root.mkdir(parents=True, exist_ok=True)
    return root


def project_root() -> Path:
    """The checkout holding recipes/, eval/, data_mixes/ (mlft/ sits inside it)."""
    return Path(__file__).resolve().parent.parent


def shared_dir() -> Path | None:
    """`$MLFT_SHARED`, else `../shared` beside the checkout, if it exists (offline data for tests and demos)."""
    env = os.environ.get("MLFT_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(project_root().parent / "shared")
    for c in candidates:
        if c.is_dir():
            return c
    return None

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


def data_dir(name: str, env_var: str, explicit: str | Path | None = None, has_data=None) -> Path:
    """Folder of an evaluation's data: `explicit`, else `$env_var`, else the cache folder `name` (after a
    fetch), else `../shared/name` when the cache holds no data yet (`has_data(folder)` decides)."""
    if explicit:
        return Path(explicit)
    if os.environ.get(env_var):
        return Path(os.environ[env_var])
    cached = cache_dir() / name
    shared = shared_dir()
    has_data = has_data or (lambda folder: folder.is_dir() and any(folder.iterdir()))
    if not has_data(cached) and shared is not None and (shared / name).is_dir():
        return shared / name
    return cached

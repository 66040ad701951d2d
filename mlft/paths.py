"""Where mlft keeps downloads and converted models, and where the read-only shared data may live."""

from __future__ import annotations

import os
from pathlib import Path

LCB_DATA_ENV = "MLFT_LCB_DATA"  # a folder holding LCB's files, read by `lcb_data_path` alone


def cache_dir() -> Path:
    """`$MLFT_CACHE`, else `$XDG_CACHE_HOME/mlft`, else `~/.cache/mlft`."""
    if os.environ.get("MLFT_CACHE"):
        root = Path(os.environ["MLFT_CACHE"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mlft"
    root.mkdir(parents=True, exist_ok=True)
    return root


def project_root() -> Path:
    """The folder holding the `mlft` package: the checkout (with recipes/, eval/, ...) or site-packages."""
    return Path(__file__).resolve().parent.parent


SHIPPED = ("eval", "recipes", "data_mixes", "configs")  # top-level folders that are also inside the wheel


def shipped_root() -> Path:
    """Where the shipped suites, recipes, mixes and configs are: `mlft/shipped/` inside an installed wheel,
    else the checkout's top level (an editable install, or running from the source tree)."""
    packaged = Path(__file__).resolve().parent / "shipped"
    return packaged if packaged.is_dir() else project_root()


def resource_dirs(folder: str) -> list[Path]:
    """Existing `folder`s in lookup order: the current directory, then the shipped copy."""
    out = []
    for root in (Path.cwd(), shipped_root()):
        cand = root / folder
        if cand.is_dir() and all(cand.resolve() != o.resolve() for o in out):
            out.append(cand)
    return out


def find_resource(folder: str, name: str) -> Path | None:
    """`folder/name` under the current directory, else in the shipped copy; None if neither has it."""
    for d in resource_dirs(folder):
        if (d / name).is_file():
            return d / name
    return None


def resolve_path(path: str | Path) -> Path:
    """A path as written in a recipe or mix (e.g. `data_mixes/cpu/english_sft.yaml`): absolute, else relative
    to the current directory, else to the shipped copy of mlft's files, else to the mlft source tree (for
    `mlft/...` paths such as the training chat template). Returns the first that exists (else `path`)."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    for root in (shipped_root(), project_root()):
        if (root / p).exists():
            return root / p
    return p


def shared_dir() -> Path | None:
    """`$MLFT_SHARED`, else `../shared` beside the checkout, if it exists (offline data for tests and demos)."""
    env = os.environ.get("MLFT_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(project_root().parent / "shared")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def lcb_data_path() -> Path | None:
    """`$MLFT_LCB_DATA` as a path, or None when unset or empty: the folder holding LCB's files as the authors
    publish them (test_sets.zip or its extracted test_sets/, words, few_shot_examples.json, outputs/*.csv,
    lid.176.bin), or one such file. The one reader of the variable: every lookup of LCB's files (the test sets,
    the word list, the few-shot examples, the released outputs, lid.176.bin) asks here, so what the variable
    means is decided once (tests/test_lcb_data_env.py holds it)."""
    value = os.environ.get(LCB_DATA_ENV)
    return Path(value) if value else None


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

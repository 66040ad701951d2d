"""Load a measurement script (measurements/*.py: plain scripts, not a package) as a module, for the tests that check
its numbers against the committed data."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """measurements/NAME.py as a module named NAME."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "measurements" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

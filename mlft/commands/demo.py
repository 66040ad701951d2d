"""`mlft demo`: the front door of the paper's experiment, the script `recipes/demo.py` shipped with mlft.

The experiment lives beside the recipes it runs (recipes/cpu/*.yaml), as a plain script one can read, copy and
edit (`python recipes/demo.py --out runs/mine`); `mlft demo [flags]` runs the shipped copy with the same flags.
The script imports `mlft`'s public API (its names load their modules when used): building `mlft`'s parser never runs
it, only reads its one-line HELP from the source; its flags and description are added when `mlft demo` itself is
parsed or asked for help.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from mlft.errors import ConfigError
from mlft.paths import shipped_root

SCRIPT = "recipes/demo.py"
MODULE = "mlft_demo_experiment"  # its name in sys.modules (loaded once per process)


def script_path() -> Path:
    """The shipped experiment: recipes/demo.py in a checkout, mlft/shipped/recipes/demo.py in an installed mlft."""
    return shipped_root() / SCRIPT


def experiment() -> ModuleType:
    """The experiment script as a module (its flags, runs, table code and `run`), loaded once."""
    loaded = sys.modules.get(MODULE)
    if loaded is not None:
        return loaded
    path = script_path()
    if not path.is_file():
        raise ConfigError(f"the demo's script is missing: {path} (reinstall mlft)")
    spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module  # before it runs: its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return module


def script_help() -> str:
    """The script's one-line `HELP`, read from its source without running it."""
    try:
        tree = ast.parse(script_path().read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return "the paper's experiment (its script is missing or unreadable: reinstall mlft)"
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HELP" for t in node.targets):
            return ast.literal_eval(node.value)
    return "the paper's experiment"


def _arguments(p) -> None:
    """The script's flags and description: the script runs here, when `mlft demo` is used."""
    demo = experiment()
    p.description = demo.__doc__
    demo.add_arguments(p)


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help=script_help(), later=_arguments)
    p.set_defaults(func=run)


def run(args) -> int:
    return experiment().run(args)

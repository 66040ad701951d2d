"""recipes/demo.py, the project's own experiment, runs on the public API only: it imports `mlft` and names from
it (`from mlft import X`, each one of `mlft.__all__`), stdlib and third-party modules, and no internal module
(`mlft.<anything>`); every `mlft.X` it uses is public too."""

from __future__ import annotations

import ast
from pathlib import Path

import mlft

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipes" / "demo.py"


def internal_uses(source: str) -> list[str]:
    """Each import of an internal mlft module, each `from mlft import X` and `mlft.X` whose X is not public."""
    public = set(mlft.__all__)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("mlft.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mlft":
            if node.module != "mlft" or node.level:
                found.append(f"from {node.module} import ...")
            else:
                found += [f"from mlft import {a.name}" for a in node.names if a.name not in public]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "mlft":
            if node.attr not in public:
                found.append(f"mlft.{node.attr}")
    return found


def test_the_demo_uses_the_public_api_only():
    assert internal_uses(DEMO.read_text(encoding="utf-8")) == []


def test_the_check_finds_internal_imports_and_names():
    planted = (
        "import mlft\nimport mlft.io\nfrom mlft.io import curve_file\nfrom mlft import score, _PUBLIC\n"
        "x = mlft.evaluate\ny = mlft.reports\n"
    )
    assert internal_uses(planted) == [
        "import mlft.io",
        "from mlft.io import ...",
        "from mlft import _PUBLIC",
        "mlft.reports",
    ]

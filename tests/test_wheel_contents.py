"""What the wheel holds: the library and the shipped suites, recipes, mixes and configs, never the
machinery that renders the project's own documentation numbers (devtools/: results blocks, lifting, the seeds story,
`python -m devtools.results`).

The wheel is built for real (`pip wheel --no-deps --no-build-isolation`, offline, about 10 s) from a copy of the
checkout's files, as tests/test_packaging.py builds it; a planted copy of the machinery inside the package fails the
check."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

# what only the docs machinery defines (each still defined in devtools/: checked below, so the list cannot rot)
MACHINERY = {
    "update_blocks",
    "block_problems",
    "render_view",
    "headline_table",
    "Fill",
    "lift_page",
    "typed_numbers",
    "NOT_MEASURED",
    "summarise_record",
    "estimate_row",
    "attach_draw",
    "measured_draw",
}
SHIPPED = [
    "mlft/shipped/eval/lcb_tiny.yaml",
    "mlft/shipped/eval/lcb_demo.yaml",
    "mlft/shipped/recipes/cpu/crosslingual_sft.yaml",
    "mlft/shipped/recipes/demo.py",
    "mlft/shipped/data_mixes/cpu/english_sft.yaml",
    "mlft/shipped/configs/accelerate/zero2.yaml",
    "mlft/reports/results.py",  # what a results file holds, and how `mlft demo` writes one: library
]


def _top_level(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _imports(source: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def docs_machinery(wheel: Path) -> list[str]:
    """Each file of the wheel that is (or holds, or imports) the docs machinery, with why."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(("devtools/", "mlft/devtools/")):
                out.append(f"{name}: a devtools/ file")
            elif name.endswith(".py"):
                source = z.read(name).decode("utf-8")
                held = sorted(_top_level(source) & MACHINERY)
                if held:
                    out.append(f"{name}: defines {', '.join(held)}")
                if "devtools" in _imports(source):
                    out.append(f"{name}: imports devtools (absent from an installed mlft)")
    return out


def _build(tmp: Path, plant: dict[str, str] | None = None) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    src = tmp / "src"
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    for rel, text in (plant or {}).items():
        (src / rel).write_text(text, encoding="utf-8")
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist")]
    proc = subprocess.run([*cmd, str(src)], cwd=tmp, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("mlft-*.whl")
    return wheel


def test_the_machinery_list_names_what_devtools_defines():
    defined = set().union(*(_top_level(f.read_text(encoding="utf-8")) for f in (REPO / "devtools").glob("*.py")))
    assert MACHINERY <= defined


def test_the_wheel_ships_the_library_and_recipes_without_the_docs_machinery(tmp_path):
    wheel = _build(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [n for n in SHIPPED if n not in names] == []
    assert docs_machinery(wheel) == []
    assert not any(n.startswith(("measurements/", "tests/", "docs/")) for n in names)


def test_a_planted_copy_of_the_machinery_fails_the_check(tmp_path):
    blocks = (REPO / "devtools" / "blocks.py").read_text(encoding="utf-8")
    wheel = _build(tmp_path, {"mlft/reports/blocks.py": blocks, "mlft/reports/page_numbers.py": "import devtools\n"})
    found = docs_machinery(wheel)
    assert len(found) == 3, found
    assert found[0].startswith("mlft/reports/blocks.py: defines Fill, block_problems, headline_table, render_view")
    assert "mlft/reports/blocks.py: imports devtools" in found[1]  # the copy imports devtools.seeds
    assert found[2].startswith("mlft/reports/page_numbers.py: imports devtools")

"""Every third-party import in mlft/ is declared in pyproject.toml, and every subcommand starts.

A fresh venv that downloads torch is too slow for CI, and a venv with --system-site-packages proves nothing
about declarations; so the declarations are checked statically: every module-level or function-level import in
mlft/ (its AST) is mapped to the distribution that provides it (importlib.metadata.packages_distributions) and
must be named in [project] dependencies or an extra. tests/test_packaging.py checks the same against the built
wheel's own METADATA.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def third_party_imports(root: Path = REPO / "mlft") -> dict[str, set[str]]:
    """top-level module name -> files importing it (stdlib and mlft itself left out)."""
    out: dict[str, set[str]] = {}
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top != "mlft":
                    out.setdefault(top, set()).add(str(f.relative_to(REPO)))
    return out


def declared(requirements: list[str]) -> set[str]:
    return {_norm(re.match(r"[A-Za-z0-9_.-]+", r.strip()).group(0)) for r in requirements}


def pyproject_declared() -> set[str]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [r for r in extra if not r.startswith("mlft[")]
    return declared(reqs)


def undeclared(have: set[str]) -> dict[str, list[str]]:
    dists = md.packages_distributions()
    missing = {}
    for module, files in third_party_imports().items():
        names = {_norm(d) for d in dists.get(module, [module])}
        if not names & have:
            missing[f"{module} ({', '.join(sorted(names))})"] = sorted(files)
    return missing


def test_every_import_is_declared_in_pyproject():
    found = third_party_imports()
    assert {"numpy", "scipy", "yaml", "torch"} <= set(found)  # the walk sees module- and function-level imports
    assert undeclared(pyproject_declared()) == {}


def test_the_check_catches_an_undeclared_import():
    assert "scipy (scipy)" in undeclared(pyproject_declared() - {"scipy"})


def _subcommands() -> list[str]:
    from mlft.cli import COMMANDS

    return [c.replace("_", "-") for c in COMMANDS]


@pytest.mark.slow
def test_every_subcommand_help_starts(tmp_path):
    """Each `mlft X --help` in a fresh interpreter (what a new user types first); no '%%' left in the text."""
    env_cmd = [sys.executable, "-m", "mlft"]
    for name in ["", *_subcommands()]:
        proc = subprocess.run(
            [*env_cmd, *([name] if name else []), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"mlft {name} --help\n{proc.stderr[-2000:]}"
        assert "%%" not in proc.stdout, f"mlft {name} --help shows '%%'"


def _outcomes(path: Path, passes: list[bool]) -> Path:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i, ok in enumerate(passes):
            fh.write(
                json.dumps(
                    {
                        "id": str(i),
                        "task": "monolingual",
                        "source": "okapi",
                        "language": "de",
                        "counted": True,
                        "line_error": not ok,
                        "word_error": False,
                        "degenerate": False,
                    }
                )
                + "\n"
            )
    return path


def test_compare_mcnemar_runs_in_a_subprocess(tmp_path):
    """The command a clean install crashed on (scipy undeclared): exact McNemar on per-reply pass/fail."""
    a = _outcomes(tmp_path / "a" / "outcomes.jsonl", [True] * 10 + [False] * 10)
    b = _outcomes(tmp_path / "b" / "outcomes.jsonl", [True] * 18 + [False] * 2)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlft",
            "compare",
            str(a),
            str(b),
            "--method",
            "mcnemar",
            "--metric",
            "lpr",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    row = next(r for r in json.loads(proc.stdout[proc.stdout.index("{") :])["rows"] if r["language"] == "avg")
    # 8 discordant pairs, all won by B: two-sided exact binomial p = 2 * 0.5**8
    assert row["method"] == "mcnemar" and row["p"] == pytest.approx(2 * 0.5**8)
    assert row["diff"] == pytest.approx(0.4)


def _make_install(tmp_path: Path, torch_version: str | None) -> str:
    """The commands `make install` would run (`make -n`) with a python3 whose `import torch` gives
    `torch_version` (None: no torch): a shim that puts a fake torch package first on the path."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    body = f"__version__ = {torch_version!r}\n" if torch_version else "raise ImportError('no torch here')\n"
    (fake / "torch" / "__init__.py").write_text(body, encoding="utf-8")
    shim = tmp_path / "python3"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{fake}" exec "{sys.executable}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "install", f"PY={shim}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _torch_range() -> str:
    tomllib = pytest.importorskip("tomllib")
    train = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (spec,) = [r for r in train["train"] if re.match(r"torch\b", r)]
    return spec.removeprefix("torch")


@pytest.mark.parametrize("version", ["2.6.0+cu124", "2.6.0a0+ecf3bae40a.nv25.01", "2.13.0+cpu", "2.4.0"])
def test_make_install_keeps_an_installed_torch_inside_the_range(tmp_path, version):
    """Before: `make install` always ran `pip install torch==2.13.0`, which on a GPU machine replaces its CUDA torch
    with the CPU wheel (or fails without a network). A torch inside pyproject's range is kept, and said so."""
    out = _make_install(tmp_path, version)
    assert "torch==2.13.0" not in out.replace("not installing torch==2.13.0", "")
    assert f"keeping the installed torch {version} (pyproject: torch{_torch_range()})" in out
    assert 'pip install -q -e ".[all]"' in out  # the rest of the install is unchanged


@pytest.mark.parametrize("version", [None, "2.3.1+cu121", "2.14.0", "3.0.0"])
def test_make_install_installs_the_cpu_pin_without_a_torch_in_range(tmp_path, version):
    """A fresh machine (CI, the README's two commands) or a torch outside the range: the CPU wheel, as before."""
    out = _make_install(tmp_path, version)
    assert "-m pip install -q torch==2.13.0" in out and "keeping" not in out


def test_the_torch_pin_lies_inside_pyprojects_range_and_the_readme_names_it():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    (pin,) = re.findall(r"^TORCH_PIN \?= torch==(\S+)$", makefile, re.M)
    from packaging.specifiers import SpecifierSet

    assert pin in SpecifierSet(_torch_range())
    assert f"torch=={pin}" in (REPO / "README.md").read_text(encoding="utf-8")

"""One reader of `$MLFT_LCB_DATA`: `mlft.paths.lcb_data_path`. Every other module asks it; none reads the variable
itself. Checked on the source (AST): the variable's name, written out or through a constant bound to it (in the
module or imported, under any alias), used as the key of an environment read (`os.environ[...]`, `.get`, `.pop`,
`os.getenv`, `in os.environ`) or handed to a function (which could read it), anywhere in the package or the
shipped demo script."""

from __future__ import annotations

import ast
from pathlib import Path

from mlft.paths import LCB_DATA_ENV, lcb_data_path

ROOT = Path(__file__).resolve().parents[1]
READER = "mlft.paths"
SOURCES = [*sorted((ROOT / "mlft").rglob("*.py")), ROOT / "recipes" / "demo.py"]


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _bound_names(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module -> its module-level names bound to the variable's name: `X = "MLFT_LCB_DATA"`, `X = Y` of such a name,
    `from m import Y as X` of one of m's; to a fixed point, so chains across modules are followed."""
    bound: dict[str, set[str]] = {m: set() for m in trees}
    changed = True
    while changed:
        changed = False
        for m, tree in trees.items():
            for node in tree.body:
                new: set[str] = set()
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    if _names_variable(node.value, bound[m]):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        new = {t.id for t in targets if isinstance(t, ast.Name)}
                elif isinstance(node, ast.ImportFrom) and node.module in bound:
                    new = {a.asname or a.name for a in node.names if a.name in bound[node.module]}
                if new - bound[m]:
                    bound[m] |= new
                    changed = True
    return bound


def _names_variable(expr: ast.AST, names: set[str]) -> bool:
    return (isinstance(expr, ast.Constant) and expr.value == LCB_DATA_ENV) or (
        isinstance(expr, ast.Name) and expr.id in names
    )


def _is_environ(expr: ast.AST) -> bool:
    return (isinstance(expr, ast.Attribute) and expr.attr == "environ") or (
        isinstance(expr, ast.Name) and expr.id == "environ"
    )


def reads(tree: ast.Module, names: set[str]) -> list[int]:
    """Lines of `tree` that read the variable (or hand its name to a function)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            if _names_variable(node.slice, names):
                found.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if _names_variable(node.left, names) and any(_is_environ(c) for c in node.comparators):
                found.append(node.lineno)
        elif isinstance(node, ast.Call):  # os.environ.get(K), os.getenv(K), any f(K) or f(x=K)
            if any(_names_variable(a, names) for a in [*node.args, *(k.value for k in node.keywords)]):
                found.append(node.lineno)
    return found


def other_readers(sources: list[Path], root: Path = ROOT) -> list[str]:
    trees = {_module(f, root): ast.parse(f.read_text(encoding="utf-8"), str(f)) for f in sources}
    bound = _bound_names(trees)
    return [f"{m}:{line}" for m, tree in trees.items() if m != READER for line in reads(tree, bound[m])]


def test_only_mlft_paths_reads_mlft_lcb_data():
    assert other_readers(SOURCES) == []


def test_the_check_finds_reads_written_out_and_through_imported_constants(tmp_path):
    """Each way the variable was read before (a literal, a module constant, an imported constant under an alias,
    a name handed to a locating function) is found; a write and an f-string message are not reads."""
    pkg = tmp_path / "mlft"
    pkg.mkdir()
    (pkg / "fetchlike.py").write_text('import os\nENV_VAR = "MLFT_LCB_DATA"\nx = os.environ.get(ENV_VAR)\n')
    (pkg / "user.py").write_text(
        "import os\n"
        "from mlft.fetchlike import ENV_VAR as E\n"
        "a = os.environ['MLFT_LCB_DATA']\n"
        "b = 'MLFT_LCB_DATA' in os.environ\n"
        "c = os.getenv(E)\n"
        "d = locate(thing, env_var=E)\n"
        "os.environ[E] = '/data'\n"
        "msg = f'set {E}=PATH'\n"
    )
    found = other_readers(sorted(pkg.glob("*.py")), tmp_path)
    assert found == ["mlft.fetchlike:3", "mlft.user:3", "mlft.user:4", "mlft.user:5", "mlft.user:6"]


def test_the_reader(monkeypatch, tmp_path):
    monkeypatch.delenv(LCB_DATA_ENV, raising=False)
    assert lcb_data_path() is None
    monkeypatch.setenv(LCB_DATA_ENV, "")
    assert lcb_data_path() is None
    monkeypatch.setenv(LCB_DATA_ENV, str(tmp_path))
    assert lcb_data_path() == tmp_path

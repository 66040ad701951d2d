"""No module of mlft/ over 600 lines: a file is split along its seams before it passes that (the house's habit: no
2,000-line modules; a reader takes in a module at a sitting)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600


def line_counts(root: Path) -> dict[str, int]:
    """{path relative to root: lines} of every module under root/mlft (the wheel's shipped copies are data)."""
    return {
        str(f.relative_to(root)): len(f.read_text(encoding="utf-8").splitlines())
        for f in sorted((root / "mlft").rglob("*.py"))
        if "shipped" not in f.parts
    }


def oversized(counts: dict[str, int], limit: int = MAX_LINES) -> list[str]:
    return [f"{path}: {n} lines" for path, n in sorted(counts.items()) if n > limit]


def test_no_module_over_600_lines():
    counts = line_counts(ROOT)
    assert len(counts) > 150  # the walk found the package
    assert oversized(counts) == []


def test_the_size_check_finds_a_long_module(tmp_path):
    (tmp_path / "mlft" / "sub").mkdir(parents=True)
    (tmp_path / "mlft" / "sub" / "long.py").write_text("x = 1\n" * 601, encoding="utf-8")
    (tmp_path / "mlft" / "short.py").write_text("x = 1\n" * 600, encoding="utf-8")
    assert oversized(line_counts(tmp_path)) == ["mlft/sub/long.py: 601 lines"]

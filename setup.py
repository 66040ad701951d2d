"""Build hook: copy the top-level eval/, recipes/, data_mixes/ and configs/ into the wheel as mlft/shipped/
(with the experiment script recipes/demo.py that `mlft demo` runs).

Everything else is in pyproject.toml. The folders stay at the repository's top level, where users read and
copy them; an installed mlft looks them up in mlft/shipped/ (mlft.paths.shipped_root).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("eval", "recipes", "data_mixes", "configs")
SUFFIXES = {".yaml", ".yml", ".json", ".jsonl", ".jinja", ".sh", ".sbatch", ".slurm", ".py"}  # .py: recipes/demo.py


class BuildWithShipped(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "mlft" / "shipped"
        for folder in SHIPPED:
            for src in (root / folder).rglob("*"):
                if src.is_file() and src.suffix in SUFFIXES:
                    dest = target / src.relative_to(root)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dest)


setup(cmdclass={"build_py": BuildWithShipped})

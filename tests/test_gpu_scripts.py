"""The GPU scripts name only paths that exist, and a bare GPU image gets every package the training and quantized
passes import.

measurements/gpu/run.sh once put `benchmarks/gpu/probe` on PYTHONPATH (the folder had moved to
measurements/gpu/probe): the probe that proves a separate-process evaluation used CUDA vanished without a word.
Every repository path named by run.sh, prepare.sh, the GPU checks, slurm/ and configs/ is checked here; a path
built at run time (the carried .whl/ and .gpu_assets/, $OUT, the work folder) is not a repository path.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOP = ("measurements", "recipes", "configs", "data_mixes", "mlft", "slurm", "tests", "benchmarks", "docs", "eval")
PATH = re.compile(r"(?<![\w./-])(?:\$\{?ROOT\}?/|\$\{?root\}?/|\./)?((?:" + "|".join(TOP) + r")/[\w.*/-]*[\w*])")


def gpu_scripts() -> list[Path]:
    gpu = REPO / "measurements/gpu"
    files = [*gpu.glob("*.sh"), *gpu.glob("*.py"), *gpu.glob("*.yaml"), *(gpu / "probe").glob("*.py")]
    files += [p for p in (REPO / "slurm").rglob("*") if p.is_file()]
    files += [p for p in (REPO / "configs").rglob("*") if p.is_file()]
    return sorted(files)


def named_paths(text: str) -> set[str]:
    """Repository paths a script names (`measurements/gpu/probe`, `$ROOT/configs/accelerate/zero3.yaml`, ...)."""
    out = set()
    for m in PATH.finditer(text):
        path = m.group(1).rstrip(".")
        if "*" in path or "{" in path or "$" in path:  # a glob or a shell expansion: its folder must exist
            path = path.split("*")[0].split("{")[0].split("$")[0].rsplit("/", 1)[0]
        if "." in path.rsplit("/", 1)[-1] or path.count("/") >= 2:  # a file or a folder, not prose ("mlft/trl")
            out.add(path)
    return out


def missing(text: str) -> list[str]:
    return sorted(p for p in named_paths(text) if not (REPO / p).exists())


def test_every_path_a_gpu_script_names_exists():
    scripts = gpu_scripts()
    assert {"run.sh", "prepare.sh", "train.sbatch", "zero3.yaml", "zero3.json"} <= {p.name for p in scripts}
    named = {str(p.relative_to(REPO)): named_paths(p.read_text(encoding="utf-8")) for p in scripts}
    assert "measurements/gpu/probe" in named["measurements/gpu/run.sh"]  # the probe is found, not skipped
    assert "configs/deepspeed/zero3.json" in named["configs/accelerate/zero3.yaml"]
    gone = {f: sorted(p for p in paths if not (REPO / p).exists()) for f, paths in named.items()}
    assert not {f: p for f, p in gone.items() if p}, gone


def test_the_check_finds_the_probe_path_run_sh_once_named():
    """The planted fault: run.sh's line before its fix names a folder that does not exist."""
    old = "  export PYTHONPATH=$ROOT/benchmarks/gpu/probe:/tmp/site:$ROOT\n"
    assert missing(old) == ["benchmarks/gpu/probe"]
    assert missing(old.replace("benchmarks/gpu/probe", "measurements/gpu/probe")) == []


# ---------------------------------------------------------------- a bare GPU image: what the passes import

# The modules the training path (mlft train: trl, the eval callback's in-process and separate-process passes) and
# the quantized passes (the `quantize` intervention: bitsandbytes w8/w4, torchao w8a8) import, by file.
TRAIN_AND_QUANT = (
    "mlft/training",
    "mlft/generation/interventions/quantize.py",
    "mlft/generation/backends/hf.py",
    "mlft/generation/models.py",
    "mlft/evals",
)
QUANT_PACKAGES = {"bitsandbytes", "torchao"}


def _imports(paths) -> set[str]:
    out = set()
    for rel in paths:
        root = REPO / rel
        for f in [root] if root.is_file() else sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module]
                    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    else []
                )
                out |= {n.split(".")[0] for n in names if n.split(".")[0] not in sys.stdlib_module_names}
    return out - {"mlft"}


def _extras() -> dict[str, set[str]]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = re.compile(r"[A-Za-z0-9_.-]+")
    out = {"core": {name.match(r).group(0).lower().replace("_", "-") for r in project["dependencies"]}}
    for extra, reqs in project["optional-dependencies"].items():
        out[extra] = {name.match(r).group(0).lower().replace("_", "-") for r in reqs if not r.startswith("mlft[")}
    return out


IMPORT_TO_DIST = {"yaml": "pyyaml", "sklearn": "scikit-learn", "fasttext": "fasttext-predict"}


def test_training_and_quantized_imports_are_declared_and_quant_travels_to_the_gpu():
    """Every package the training and quantized paths import is declared in pyproject (core, train, quant or
    deepspeed), and bitsandbytes and torchao (what the quantized passes import) are in prepare.sh's wheels: the
    GPU image has neither, so a quantized pass there needs them carried."""
    imports = _imports(TRAIN_AND_QUANT)
    quantize = (REPO / "mlft/generation/interventions/quantize.py").read_text(encoding="utf-8")
    assert "BitsAndBytesConfig" in quantize  # w8 / w4 import bitsandbytes through transformers, at load time
    imports |= {"bitsandbytes"}
    assert (
        "torchao" in imports
    )  # the scan sees the quantize intervention's own import (one that finds nothing checks nothing)
    assert {"trl", "transformers", "peft", "accelerate", "torch"} <= imports
    extras = _extras()
    declared = extras["core"] | extras["train"] | extras["quant"] | extras["deepspeed"]
    dists = {IMPORT_TO_DIST.get(m, m).replace("_", "-").lower() for m in imports}
    missing_dists = sorted(d for d in dists - declared if d not in {"vllm", "openai", "lm-eval"})
    assert not missing_dists, missing_dists
    assert QUANT_PACKAGES <= extras["quant"]
    prepare = (REPO / "measurements/gpu/prepare.sh").read_text(encoding="utf-8")
    wheels = re.search(r'WHEELS="([^"]*)"', prepare).group(1).split()
    quant = re.search(r'QUANT_WHEELS="([^"]*)"', prepare).group(1).split()
    carried = {w.split("==")[0].lower() for w in wheels + quant}
    assert QUANT_PACKAGES <= carried, carried

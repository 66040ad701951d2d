"""mlft works pip-installed: build the wheel, install it into a fresh virtual environment and run shipped suites
and recipes from an empty folder (lookup order: explicit path, then the current directory, then the copy
inside the package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.training_helpers import noisy_lines

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _sh(cmd, cwd, env=None, timeout=600):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    files = _sh(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], REPO).stdout.split("\0")
    src = tmp / "src"
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    _sh(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        tmp,
    )
    (wheel,) = (tmp / "dist").glob("mlft-*.whl")
    venv = tmp / "venv"
    _sh([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp)
    _sh([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp)
    return wheel, venv


def test_wheel_holds_the_shipped_files(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in [
        "eval/lcb_tiny.yaml",
        "eval/_lcb_base.yaml",
        "recipes/cpu/english_sft.yaml",
        "data_mixes/cpu/english_sft.yaml",
        "configs/accelerate/zero2.yaml",
        "configs/deepspeed/zero2.json",
        "eval/steer_dev_prompts.jsonl",
        "eval/outside_lcb_prompts.jsonl",  # prompt files suites name
        "recipes/demo.py",
    ]:  # the experiment `mlft demo` runs
        assert f"mlft/shipped/{rel}" in names
    assert "mlft/training/templates/chatml_training.jinja" in names and "mlft/resources/seed/parallel.jsonl" in names
    for rel in ["lcb/lcb.yaml", "lcb/_lcb_template_yaml", "lcb/utils.py", "mlft_polyglot_mc/utils.py"]:
        assert f"mlft/harness/tasks/{rel}" in names  # lm_eval --include_path $(mlft harness path)


def test_wheel_declares_every_import(installed):
    """The built wheel's own METADATA (Requires-Dist, extras included) names every third-party import in mlft."""
    from email.parser import Parser

    from tests.test_dependencies import declared, undeclared

    wheel, _ = installed
    with zipfile.ZipFile(wheel) as zf:
        meta = Parser().parsestr(
            zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode("utf-8")
        )
    reqs = [r.split(";")[0] for r in meta.get_all("Requires-Dist") or []]
    have = declared([r for r in reqs if not r.strip().startswith("mlft")])
    assert "scipy" in have and undeclared(have) == {}


def test_installed_mlft_runs_from_an_empty_folder(installed, shared, tmp_path):
    _, venv = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "MLFT_LCB_DATA": str(shared / "lcb"), "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    where = _sh([str(venv / "bin" / "python"), "-c", "import mlft; print(mlft.__file__)"], empty, env).stdout
    assert str(venv) in where  # the wheel's copy, not the checkout
    mlft = str(venv / "bin" / "mlft")
    check = _sh([mlft, "train", "recipes/cpu/english_sft.yaml", "--check"], empty, env)
    assert "OK (sft" in check.stdout
    demo = _sh([mlft, "demo", "--help"], empty, env)  # the front door finds the shipped experiment script
    assert "--max-new-tokens" in demo.stdout and "recipes/demo.py" in demo.stdout
    out = _sh([mlft, "eval", "lcb_tiny", "--no-progress", "--out", "ev"], empty, env, timeout=600)
    assert "lcb_tiny:" in out.stdout
    assert noisy_lines(out.stdout, out.stderr) == []  # a quiet console (no deprecated transformers API)
    assert (empty / "ev" / "scores.jsonl").is_file() and (empty / "ev" / "results.json").is_file()
    # a suite in the current directory wins over the shipped one
    (empty / "eval").mkdir()
    (empty / "eval" / "lcb_tiny.yaml").write_text("include: nowhere.yaml\n")
    bad = subprocess.run(
        [mlft, "eval", "lcb_tiny", "--no-progress"], cwd=empty, env=env, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "nowhere.yaml: file not found" in bad.stderr

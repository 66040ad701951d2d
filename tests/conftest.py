import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")
SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
# Offline import of the LCB files (test sets, word list) the way a user without internet does it.
if (SHARED / "lcb").is_dir():
    os.environ.setdefault("MLFT_LCB_DATA", str(SHARED / "lcb"))


@pytest.fixture(scope="session")
def shared() -> Path:
    path = Path(os.environ.get("MLFT_SHARED", SHARED))
    if not path.is_dir():
        pytest.skip(f"shared data folder {path} not found")
    return path


@pytest.fixture(scope="session")
def embedded_model():
    """(model, tokenizer) of the embedded SmolLM2-135M-Instruct, loaded once per test session."""
    from mlft.generation.models import load

    return load(None)


@pytest.fixture
def polyglot_placeholders(tmp_path, monkeypatch):
    """A Polyglot-or-Not data folder whose files exist but are never read: for tests of what is refused before the
    data is loaded (a clone without ../shared has no Polyglot data)."""
    from mlft.benchmarks.polyglot.data import ENV_VAR, LANGUAGES

    data = tmp_path / "polyglot_placeholders"
    data.mkdir()
    for lang in LANGUAGES:
        (data / f"{lang}.parquet").touch()
    monkeypatch.setenv(ENV_VAR, str(data))
    return data


@pytest.fixture
def polyglot_data():
    """The Polyglot-or-Not data folder (../shared's or a fetched copy); the test is skipped, saying why, without it
    (mlft's lm-eval task `mlft_polyglot_mc` reads it when lm-eval indexes mlft's tasks)."""
    from mlft.benchmarks.polyglot.data import data_dir

    folder = data_dir()
    if not (folder / "de.parquet").is_file():
        pytest.skip(f"Polyglot-or-Not data not found in {folder} (`mlft data polyglot`)")
    return folder

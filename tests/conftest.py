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

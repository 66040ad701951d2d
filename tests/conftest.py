import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")
SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


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

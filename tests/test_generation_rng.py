"""One keeper of the global random streams (mlft.generation.rng), used by the training callback around each
evaluation and by the lm-eval kind around lm-eval's reseeding."""

from __future__ import annotations

import random

import numpy as np
import torch

from mlft.generation.rng import preserved_rng


def _draw():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_preserved_rng_restores_python_numpy_and_torch():
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = _draw()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    with preserved_rng():
        random.seed(7), np.random.seed(7), torch.manual_seed(7)  # what lm-eval does
        _draw()
    assert _draw() == expected


def test_preserved_rng_restores_on_error():
    torch.manual_seed(3)
    expected = float(torch.rand(1))
    torch.manual_seed(3)
    try:
        with preserved_rng():
            torch.rand(5)
            raise RuntimeError
    except RuntimeError:
        pass
    assert float(torch.rand(1)) == expected


def test_one_keeper():
    from mlft.evals import lm_eval_kind
    from mlft.training import callback

    assert lm_eval_kind.preserved_rng is callback.preserved_rng is preserved_rng

"""The process's global random streams, kept across a piece of work that draws from or reseeds them."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def preserved_rng():
    """Restore Python's, NumPy's and torch's (CPU and CUDA) random states on exit. A checkpoint stores the RNG
    states of the moment it was saved, before the callback evaluates it: without this, the evaluation's sampling
    (or lm-eval's reseeding) would move the generators, and a run resumed from that checkpoint (RL samples its
    rollouts) would differ from one that never stopped. CUDA's states are kept where CUDA is initialized (asking
    for them would initialize CUDA in a process that does not use it)."""
    import random

    import numpy as np
    import torch

    py, npy, cpu = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)

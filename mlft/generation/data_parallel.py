"""Data-parallel generation over the ranks of a running process group (the training job's).

Where every rank holds the whole model (DDP, ZeRO-1/2), an evaluation pass need not leave N-1 GPUs idle: rank 0
runs the pass as usual (prompts, files, scoring, reports: one writer), and when it generates with the live model
it hands whole *chunks* of requests to the other ranks, which generate them with their own copy and send the
results back. The unit is one batch of the hf backend (`HFBackend.plan`: how it cuts a runner chunk; every
reply's draws are keyed by its own request, so a batch generated alone is generated the same), or a whole runner
chunk when a loop strategy works on it, so N ranks write exactly the completions one rank would have written.

    rank 0:                                   ranks 1..N-1:
    with coordinate():                         serve(model, tokenizer, merge_lora)   # until rank 0 is done
        evaluate_step(..., model=model)

Protocol (object collectives on the default group): rank 0 broadcasts a job (backend settings, interventions as
specs, decoding, the chunks of every rank) or STOP; each rank generates its chunks; rank 0 gathers the results.
A rank that fails returns per-request errors (recorded as failed, generated again on resume), never a hang.
The ranks wait in collectives while rank 0 scores: the process group's timeout must exceed a pass
(mlft.training.train sets it from `evaluation.timeout_s`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from mlft.console import get_logger
from mlft.generation.backends import Request, Result
from mlft.generation.backends.hf import HFBackend
from mlft.generation.interventions import build_interventions, describe_all
from mlft.generation.models import eval_mode

log = get_logger(__name__)
STOP = "mlft-parallel-stop"


@dataclass
class _Job:
    backend: dict                  # HFBackend.spec()
    decoding: object
    interventions: list[dict]      # per-call interventions and strategies, as specs (rebuilt on each rank)
    chunks: list[list[list[Request]]]  # chunks[rank] = that rank's chunks


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 else None


def world_size() -> int:
    dist = _dist()
    return dist.get_world_size() if dist is not None else 1


class Coordinator:
    """Rank 0's side: decides which generate calls are shared and collects the other ranks' results."""

    def __init__(self, dist):
        self.dist = dist
        self.world = dist.get_world_size()

    def covers(self, backend) -> bool:
        """Only generation with the live (replicated) model is shared; transformed or reloaded models are not."""
        return bool(getattr(backend, "live", False)) and hasattr(backend, "spec")

    def generate(self, backend, chunks: list[list[Request]], decoding, per_call: Sequence, strategies: Sequence,
                 generate: Callable) -> Iterator[Result]:
        """Yield the results of every chunk: rank 0's own as they finish, then the other ranks'. `generate` is
        rank 0's (already wrapped by the strategies); the other ranks rebuild the same from the specs.

        The unit of work is one of the backend's own batches (`plan`: the batch a chunk is cut into, generated
        alone it is generated identically), or the whole chunk when a loop strategy (line resampling) works on it."""
        units = chunks if strategies or not hasattr(backend, "plan") else \
            [batch for chunk in chunks for batch in backend.plan(chunk, decoding, per_call)]
        shares = [units[r::self.world] for r in range(self.world)]
        job = _Job(backend.spec(), decoding, describe_all([*per_call, *strategies]), shares)
        self.dist.broadcast_object_list([job], src=0)
        for unit in shares[0]:
            yield from generate(unit, decoding, per_call)
        gathered: list = [None] * self.world
        self.dist.gather_object([], gathered, dst=0)
        for rank_results in gathered[1:]:
            yield from rank_results


_CURRENT: Coordinator | None = None


def current() -> Coordinator | None:
    """The active coordinator (rank 0 inside `coordinate()`), or None: generate alone."""
    return _CURRENT


@contextmanager
def coordinate(enabled: bool = True):
    """On rank 0 of a multi-process group: share live-model generation with the other ranks (which run
    `serve`) until the block ends; STOP is sent even when the block raises. Elsewhere: a no-op."""
    global _CURRENT
    dist = _dist() if enabled else None
    if dist is None or dist.get_rank() != 0:
        yield None
        return
    _CURRENT = Coordinator(dist)
    try:
        yield _CURRENT
    finally:
        _CURRENT = None
        dist.broadcast_object_list([STOP], src=0)


def serve(model, tokenizer, merge_lora: bool = True) -> int:
    """Ranks 1..N-1: generate the chunks rank 0 sends, until STOP; return the number of requests served."""

    dist = _dist()
    if dist is None:
        return 0
    rank, served = dist.get_rank(), 0
    with eval_mode(model, merge_lora) as live:
        while True:
            box = [None]
            dist.broadcast_object_list(box, src=0)
            job = box[0]
            if job == STOP:
                return served
            results = _run_job(job, rank, live, tokenizer, HFBackend)
            served += len(results)
            dist.gather_object(results, None, dst=0)


def _run_job(job: _Job, rank: int, model, tokenizer, backend_cls) -> list[Result]:
    chunks = job.chunks[rank] if rank < len(job.chunks) else []
    try:
        backend = backend_cls(model, tokenizer, **job.backend)
        interventions = build_interventions(job.interventions, f"data-parallel rank {rank}")
        strategies = [iv for iv in interventions if "strategy" in iv.applies_via]
        per_call = [iv for iv in interventions if "strategy" not in iv.applies_via]
        generate = backend.generate
        for iv in strategies:
            generate = iv.wrap(generate, backend)
        return [res for chunk in chunks for res in generate(chunk, job.decoding, per_call)]
    except Exception as exc:  # noqa: BLE001 — rank 0 records the errors; the pass goes on
        log.error("[mlft eval] data-parallel rank %s: generation failed (%s: %s)", rank, type(exc).__name__, exc)
        return [Result(r.id, error=f"rank {rank}: {type(exc).__name__}: {exc}") for chunk in chunks for r in chunk]

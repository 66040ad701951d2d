"""Data-parallel generation over the ranks of a running process group (the training job's).

Where every rank holds the whole model (DDP, ZeRO-1/2), an evaluation pass need not leave N-1 GPUs idle: rank 0
runs the pass as usual (prompts, files, scoring, reports: one writer), and when it generates with the live model
it hands whole *chunks* of requests to the other ranks, which generate them with their own copy and send the
results back. The unit is one batch of the hf backend (`HFBackend.plan`: how it cuts a runner chunk; every
reply's draws are keyed by its own request, so a batch generated alone is generated the same), or a whole runner
chunk when a loop strategy works on it, so N ranks write exactly the completions one rank would have written.

    rank 0:                                   ranks 1..N-1:
    with coordinate():                         serve(model, tokenizer)   # until rank 0 is done
        evaluate_step(..., target)             # target.model: the live model

Protocol (object collectives on the default group): rank 0 broadcasts a job (backend settings, interventions as
specs, decoding, the chunks of every rank) or STOP; each rank generates its chunks; rank 0 gathers the results.
The ranks wait in collectives while rank 0 scores: the process group's timeout must exceed a pass
(mlft.training.train sets it from `evaluation.timeout_s`).

A failure never leaves a rank waiting in a collective its peers will not join. Around a job's generation the
ranks talk through the process group's key-value store, never a collective: a rank that fails (rank 0's own
share or its reader included) writes the failure under the job's key; every rank checks it between its units
and while it waits for the others to finish, and raises `BackendError` naming the failed rank; only when every
rank has reported done does rank 0 open the gather. After a failed job rank 0 sends no STOP (the other ranks
have left `serve` with the error). A rank that dies without raising is left to the process group's timeout.

Rank 0 can also fail outside its generation, anywhere in the coordinated block: its reader (the runner writing a
record) may raise while the job's results are being read, the generator paused at a yield (nobody closes it until
it is garbage); or scoring fails between jobs. The block's end tells the other ranks wherever they wait: a job in
flight (broadcast, not yet gathered: they generate or wait for the gather) is failed in the store; otherwise they
wait in the broadcast and get a failure instead of STOP. Either way they leave `serve` raising `BackendError` with
rank 0's error, promptly, and every rank reports the same failure.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from mlft.console import get_logger
from mlft.errors import BackendError
from mlft.generation.backends.hf import HFBackend
from mlft.generation.interventions import build_interventions, describe_all
from mlft.generation.models import eval_mode
from mlft.generation.requests import Request, Result

log = get_logger(__name__)
STOP = "mlft-parallel-stop"


@dataclass
class _Failed:
    """Sent instead of STOP when rank 0's coordinated block raised between jobs: the other ranks raise it."""

    message: str


@dataclass
class _Job:
    backend: dict  # HFBackend.spec()
    decoding: object
    interventions: list[dict]  # per-call interventions and strategies, as specs (rebuilt on each rank)
    chunks: list[list[list[Request]]]  # chunks[rank] = that rank's chunks
    key: str = field(default_factory=lambda: f"mlft-dp/{uuid.uuid4().hex}/")  # the job's keys in the store


class _Signals:
    """A job's failure and completion flags in the process group's key-value store (no collective: a rank that
    checks them never waits on a peer that failed)."""

    POLL_S = 0.05

    def __init__(self, dist, key: str, store=None):
        self.store = store if store is not None else dist.distributed_c10d._get_default_store()
        self.key = key

    def fail(self, message: str) -> None:
        if not self.store.check([self.key + "failed"]):  # the first failure is the one reported
            self.store.set(self.key + "failed", message)

    def failure(self) -> str | None:
        try:
            if self.store.check([self.key + "failed"]):
                return self.store.get(self.key + "failed").decode()
        except Exception as exc:  # noqa: BLE001 — the store lives on rank 0: it is gone (rank 0 exited)
            return f"the process group's store is unreachable (rank 0 exited?): {type(exc).__name__}: {exc}"
        return None

    def check(self) -> None:
        """Raise BackendError when some rank failed this job."""
        message = self.failure()
        if message is not None:
            raise BackendError(f"data-parallel evaluation failed: {message}")

    def done(self) -> None:
        self.store.add(self.key + "done", 1)

    def wait_done(self, ranks: int) -> None:
        """Rank 0: until `ranks` ranks reported done (then open the gather), or raise when one failed."""
        while self.store.add(self.key + "done", 0) < ranks:
            self.check()
            time.sleep(self.POLL_S)
        self.check()
        self.store.set(self.key + "go", "1")

    def wait_go(self) -> None:
        """Ranks 1..N-1: until rank 0 opens the gather, or raise when a rank failed."""
        while not self.store.check([self.key + "go"]):
            self.check()
            time.sleep(self.POLL_S)


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
        self.broken = False  # a job failed: the other ranks left `serve` (no STOP)
        self.in_flight: _Signals | None = None  # the job broadcast and not yet gathered (the others are in it)

    def covers(self, backend) -> bool:
        """Only generation with the live (replicated) model is shared; transformed or reloaded models are not."""
        return bool(getattr(backend, "live", False)) and hasattr(backend, "spec")

    def generate(
        self,
        backend,
        chunks: list[list[Request]],
        decoding,
        per_call: Sequence,
        strategies: Sequence,
        generate: Callable,
    ) -> Iterator[Result]:
        """Yield the results of every chunk: rank 0's own as they finish, then the other ranks'. `generate` is
        rank 0's (already wrapped by the strategies); the other ranks rebuild the same from the specs.

        The unit of work is one of the backend's own batches (`plan`: the batch a chunk is cut into, generated
        alone it is generated identically), or the whole chunk when a loop strategy (line resampling) works on it."""
        units = (
            chunks
            if strategies or not hasattr(backend, "plan")
            else [batch for chunk in chunks for batch in backend.plan(chunk, decoding, per_call)]
        )
        shares = [units[r :: self.world] for r in range(self.world)]
        job = _Job(backend.spec(), decoding, describe_all([*per_call, *strategies]), shares)
        signals = _Signals(self.dist, job.key)
        self.dist.broadcast_object_list([job], src=0)
        self.in_flight = signals
        try:
            for unit in shares[0]:
                signals.check()
                yield from generate(unit, decoding, per_call)
            signals.wait_done(self.world - 1)
        except BaseException as exc:  # its own share, its reader (GeneratorExit) or a peer: every rank hears it
            self.broken = True
            signals.fail(f"rank 0: {type(exc).__name__}: {exc}")
            if isinstance(exc, BackendError) or not isinstance(exc, Exception):
                raise
            raise BackendError(f"data-parallel evaluation failed: rank 0: {type(exc).__name__}: {exc}") from exc
        gathered: list = [None] * self.world
        self.dist.gather_object([], gathered, dst=0)
        self.in_flight = None  # the other ranks wait for the next broadcast
        for rank_results in gathered[1:]:
            yield from rank_results

    def end(self, error: BaseException | None) -> None:
        """The coordinated block is over (`error`: what it raised): tell the other ranks wherever they wait. After
        a failed job they have left `serve` already; with a job in flight (its reader raised or stopped reading)
        fail it in the store, where they look between units and while they wait for the gather; else broadcast
        STOP, or the failure when the block raised. A job left unread without an error raises here too (the other
        ranks fail: rank 0 must not report a pass they did not finish)."""
        if self.broken:
            return
        message = None if error is None else f"rank 0: {type(error).__name__}: {error}"
        if self.in_flight is not None:
            self.broken = True
            signals, self.in_flight = self.in_flight, None
            signals.fail(message or "rank 0: the coordinated block ended with a job's results unread")
            if error is None:
                raise BackendError(f"data-parallel evaluation failed: {signals.failure()}")
            return
        self.dist.broadcast_object_list([STOP if message is None else _Failed(message)], src=0)


_CURRENT: Coordinator | None = None


def current() -> Coordinator | None:
    """The active coordinator (rank 0 inside `coordinate()`), or None: generate alone."""
    return _CURRENT


@contextmanager
def coordinate(enabled: bool = True):
    """On rank 0 of a multi-process group: share live-model generation with the other ranks (which run
    `serve`) until the block ends; then STOP, or when the block raised its error, reaches every rank
    (`Coordinator.end`). Elsewhere: a no-op."""
    global _CURRENT
    dist = _dist() if enabled else None
    if dist is None or dist.get_rank() != 0:
        yield None
        return
    _CURRENT = coordinator = Coordinator(dist)
    error = None
    try:
        yield coordinator
    except BaseException as exc:
        error = exc
        raise
    finally:
        _CURRENT = None
        coordinator.end(error)


def serve(model, tokenizer, backend_cls=HFBackend) -> int:
    """Ranks 1..N-1: generate the chunks rank 0 sends, until STOP; return the number of requests served. Raise
    BackendError when a job fails on any rank (this one included) or rank 0's coordinated block raises."""

    dist = _dist()
    if dist is None:
        return 0
    rank, served = dist.get_rank(), 0
    with eval_mode(model) as live:
        while True:
            box = [None]
            dist.broadcast_object_list(box, src=0)
            job = box[0]
            if job == STOP:
                return served
            if isinstance(job, _Failed):  # rank 0's block raised between jobs
                raise BackendError(f"data-parallel evaluation failed: {job.message}")
            signals = _Signals(dist, job.key)
            results = _run_job(job, rank, live, tokenizer, backend_cls, signals)
            signals.done()
            signals.wait_go()
            served += len(results)
            dist.gather_object(results, None, dst=0)


def _run_job(job: _Job, rank: int, model, tokenizer, backend_cls, signals: _Signals | None = None) -> list[Result]:
    """This rank's share of `job`; a failure is written to the store (every rank raises) and raised."""
    chunks = job.chunks[rank] if rank < len(job.chunks) else []
    try:
        backend = backend_cls(model, tokenizer, **job.backend)
        interventions = build_interventions(job.interventions, f"data-parallel rank {rank}")
        strategies = [iv for iv in interventions if "strategy" in iv.applies_via]
        per_call = [iv for iv in interventions if "strategy" not in iv.applies_via]
        generate = backend.generate
        for iv in strategies:
            generate = iv.wrap(generate, backend)
        results = []
        for chunk in chunks:
            if signals is not None:
                signals.check()  # another rank failed: stop here
            results += generate(chunk, job.decoding, per_call)
        return results
    except BackendError as exc:
        if signals is not None and signals.failure() is not None:
            raise  # another rank's failure, already in the store
        message = f"rank {rank}: {type(exc).__name__}: {exc}"
        if signals is not None:
            signals.fail(message)
        raise
    except Exception as exc:
        log.error("[mlft eval] data-parallel rank %s: generation failed (%s: %s)", rank, type(exc).__name__, exc)
        message = f"rank {rank}: {type(exc).__name__}: {exc}"
        if signals is not None:
            signals.fail(message)
        raise BackendError(f"data-parallel evaluation failed: {message}") from exc

"""Data-parallel evaluation cannot hang: a 2-process gloo group, rank 0 coordinating a job of
several chunks per rank, rank 1 serving it, with a fake backend (no model). When the generation raises on rank 0
or on rank 1, both ranks exit with the error within seconds (the process group's timeout is 60 s: a hang waits
it out). Before: rank 0's own failure skipped the gather and sent STOP while rank 1 waited in the gather; rank 1's
failure came back as per-request errors and the pass went on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
PG_TIMEOUT_S = 60


class FakeBackend:
    """The hf backend's data-parallel surface: spec, live, generate (0.2 s a chunk); raises on FAIL_RANK."""

    live = True

    def __init__(self, model=None, tokenizer=None, **spec):
        self.rank = int(os.environ["RANK"])

    def spec(self) -> dict:
        return {}

    def generate(self, chunk, decoding, per_call):
        from mlft.generation.backends import Result

        time.sleep(0.2)
        if os.environ.get("FAIL_RANK") == str(self.rank):
            raise RuntimeError(f"boom on rank {self.rank}")
        return [Result(r.id, "ok") for r in chunk]


def worker() -> None:
    """One rank (RANK, WORLD_SIZE, MASTER_PORT in the environment): exit 0 with the results, or 3 naming the
    error."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from mlft.generation import data_parallel
    from mlft.generation.backends import Request

    rank = int(os.environ["RANK"])
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=PG_TIMEOUT_S),
    )
    started = time.monotonic()
    try:
        if rank == 0:
            chunks = [
                [Request(f"c{c}r{i}", messages=[{"role": "user", "content": "x"}]) for i in range(2)] for c in range(8)
            ]
            backend = FakeBackend()
            with data_parallel.coordinate() as dp:
                got = list(dp.generate(backend, chunks, None, [], [], backend.generate))
            print("RESULTS", len(got), flush=True)
        else:
            print("SERVED", data_parallel.serve(torch.nn.Linear(1, 1), None, backend_cls=FakeBackend), flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"ERROR {type(exc).__name__}: {exc}\nAFTER {time.monotonic() - started:.2f} s", flush=True)
        time.sleep(2.0 if rank == 0 else 0.0)  # rank 0 holds the store: it goes on (training would), then exits
        os._exit(3)
    dist.destroy_process_group()


def _run(fail_rank: str) -> list[tuple[int, str, float]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_PORT": str(port),
            "FAIL_RANK": fail_rank,
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", "from tests.test_data_parallel_failure import worker; worker()"],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=PG_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
        out.append((p.returncode, text, time.monotonic() - start))
    return out


def test_a_pass_without_failure_gathers_every_result():
    """And the ranks' flags do not slow a pass: 8 chunks of 0.2 s per rank."""
    (rc0, out0, _), (rc1, out1, _) = _run("none")
    assert rc0 == 0 and "RESULTS 16" in out0, out0
    assert rc1 == 0 and "SERVED 8" in out1, out1


@pytest.mark.parametrize("fail_rank", ["0", "1"])
def test_a_failure_on_any_rank_reaches_every_rank_within_seconds(fail_rank):
    runs = _run(fail_rank)
    print(
        f"\nfailure on rank {fail_rank}: "
        + ", ".join(
            f"rank {r} exit {rc}, error {text.rsplit('AFTER', 1)[-1].strip()} into the job"
            for r, (rc, text, _) in enumerate(runs)
        )
    )
    for rank, (rc, text, seconds) in enumerate(runs):
        assert rc == 3, (rank, text[-2000:])
        assert f"ERROR BackendError: data-parallel evaluation failed: rank {fail_rank}: RuntimeError: boom" in text
        assert seconds < 20, (rank, seconds)  # the process group's timeout is 60 s (+ start-up ~5 s)

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
pytestmark = [pytest.mark.slow, pytest.mark.serial]  # multi-process runs, timed
PG_TIMEOUT_S = 60


class FakeBackend:
    """The hf backend's data-parallel surface: spec, live, generate (0.2 s a chunk); raises on FAIL_RANK."""

    live = True

    def __init__(self, model=None, tokenizer=None, **spec):
        self.rank = int(os.environ["RANK"])

    def spec(self) -> dict:
        return {}

    def generate(self, chunk, decoding, per_call):
        from mlft.generation.requests import Result

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
    from mlft.generation.requests import Request

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


class RunnerBackend(FakeBackend):
    """What the runner asks of a backend besides the data-parallel surface (no `plan`: a unit is a chunk of 2)."""

    name = "fake"
    batch_size = 2

    def check(self, decoding, per_call) -> None:
        pass

    def prompt_length(self, req) -> int:
        return len(req.id)


def reader_worker() -> None:
    """One rank of a pass run as the eval callback runs it: rank 0 writes 16 prompts' completions with the real
    runner inside `coordinate()`, its `_record` failing where FAIL_AT says (`own`: its first record, the job's
    generator paused in rank 0's own share; `gathered`: the first record of rank 1's share, the job gathered;
    `after`: no record fails, the block raises after the generation, as scoring would); rank 1 serves. Then, as the
    callback, every rank reports its error and meets the others at a barrier (a rank left behind hangs there until
    the group's timeout). Exit 3 naming the error, 0 without one."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from mlft.benchmarks.lcb.data import Prompt
    from mlft.generation import data_parallel, runner
    from mlft.generation.decoding import Decoding
    from mlft.generation.prompting import Prompting

    rank, fail_at = int(os.environ["RANK"]), os.environ["FAIL_AT"]
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=PG_TIMEOUT_S),
    )
    started, error = time.monotonic(), None
    try:
        if rank == 0:
            record, written = runner._record, []

            def failing_record(*args):
                if (fail_at, len(written)) in (("own", 0), ("gathered", 8)):  # rank 0's share: 4 chunks of 2
                    raise OSError("disk full")
                written.append(record(*args))
                return written[-1]

            runner._record = failing_record
            prompts = [Prompt(f"p{i:02d}", "monolingual", "fake", "en", f"prompt {i}") for i in range(16)]
            with data_parallel.coordinate():
                runner.generate_completions(
                    prompts,
                    RunnerBackend(),
                    Decoding(),
                    Prompting(),
                    Path(os.environ["OUT_DIR"]) / "c.jsonl",
                    "fake",
                    progress=False,
                )
                if fail_at == "after":
                    raise RuntimeError("scoring failed")
            print("WRITTEN", len(written), flush=True)
        else:
            print("SERVED", data_parallel.serve(torch.nn.Linear(1, 1), None, backend_cls=RunnerBackend), flush=True)
    except Exception as exc:  # noqa: BLE001 — the callback logs it and goes on to the barrier
        error = exc
        print(f"ERROR {type(exc).__name__}: {exc}\nAFTER {time.monotonic() - started:.2f} s", flush=True)
    dist.barrier()
    print(f"BARRIER {time.monotonic() - started:.2f} s", flush=True)
    dist.barrier()  # rank 0 holds the store: nobody leaves before the others passed the first barrier
    os._exit(3 if error is not None else 0)


def _run(fail_rank: str, entry: str = "worker", **extra_env: str) -> list[tuple[int, str, float]]:
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
            **extra_env,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", f"from tests.test_data_parallel_failure import {entry}; {entry}()"],
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
    for rank, (rc, text, _) in enumerate(runs):
        assert rc == 3, (rank, text[-2000:])
        assert f"ERROR BackendError: data-parallel evaluation failed: rank {fail_rank}: RuntimeError: boom" in text
        seconds = float(text.rsplit("AFTER ", 1)[1].split()[0])  # from the group's start: a loaded machine's slow
        assert seconds < 20, (rank, seconds)  # imports apart; the process group's timeout is 60 s


@pytest.mark.parametrize("fail_at", ["own", "gathered", "after"])
def test_rank_0_failing_outside_its_generation_reaches_every_rank_within_seconds(fail_at, tmp_path):
    """Rank 0's reader (the runner's `_record`) raises while the job's generator is paused at a yield, before or
    after the gather, or the block raises between jobs: every rank reports rank 0's error and passes the callback's
    barrier within seconds. Before: the block's end broadcast STOP as if all went well; rank 1, still in the job
    (waiting for the gather) or served to the end without an error, and rank 0 met in mismatched collectives and
    waited out the group's timeout."""
    runs = _run("none", entry="reader_worker", FAIL_AT=fail_at, OUT_DIR=str(tmp_path))
    error = "RuntimeError: scoring failed" if fail_at == "after" else "OSError: disk full"
    (rc0, out0, _), (rc1, out1, _) = runs
    assert rc0 == 3 and f"ERROR {error}" in out0, out0[-2000:]
    assert rc1 == 3 and f"ERROR BackendError: data-parallel evaluation failed: rank 0: {error}" in out1, out1[-2000:]
    for rank, (_, text, _) in enumerate(runs):
        assert "BARRIER" in text, (rank, text[-2000:])
        seconds = float(text.split("BARRIER ", 1)[1].split()[0])  # from the group's start (imports apart)
        assert seconds < 20, (rank, seconds)  # the process group's timeout is 60 s
    if fail_at == "gathered":  # rank 0's own share was written before the failure
        assert "WRITTEN" not in out0 and len((tmp_path / "c.jsonl").read_text().splitlines()) == 8

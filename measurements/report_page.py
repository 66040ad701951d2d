"""Size and open time of `mlft report`'s page for a demo-sized and a full-LCB-sized training run.

    python measurements/report_page.py demo [OUT_DIR]    # lcb_demo's 290 prompts x 3 checkpoints (0, 16, 32)
    python measurements/report_page.py full [OUT_DIR]    # all 6,586 LCB prompts x 10 checkpoints

The runs are synthetic: checkpoint k's replies are the paper's released completions of the k-th released model
($MLFT_LCB_DATA/outputs, 10 models x 6,586 replies; prompt text paired by position within its (task, source,
language) group), scored and written exactly as `mlft evaluate-run` writes a pass (completions.jsonl,
outcomes.jsonl, curve rows with 95 % intervals). Prints: build time of the run, page build time, file size, and
in headless chromium (when installed) the time from navigation to the first replies shown and to another
checkpoint's replies shown.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from mlft.benchmarks.lcb.data import load_prompts
from mlft.benchmarks.lcb.scoring import load_resources, outcomes_from, score_completions
from mlft.completions import Completion
from mlft.constants import TASKS
from mlft.evals.lcb import metric_rows
from mlft.evals.lcb_options import select_prompts
from mlft.evals.suite import load_suite
from mlft.io.jsonl import write_jsonl
from mlft.paths import shared_dir
from mlft.reports.page import write_page
from mlft.stats import save_outcomes

MODELS = [
    "llama-2-instruct",
    "mistral-8x7b",
    "command-r-base",
    "llama-3-instruct",
    "command-r",
    "gpt-3.5-turbo",
    "command-r-plus-base",
    "mistral-large",
    "command-r-plus",
    "gpt-4-turbo",
]


def released(model: str, prompts: dict[str, str]) -> list[dict]:
    csv.field_size_limit(1 << 30)
    path = shared_dir() / "lcb" / "outputs" / f"{model}.csv"
    seen: dict[tuple, int] = defaultdict(int)
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            key = (row["task"], row["source"], row["language"])
            pid = "/".join(key) + f"/{seen[key]}"
            seen[key] += 1
            if pid in prompts:
                out.append(
                    {
                        "id": pid,
                        "task": row["task"],
                        "source": row["source"],
                        "language": row["language"],
                        "model": model,
                        "completion": row["completion"],
                        "prompt": prompts[pid],
                    }
                )
    return out


def build_run(run_dir: Path, size: str) -> float:
    t0 = time.perf_counter()
    if (run_dir / "curves.jsonl").is_file():
        return 0.0
    if size == "demo":
        chosen = select_prompts(load_suite("lcb_demo").options)
        steps = [0, 16, 32]
    else:
        chosen = load_prompts(list(TASKS), None, None)
        steps = [250 * k for k in range(10)]
    prompts = {p.id: p.prompt for p in chosen}
    lid, _ = load_resources(None)
    rows = []
    for k, step in enumerate(steps):
        records = released(MODELS[k], prompts)
        folder = run_dir / "evals" / f"step-{step:06d}" / "model" / "default"
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl(folder / "completions.jsonl", records)
        comps = [Completion(r["id"], "model", r["task"], r["source"], r["language"], r["completion"]) for r in records]
        outcomes = outcomes_from(comps, score_completions(comps, lid=lid).replies)
        save_outcomes(folder / "outcomes.jsonl", outcomes)
        rel = folder.relative_to(run_dir) / "outcomes.jsonl"
        rows += [
            {
                "step": step,
                "variant": "model",
                "suite": "synthetic",
                "suite_variant": "default",
                **r,
                "outcomes": str(rel),
            }
            for r in metric_rows("default", outcomes, 0.95, 2000)
        ]
        print(f"  step {step}: {len(records)} replies of {MODELS[k]}", flush=True)
    for r in rows:
        r["variant"] = "model"
    write_jsonl(run_dir / "curves.jsonl", rows)
    return time.perf_counter() - t0


def main() -> None:
    size = sys.argv[1] if len(sys.argv) > 1 else "demo"
    root = Path(sys.argv[2] if len(sys.argv) > 2 else "runs/bench_report")
    run_dir = root / f"{size}_run"
    built = build_run(run_dir, size)
    t0 = time.perf_counter()
    out, page = write_page([run_dir], root / f"{size}.html")
    seconds = time.perf_counter() - t0
    replies = sum(len(v.replies) for v in page.views)
    print(
        json.dumps(
            {
                "size": size,
                "views": len(page.views),
                "replies": replies,
                "prompts": len(page.prompts),
                "run_build_s": round(built, 1),
                "page_build_s": round(seconds, 1),
                "file_mb": round(out.stat().st_size / 1e6, 2),
            }
        )
    )
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.browser_helpers import Browser, find_chromium
    except ImportError as exc:
        print(f"no browser timing ({exc})")
        return
    if find_chromium() is None:
        print("no browser timing (chromium not installed)")
        return
    with Browser() as b:
        opens = [b.open(out) for _ in range(3)]
        t1 = time.perf_counter()
        last = len(page.views) - 1
        b.eval(
            f"(() => {{ const s = document.getElementById('r-view'); s.value = '{last}'; "
            "s.dispatchEvent(new Event('change')); return 1; })()"
        )
        b.eval(
            "document.querySelector('#reply-count').textContent",
            until=lambda v: v and v.endswith(f" of {len(page.views[last].replies)} replies"),
        )
        switch = time.perf_counter() - t1
        heap = b.eval("performance.memory ? performance.memory.usedJSHeapSize : null")
        print(
            json.dumps(
                {
                    "open_s": [round(x, 2) for x in opens],
                    "switch_checkpoint_s": round(switch, 2),
                    "js_heap_mb": round(heap / 1e6, 1) if heap else None,
                    "problems": b.problems(),
                    "requests": len(b.requests()),
                }
            )
        )


if __name__ == "__main__":
    main()

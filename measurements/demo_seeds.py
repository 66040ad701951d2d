"""The demo's story under several seeds: which claims hold?

Runs `mlft demo --seed S --decode-seed D` for each training seed S (every run's training seed) at one decoding seed D
held fixed (`--decode-seed`, default 0: every pass's keyed draws; resumable), then
collects each run's mitigation table into one results file (`docs/results/demo_seeds.json` by default: per seed the
table's rows, with the command, seeds and git commit) and renders `docs/results/demo_seeds.md` from it: per row and
task, LPR and the guard in each seed, its mean and spread, the gain over the base row in each seed with its paired p
(Holm-adjusted, as the table prints it), and the claim as an estimate: the mean gain over seeds with its t-interval,
widened by the shared base pass's own draw (measured on `--base-reruns`, else bounded by its interval;
`devtools.seeds`, `mlft.stats.means.seed_interval`; "up" / "down" when the interval excludes 0, else
"unclear"). The training seed varies and the decoding seed does not, so the spread over seeds is the training seed's
(each seed's paired test covers the decoding draw); `--decode-seed -1` gives each training seed its own decoding
seed (the old coupling). With the task axis (`mlft demo`'s default), the `task` metric is estimated the same way.

    python measurements/demo_seeds.py --seeds 0 1 2                       # three demos, then the results file
    python measurements/demo_seeds.py --seeds 0 1 2 --samples 2 --out runs/demo_seeds
    python measurements/demo_seeds.py --seeds 0 1 2 --no-run              # only the results file, from finished runs

Writes RESULTS (docs/results/demo_seeds.json), re-renders the blocks of docs/results/demo_seeds.md from it, and
prints the table. Other pages' blocks: `python -m devtools.results docs/results/demo_seeds.json --update
README.md ...`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from mlft.provenance import environment
from mlft.reports.results import SCHEMA

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/, beside measurements/ (not in the package)
from devtools.blocks import update_blocks  # noqa: E402
from devtools.seeds import attach_draw, greedy_metrics, markdown, summarise_record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "results" / "demo_seeds.md"
RERUNS = ROOT / "tests" / "data" / "calibration_lcb_demo.json.gz"  # 24 keyed reruns of the demo's base pass


def run_demo(seed: int, out: Path, extra: list[str], decode_seed: int | None = None) -> Path:
    folder = out / f"seed{seed}"
    cmd = [sys.executable, "-m", "mlft", "demo", "--seed", str(seed), "--out", str(folder), *extra]
    if decode_seed is not None:
        cmd += ["--decode-seed", str(decode_seed)]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return folder / "results.json"


def table_rows(path: Path, retable: bool = False) -> tuple[list[dict], dict]:
    """A seed's mitigation rows and its demo's config; `retable`: the rows rebuilt by this mlft from the table spec
    the demo wrote beside its results (table.yaml: the same runs, the same seeded tests), e.g. for fields a newer
    table record holds."""
    record = json.loads(path.read_text(encoding="utf-8"))
    rows = record["tables"]["mitigation"]["rows"]
    if retable:
        from mlft.reports.mitigation import tables
        from mlft.reports.results import table_record
        from mlft.reports.table_spec import load_spec

        spec = load_spec(path.parent / "table.yaml")
        built = tables(spec)[0]
        rows = table_record(built, spec.base or spec.rows[0].label, spec.confidence, spec.resamples)["rows"]
    return rows, record.get("config", {})


def seeds_record(per_seed: dict[int, Path], command: str, retable: bool = False) -> dict:
    """The seeds results file: each seed's mitigation rows and its demo's command, git commit, training seeds (per
    run) and decoding seed."""
    seeds, runs = {}, {}
    for s, path in per_seed.items():
        rows, config = table_rows(path, retable)
        seeds[str(s)] = rows
        runs[str(s)] = {
            "results": str(path),
            "command": config.get("command"),
            "training_seeds": {k: r.get("seed") for k, r in config.get("runs", {}).items()},
            "decoding_seed": config.get("suite", {}).get("decoding", {}).get("seed"),
        }
    return {
        "name": "demo_seeds",
        "schema": SCHEMA,
        "provenance": f"measured by {command} on {datetime.now(timezone.utc):%Y-%m-%d}",
        "config": {"command": command, "seeds": list(per_seed), "runs": runs},
        "environment": environment(),
        "seeds": seeds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path("runs/demo_seeds"))
    ap.add_argument("--samples", type=int, help="replies per prompt (mlft demo --samples)")
    ap.add_argument(
        "--decode-seed",
        type=int,
        default=0,
        help="every pass's decoding seed, the same for every training seed (-1: each training seed's own)",
    )
    ap.add_argument("--no-run", action="store_true", help="only read finished runs")
    ap.add_argument(
        "--retable", action="store_true", help="rebuild each seed's table from its table.yaml (this mlft's record)"
    )
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "results" / "demo_seeds.json")
    ap.add_argument(
        "--base-reruns",
        type=Path,
        default=RERUNS,
        help="K = 1 reruns of the base pass (a save_compact file) that measure its own draw; default: the "
        "calibration's (lcb_demo, the embedded model, decoding seed 0); else its interval bounds it",
    )
    args, extra = ap.parse_known_args()
    if args.samples is not None:
        extra += ["--samples", str(args.samples)]
    per_seed = {}
    for s in args.seeds:
        path = args.out / f"seed{s}" / "results.json"
        if not args.no_run:
            path = run_demo(s, args.out, extra, None if args.decode_seed < 0 else args.decode_seed)
        per_seed[s] = path
    record = seeds_record(per_seed, " ".join(["python", "measurements/demo_seeds.py", *sys.argv[1:]]), args.retable)
    print(attach_draw(record, args.base_reruns, greedy_metrics(table_rows(per_seed[args.seeds[0]])[1])))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.results}")
    if args.results.resolve() == (ROOT / "docs" / "results" / "demo_seeds.json").resolve():
        PAGE.write_text(update_blocks(PAGE.read_text(encoding="utf-8"), {"demo_seeds": record}), encoding="utf-8")
        print(f"updated {PAGE}")
    print(markdown(summarise_record(record), list(record["seeds"])))


if __name__ == "__main__":
    main()

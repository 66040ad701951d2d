"""Does the seeds' interval cover the mean gain over training seeds, when every gain shares one base pass?

A claim over k training seeds is the mean of k gains, each a run's value minus the value of one base pass that
every seed is compared with. The gains then share that pass's own decoding draw: the seeds' sd cannot see it, and
no number of seeds averages it away. This simulates such claims (gain_s = training draw_s + shared base draw; the
shared sd itself estimated on R reruns, as the calibration measures it) over a range of the seeds' spread against
the shared draw, and reports how often each interval rule holds the true mean gain:

- `quadrature` (shipped: `mlft.stats.means.seed_interval(shared_sd=...)`): the seeds' t half-width and the shared
  term's (t with R - 1 df) added in quadrature;
- `seeds alone` (before): the seeds' t-interval, blind to the shared draw;
- `satterthwaite`: one t quantile on the summed variance with Welch-Satterthwaite degrees of freedom.

    python measurements/seed_coverage.py                    # writes docs/results/seed_coverage.json
    python measurements/seed_coverage.py --draws 20000 --results /tmp/seed_coverage.json

The shared sd is the cross-lingual LPR sd of the demo's base pass (3.46 pp over the calibration's 24 reruns, read
from docs/results/demo_seeds.json's `base_draw`), so the ratios below are those of the demo's claims.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from mlft.provenance import environment
from mlft.reports.results import SCHEMA
from mlft.stats import seed_interval

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/, beside measurements/ (not in the package)
from devtools.blocks import Fill  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RATIOS = (0.15, 0.5, 1.0, 2.0, 4.0, 8.0)  # the seeds' sd over the shared draw's sd
RULES = ("quadrature", "seeds alone", "satterthwaite")


def satterthwaite(gains: np.ndarray, shared_sd: float, shared_df: int, confidence: float = 0.95) -> float:
    """Half-width of the rule not shipped: t(nu) * sqrt(sd^2 / k + shared_sd^2), nu by Welch-Satterthwaite."""
    k = len(gains)
    own, shared = gains.var(ddof=1) / k, shared_sd**2
    df = (own + shared) ** 2 / (own**2 / (k - 1) + shared**2 / shared_df)
    return float(student_t.ppf(0.5 + confidence / 2, df)) * math.sqrt(own + shared)


def simulate(ratio: float, shared_sd: float, reruns: int, seeds: int, draws: int, rng: np.random.Generator) -> dict:
    covered = dict.fromkeys(RULES, 0)
    widths = {r: [] for r in RULES}
    for _ in range(draws):
        gains = rng.normal(0.0, ratio * shared_sd, seeds) + rng.normal(0.0, shared_sd)  # the true mean gain is 0
        measured = shared_sd * math.sqrt(rng.chisquare(reruns - 1) / (reruns - 1))
        est = seed_interval(gains, shared_sd=measured, shared_df=reruns - 1)
        alone = seed_interval(gains)
        halves = {
            "quadrature": (est.high - est.low) / 2,
            "seeds alone": (alone.high - alone.low) / 2,
            "satterthwaite": satterthwaite(gains, measured, reruns - 1),
        }
        for rule, half in halves.items():
            covered[rule] += abs(est.mean) < half
            widths[rule].append(2 * half)
    return {r: {"coverage": covered[r] / draws, "median_width": float(np.median(widths[r]))} for r in RULES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=4000, help="simulated claims per ratio")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "results" / "seed_coverage.json")
    args = ap.parse_args()
    demo = json.loads((ROOT / "docs" / "results" / "demo_seeds.json").read_text(encoding="utf-8"))
    measured = demo["base_draw"]["tasks"]["crosslingual"]["lpr"]
    shared_sd, reruns = measured["sd"], measured["df"] + 1
    rng = np.random.default_rng(0)
    rows = {str(r): simulate(r, shared_sd, reruns, args.seeds, args.draws, rng) for r in RATIOS}
    v = Fill()
    cover = {rule: [rows[str(r)][rule]["coverage"] * 100 for r in RATIOS] for rule in RULES}
    lines = [
        "",
        f"| seeds' sd / base draw's sd | {' | '.join(v(r, 'g') for r in RATIOS)} |",
        "|---|" + "---:|" * len(RATIOS),
    ]
    for rule in RULES:
        cells = " | ".join(
            f"{v(rows[str(r)][rule]['coverage'] * 100, '.1f')} ({v(rows[str(r)][rule]['median_width'], '.1f')})"
            for r in RATIOS
        )
        lines.append(f"| {rule}{' (shipped)' if rule == 'quadrature' else ''} | {cells} |")
    lines += [
        "",
        f"Coverage of the true mean gain, % (median width, pp), over {v(args.draws, 'd')} simulated claims of "
        f"{v(args.seeds, 'd')} seeds per column; the base draw's sd {v(shared_sd, '.2f')} pp, estimated on "
        f"{v(reruns, 'd')} reruns. The shipped rule covers {v(min(cover['quadrature']), '.1f')}-"
        f"{v(max(cover['quadrature']), '.1f')} %; the seeds' t-interval alone {v(min(cover['seeds alone']), '.1f')} % "
        f"where the seeds agree; Welch-Satterthwaite {v(min(cover['satterthwaite']), '.1f')} % where they spread.",
        "",
    ]
    command = " ".join(["python", "measurements/seed_coverage.py", *sys.argv[1:]])
    record = {
        "name": "seed_coverage",
        "schema": SCHEMA,
        "provenance": f"measured by {command} on {datetime.now(timezone.utc):%Y-%m-%d}",
        "config": {
            "command": command,
            "draws": args.draws,
            "seeds": args.seeds,
            "shared_sd": shared_sd,
            "reruns": reruns,
            "ratios": list(RATIOS),
        },
        "environment": environment(),
        "rows": rows,
        "fills": {"table": v.record("\n".join(lines))},
    }
    args.results.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.results}")
    print(record["fills"]["table"]["template"].format(*record["fills"]["table"]["values"]))


if __name__ == "__main__":
    main()

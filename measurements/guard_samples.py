"""Replies the guard passes and flags, per variant of an `mlft eval` LCB run (e.g. mitigation_decoding).

For each variant folder (completions.jsonl + outcomes.jsonl): the guard's numbers (coverage, degeneracy, lexical
validity) and N replies it passes and N it flags (degenerate or lexically invalid), drawn at random (seeded),
each with LCB's verdict, so a reader can judge whether the guard separates fixes from word salad. Outcomes
written before lexical validity existed get it computed from the reply (`mlft.benchmarks.lcb.guard.lexical_validity`).
Usage: python measurements/guard_samples.py EVAL_DIR [N]
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path

from mlft.benchmarks.lcb.guard import lexical_validity
from mlft.constants import VALID_SHARE
from mlft.stats import load_outcomes


def _verdict(o) -> str:
    if not o.counted:
        return "LCB: skipped"
    return "LCB: line error" if o.line_error else "LCB: pass"


def main() -> None:
    root = Path(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    for folder in sorted(p.parent for p in root.glob("*/outcomes.jsonl")):
        outcomes = {(o.task, o.source, o.language, o.id): o for o in load_outcomes(folder / "outcomes.jsonl")}
        records = [
            json.loads(x) for x in (folder / "completions.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()
        ]
        pairs = [
            (r, outcomes[key])
            for r in records
            if (key := (r["task"], r["source"], r["language"], str(r["id"]))) in outcomes
        ]
        if all(o.validity is None for _, o in pairs):  # outcomes from before the validity column
            pairs = [(r, replace(o, validity=lexical_validity(r["completion"], r["language"]))) for r, o in pairs]
        flagged = [(r, o) for r, o in pairs if o.degenerate or (o.validity is not None and o.validity <= VALID_SHARE)]
        passed = [(r, o) for r, o in pairs if (r, o) not in flagged]
        rng = random.Random(0)
        cov = sum(o.counted for _, o in pairs) / len(pairs)
        print(
            f"== {folder.name}: {len(pairs)} replies, coverage {cov:.1%}, flagged {len(flagged)} "
            f"(degenerate {sum(o.degenerate for _, o in pairs)}, lexically invalid "
            f"{sum(o.validity is not None and o.validity <= VALID_SHARE for _, o in pairs)})"
        )
        for name, group in (("passed", passed), ("flagged", flagged)):
            print(f"-- {name} (random {min(n, len(group))} of {len(group)})")
            for r, o in rng.sample(group, min(n, len(group))):
                why = " degenerate" if o.degenerate else ""
                validity = "–" if o.validity is None else f"{o.validity:.2f}"
                text = " ".join(r["completion"].split())[:90]
                print(f"  [{r['task'][:5]} {r['language']}] validity {validity}{why}, {_verdict(o)} | {text}")
        print()


if __name__ == "__main__":
    main()

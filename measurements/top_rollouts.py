"""What the reward paid most: the N rollouts of highest total reward of a GRPO run, to read.

Reads RUN/rollouts.jsonl (each optimizer step's highest- and lowest-reward rollouts, with every term's value and
LCB's verdict) and prints, as a markdown table, N of the "top" rollouts of highest total from the steps
>= --from-step (ties at the top, common with a gated 0/1 reward, are drawn at random with --seed), each with its
term values, its group's mean reward, the guard's view (degenerate, lexical validity without English) and the
reply on one line. Reading them is the check that the reward pays replies in the language, not salad.

    python measurements/top_rollouts.py runs/cpu/grpo_gated 20 --from-step 17
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mlft.benchmarks.lcb.guard import degeneracy_reason, lexical_validity
from mlft.training.rollouts import most_paid


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path)
    p.add_argument("n", type=int, nargs="?", default=20)
    p.add_argument("--from-step", type=int, default=1, help="only rollouts of this step and later")
    p.add_argument("--seed", type=int, default=0, help="draws among tied totals")
    args = p.parse_args(argv)
    path = args.run / "rollouts.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path}: no rollouts file (a GRPO run of this mlft writes one)")
    top = most_paid(args.run, args.from_step, args.seed)
    print(
        f"{len(top)} top rollouts at steps >= {args.from_step} in {path}; the {min(args.n, len(top))} of highest "
        f"total (ties drawn with seed {args.seed})\n"
    )
    print("| step | task | lang | total | terms | group mean | LCB | degenerate | valid | reply |")
    print("|---:|---|---|---:|---|---:|---|---|---:|---|")
    for r in top[: args.n]:
        degenerate = degeneracy_reason(r["completion"])
        valid = lexical_validity(r["completion"], r["language"])
        terms = ", ".join(f"{k} {v:.2f}" for k, v in r["terms"].items() if v is not None)
        text = r["completion"].replace("\n", " ⏎ ").replace("|", "\\|")
        print(
            f"| {r['step']} | {r['task'][:5]} | {r['language']} | {r['total']:.2f} | {terms} | "
            f"{r['group']['mean']:.2f} | {r.get('verdict', '')} | {degenerate or 'no'} | "
            f"{'' if valid is None else f'{valid:.2f}'} | {text} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""GRPO dev sweep: which reward weights, KL (beta) and group size keep the guard intact?

Each configuration is a short GRPO LoRA run of recipes/cpu/grpo_summed_control.yaml (or the recipe RECIPES names)
on the embedded model, evaluated at its last step on the dev split eval/grpo_dev.yaml (held-out seed items, never
LCB; fastText and langdetect), against one shared step-0 pass of the base model. Prints one line per configuration:
cross-lingual / monolingual LPR (fastText), cross-lingual LPR (langdetect), coverage, degeneracy, validity
(cross-lingual), NLL, the last logged reward terms and s/step; writes OUT/sweep.json, then the same rows as a Table 11
(OUT/sweep.md: intervals, paired tests against base, the guard's flags; `--results`: also as a results file).
Resumable: finished runs are kept.

    python measurements/grpo_sweep.py --out runs/grpo_sweep --steps 8 [--only NAME ...] [--results docs/results/X.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from mlft.io import curve_file as curves
from mlft.provenance import environment
from mlft.reports.mitigation import tables
from mlft.reports.results import SCHEMA, table_record
from mlft.reports.table_spec import judge_columns, load_spec
from mlft.training.passes import EvaluationOptions, Step, evaluate_step, evaluation_target
from mlft.training.recipe import load_recipe
from mlft.training.rollouts import read_reward_curves
from mlft.training.train import train

RECIPE = "recipes/cpu/grpo_summed_control.yaml"
SUITE = "grpo_dev"
DEFAULT = (
    "[{name: language, weight: 1.0}, {name: words, weight: 0.5}, {name: validity, weight: 0.5}, "
    "{name: degeneracy, weight: 1.0}]"
)
CONFIGS = {  # name -> recipe overrides
    "default b=0.04 G=4": [f"rewards={DEFAULT}"],
    "language only b=0.04 G=4": ["rewards=[{name: language, weight: 1.0}]"],
    "default b=0 G=4": [f"rewards={DEFAULT}", "training_args.beta=0.0"],
    "default b=0.04 G=8": [f"rewards={DEFAULT}", "training_args.num_generations=8"],
    "default lr=5e-4": [f"rewards={DEFAULT}", "training_args.learning_rate=5e-4"],
    "language only lr=5e-4": ["rewards=[{name: language, weight: 1.0}]", "training_args.learning_rate=5e-4"],
    # the gated term (recipes/cpu/grpo_gated.yaml's reward) against the language term alone, both with dropout
    # off, three seeds each for a spread (interleaved: a sweep stopped early still holds pairs)
    **{
        f"{term} lr=5e-4 seed={seed}": [
            f"rewards=[{{name: {reward}, weight: 1.0}}]",
            "training_args.learning_rate=5e-4",
            "training_args.disable_dropout=true",
            f"training_args.seed={seed}",
        ]
        for seed in (0, 1, 2)
        for term, reward in (("gated", "gated_language"), ("language", "language"))
    },
    # a lower learning rate: does the gated term keep the monolingual NLL inside the guard?
    **{
        f"gated lr=2e-4 seed={seed}": [
            "rewards=[{name: gated_language, weight: 1.0}]",
            "training_args.learning_rate=2e-4",
            "training_args.disable_dropout=true",
            f"training_args.seed={seed}",
        ]
        for seed in (0, 1, 2)
    },
    **{
        f"gated lr=5e-4 mu=2 eps_high=0.28 seed={seed}": [
            "rewards=[{name: gated_language, weight: 1.0}]",
            "training_args.learning_rate=5e-4",
            "training_args.disable_dropout=true",
            "training_args.num_iterations=2",
            "training_args.epsilon_high=0.28",
            f"training_args.seed={seed}",
        ]
        for seed in (0, 1, 2)
    },
    # the verifiable recipe (recipes/cpu/grpo_answered.yaml: its own mix, reward, lr and reply length) with its KL
    # (beta) as shipped, five times it and in between: does a stronger pull to the base keep the monolingual NLL in
    # the guard, and what does it cost in LPR?
    **{
        f"answered b={beta} seed={seed}": [f"training_args.beta={beta}", f"training_args.seed={seed}"]
        for beta in (0.04, 0.1, 0.2)
        for seed in (0, 1, 2)
    },
}
RECIPES = {name: "recipes/cpu/grpo_answered.yaml" for name in CONFIGS if name.startswith("answered ")}


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def _value(rows, step, task, metric, language="avg"):
    for r in rows:
        if (r["step"], r["variant"], r["task"], r["language"], r["metric"]) == (step, "model", task, language, metric):
            return r["value"]
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/grpo_sweep")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--only", nargs="*", help="configuration names (default: all)")
    p.add_argument("--results", type=Path, help="also write the Table 11 as a results file (docs/results/NAME.json)")
    p.add_argument(
        "--samples",
        type=int,
        default=1,
        help="replies per dev prompt at every evaluation (the suite's `samples`; the base pass too)",
    )
    args = p.parse_args(argv)
    out = Path(args.out)
    base = out / "base"
    base.mkdir(parents=True, exist_ok=True)
    ev = EvaluationOptions(suite=SUITE, suite_overrides={"samples": args.samples})
    evaluate_step(base, ev, Step(0, mode="baseline"), evaluation_target(ev).with_model("smollm2-135m-instruct"))
    results = {"base": {"run": str(base), "step": 0}}
    for name, overrides in CONFIGS.items():
        if args.only and name not in args.only:
            continue
        run_dir = out / _slug(name)
        t0 = time.time()
        recipe = load_recipe(
            RECIPES.get(name, RECIPE),
            [
                *overrides,
                f"run_dir={run_dir}",
                f"training_args.max_steps={args.steps}",
                f"training_args.save_steps={args.steps}",
                f"evaluation.suite={SUITE}",
                f"evaluation.suite_overrides.samples={args.samples}",
                "evaluation.at_start=false",
            ],
        )
        train(recipe, progress=False)
        marker = json.loads((run_dir / "complete").read_text())
        rewards = read_reward_curves(run_dir)
        step_times = [r["step_time"] for r in rewards if r.get("step_time")]
        results[name] = {
            "run": str(run_dir),
            "step": args.steps,
            "wall_s": round(time.time() - t0, 1),
            "s_per_step": round(sum(step_times) / len(step_times), 1) if step_times else None,
            "last_terms": {k: v["mean"] for k, v in rewards[-1]["terms"].items()} if rewards else {},
            "train_wall_s": marker["wall_s"],
        }
    head = (
        f"{'config':28} {'X-LPR':>6} {'M-LPR':>6} {'X-ld':>6} {'cov':>6} {'degen':>6} {'valid':>6} {'NLL':>6}  "
        "s/step  last terms"
    )
    print(head)
    for name, res in results.items():
        rows = curves.read_curves(res["run"])
        step = res["step"]
        cells = [
            _value(rows, step, "crosslingual", "lpr"),
            _value(rows, step, "monolingual", "lpr"),
            _value(rows, step, "crosslingual", "lpr@langdetect"),
            _value(rows, step, "crosslingual", "coverage"),
            _value(rows, step, "crosslingual", "degeneracy"),
            _value(rows, step, "crosslingual", "validity"),
        ]
        nll = _value(rows, step, "crosslingual", "nll")
        res["metrics"] = dict(
            zip(["x_lpr", "m_lpr", "x_lpr_langdetect", "x_coverage", "x_degeneracy", "x_validity"], cells), x_nll=nll
        )
        text = " ".join(f"{100 * c:6.1f}" if c is not None else f"{'-':>6}" for c in cells)
        terms = ", ".join(f"{k}={v:.2f}" for k, v in res.get("last_terms", {}).items() if v is not None)
        print(
            f"{name:28} {text} {nll if nll is None else round(nll, 3)!s:>6}  {res.get('s_per_step') or '-'!s:>6}  "
            f"{terms}"
        )
    (out / "sweep.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    # the same rows as a Table 11 with intervals, paired tests against base and the guard's flags (which
    # configurations keep coverage, degeneracy, validity and NLL inside the guard)
    spec = {
        "title": f"GRPO dev sweep ({SUITE}: held-out seed items, never LCB; {args.steps} steps, %)",
        "base": "base",
        "rows": [{"label": name, "run": res["run"], "step": res["step"]} for name, res in results.items()],
        "capability": judge_columns("langdetect"),
    }
    (out / "sweep_table.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    built = tables(load_spec(out / "sweep_table.yaml"))
    (out / "sweep.md").write_text("\n".join(t.render("markdown") for t in built), encoding="utf-8")
    print("\n" + built[0].render("table"))
    if args.results:
        command = " ".join(["python", "measurements/grpo_sweep.py", *(argv if argv is not None else sys.argv[1:])])
        record = {
            "name": args.results.stem,
            "schema": SCHEMA,
            "provenance": f"measured by {command} on {datetime.now(timezone.utc):%Y-%m-%d}",
            "config": {
                "command": command,
                "suite": SUITE,
                "steps": args.steps,
                "samples": args.samples,
                "configs": {name: CONFIGS[name] for name in results if name in CONFIGS},
                "recipes": {name: RECIPES.get(name, RECIPE) for name in results if name in CONFIGS},
            },
            "environment": environment(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "tables": {"mitigation": table_record(built[0], "base")},
        }
        args.results.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

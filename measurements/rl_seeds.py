"""The demo's RL row over training seeds, with the task axis: does GRPO that pays answering raise cross-lingual LPR
and keep the answers?

For each training seed S: `mlft train recipes/cpu/grpo_gated.yaml` from the embedded base model (the demo's RL row:
the `answered_language` reward, the relevance judge on open prompts; `--steps` steps, `training_args.seed=S`; its
evaluation callback scores the final checkpoint on `lcb_demo`, one reply per prompt, decoding seed 0, fastText and
langdetect) into OUT/gated_sS (resumable; `--no-train` only reads finished runs), then the task axis of its final
model (`mlft demo`'s `task_passes`: the arithmetic problems, ten per language in five languages, greedy), then one
table against the base row of a demo run at the same decoding seed (`--base`: measurements/demo_seeds.py's seed 0
folder, whose base pass is the same draw for every training seed). The per-seed tables become one seeds record
(`docs/results/rl_seeds.json`, the layout of demo_seeds.json), rendered as docs/results/rl_seeds.md: per metric the
value in each seed, the gain over base with its paired p (Holm), and the mean gain over seeds with its interval
(the seeds' t-interval and the shared base pass's own draw, `devtools.seeds`).

    python measurements/rl_seeds.py --seeds 0 1 2 --base runs/demo_seeds/seed0 --out runs/rl_seeds
    python measurements/rl_seeds.py --seeds 0 1 2 --base runs/demo_seeds/seed0 --out runs/rl_seeds --no-train

The issue's goal per seed: cross-lingual LPR >= 92 % with the guard quiet, and the task score not below base (the
paired interval excludes a drop of more than 2 pp); printed per seed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from statistics import NormalDist

from mlft.commands.demo import experiment
from mlft.provenance import environment
from mlft.reports.mitigation import tables, task_columns
from mlft.reports.results import SCHEMA, table_record
from mlft.reports.table_spec import Capability, RowSpec, TableSpec, check_spec
from mlft.reports.task_axis import task_number
from mlft.stats import paired_share_sd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/, beside measurements/ (not in the package)
from devtools.blocks import Fill, update_blocks  # noqa: E402
from devtools.seeds import (  # noqa: E402
    attach_draw,
    greedy_metrics,
    markdown,
    per_seed_tables,
    summarise_record,
)

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "results" / "rl_seeds.md"
# the RL rows this measures: recipe, row label, results file (docs/results/) and the overrides that make its
# evaluation callback score lcb_demo (one reply per prompt, langdetect beside fastText) after the last step
PRESETS = {
    "gated": {
        "recipe": "recipes/cpu/grpo_gated.yaml",
        "label": "+GRPO (answer x gated language)",
        "results": "rl_seeds.json",
        "overrides": ["evaluation.suite_overrides.samples=1"],
    },
    "answered": {  # the verifiable-prompt mix: arithmetic problems, the reply's number checked against `answer`
        "recipe": "recipes/cpu/grpo_answered.yaml",
        "label": "+GRPO (correct x gated language, arithmetic mix)",
        "results": "rl_seeds_answered.json",
        "overrides": ["evaluation.suite=lcb_demo", "evaluation.suite_overrides={judge: langdetect, samples: 1}"],
    },
    "answered_kl": {  # the same with five times the KL to the base (beta 0.2): the dev sweep's pick for the guard
        "recipe": "recipes/cpu/grpo_answered.yaml",
        "label": "+GRPO (correct x gated language, arithmetic mix, beta 0.2)",
        "results": "rl_seeds_answered_kl.json",
        "overrides": [
            "training_args.beta=0.2",
            "evaluation.suite=lcb_demo",
            "evaluation.suite_overrides={judge: langdetect, samples: 1}",
        ],
    },
    "answered_b01": {  # in between (beta 0.1): the dev split's best, run on LCB by the same rule
        "recipe": "recipes/cpu/grpo_answered.yaml",
        "label": "+GRPO (correct x gated language, arithmetic mix, beta 0.1)",
        "results": "rl_seeds_answered_b01.json",
        "overrides": [
            "training_args.beta=0.1",
            "evaluation.suite=lcb_demo",
            "evaluation.suite_overrides={judge: langdetect, samples: 1}",
        ],
    },
}
LABEL = PRESETS["gated"]["label"]  # results files written before `config.label` was recorded


def train_overrides(seed: int, run: Path, steps: int, preset: str = "gated") -> list[str]:
    """The `mlft train` overrides of one seed's run: its steps, seed, folder, and an evaluation of lcb_demo after
    the last step only."""
    return [
        f"training_args.max_steps={steps}", f"training_args.save_steps={steps}", f"training_args.seed={seed}",
        f"run_dir={run}", "evaluation.at_start=false", *PRESETS[preset]["overrides"],
    ]  # fmt: skip


def train(seed: int, out: Path, steps: int, preset: str = "gated") -> Path:
    run = out / f"{preset}_s{seed}"
    cmd = [sys.executable, "-m", "mlft", "train", PRESETS[preset]["recipe"], *train_overrides(seed, run, steps, preset)]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return run


def seed_table(seed: int, run: Path, base: Path, label: str = LABEL) -> list[dict]:
    """The RL run against the base row (the base run's step-0 pass and its task pass), with the task columns."""
    demo = experiment()
    task_base = run / "task" / "base"
    if not task_base.exists() and (base / "task" / "base").is_dir():  # the same greedy pass: reused, not redrawn
        shutil.copytree(base / "task" / "base", task_base)
    task, _ = demo.task_passes(run, {"grpo": run}, decoding_row=False)
    rows = [
        RowSpec(
            "base", run=str(base / "base"), step=0, capability_rows_file=str(task[("base", None)] / "scores.jsonl")
        ),
        RowSpec(label, run=str(run), capability_rows_file=str(task[("grpo", None)] / "scores.jsonl")),
    ]
    spec = TableSpec(rows, title=f"GRPO {label}, training seed {seed}", base="base")
    spec.capability = [Capability(**c) for c in task_columns()]
    built = tables(check_spec(spec, f"rl seed {seed}", run))
    (run / "table.md").write_text("\n".join(t.render("markdown") for t in built), encoding="utf-8")
    return table_record(built[0], "base", spec.confidence, spec.resamples)["rows"]


def top_rollouts(run: Path, n: int, from_step: int, seed: int = 0) -> dict:
    """The `n` rollouts of highest total reward of `run` at steps >= `from_step` (ties drawn with `seed`, as
    measurements/top_rollouts.py draws them), as a {template, values} table to read: step, task, language, the
    reward, its group's mean, LCB's verdict, lexical validity and the reply on one line (cut at 110 characters)."""
    from mlft.benchmarks.lcb.guard import lexical_validity
    from mlft.training.rollouts import most_paid, read_rollouts

    top, rows = most_paid(run, from_step, seed), read_rollouts(run)
    v = Fill()

    last = max(r["step"] for r in rows)
    lines = [
        "",
        f"The {v(min(n, len(top)), 'd')} of highest reward of the {v(len(top), 'd')} top rollouts of steps "
        f"{v(from_step, 'd')}-{v(last, 'd')} (the run logs each step's best and worst):",
        "",
        "| step | task | lang | reward | group mean | LCB | valid | reply |",
        "|---:|---|---|---:|---:|---|---:|---|",
    ]
    for r in top[:n]:
        valid = lexical_validity(r["completion"], r["language"])
        text = r["completion"].replace("\n", " ⏎ ")
        text = (text[:110] + "…" if len(text) > 110 else text).replace("|", "\\|").replace("{", "{{").replace("}", "}}")
        lines.append(
            f"| {v(r['step'], 'd')} | {r['task'][:5]} | {r['language']} | {v(r['total'], '.2f')} | "
            f"{v(r['group']['mean'], '.2f')} | {r.get('verdict', '')} | "
            f"{'–' if valid is None else v(valid, '.2f')} | {text} |"
        )
    return v.record("\n".join(lines) + "\n")


GOAL_CROSS = 92.0  # the issue's goal: cross-lingual LPR >= 92 % in each seed
TASK_DROP = 2.0  # ... and the task score's interval excludes a drop of more than 2 pp


def findings(record: dict) -> dict:
    """The docs' "What it shows" list as {template, values}: every number from the per-seed tables."""
    v = Fill()
    label = record["config"].get("label", LABEL)
    per_seed = per_seed_tables(record)
    rows = {(r["row"], r["task"], r["metric"]): r for r in summarise_record(record)}
    cross, mono = rows[(label, "crosslingual", "lpr")], rows[(label, "monolingual", "lpr")]
    task = rows[(label, "crosslingual", "task")]
    n = [task_number(t[label], "crosslingual")["n"] for t in per_seed.values()]
    ps = [p for p in task["p"] if p is not None] or [float("nan")]
    moved = max(abs(g) for g in task["gains"]) * min(n) / 100
    flagged = sum(bool(t[label]["flagged"]) for t in per_seed.values())
    why = sorted({f.split(": ")[1].split()[0] for t in per_seed.values() for f in t[label].get("flags", [])})
    walls = [r["train_wall_s"] / 60 for r in record["config"]["runs"].values()]
    reached = sum(x >= GOAL_CROSS for x in cross["values"])
    verdict = {"up": "rises", "down": "falls", "unclear": "is unclear"}
    lines = [
        "",
        f"- **Cross-lingual LPR**: {v(min(cross['values']), '.1f')}-{v(max(cross['values']), '.1f')} % over the seeds, "
        f"the goal ({v(GOAL_CROSS, '.0f')} %) reached in {v(reached, 'd')} of {v(len(cross['values']), 'd')}; the mean "
        f"gain {verdict[cross['verdict']]} over the seeds (the seeds differ by up to "
        f"{v(max(cross['values']) - min(cross['values']), '.1f')} pp). Monolingual LPR {verdict[mono['verdict']]}.",
        f"- **The answers**: the cross-lingual task score moves by at most {v(round(moved), 'd')} of "
        f"{v(min(n), 'd')} problems in a seed; the interval's lower end, {v(task['gain_low'], '+.1f')} pp, "
        + ("rules out" if task["gain_low"] > -TASK_DROP else "does not rule out")
        + f" a drop of {v(TASK_DROP, '.0f')} pp. The interval holds the training seeds and the problems' own "
        "sampling (the greedy base pass has no draw; each seed's discordant problems, `paired_share_sd`); each "
        f"seed's own paired test over the problems gives p {v(min(ps), '.2f')}"
        + (f"-{v(max(ps), '.2f')}" if max(ps) > min(ps) else " in each")
        + ". On this model the axis sits near its floor (the base answers a few cross-lingual problems and no "
        "monolingual one): it could show a collapse, hardly a small cost. Nor can this suite show the goal's "
        f"bound: a row that agrees with the base on all {v(min(n), 'd')} problems still gets "
        f"+-{v(100 * NormalDist().inv_cdf(0.975) * paired_share_sd(0, 0, min(n)), '.1f')} pp from the problems' "
        f"sampling, more than {v(TASK_DROP, '.0f')} pp.",
        f"- **The guard**: {v(flagged, 'd')} of the {v(len(per_seed), 'd')} seeds flagged ("
        + (", ".join(why) or "none")
        + "); cross-lingual degeneracy and validity over the seeds: "
        + ", ".join(rows[(label, "crosslingual", m)]["verdict"] for m in ("degeneracy", "validity"))
        + ".",
        f"- **Cost**: {v(min(walls), '.0f')}-{v(max(walls), '.0f')} min per RL row (training and its `lcb_demo` "
        "evaluation) on 2 cores shared with other jobs.",
    ]
    return v.record("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--base", type=Path, required=True, help="a demo run folder (its base pass and task/base)")
    ap.add_argument("--out", type=Path, default=Path("runs/rl_seeds"))
    ap.add_argument("--steps", type=int, default=16, help="GRPO steps (the demo's --rl-steps)")
    ap.add_argument("--recipe", choices=sorted(PRESETS), default="gated", help="which RL row (PRESETS)")
    ap.add_argument("--no-train", action="store_true", help="only read finished runs")
    ap.add_argument("--results", type=Path, help="default: docs/results/ and the preset's file")
    ap.add_argument(
        "--base-reruns",
        type=Path,
        default=ROOT / "tests" / "data" / "calibration_lcb_demo.json.gz",
        help="K = 1 reruns of the base pass that measure its own draw (measurements/demo_seeds.py's default)",
    )
    args = ap.parse_args()
    preset = PRESETS[args.recipe]
    label, results = preset["label"], args.results or ROOT / "docs" / "results" / preset["results"]
    seeds, runs = {}, {}
    for s in args.seeds:
        run = args.out / f"{args.recipe}_s{s}" if args.no_train else train(s, args.out, args.steps, args.recipe)
        seeds[str(s)] = seed_table(s, run, args.base, label)
        complete = json.loads((run / "complete").read_text(encoding="utf-8"))
        runs[str(s)] = {"run": str(run), "training_seed": s, "decoding_seed": 0, "train_wall_s": complete.get("wall_s")}
    command = " ".join(["python", "measurements/rl_seeds.py", *sys.argv[1:]])
    config = {"command": command, "recipe": preset["recipe"], "label": label, "steps": args.steps}
    record = {
        "name": Path(preset["results"]).stem,
        "schema": SCHEMA,
        "provenance": f"measured by {command} on {datetime.now(timezone.utc):%Y-%m-%d}",
        "config": {**config, "base": str(args.base), "runs": runs},
        "environment": environment(),
        "seeds": seeds,
        "fills": {"top_rollouts": top_rollouts(Path(runs[str(args.seeds[0])]["run"]), 20, args.steps // 2 + 1)},
    }
    base_config = json.loads((args.base / "results.json").read_text(encoding="utf-8"))["config"]
    print(attach_draw(record, args.base_reruns, greedy_metrics(base_config)))
    record["fills"]["findings"] = findings(record)
    results.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {results}")
    if results.resolve().parent == (ROOT / "docs" / "results").resolve() and PAGE.is_file():
        PAGE.write_text(update_blocks(PAGE.read_text(encoding="utf-8"), {record["name"]: record}), encoding="utf-8")
        print(f"updated {PAGE}")
    summary = summarise_record(record)
    print(markdown(summary, list(record["seeds"])))
    for s, rows in per_seed_tables(record).items():
        cross, task = rows[label]["tasks"]["crosslingual"]["lpr"], task_number(rows[label], "crosslingual")
        base = task_number(rows["base"], "crosslingual")
        print(
            f"seed {s}: cross-lingual LPR {100 * cross['value']:.1f} % (goal >= 92), task {100 * task['value']:.1f} % "
            f"against base {100 * base['value']:.1f} % (p {task.get('p_vs_base')}), flagged: {rows[label]['flagged']}, "
            f"{runs[s]['train_wall_s']:.0f} s training with its evaluation"
        )


if __name__ == "__main__":
    main()

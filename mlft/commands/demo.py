"""`mlft demo`: the README's main job, end to end on CPU with the embedded SmolLM2-135M-Instruct.

English-only vs multilingual LoRA SFT (recipes/cpu/), DPO on top of each, the eval callback at every
checkpoint (eval/lcb_demo.yaml), few-shot prompting baselines and quantized variants, then the LPR/WPR/LCPR
curves PNG and the mitigation table (Table 11 layout). Rerunning resumes: finished runs and passes are kept.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import yaml

from mlft.errors import DataError
from mlft.paths import project_root, shared_dir

FEWSHOT = [{"variant": "Q/A template", "overrides": ["prompting.mode=qa"]},
           {"variant": "1-shot", "overrides": ["prompting.mode=qa", "prompting.shots=1"]},
           {"variant": "5-shot", "overrides": ["prompting.mode=qa", "prompting.shots=5"]}]


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="the main job: English vs multilingual SFT/DPO on CPU, curves + table",
                       description=__doc__)
    p.add_argument("--out", default="runs/demo", help="folder for the runs, curves.png and mitigation.md")
    p.add_argument("--sft-steps", type=int, default=32, help="SFT optimizer steps per run (checkpoint every half)")
    p.add_argument("--dpo-steps", type=int, default=12, help="DPO steps per run (0: no DPO)")
    p.add_argument("--suite", default="lcb_demo", help="eval suite of the callback")
    p.add_argument("--max-new-tokens", type=int, help="override the suite's max_new_tokens (faster passes)")
    p.add_argument("--quantized", default="w8,w4,w8a8", help="quantized variants of the multilingual run ('' = none)")
    p.add_argument("--no-fewshot", action="store_true", help="skip the few-shot prompting baselines")
    p.set_defaults(func=run)


def _ensure_lcb_data() -> None:
    if os.environ.get("MLFT_LCB_DATA"):
        return
    shared = shared_dir()
    if shared and (shared / "lcb" / "test_sets.zip").is_file():
        os.environ["MLFT_LCB_DATA"] = str(shared / "lcb")


def _train(recipe_path: str, overrides: list[str]) -> Path:
    from mlft.training.recipe import load_recipe
    from mlft.training.train import train

    recipe = load_recipe(project_root() / recipe_path, overrides)
    print(f"\n=== mlft train {recipe_path} {' '.join(overrides)}", flush=True)
    return train(recipe, progress=False)


def _share_baseline(src: Path, dst: Path) -> None:
    """Both SFT runs start from the same model and suite: copy the step-0 pass instead of redoing it."""
    from mlft.training import curves

    if (0, "model") in curves.done(dst):
        return
    rows = [r for r in curves.read_curves(src) if r["step"] == 0 and r["variant"] == "model"]
    dst.mkdir(parents=True, exist_ok=True)
    curves.append_pass(dst, 0, "model", rows, 0.0, f"copied from {src}")


def _table_spec(out: Path, runs: dict[str, Path], fewshot: bool, quantized: list[str]) -> Path:
    eng, mul = str(runs["english_sft"]), str(runs["multilingual_sft"])
    rows = [{"label": "base", "run": eng, "step": 0}]
    if fewshot:
        rows += [{"label": "+Q/A template", "run": eng, "step": 0, "variant": "Q/A template"},
                 {"label": "+1-shot", "run": eng, "step": 0, "variant": "1-shot"},
                 {"label": "+5-shot", "run": eng, "step": 0, "variant": "5-shot"}]
    rows.append({"label": "+English SFT", "run": eng})
    if "english_dpo" in runs:
        rows.append({"label": "+English pref. tuning", "run": str(runs["english_dpo"])})
    rows.append({"label": "+Multilingual SFT", "run": mul})
    if "multilingual_dpo" in runs:
        rows.append({"label": "+Multilingual pref. tuning", "run": str(runs["multilingual_dpo"])})
    spec = {"title": "Language confusion mitigation on SmolLM2-135M-Instruct (CPU demo, Table 11 layout, %)",
            "rows": rows}
    if quantized:
        variants = ["model", *quantized]
        spec["quantization"] = [{"label": "base", "run": mul, "step": 0, "variants": variants},
                                {"label": "+Multilingual SFT", "run": mul, "variants": variants}]
    path = out / "table.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def run(args) -> int:
    from mlft.reports.curves import curve_table, load_runs, plot_curves
    from mlft.reports.mitigation import build, load_spec
    from mlft.training import curves
    from mlft.training.passes import evaluate_step
    from mlft.training.recipe import EvaluationOptions, PromptVariant

    t0 = time.time()
    _ensure_lcb_data()
    if not os.environ.get("MLFT_LCB_DATA"):
        raise DataError("the demo evaluates on the LCB test sets: run `mlft lcb --from PATH` or set "
                        "MLFT_LCB_DATA=PATH (offline), or run it where the download works")
    out = Path(args.out)
    quantized = [q for q in args.quantized.split(",") if q]
    half = max(1, args.sft_steps // 2)
    suite_overrides = [f"decoding.max_new_tokens={args.max_new_tokens}"] if args.max_new_tokens else []
    ev_args = [f"evaluation.suite={args.suite}", f"evaluation.suite_overrides={suite_overrides}"]
    common = [f"training_args.max_steps={args.sft_steps}", f"training_args.save_steps={half}", *ev_args]
    runs = {"english_sft": out / "english_sft", "multilingual_sft": out / "multilingual_sft"}
    _train("recipes/cpu/english_sft.yaml", [*common, f"run_dir={runs['english_sft']}"])
    _share_baseline(runs["english_sft"], runs["multilingual_sft"])
    _train("recipes/cpu/multilingual_sft.yaml",
           [*common, f"run_dir={runs['multilingual_sft']}", f"evaluation.quantized=[{','.join(quantized)}]"])
    if not args.no_fewshot:
        print("\n=== few-shot prompting baselines of the base model (step 0)", flush=True)
        ev = EvaluationOptions(suite=args.suite, suite_overrides=suite_overrides, fewshot=True, fewshot_variants=[
            PromptVariant(f["variant"], args.suite, [*suite_overrides, *f["overrides"]]) for f in FEWSHOT])
        evaluate_step(runs["english_sft"], ev, 0, model_ref="smollm2-135m-instruct", progress=False)
    if args.dpo_steps > 0:
        for kind in ("english", "multilingual"):
            runs[f"{kind}_dpo"] = out / f"{kind}_dpo"
            _train(f"recipes/cpu/{kind}_dpo.yaml",
                   [f"model={runs[f'{kind}_sft'] / 'final'}", f"run_dir={runs[f'{kind}_dpo']}",
                    f"training_args.max_steps={args.dpo_steps}", f"training_args.save_steps={args.dpo_steps}",
                    *ev_args, "evaluation.at_start=false"])

    print("\n=== curves", flush=True)
    loaded = load_runs(list(runs.values()))
    print(curve_table(loaded))
    png = plot_curves(loaded, out / "curves.png")
    print(f"wrote {png}")
    print("\n=== mitigation table", flush=True)
    text = build(load_spec(_table_spec(out, runs, not args.no_fewshot, quantized)))
    (out / "mitigation.md").write_text(build(load_spec(out / "table.yaml"), "markdown"), encoding="utf-8")
    print(text)
    passes = [dict(p, run=name) for name, d in runs.items() for p in curves.read_passes(d)]
    timing = {"wall_s": round(time.time() - t0, 1), "eval_passes": passes}
    (out / "timings.json").write_text(json.dumps(timing, indent=2), encoding="utf-8")
    print("eval passes (s): " + ", ".join(f"{p['run']}@{p['step']}/{p['variant']}={p['seconds']:.0f}"
                                         for p in passes if p["seconds"]))
    print(f"demo wall time: {timing['wall_s']:.0f} s; wrote {out / 'mitigation.md'}, {png}, {out / 'timings.json'}")
    return 0

"""The model card of a finished run (`final/README.md`), and publishing `final/` to the Hugging Face Hub.

The card is built only from files the run directory holds, so it always describes what was trained:
chain.json (base model and lineage), recipe.yaml (trainer, training arguments, LoRA), mix/stats.json and
mix/decontamination.json (the data mix with shares and row counts, LCB hold-out and phrasing overlap),
curves.jsonl (the last step's LCB numbers with their 95 % intervals and the guard), complete and results.json
(steps, wall time, versions, git commit).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mlft.constants import GUARD_METRICS, METRICS, TASKS
from mlft.io.curve_file import read_curves

CARD = "README.md"


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _pct(row: dict | None) -> str:
    if not row or row.get("value") is None:
        return "–"
    text = f"{100 * row['value']:.1f}"
    if row.get("low") is not None and row.get("high") is not None:
        text += f" [{100 * row['low']:.1f}, {100 * row['high']:.1f}]"
    return text


def _lcb_section(run_dir: Path) -> list[str]:
    rows = [r for r in read_curves(run_dir) if r["variant"] == "model"]
    if not rows:
        return ["No LCB evaluation was recorded for this run."]
    step = max(int(r["step"]) for r in rows)
    at = {(r["task"], r["language"], r["metric"]): r for r in rows if int(r["step"]) == step}
    base = {(r["task"], r["language"], r["metric"]): r for r in rows if int(r["step"]) == 0}
    suite = next(iter(at.values()))["suite"]
    out = [
        f"Language Confusion Benchmark (suite `{suite}`), step {step}; 95 % intervals in brackets "
        "(stratified bootstrap). LPR alone rewards degenerate output: read it beside coverage, degeneracy and "
        "lexical validity (share of replies whose words are words of the language; word salad scores low).",
        "",
        "| task | LPR | WPR | LCPR | coverage | degeneracy | lexical validity | LPR at step 0 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task in TASKS:
        if (task, "avg", "lpr") not in at:
            continue
        cells = [_pct(at.get((task, "avg", m))) for m in (*METRICS, *GUARD_METRICS)]
        out.append(f"| {task} | " + " | ".join(cells) + f" | {_pct(base.get((task, 'avg', 'lpr')))} |")
    langs = sorted({lang for (t, lang, m) in at if m == "lpr" and lang != "avg"})
    if langs:
        out += ["", "LPR per language (%):", "", "| task | " + " | ".join(langs) + " |", "|---|" + "---|" * len(langs)]
        for task in TASKS:
            if any((task, lang, "lpr") in at for lang in langs):
                out.append(
                    f"| {task} | "
                    + " | ".join(
                        "–" if (task, lang, "lpr") not in at else f"{100 * at[(task, lang, 'lpr')]['value']:.0f}"
                        for lang in langs
                    )
                    + " |"
                )
    return out


def model_card(run_dir: str | Path) -> str:
    run_dir = Path(run_dir)
    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text(encoding="utf-8")) or {}
    chain = _json(run_dir / "chain.json")
    stats = _json(run_dir / "mix" / "stats.json")
    decon = _json(run_dir / "mix" / "decontamination.json")
    done = _json(run_dir / "complete")
    results = _json(run_dir / "results.json")
    env = results.get("environment", {})
    base = (chain.get("lineage") or [{}])[0].get("model") or recipe.get("model")
    languages = sorted((stats.get("by_language") or {}).keys())
    lora = recipe.get("lora") or {}
    method = "LoRA" if lora.get("enabled") else "full fine-tuning"
    front = {
        "base_model": base if base and "/" in str(base) else None,
        "library_name": "transformers",
        "language": languages or None,
        "tags": ["mlft", "language-confusion", "lcb", recipe.get("trainer", "sft")],
    }
    front = {k: v for k, v in front.items() if v}
    name = run_dir.name
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(),
        "---",
        "",
        f"# {name}",
        "",
        f"{recipe.get('trainer', 'sft').upper()} ({method}) of `{base}` with mlft "
        f"({env.get('versions', {}).get('mlft', '?')}), to mitigate language confusion (LCB).",
        "",
        "## Model",
        "",
        f"- base model: `{base}`",
    ]
    for step in (chain.get("lineage") or [])[1:]:
        lines.append(
            f"- then: run `{step.get('run')}` — {step.get('trainer')} ({step.get('method')}) on `{step.get('mix')}`"
            if "run" in step
            else f"- then: merged adapter `{step.get('adapter')}`"
        )
    if done.get("final") == "merged":
        lines.append("- this folder holds the merged full weights (the run's LoRA adapter is in `final_adapter/`)")
    lines += [
        "",
        "## Training",
        "",
        f"- recipe: `{Path(str(recipe.get('mix', ''))).stem}` mix, trainer "
        f"`{recipe.get('trainer')}`, {method}"
        + (f" (r={lora.get('r')}, alpha={lora.get('alpha')})" if lora.get("enabled") else ""),
        f"- steps: {done.get('global_step', '?')}, final train loss {done.get('train_loss', '?')}, "
        f"wall time {done.get('wall_s', '?')} s (of which evaluation {done.get('eval_s', '?')} s)",
    ]
    args = recipe.get("training_args") or {}
    keys = [
        k
        for k in (
            "learning_rate",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "max_steps",
            "num_train_epochs",
            "max_length",
            "beta",
            "seed",
        )
        if k in args
    ]
    if keys:
        lines.append("- " + ", ".join(f"{k}={args[k]}" for k in keys))
    lines += ["", "## Data mix", ""]
    if stats:
        lines += [
            f"{stats.get('total')} rows ({stats.get('kind')}, seed {stats.get('seed')}):",
            "",
            "| source | language | rows | share |",
            "|---|---|---|---|",
        ]
        for src, langs in (stats.get("by_source") or {}).items():
            for lang, cell in langs.items():
                lines.append(f"| {src} | {lang} | {cell['rows']} | {100 * cell['share']:.1f} % |")
    if decon:
        dropped = decon.get("dropped", {})
        over = decon.get("phrasing_overlap") or {}
        lines += [
            "",
            f"LCB hold-out: {decon.get('inspected', 0)} rows inspected against {decon.get('lcb_prompts', 0)} "
            f"LCB prompts, {dropped.get('total', 0)} dropped (exact {dropped.get('exact', 0)}, "
            f"{decon.get('ngram')}-gram {dropped.get('ngram', 0)})"
            + (f"; rows using one of LCB's eight request phrasings: {over.get('rows', 0)}" if over else "")
            + ".",
        ]
    lines += [
        "",
        "## Evaluation",
        "",
        *_lcb_section(run_dir),
        "",
        "## How to reproduce",
        "",
        "```bash",
        f"mlft train {run_dir.name}/recipe.yaml   # the resolved recipe this run saved",
        "```",
        "",
    ]
    if env.get("git_commit"):
        lines.append(
            f"mlft commit `{env['git_commit']}`; "
            + ", ".join(
                f"{k} {v}"
                for k, v in (env.get("versions") or {}).items()
                if v and k in ("torch", "transformers", "trl", "peft", "accelerate")
            )
            + "."
        )
    return "\n".join(lines) + "\n"


def write_card(run_dir: str | Path, folder: str | Path | None = None) -> Path:
    run_dir = Path(run_dir)
    target = Path(folder) if folder else run_dir / "final"
    path = target / CARD
    path.write_text(model_card(run_dir), encoding="utf-8")
    return path


def push(run_dir: str | Path, repo_id: str, private: bool = True, api=None) -> str:
    """Upload final/ (weights, tokenizer, card) to the Hub; returns the commit URL."""
    from huggingface_hub import HfApi

    api = api or HfApi()
    folder = Path(run_dir) / "final"
    api.create_repo(repo_id=repo_id, private=private, exist_ok=True, repo_type="model")
    info = api.upload_folder(
        repo_id=repo_id, folder_path=str(folder), repo_type="model", commit_message=f"mlft: {Path(run_dir).name}"
    )
    return str(getattr(info, "commit_url", info))

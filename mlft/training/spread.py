"""Prompts with spread: keep the prompts of a built `kind: prompts` mix that the base model answers right sometimes
but not always.

GRPO takes each reply's advantage within its prompt's group: a prompt whose K replies all earn the same reward
(all right or all wrong) gives a group without spread, zero advantage, no gradient. A base pass with K replies per
prompt (`mlft eval grpo_spread --prompts MIX/mix/prompts.jsonl`, the lcb kind with `samples: K`) decides: a prompt
is kept when the share of its replies that the reward term passes (value > `above`; for `language` and
`gated_language`: the language verdict holds) is strictly between 0 and 1.

    mlft data mix data_mixes/cpu/grpo_prompts.yaml --out runs/rl_mix          # mix/train.jsonl + mix/prompts.jsonl
    mlft eval grpo_spread --out runs/rl_mix/base_pass                    # K replies per prompt (the base model)
    mlft data mix filter runs/rl_mix --pass runs/rl_mix/base_pass --out runs/rl_spread
    # a recipe: mix: runs/rl_spread/filtered_mix.yaml

Written to OUT: mix/train.jsonl (the kept rows, in the mix's order), mix/stats.json (the mix's statistics plus
`filter`: kept / dropped per language), mix/filter.json (per prompt: replies, passed, share, kept) and
filtered_mix.yaml, a `kind: prompts` mix of the kept rows (a local source) that a recipe's `mix:` names.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml

from mlft.completions import read_completions
from mlft.data.prompt_file import PROMPT_FILE, mix_folder, prompt_rows
from mlft.data.stats import mix_stats
from mlft.errors import DataError
from mlft.io.jsonl import read_jsonl, write_jsonl
from mlft.training.reward_terms import ReplyScorer, RewardSpec
from mlft.training.rewards import RewardFunction, validate_rewards

FILTERED_MIX = "filtered_mix.yaml"


def _pass_completions(pass_dir: Path) -> Path:
    """completions.jsonl of a pass: in `pass_dir`, or in its one variant folder (an `mlft eval --out` folder)."""
    if pass_dir.is_file():
        return pass_dir
    if (pass_dir / "completions.jsonl").is_file():
        return pass_dir / "completions.jsonl"
    found = sorted(pass_dir.glob("*/completions.jsonl"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise DataError(f"{pass_dir}: no completions.jsonl (give the `mlft eval --out` folder of the base pass)")
    raise DataError(f"{pass_dir}: several variants ({', '.join(f.parent.name for f in found)}); give one's folder")


def filter_mix(
    mix_dir: str | Path,
    pass_dir: str | Path,
    out: str | Path,
    reward: str = "language",
    options: dict | None = None,
    above: float = 0.0,
    scorer=None,
) -> dict:
    """Keep the mix's prompts whose share of passed replies in the base pass is strictly between 0 and 1; write
    OUT (module docstring) and return the filter's summary (filter.json without the per-prompt rows)."""
    folder = mix_folder(mix_dir)
    rows = read_jsonl(folder / "train.jsonl")
    if not rows:
        raise DataError(f"{folder / 'train.jsonl'}: no rows")
    spec = validate_rewards([RewardSpec(reward, 1.0, dict(options or {}))], "--reward")[0]
    completions = read_completions(_pass_completions(Path(pass_dir)))
    languages = {r["id"]: r["language"] for r in rows}
    mine = [c for c in completions if c.id in languages]
    if not mine:
        raise DataError(
            f"{pass_dir}: none of its {len(completions)} replies answers a prompt of {folder} (ids "
            f"differ: run the pass on {folder / PROMPT_FILE})"
        )
    for c in mine:
        if c.language != languages[c.id]:
            raise DataError(
                f"{pass_dir}: reply to {c.id!r} is scored as {c.language!r}, the mix asks for {languages[c.id]!r}"
            )
    tasks = {r["id"]: r.get("task") or "monolingual" for r in rows}
    term = RewardFunction(spec, scorer or ReplyScorer())
    values = term(
        completions=[c.completion for c in mine],
        language=[c.language for c in mine],
        task=[tasks[c.id] for c in mine],
        id=[c.id for c in mine],
    )
    replies, passed = Counter(), Counter()
    for c, v in zip(mine, values):
        replies[c.id] += 1
        passed[c.id] += int(v is not None and v > above)
    if max(replies.values()) < 2:
        raise DataError(
            f"{pass_dir}: one reply per prompt: a share strictly between 0 and 1 needs K >= 2 replies "
            "(run the pass with samples: K, e.g. `mlft eval grpo_spread`)"
        )
    prompts, by_language = {}, {}
    for pid, lang in languages.items():
        n, k = replies[pid], passed[pid]
        why = "unscored" if n == 0 else "all_wrong" if k == 0 else "all_right" if k == n else "kept"
        prompts[pid] = {
            "language": lang,
            "task": tasks[pid],
            "replies": n,
            "passed": k,
            "share": k / n if n else None,
            "kept": why == "kept",
            "why": why,
        }
        cell = by_language.setdefault(lang, {"kept": 0, "all_right": 0, "all_wrong": 0, "unscored": 0})
        cell[why] += 1
    kept_rows = [r for r in rows if prompts[r["id"]]["kept"]]
    if not kept_rows:
        raise DataError(
            f"{pass_dir}: no prompt has replies both passed and failed by {reward!r}: nothing to keep "
            f"({sum(c['all_right'] for c in by_language.values())} all right, "
            f"{sum(c['all_wrong'] for c in by_language.values())} all wrong)"
        )
    summary = {
        "mix": str(folder),
        "pass": str(pass_dir),
        "reward": reward,
        "options": spec.options,
        "above": above,
        "replies_per_prompt": dict(sorted(Counter(replies[p] for p in languages).items())),
        "prompts": {
            "total": len(prompts),
            **{w: sum(c[w] for c in by_language.values()) for w in ("kept", "all_right", "all_wrong", "unscored")},
        },
        "rows": {"total": len(rows), "kept": len(kept_rows)},
        "by_language": dict(sorted(by_language.items())),
        "unknown_replies": len(completions) - len(mine),
    }
    out = Path(out)
    target = out / "mix"
    write_jsonl(target / "train.jsonl", kept_rows)
    stats = mix_stats(kept_rows)
    stats["kind"], stats["filter"] = "prompts", summary
    (target / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (target / "filter.json").write_text(
        json.dumps({**summary, "per_prompt": prompts}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    listed = prompt_rows(kept_rows)
    if listed is not None:
        write_jsonl(target / PROMPT_FILE, listed)
    _write_mix_file(out, folder, len(kept_rows))
    return summary


def _write_mix_file(out: Path, source_mix: Path, total: int) -> Path:
    """filtered_mix.yaml: a `kind: prompts` mix of the kept rows, every row once (same seed and decontamination
    settings as the mix it came from, when its mix.yaml is there)."""
    origin = {}
    if (source_mix / "mix.yaml").is_file():
        origin = yaml.safe_load((source_mix / "mix.yaml").read_text(encoding="utf-8")) or {}
    data = {
        "kind": "prompts",
        "total": total,
        "seed": origin.get("seed", 0),
        "sources": [
            {
                "name": "spread",
                "type": "local",
                "path": "mix/train.jsonl",
                "format": "prompt",
                "language_column": "language",
                "share": 1.0,
            }
        ],
    }
    if origin.get("decontaminate"):
        data["decontaminate"] = origin["decontaminate"]
    path = out / FILTERED_MIX
    head = (
        f"# The prompts of {source_mix} that the base model answers right sometimes but not always\n"
        f"# (`mlft data mix filter`; mix/filter.json says why each prompt was kept or dropped). A recipe: mix: {path}\n"
    )
    path.write_text(head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path

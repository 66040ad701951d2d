"""What the shipped GRPO recipes pay for: reply class x recipe, as reward / the honest reply's reward.

Reads the hand-written adversarial replies of tests/data/reward_probes.yaml (LCB-style prompts in 12 languages,
each with an honest fluent reply and probes: refusals, echoes, loops, padding, close languages...), builds each
shipped GRPO recipe's reward functions from its `rewards:` and `scorer:` blocks (`reward_functions`, as
`mlft train` hands them to trl) and calls them the way trl does (prompts, completions, the mix's `language`
column), summing the terms with the recipe's weights (trl's `reward_weights`; a term returning None is left out).
Each cell is the worst case of the class: the largest ratio of a probe's reward to the honest reply's reward for
the same prompt (and how many probes of the class reach 0.5 of it). A dishonest class should stay below 0.5;
honest replies with code, numbers or a short sentence should earn >= 0.8.

    python measurements/reward_probes.py                  # every recipe under recipes/ with trainer: grpo
    python measurements/reward_probes.py --probes FILE --recipes recipes/cpu/grpo_gated.yaml
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's mlft (run against another checkout: that one's copy of the script)
PROBES = ROOT / "tests" / "data" / "reward_probes.yaml"
HONEST = ("honest_code", "honest_numbers", "honest_short", "honest_terse")


def _load(path: Path):
    """The recipe, its model replaced by the embedded one when it names a model not trained yet (a recipe on an
    SFT adapter): the reward terms do not depend on the model."""
    from mlft.errors import ConfigError
    from mlft.training.recipe import load_recipe

    try:
        return load_recipe(path, check_linked=False)
    except ConfigError as exc:
        if "model" not in str(exc):
            raise
        return load_recipe(path, ["model=smollm2-135m-instruct"], check_linked=False)


def shipped_grpo_recipes(root: Path = ROOT) -> list[Path]:
    """Every recipe (not an include, `_*.yaml`) under recipes/ whose trainer is grpo and whose reward reads no
    column the probes lack (`required_columns`)."""
    out = []
    for path in sorted((root / "recipes").rglob("*.yaml")):
        if path.name.startswith("_"):
            continue
        try:
            recipe = _load(path)
        except Exception:  # noqa: BLE001 - not a recipe (a mix, a config): skipped
            continue
        if recipe.trainer == "grpo" and not required_columns(recipe):
            out.append(path)
    return out


def required_columns(recipe) -> set[str]:
    """The mix columns the recipe's reward terms require (a term's `required_columns`, e.g. `answer` for
    `answered_language` with `source: answer`): the probes are open LCB-style prompts without them, so such a
    recipe is measured on its own verifiable prompts (tests/test_answer_reward.py), not here."""
    from mlft.training.rewards import resolve_term

    need = set()
    for spec in recipe.rewards:
        columns = getattr(resolve_term(spec.name, "rewards"), "required_columns", None)
        need |= set(columns(**spec.options)) if columns else set()
    return need


def load_probes(path: Path = PROBES) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def recipe_rewards(path: Path, words: Path | None = None):
    """(reward functions, weights) of a recipe, as `mlft train` builds them."""
    from mlft.training.reward_terms import ReplyScorer
    from mlft.training.rewards import reward_functions

    recipe = _load(path)
    scorer = recipe.scorer.scorer()
    if words is not None:
        scorer = ReplyScorer(recipe.scorer.lid, words, scorer.options)
    return reward_functions(recipe.rewards, scorer)


def rewards_of(path: Path, probes: list[dict], words: Path | None = None) -> dict[tuple[str, str], float]:
    """{(prompt id, class): summed weighted reward} of every reply, one trl-style call per term for all replies."""
    from mlft.training.rollouts import weighted_total

    funcs, weights = recipe_rewards(path, words)
    keys, prompts, completions, languages = [], [], [], []
    for p in probes:
        for cls, text in p["replies"].items():
            keys.append((p["id"], cls))
            prompts.append([{"role": "user", "content": p["prompt"]}])
            completions.append([{"role": "assistant", "content": text}])
            languages.append(p["language"])
    values = [f(prompts=prompts, completions=completions, language=languages, trainer_state=None) for f in funcs]
    return {k: weighted_total([v[i] for v in values], weights) or 0.0 for i, k in enumerate(keys)}


def class_ratios(rewards: dict[tuple[str, str], float], probes: list[dict]) -> dict[str, list[float | None]]:
    """{class: [reward / honest reward of the same prompt, per probe]} (None where the honest reply earns <= 0)."""
    out: dict[str, list[float | None]] = {}
    for p in probes:
        honest = rewards[(p["id"], "honest")]
        for key in p["replies"]:
            if key == "honest":
                continue
            r = rewards[(p["id"], key)]
            out.setdefault(key.split("#")[0], []).append(r / honest if honest > 0 else None)  # `class#2`: a 2nd probe
    return out


def table(recipes: list[Path], probes: list[dict], words: Path | None = None) -> dict[str, dict[str, list]]:
    """{recipe name: {class: ratios}}, plus '(honest reward)': the honest replies' rewards per recipe."""
    out = {}
    for path in recipes:
        rewards = rewards_of(path, probes, words)
        ratios = class_ratios(rewards, probes)
        ratios["(honest reward)"] = [rewards[(p["id"], "honest")] for p in probes]
        out[str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)] = ratios
    return out


def _cell(cls: str, values: list) -> str:
    if cls == "(honest reward)":
        return f"{min(values):.2f}–{max(values):.2f}"
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    worst = min(known) if cls in HONEST else max(known)
    bad = sum(v < 0.8 for v in known) if cls in HONEST else sum(v >= 0.5 for v in known)
    return f"{worst:.2f} ({bad}/{len(values)})"


def markdown(result: dict[str, dict[str, list]]) -> str:
    names = list(result)
    classes = sorted({c for r in result.values() for c in r}, key=lambda c: (c in HONEST, c.startswith("("), c))
    lines = [
        "| class | " + " | ".join(f"`{n.removeprefix('recipes/')}`" for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for cls in classes:
        cells = [_cell(cls, result[n][cls]) if cls in result[n] else "" for n in names]
        lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--probes", type=Path, default=PROBES)
    p.add_argument("--recipes", type=Path, nargs="*", help="default: every shipped recipe with trainer grpo")
    p.add_argument("--words", type=Path, help="the official English word list (default: as the recipe says)")
    args = p.parse_args(argv)
    words = args.words
    if words is None and os.environ.get("MLFT_LCB_DATA"):
        candidate = Path(os.environ["MLFT_LCB_DATA"]) / "words"
        words = candidate if candidate.exists() else None
    recipes = [r.resolve() for r in args.recipes] if args.recipes else shipped_grpo_recipes()
    probes = load_probes(args.probes)
    n = sum(len(x["replies"]) for x in probes)
    print(f"{n} replies to {len(probes)} prompts ({args.probes}); {len(recipes)} recipes\n")
    print("Cell: the worst probe's reward / the honest reply's reward (dishonest classes: the largest ratio, and")
    print("how many probes reach 0.5; honest classes: the smallest, and how many fall below 0.8).\n")
    print(markdown(table(recipes, probes, words)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`mlft data mix` (was `mlft mix`): validate a data mix, or build it (mixed JSONL + stats + decontamination report)
and summarise it; `mlft data mix filter MIX_DIR --pass PASS_DIR --out OUT`: keep a prompts mix's prompts that the
base model answers right sometimes but not always (mlft/training/spread.py)."""

from __future__ import annotations

import json
from pathlib import Path

from mlft.errors import ConfigError


def _describe(p) -> None:
    """The description lists the mix keys with their help (read from the config dataclasses when asked)."""
    from mlft.config import help_of
    from mlft.data.mix_config import MixConfig
    from mlft.data.sources import SourceConfig

    keys = "; ".join(f"{k}: {v}" for k, v in {**help_of(MixConfig), **help_of(SourceConfig)}.items() if v)
    p.description = (
        "Build the exact training mix of a data-mix file into OUT/mix/ "
        "(train.jsonl, stats.json, decontamination.json, mix.yaml). Keys: " + keys
    )


def add_parser(sub, name: str = "mix", **kw):
    p = sub.add_parser(name, **kw, help="validate or build a data mix (data_mixes/*.yaml)", later=_describe)
    p.add_argument("mix", help="data-mix YAML, e.g. data_mixes/cpu/multilingual_sft.yaml")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. total=500 seed=1")
    p.add_argument("--out", type=Path, help="output folder (omit to only validate and show the plan)")
    f = p.add_argument_group(
        "mlft data mix filter MIX_DIR --pass PASS_DIR --out OUT",
        "keep the prompts of a built prompts mix (MIX_DIR: an `mlft data mix --out` folder or a run directory) whose "
        "share of replies passed by the reward term, in a base pass with K replies per prompt (`mlft eval "
        "grpo_spread`), is strictly between 0 and 1; writes OUT/mix/ (train.jsonl, stats.json, filter.json) and "
        "OUT/filtered_mix.yaml for a recipe's `mix:`",
    )
    f.add_argument("--pass", dest="pass_dir", type=Path, help="the base pass: an `mlft eval --out` folder")
    f.add_argument(
        "--reward", default="language", help="reward term whose verdict decides (default language; e.g. gated_language)"
    )
    f.add_argument("--reward-options", default="{}", help="the term's options as JSON, e.g. '{\"floor\": 0}'")
    f.add_argument(
        "--above", type=float, default=0.0, help="a reply passes when the term's value is above this (default 0)"
    )
    p.set_defaults(func=run)
    return p


def run_filter(args) -> int:
    from mlft.training.spread import filter_mix

    if len(args.overrides) != 1 or args.pass_dir is None or args.out is None:
        raise ConfigError("usage: mlft data mix filter MIX_DIR --pass PASS_DIR --out OUT")
    try:
        options = json.loads(args.reward_options)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--reward-options: not JSON ({exc.msg})") from None
    s = filter_mix(args.overrides[0], args.pass_dir, args.out, args.reward, options, args.above)
    p = s["prompts"]
    print(
        f"{s['mix']}: {p['kept']} of {p['total']} prompts kept ({p['all_right']} all right, {p['all_wrong']} all "
        f"wrong, {p['unscored']} without replies; replies per prompt {s['replies_per_prompt']}), "
        f"{s['rows']['kept']} of {s['rows']['total']} rows, by {s['reward']!r}"
    )
    for lang, c in s["by_language"].items():
        print(
            f"  {lang:<6}kept {c['kept']:>5}  all right {c['all_right']:>5}  all wrong {c['all_wrong']:>5}"
            + (f"  unscored {c['unscored']}" if c["unscored"] else "")
        )
    print(
        f"wrote {args.out / 'mix'} and {args.out / 'filtered_mix.yaml'} (a recipe: mix: "
        f"{args.out / 'filtered_mix.yaml'})"
    )
    return 0


def run(args) -> int:
    if args.mix == "filter":
        return run_filter(args)
    from mlft.data.mix import build_mix, load_mix

    mix = load_mix(args.mix, args.overrides)
    print(f"{args.mix}: {mix.kind} mix of {mix.total} rows, seed {mix.seed}")
    for i, lang, n in mix.counts():
        print(f"  {mix.sources[i].name:<28}{lang or 'any':<6}{n:>8}")
    if args.out is None:
        return 0
    build_mix(mix, args.out)
    out = args.out / "mix"
    stats = json.loads((out / "stats.json").read_text())
    report = json.loads((out / "decontamination.json").read_text())
    print(
        f"wrote {out / 'train.jsonl'}: {stats['total']} rows, {stats['prompt_tokens']} prompt + "
        f"{stats['completion_tokens']} completion {stats['token_unit']}"
    )
    print(
        f"decontamination: {report['dropped']['total']} of {report['inspected']} inspected rows dropped "
        f"({report['dropped']['exact']} exact, {report['dropped']['ngram']} {report['ngram']}-gram)"
        if report["enabled"]
        else "decontamination: off"
    )
    return 0

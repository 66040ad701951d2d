"""`mlft mix`: validate a data mix, or build it (mixed JSONL + stats + decontamination report) and summarise it."""

from __future__ import annotations

import json
from pathlib import Path

from mlft.config import help_of
from mlft.data.mix import build_mix, load_mix
from mlft.data.mix_config import MixConfig, SourceConfig


def add_parser(sub) -> None:
    keys = "; ".join(f"{k}: {v}" for k, v in {**help_of(MixConfig), **help_of(SourceConfig)}.items() if v)
    p = sub.add_parser("mix", help="validate or build a data mix (data_mixes/*.yaml)",
                       description="Build the exact training mix of a data-mix file into OUT/mix/ "
                                   "(train.jsonl, stats.json, decontamination.json, mix.yaml). Keys: " + keys)
    p.add_argument("mix", help="data-mix YAML, e.g. data_mixes/cpu/multilingual_sft.yaml")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. total=500 seed=1")
    p.add_argument("--out", type=Path, help="output folder (omit to only validate and show the plan)")
    p.set_defaults(func=run)


def run(args) -> int:
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
    print(f"wrote {out / 'train.jsonl'}: {stats['total']} rows, {stats['prompt_tokens']} prompt + "
          f"{stats['completion_tokens']} completion {stats['token_unit']}")
    print(f"decontamination: {report['dropped']['total']} of {report['inspected']} inspected rows dropped "
          f"({report['dropped']['exact']} exact, {report['dropped']['ngram']} {report['ngram']}-gram)"
          if report["enabled"] else "decontamination: off")
    return 0

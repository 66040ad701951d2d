"""The `task_axis` eval kind: several verifiable `lcb` suites (each with `answers: true`) as one task axis, each
generated on its own (its own prompt selection and batches: a part's replies are what its suite alone gives) and
scored into one folder, so that one pass per model gives a mitigation table every task column.

Suite keys: `parts` ({metric: suite}: the part's task score is written as that metric; the part named `task` keeps
every row as its suite writes them, the others' other rows are prefixed `<metric>_`, e.g. `extraction_lpr`) and
the settings laid over every part (languages, per_language, samples, decoding, variants, seed; null: the part's
own). Each part's files go to `<out>/<metric>/` (its verdicts: `<metric>/<variant>/task.jsonl`).

    eval/task_axis.yaml: parts {task: arithmetic, extraction: extraction} (the demo's task axis)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from mlft.errors import ConfigError
from mlft.evals.registry import EvalKind, KindOutput
from mlft.evals.suite import load_suite

PRIMARY = "task"  # the part whose rows keep their names (metric `task`: the arithmetic task's columns)
FORWARDED = ("languages", "per_language", "samples", "decoding", "variants", "seed")


@dataclass
class TaskAxisOptions:
    parts: dict[str, str] = field(
        default_factory=dict,
        metadata={"help": "{metric: lcb suite with answers: true}: each part's task score under that metric name"},
    )
    languages: list[str] | None = field(default=None, metadata={"help": "languages of every part (null: its own)"})
    per_language: int | None = field(default=None, metadata={"help": "prompts per (task, language) of every part"})
    samples: int | None = field(default=None, metadata={"help": "replies per prompt of every part"})
    decoding: dict[str, Any] | None = field(default=None, metadata={"help": "decoding keys over every part's"})
    variants: list[dict] | None = field(default=None, metadata={"help": "the variants of every part"})
    seed: int | None = field(default=None, metadata={"help": "seed of every part's prompt sample"})


def _settings(o: TaskAxisOptions) -> dict:
    return {k: getattr(o, k) for k in FORWARDED if getattr(o, k) is not None}


def part_suites(o: TaskAxisOptions, where: str) -> dict[str, Any]:
    """{metric: the part's validated EvalSuite, with the forwarded settings}."""
    if not o.parts:
        raise ConfigError(f"{where}: parts: name at least one verifiable suite ({{metric: suite}})")
    out = {}
    for metric, name in o.parts.items():
        if not str(metric).isidentifier():
            raise ConfigError(f"{where}: parts: metric names are identifiers (letters, digits, _), got {metric!r}")
        suite = load_suite(name, settings=_settings(o))
        if suite.kind != "lcb" or not suite.options.answers:
            raise ConfigError(f"{where}: parts.{metric}: {name} is not an lcb suite with answers: true")
        out[metric] = suite
    return out


def validate(o: TaskAxisOptions, where: str) -> None:
    part_suites(o, where)


def _renamed(row, metric: str):
    name = row.metric
    if metric != PRIMARY:
        name = metric if row.metric == "task" else f"{metric}_{row.metric}"
    outcomes = f"{metric}/{row.outcomes}" if row.outcomes else row.outcomes
    return dataclasses.replace(row, metric=name, outcomes=outcomes)


def run(suite, ctx) -> KindOutput:
    from mlft.evals import lcb

    where = suite.source_file or suite.name
    rows, report, files = [], [], []
    for metric, part in part_suites(suite.options, where).items():
        (ctx.out_dir / metric).mkdir(parents=True, exist_ok=True)
        out = lcb.run(part, dataclasses.replace(ctx, out_dir=ctx.out_dir / metric))
        rows += [_renamed(r, metric) for r in out.rows]
        report.append(f"## {metric}: {part.name}\n\n{out.report}")
        files += out.files
    return KindOutput(rows, "\n".join(report), [], files)


KIND = EvalKind(
    "task_axis",
    TaskAxisOptions,
    validate,
    run,
    "several verifiable lcb suites as one task axis, one task metric each",
)

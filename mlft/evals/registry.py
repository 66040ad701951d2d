"""What an eval *kind* is, and the registry of kinds.

Words used across mlft's evaluation code:
- a **suite file** is a YAML in `eval/` (or any path): `kind:` plus that kind's options (mlft/evals/suite.py);
- a **kind** is what a suite runs: `lcb` (generate + LPR/WPR/LCPR), `multisense`, `polyglot` (this file);
- **the runner** runs any suite with a backend and writes its folder (mlft/evals/runner.py);
- the training callback's **passes** run a suite at a checkpoint (mlft/training/passes.py).

The contract every kind fulfils (an `EvalKind` object named `KIND` in its module):
- `options`: a dataclass of the suite keys the kind reads (validated by `from_dict`: unknown keys get a
  "did you mean");
- `validate(options, where)`: the semantic checks (languages, data present...), before any model loads;
- `needs`: the backend capabilities it needs beyond generating text (names from
  `mlft.generation.backends.CAPABILITIES`, e.g. "weights": `ctx.local_model()`, "chat", "logprobs"); backends
  declare their `Capabilities`, and the runner refuses, before any model loads, a backend that lacks one (so a
  new backend needs no edit here);
- `run(suite, ctx) -> KindOutput`: does the work with `ctx.backend(...)` (any generation backend) or
  `ctx.local_model()` (a backend that holds weights) and returns `MetricRow`s (mlft/io/metric_rows.py).

To add a kind: a module with `KIND = EvalKind(...)`, one line in `KINDS` (or `KINDS.add("name", "module")`),
a suite YAML in `eval/`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlft.generation.backends import CAPABILITIES
from mlft.io.metric_rows import MetricRow
from mlft.registry import Registry

# name -> module holding `KIND` (imported on first use)
KINDS = Registry(
    "eval kind",
    {
        "lcb": "mlft.evals.lcb",
        "multisense": "mlft.evals.multisense.kind",
        "polyglot": "mlft.evals.polyglot.kind",
        "lm_eval": "mlft.evals.lm_eval_kind",
        "task_axis": "mlft.evals.task_axis_kind",
    },
    default_attr="KIND",
)


@dataclass
class KindOutput:
    rows: list[MetricRow]  # the kind's metric rows (scores.jsonl)
    report: str = ""  # markdown for report.md
    tables: list[tuple[str, str]] = field(default_factory=list)  # (name, CSV text) -> table_<name>.csv
    files: list[Path] = field(default_factory=list)  # other files the kind wrote

    def __post_init__(self):
        wrong = next((r for r in self.rows if not isinstance(r, MetricRow)), None)
        if wrong is not None:
            raise TypeError(
                f"an eval kind returns MetricRows (mlft/io/metric_rows.py), got {type(wrong).__name__}: {wrong!r:.200}"
            )


@dataclass(frozen=True)
class EvalKind:
    name: str
    options: type
    validate: Callable[[Any, str], None]
    run: Callable[[Any, Any], KindOutput]
    description: str = ""
    needs: tuple[str, ...] = ()  # backend capabilities (any of mlft.generation.backends.CAPABILITIES)

    def __post_init__(self):
        unknown = set(self.needs) - set(CAPABILITIES)
        if unknown:
            raise ValueError(
                f"eval kind {self.name}: unknown needs {sorted(unknown)}; valid: {', '.join(CAPABILITIES)}"
            )


def get_kind(name: str, where: str = "kind") -> EvalKind:
    return KINDS.load(name, where)

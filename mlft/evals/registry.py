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
- `backends`: the generation backends it can use; the runner refuses any other with a clear message;
- `run(suite, ctx) -> KindOutput`: does the work with `ctx.backend(...)` (any generation backend) or
  `ctx.local_model()` (hf only) and returns long-format rows {variant, task, language, metric, value}.

To add a kind: a module with `KIND = EvalKind(...)`, one line in `KINDS`, a suite YAML in `eval/`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mlft.config import check_choice

KINDS: dict[str, str] = {
    "lcb": "mlft.evals.lcb",
    "multisense": "mlft.evals.multisense.kind",
    "polyglot": "mlft.evals.polyglot.kind",
    "lm_eval": "mlft.evals.lm_eval_kind",
}


@dataclass
class KindOutput:
    rows: list[dict]                                         # {variant, task, language, metric, value}
    report: str = ""                                         # markdown for report.md
    tables: list[tuple[str, str]] = field(default_factory=list)  # (name, CSV text) -> table_<name>.csv
    files: list[Path] = field(default_factory=list)          # other files the kind wrote


@dataclass(frozen=True)
class EvalKind:
    name: str
    options: type
    validate: Callable[[Any, str], None]
    run: Callable[[Any, Any], KindOutput]
    backends: tuple[str, ...]
    description: str = ""


def get_kind(name: str, where: str = "kind") -> EvalKind:
    check_choice(name, KINDS, "eval kind", where)
    return importlib.import_module(KINDS[name]).KIND

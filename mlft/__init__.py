"""mlft: multilingual fine-tuning and language-confusion mitigation.

The public API (docs/api.md): `mlft.score`, `mlft.evaluate`, `mlft.train`, `mlft.compare`, `mlft.load_run` and
the names in `__all__`. `import mlft` loads nothing heavy (no torch, transformers, pandas, trl): each name is
imported the first time it is used (PEP 562 `__getattr__`).

>>> import mlft
>>> r = mlft.score("outputs/command-r.csv")  # doctest: +SKIP
>>> print(r.table())  # doctest: +SKIP
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> "module:attribute" (the module is imported when the name is first used)
_PUBLIC = {
    # the verbs and their results
    "score": "mlft.api.score:score",
    "evaluate": "mlft.api.evaluate:evaluate",
    "evaluate_checkpoint": "mlft.api.evaluate:evaluate_checkpoint",
    "train": "mlft.api.train:train",
    "check_recipe": "mlft.api.train:check_recipe",
    "load_recipe": "mlft.api.train:load",
    "compare": "mlft.api.compare:compare",
    "load_run": "mlft.api.runs:load_run",
    "load_runs": "mlft.api.runs:load_runs",
    "plot_reward_curves": "mlft.api.runs:plot_reward_curves",
    "load_result": "mlft.api.load:load_result",
    "ScoreResult": "mlft.api.results:ScoreResult",
    "EvalResult": "mlft.api.evaluate:EvalResult",
    "Comparison": "mlft.api.results:Comparison",
    "Run": "mlft.api.runs:Run",
    "Curves": "mlft.api.runs:Curves",
    "MitigationTables": "mlft.api.tables:MitigationTables",
    # tables of mitigations
    "mitigation_tables": "mlft.api.tables:mitigation_tables",
    "save_spec": "mlft.api.tables:save_spec",
    "judge_columns": "mlft.api.tables:judge_columns",
    "task_columns": "mlft.api.tables:task_columns",
    "write_results": "mlft.api.tables:write_results",
    "report_page": "mlft.api.tables:report_page",
    "TableSpec": "mlft.reports.table_spec:TableSpec",
    "RowSpec": "mlft.reports.table_spec:RowSpec",
    "Capability": "mlft.reports.table_spec:Capability",
    # what is evaluated, and how
    "Target": "mlft.generation.target:Target",
    "load_suite": "mlft.evals.suite:load_suite",
    "PassVariant": "mlft.training.passes:PassVariant",
    "FEWSHOT_BASELINES": "mlft.constants:FEWSHOT_BASELINES",
    "QUANTIZATION_SCHEMES": "mlft.generation.interventions.quantize:SCHEMES",
    # data, logging, errors
    "ensure_lcb_data": "mlft.api.data:ensure_lcb_data",
    "get_logger": "mlft.console:get_logger",
    "setup_logging": "mlft.console:setup",
    "MlftError": "mlft.errors:MlftError",
    "ConfigError": "mlft.errors:ConfigError",
    "DataError": "mlft.errors:DataError",
    "MissingDataError": "mlft.errors:MissingDataError",
    "ModelError": "mlft.errors:ModelError",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    target = _PUBLIC.get(name)
    if target is None:
        raise AttributeError(f"module 'mlft' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # once: later uses do not come back here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])

"""Evaluations beyond LCB, run as eval suites (`kind:` in eval/*.yaml).

Each module named here provides `validate(options: dict, where: str) -> object` (raises ConfigError naming
`where.key`) and `run(options_obj, *, model, tokenizer, out_dir, progress=True) -> list[dict]` returning flat
metric rows {suite, variant, task, language, metric, value}.
"""

EVAL_KINDS = {
    "multisense": "mlft.evals.multisense.suite",
    "polyglot": "mlft.evals.polyglot.suite",
}

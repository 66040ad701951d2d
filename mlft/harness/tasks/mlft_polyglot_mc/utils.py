"""lm-eval's `!function utils.<name>` target of the Polyglot-or-Not multiple-choice tasks
(mlft/harness/polyglot_mc.py)."""

from mlft.harness.polyglot_mc import polyglot_dataset  # noqa: F401

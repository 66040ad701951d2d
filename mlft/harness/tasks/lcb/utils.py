"""lm-eval's `!function utils.<name>` targets of the LCB tasks: mlft's loader, scorer and official aggregation
(mlft/harness/lcb_task.py)."""

from mlft.harness.lcb_task import (  # noqa: F401
    agg_coverage,
    agg_degeneracy,
    agg_lcpr,
    agg_lpr,
    agg_wpr,
    lcb_dataset,
    process_results,
)

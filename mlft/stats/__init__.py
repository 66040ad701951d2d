"""Intervals and paired tests for LCB metrics, computed from per-reply outcomes.

Unit of analysis: one `Outcome` per reply (counted, line error, word error, degenerate, optional NLL), written
once by an eval pass (`save_outcomes`) so intervals and tests never need rescoring. Every statistic follows the
official aggregation: a metric per (source, language) group, (all, lang) = mean over sources, (source, all) =
mean over languages, (all, all) = mean over (all, lang); LCPR = harmonic(LPR, WPR) per language, averaged over
the non-Latin languages. Coverage (share of replies with >= 1 counted line), degeneracy (share of degenerate
replies, `mlft.benchmarks.lcb.guard`) and lexical validity (share of replies whose words are mostly words of the
language, `mlft.benchmarks.lcb.guard.lexical_validity`; defined for a (source, language) group whose replies carry
it) are aggregated the same unweighted way. Point values are the official numbers, bit for bit (same formulas,
same summation order).

The engine, one module per seam (each imports only those above it):
- `mlft.stats.outcomes`: the per-reply `Outcome`, its file (`save_outcomes` / `load_outcomes`), reruns' compact file
  (`save_compact` / `load_compact`), metric names;
- `mlft.stats.aggregate`: the official aggregation on count arrays and the stratified resampling;
- `mlft.stats.intervals`: intervals for a named target (`intervals`, `interval_rows`, `wilson`, ...);
- `mlft.stats.means`: means, ratios, single proportions and seeds outside LCB's aggregation;
- `mlft.stats.paired`: paired (and unpaired) comparisons of two runs, Holm's adjustment.
The public names are re-exported here: callers import them from `mlft.stats`.
"""

from mlft.stats.aggregate import PSEUDO, clustered, pass_values
from mlft.stats.intervals import (
    Estimate,
    check_confidence,
    interval_rows,
    intervals,
    modified_wilson,
    set_design_effects,
    unknown_share_intervals,
    wilson,
    within_share,
)
from mlft.stats.means import (
    SeedEstimate,
    mean_interval,
    paired_share_sd,
    prompt_means,
    proportion_halfwidth,
    ratio_interval,
    seed_interval,
)
from mlft.stats.outcomes import (
    METHODS,
    METRICS,
    PER_REPLY,
    Outcome,
    load_compact,
    load_outcomes,
    save_compact,
    save_outcomes,
)
from mlft.stats.paired import (
    PairedResult,
    adjust,
    holm,
    paired_mean_bootstrap,
    paired_test,
    paired_tests_by_language,
    sign_flip_p,
    swap_test,
    unpaired_test,
)

__all__ = [
    "METHODS",
    "METRICS",
    "PER_REPLY",
    "PSEUDO",
    "Estimate",
    "Outcome",
    "PairedResult",
    "SeedEstimate",
    "adjust",
    "check_confidence",
    "clustered",
    "holm",
    "interval_rows",
    "intervals",
    "load_compact",
    "load_outcomes",
    "mean_interval",
    "modified_wilson",
    "paired_mean_bootstrap",
    "paired_test",
    "paired_tests_by_language",
    "pass_values",
    "prompt_means",
    "proportion_halfwidth",
    "ratio_interval",
    "save_compact",
    "save_outcomes",
    "paired_share_sd",
    "seed_interval",
    "set_design_effects",
    "sign_flip_p",
    "swap_test",
    "unknown_share_intervals",
    "unpaired_test",
    "wilson",
    "within_share",
]

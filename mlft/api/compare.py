"""`mlft.compare`: paired differences between two evaluations over the same prompts. `mlft compare A B` is this
function and `Comparison.table`."""

from __future__ import annotations

from collections.abc import Sequence

from mlft.api.results import Comparison
from mlft.api.score import DEFAULT_TRACE_MARKERS, markers_of
from mlft.errors import ConfigError
from mlft.reports.compare import compare as paired
from mlft.reports.compare import compare_task, load_side, task_file
from mlft.reports.compare import intersect as shared
from mlft.reports.task_axis import TASK_METRICS

METRICS = ("lpr", "wpr", "lcpr", "coverage", "degeneracy", "validity", "task", "extraction")
METHODS = ("permutation", "bootstrap", "mcnemar")


def compare(
    a: str,
    b: str,
    metrics: Sequence[str] | str = METRICS,
    *,
    method: str = "permutation",
    resamples: int = 10000,
    seed: int = 0,
    intersect: bool = False,
    part: str = "answer",
    trace_markers=DEFAULT_TRACE_MARKERS,
) -> Comparison:
    """B − A per task and language with its interval and p-value, Holm-adjusted over languages.

    `a`, `b`: RUN_DIR[@STEP][:VARIANT] (a `mlft train` run), EVAL_DIR[:VARIANT] (a `mlft eval` folder),
    outcomes.jsonl, or a completions file (scored here). `metrics`: lpr, wpr, lcpr, coverage, degeneracy, validity,
    task, extraction (the task axis: arithmetic, extractive questions); a sequence or a comma-separated text.
    `method`: permutation (the paired permutation test's p, the bootstrap's interval), bootstrap or mcnemar.
    `intersect`: compare on the prompts both sides hold (otherwise differing prompt sets are an error). `part`:
    answer or trace (reasoning traces).

    >>> import mlft
    >>> c = mlft.compare("runs/demo/base@0", "runs/demo/crosslingual_sft", metrics=("lpr",))  # doctest: +SKIP
    >>> print(c)  # doctest: +SKIP
    """

    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",") if m.strip()]
    metrics = list(metrics)
    if method not in METHODS:
        raise ConfigError(f"method: one of {', '.join(METHODS)}, got {method!r}")
    markers = markers_of(trace_markers)
    if part == "trace" and markers is None:
        raise ConfigError("--part trace needs trace markers (--trace-markers OPEN,CLOSE)")
    (la, sa), (lb, sb) = (load_side(x, part, markers) for x in (a, b))
    dropped, n_shared = 0, None
    if intersect:
        sa, sb, dropped = shared(sa, sb)
        n_shared = len(sa)
    rows = paired(sa, sb, metrics, method, resamples, seed)
    for axis in (m for m in TASK_METRICS if m in metrics and part == "answer"):
        files = [task_file(x, axis) for x in (a, b)]
        if all(files):
            rows += compare_task(*files, n=resamples, seed=seed, metric=axis)
        elif metrics == [axis]:
            raise ConfigError(
                f"--metric {axis}: a side has no {axis} verdicts (task.jsonl: a suite with answers: true"
                + (", eval/task_axis.yaml's extractive questions" if axis == "extraction" else "")
                + ")"
            )
    return Comparison(la, lb, rows, dropped, n_shared)

"""The task axis in paired comparisons: does a mitigation cost answers?

The lcb kind's `answers: true` writes one verdict per reply to `<variant>/task.jsonl` (id, sample, task, language,
answer, extracted, correct; mlft.evals.lcb). Two evaluations of the same verifiable prompts are compared here as
LPR is (`mlft.stats`): B − A of the share of replies that answer, the paired permutation test over prompts (each
prompt's mean verdict difference keeps or flips its sign; every pattern when 2^m <= the draws, m = the prompts
whose sides differ, else seeded draws) and the paired bootstrap's percentile interval over prompts. A prompt's
replies stay together (its samples are matched by index), so within-prompt noise is not counted as prompts.

Used by `mlft compare` (the `task` metric, where both sides hold verdicts) and the mitigation table (the task
columns' `*` and the guard's flag: a row whose task score drops at p < 1 - confidence is flagged as the guard
flags a coverage drop: a language fix that costs the answer is not a clean win).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlft.errors import DataError
from mlft.stats import PairedResult, holm, sign_flip_p

TASK_FILE = "task.jsonl"  # the lcb kind's per-reply verdicts (mlft.evals.lcb.TASK_FILE)
METRIC = "task"
# the task axis's metrics and their columns' word: `task` (the arithmetic suite, or any one suite with answers) and
# `extraction` (eval/task_axis.yaml's extractive questions, mlft.evals.task_axis_kind); verdicts in task.jsonl files
TASK_METRICS = {METRIC: "task", "extraction": "extraction"}
TASK_NOTE = (
    " Task columns (the share of replies that answer a verifiable prompt, Wilson interval): * = paired permutation "
    "test over the same prompts (a prompt's replies swapped), Holm-adjusted; ⚠ = the score dropped at that level."
)


def task_header(task: str, metric: str = METRIC) -> str:
    """The mitigation table's task column of an LCB task (`mlft.reports.mitigation.task_columns`)."""
    return f"{'Mono' if task == 'monolingual' else 'Cross'} {TASK_METRICS.get(metric, metric)}"


def task_number(row: dict, task: str, metric: str = METRIC) -> dict | None:
    """A results file row's task score on `task` ({value, low, high, n, p_vs_base}), None when it has none."""
    return (row.get("capability") or {}).get(task_header(task, metric))


def load_verdicts(path: str | Path) -> dict[tuple[str, str, str, int], bool]:
    """{(task, language, id, sample): correct} of one task.jsonl."""
    out = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the task verdicts ({exc})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            v = json.loads(line)
            out[(v["task"], v["language"], str(v["id"]), int(v.get("sample") or 0))] = bool(v["correct"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path}: line {n} is not a task verdict ({exc})") from None
    return out


def prompt_differences(a: dict, b: dict, task: str, language: str | None = None) -> tuple[np.ndarray, float, float]:
    """Per prompt both sides answered (matched replies only): mean(B) − mean(A) of its verdicts; and the two
    sides' shares over the matched replies."""
    per: dict[tuple[str, str], list[tuple[bool, bool]]] = {}
    for key, x in a.items():
        t, lang, pid, _ = key
        if t != task or (language is not None and lang != language) or key not in b:
            continue
        per.setdefault((lang, pid), []).append((x, b[key]))
    if not per:
        return np.zeros(0), float("nan"), float("nan")
    d = np.array([np.mean([y for _, y in v]) - np.mean([x for x, _ in v]) for v in per.values()])
    flat = [p for v in per.values() for p in v]
    return d, float(np.mean([x for x, _ in flat])), float(np.mean([y for _, y in flat]))


def discordant(a: dict, b: dict, task: str, language: str | None = None) -> dict | None:
    """{up, down, n}: the paired prompts only B answers, only A, and all, where a side has one verdict a prompt
    (greedy): what a paired interval of the two shares needs (`mlft.stats.paired_share_sd`); else None."""
    keys = [k for k in a if k[0] == task and language in (None, k[1]) and k in b]
    if not keys or len({k[1:3] for k in keys}) < len(keys):  # none, or several replies of a prompt
        return None
    return {"up": sum(b[k] > a[k] for k in keys), "down": sum(a[k] > b[k] for k in keys), "n": len(keys)}


def paired_task_test(
    a: dict, b: dict, task: str, language: str | None = None, *, n: int = 10000, seed: int = 0, confidence: float = 0.95
) -> PairedResult | None:
    """B − A of the task score on `task` (and `language`) over the replies both sides hold: the paired permutation
    test's p and the paired bootstrap's interval over prompts; None when no reply is shared."""
    d, share_a, share_b = prompt_differences(a, b, task, language)
    if not len(d):
        return None
    p, patterns, exact = sign_flip_p(d, n, seed)
    boot = d[np.random.default_rng(seed).integers(0, len(d), (n, len(d)))].mean(1)
    alpha = 1 - confidence
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return PairedResult(
        METRIC,
        task,
        "all",
        language or "all",
        "permutation",
        share_a,
        share_b,
        float(d.mean()),
        float(lo),
        float(hi),
        p,
        len(d),
        0,
        confidence=confidence,
        permutations=patterns,
        exact=exact,
    )


def task_column_tests(rows, base, capability, resamples: int, confidence: float = 0.95) -> dict:
    """{(row label, column header): (difference, low, high, Holm p, prompts, `discordant`)} for the task columns
    (`TASK_METRICS`) of a mitigation table whose rows name their task.jsonl verdicts, Holm-adjusted down each column."""
    out = {}
    for cap in capability:
        if cap.metric not in TASK_METRICS:
            continue
        key = (cap.task, cap.language, cap.metric)
        path_a = base.outcomes_file(key)
        if path_a is None or not path_a.is_file():
            continue
        a = load_verdicts(path_a)
        family = []
        for row in rows:
            path_b = row.outcomes_file(key)
            if row is base or path_b is None or not path_b.is_file():
                continue
            lang = None if cap.language == "avg" else cap.language
            b = load_verdicts(path_b)
            res = paired_task_test(a, b, cap.task, lang, n=resamples, confidence=confidence)
            if res is not None:
                family.append((row.label, res, discordant(a, b, cap.task, lang)))
        for (label, res, pairs), q in zip(family, holm([r.p_value for _, r, _ in family])):
            out[(label, cap.header)] = (res.diff, res.ci_low, res.ci_high, q, res.n_pairs, pairs)
    return out


def task_drop_flags(tests: dict, confidence: float = 0.95) -> dict[str, list[str]]:
    """{row label: [reason]} for task columns whose score dropped at Holm p < 1 - confidence (the guard's flag)."""
    out: dict[str, list[str]] = {}
    for (label, header), (d, lo, hi, q, pairs, _) in tests.items():
        if d < 0 and q < 1 - confidence:
            out.setdefault(label, []).append(
                f"task {header}: {100 * d:+.1f} pp [{100 * lo:+.1f}, {100 * hi:+.1f}] vs base, p = {q:.3g} "
                f"({pairs} paired prompts): the fix costs answers"
            )
    return out

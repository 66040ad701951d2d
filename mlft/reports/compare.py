"""Paired differences between two runs or files, per task and language: `mlft compare A B`.

A and B can be:
  RUN_DIR[@STEP][:VARIANT]    a `mlft train` run directory (default: last step, variant `model`)
  EVAL_DIR[:VARIANT]          a `mlft eval` folder (scores.jsonl; default: its only / `default` variant)
  FILE.jsonl / FILE.csv       per-reply outcomes (outcomes.jsonl), or completions (scored here)
Per task: the official aggregate and every language, B − A with its 95 % interval and p-value, Holm-adjusted over
the task's languages. Default p: the paired permutation test (`mlft.stats.swap_test`: A's and B's replies to a
prompt trade places; exact level under "A and B are draws of the same model"), beside the paired bootstrap's
interval; or the bootstrap's own p, or exact McNemar.
The task axis (metric `task`, where both sides hold the lcb kind's `task.jsonl` verdicts of verifiable prompts):
the share of replies that answer, B − A with the paired permutation test over prompts (mlft.reports.task_axis),
and the guard's flag where it drops significantly: a fix that costs answers.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlft.benchmarks.lcb.scoring import outcomes_from, score_completions
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, TRACE_OUTCOMES_FILE, TraceMarkers, split_completions
from mlft.completions import read_completions
from mlft.errors import ConfigError, DataError
from mlft.format import render
from mlft.io.curve_file import read_curves
from mlft.languages import NON_LATIN
from mlft.reports.task_axis import TASK_FILE, TASK_METRICS, load_verdicts, paired_task_test
from mlft.stats import holm, load_outcomes, paired_test, paired_tests_by_language


def _split(spec: str) -> tuple[Path, int | None, str | None]:
    variant = step = None
    path = spec
    if not Path(spec).exists() and ":" in spec:
        path, variant = spec.rsplit(":", 1)
    if not Path(path).exists() and "@" in path:
        path, raw = path.rsplit("@", 1)
        try:
            step = int(raw)
        except ValueError:
            raise ConfigError(f"{spec}: the step after @ must be an integer, got {raw!r}") from None
    if not Path(path).exists():
        raise ConfigError(f"{spec}: no such run directory, eval folder or file")
    return Path(path), step, variant


PARTS = ("answer", "trace")


def _outcomes_name(part: str) -> str:
    return TRACE_OUTCOMES_FILE if part == "trace" else "outcomes.jsonl"


def load_side(spec: str, part: str = "answer", markers: TraceMarkers | None = DEFAULT_MARKERS):
    """(label, outcomes) of one side of a comparison. `part`: the answers (the replies themselves when they hold no
    trace) or the reasoning traces (`mlft.benchmarks.lcb.traces`: a completions file is split with `markers`; an
    eval folder or run directory gives its `outcomes.trace.jsonl`)."""

    if part not in PARTS:
        raise ConfigError(f"part: expected one of {', '.join(PARTS)}, got {part!r}")
    path, step, variant = _split(spec)
    if path.is_file():
        head = path.read_text(encoding="utf-8").lstrip()[:2000]
        if path.suffix == ".jsonl" and head.startswith("{") and '"counted"' in head.splitlines()[0]:
            return spec, load_outcomes(path)

        comps = read_completions(path)
        models = sorted({c.model for c in comps})
        if len(models) > 1:
            comps = [c for c in comps if c.model == (variant or models[0])]
        split = split_completions(comps, markers)
        comps = split.traces if part == "trace" else split.answers
        if not comps:
            raise DataError(f"{spec}: no reply holds a reasoning trace (markers {markers and markers.spec()})")
        return spec, outcomes_from(comps, score_completions(comps, guard=True).replies)
    if (path / "curves.jsonl").is_file():
        rows = [
            r
            for r in read_curves(path)
            if r["variant"] == (variant or "model") and (r.get("outcomes") or "").split("/")[-1] == _outcomes_name(part)
        ]
        if not rows:
            raise DataError(
                f"{path}: no curve rows with per-reply outcomes for variant {variant or 'model'!r} "
                "(evaluated before outcomes were kept? rerun `mlft evaluate-run`)"
            )
        step = max(int(r["step"]) for r in rows) if step is None else step
        rel = next((r["outcomes"] for r in rows if int(r["step"]) == step), None)
        if rel is None:
            raise DataError(f"{path}: no evaluation at step {step}")
        return f"{path.name}@{step}:{variant or 'model'}", load_outcomes(path / rel)
    if (path / "scores.jsonl").is_file():
        rels = sorted(  # the part's own outcomes (not a second judge's, `outcomes.<judge>.jsonl`)
            r
            for r in {
                json.loads(x).get("outcomes") for x in (path / "scores.jsonl").read_text().splitlines() if x.strip()
            }
            - {None}
            if r.split("/")[-1] == _outcomes_name(part)
        )
        if variant:
            rels = [r for r in rels if r.split("/")[0] == variant]
        elif len(rels) > 1:
            rels = [r for r in rels if r.split("/")[0] == "default"] or rels
            if len(rels) > 1:
                raise ConfigError(
                    f"{spec}: several variants ({', '.join(r.split('/')[0] for r in rels)}); name one: {path}:VARIANT"
                )
        if not rels:
            raise DataError(
                f"{spec}: no per-reply outcomes found"
                + (" of reasoning traces (no reply held a trace marker?)" if part == "trace" else "")
            )
        return spec, load_outcomes(path / rels[0])
    raise ConfigError(f"{spec}: not a run directory (curves.jsonl), an eval folder (scores.jsonl) or a file")


def task_file(spec: str, metric: str = "task") -> Path | None:
    """The task verdicts (`task.jsonl`) of one side, where it has them: beside the variant's outcomes in an eval
    folder or a run's pass, or the file itself; None for a side without the task axis (LCB's prompts, a
    completions file). `metric`: the task axis's metric (`task`: arithmetic or any suite with answers;
    `extraction`: the extractive questions; mlft.reports.task_axis.TASK_METRICS)."""
    path, step, variant = _split(spec)
    if path.is_file():
        return path if path.name == TASK_FILE else None
    if (path / "curves.jsonl").is_file():
        rows = [
            r
            for r in read_curves(path)
            if r["variant"] == (variant or "model")
            and (r.get("outcomes") or "").split("/")[-1] == TASK_FILE
            and r.get("metric", metric) == metric
        ]
        if not rows:
            return None
        step = max(int(r["step"]) for r in rows) if step is None else step
        rel = next((r["outcomes"] for r in rows if int(r["step"]) == step), None)
        return path / rel if rel else None
    if (path / "scores.jsonl").is_file():
        rels = sorted(
            {
                r["outcomes"]
                for r in map(json.loads, filter(str.strip, (path / "scores.jsonl").read_text().splitlines()))
                if r.get("metric") == metric and r.get("outcomes")
            }
        )
        if variant:
            rels = [r for r in rels if r.split("/")[0] == variant]
        elif len(rels) > 1:
            rels = [r for r in rels if r.split("/")[0] == "default"] or rels[:0]
        return path / rels[0] if len(rels) == 1 else None
    return None


def compare_task(
    path_a: Path, path_b: Path, n: int = 10000, seed: int = 0, alpha: float = 0.05, metric: str = "task"
) -> list[dict]:
    """Rows (as `compare`'s, metric `task` or `extraction`: the axis the verdicts belong to) of the task axis: per
    task and language B − A of the share of replies that answer, paired over the prompts both sides hold (Holm over
    the task's languages); `task_drop` marks a drop at p < alpha (the official `avg` row: p; a language: Holm p),
    the guard's flag."""
    a, b = load_verdicts(path_a), load_verdicts(path_b)
    rows = []
    for task in sorted({k[0] for k in a} & {k[0] for k in b}):
        overall = paired_task_test(a, b, task, n=n, seed=seed)
        if overall is None:
            continue
        rows.append(_row(task, "avg", overall, overall.p_value))
        langs = sorted({k[1] for k in a if k[0] == task} & {k[1] for k in b if k[0] == task})
        found = [(lang, paired_task_test(a, b, task, lang, n=n, seed=seed)) for lang in langs]
        found = [(lang, res) for lang, res in found if res is not None]
        for (lang, res), q in zip(found, holm([res.p_value for _, res in found])):
            rows.append(_row(task, lang, res, q))
    for r in rows:
        r["task_drop"] = r["diff"] < 0 and (r["p"] if r["language"] == "avg" else r["p_holm"]) < alpha
        r["metric"] = metric
    return rows


def intersect(a, b):
    """Both sides restricted to the replies they share (matched on task, source, language, id and reply index: a
    run with K replies per prompt against one with 1 pairs the first replies)."""
    key = lambda o: (o.task, o.source, o.language, o.id, o.sample)  # noqa: E731
    shared = {key(o) for o in a} & {key(o) for o in b}
    ka, kb = [o for o in a if key(o) in shared], [o for o in b if key(o) in shared]
    return ka, kb, len(a) + len(b) - len(ka) - len(kb)


def compare(a, b, metrics=("lpr",), method: str = "permutation", n: int = 10000, seed: int = 0) -> list[dict]:
    """Rows {task, language, metric, a, b, diff, ci_low, ci_high, p, p_holm, n_pairs, n_dropped} (the task axis's
    rows: `compare_task`)."""

    rows = []
    metrics = [m for m in metrics if m not in TASK_METRICS]
    for task in sorted({o.task for o in a} & {o.task for o in b}):
        for metric in metrics:
            if metric in ("wpr", "lcpr") and not any(o.language in NON_LATIN for o in a if o.task == task):
                continue
            if metric == "lcpr" and method == "mcnemar":
                continue
            if metric == "validity" and not all(
                any(o.validity is not None for o in side if o.task == task) for side in (a, b)
            ):
                continue  # not measured (outcomes written before lexical validity, or no lexicon)
            overall = paired_test(a, b, metric, task=task, method=method, n=n, seed=seed)
            rows.append(_row(task, "avg", overall, overall.p_value))
            if metric != "lcpr":
                for lang, res in paired_tests_by_language(
                    a, b, metric, task=task, method=method, n=n, seed=seed
                ).items():
                    rows.append(_row(task, lang, res, res.p_adjusted))
    return rows


def _row(task, lang, res, p_holm) -> dict:
    return {
        "task": task,
        "language": lang,
        "metric": res.metric,
        "a": res.a,
        "b": res.b,
        "diff": res.diff,
        "ci_low": res.ci_low,
        "ci_high": res.ci_high,
        "p": res.p_value,
        "p_holm": p_holm,
        "n_pairs": res.n_pairs,
        "n_dropped": res.n_dropped,
        "method": res.method,
        "exact": res.exact,
        "level": res.level,  # the swap test's own level given these replies (0: it cannot reject here)
    }


HOW = {
    "permutation": "p: paired permutation test (a prompt's A and B replies swapped; exact where every pattern is "
    "enumerated), 95 % CI: paired bootstrap over prompts (the prompt population)",
    "bootstrap": "p and 95 % CI: paired bootstrap over prompts (the prompt population)",
    "mcnemar": "p: exact McNemar, 95 % CI: Clopper-Pearson on the discordant pairs",
}


def render_compare(rows: list[dict], label_a: str, label_b: str, fmt: str = "table") -> str:
    header = ["task", "language", "metric", "A %", "B %", "B − A (pp)", "95 % CI", "p", "p (Holm)", "pairs"]
    body = []
    for r in rows:
        sig = "*" if (r["p_holm"] if r["language"] != "avg" else r["p"]) < 0.05 else ""
        sig += " ⚠" if r.get("task_drop") else ""
        body.append(
            [
                r["task"],
                r["language"],
                r["metric"],
                f"{100 * r['a']:.1f}",
                f"{100 * r['b']:.1f}",
                f"{100 * r['diff']:+.1f}{sig}",
                f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}]",
                f"{r['p']:.3g}" + ("†" if r.get("level") == 0 else ""),
                "" if r["language"] == "avg" else f"{r['p_holm']:.3g}",
                f"{r['n_pairs']}" + (f" (-{r['n_dropped']})" if r["n_dropped"] else ""),
            ]
        )
    method = rows[0]["method"] if rows else "permutation"
    how = HOW.get(method, method)
    title = f"A = {label_a}\nB = {label_b}\n{how}: B − A over the same prompts; * = p < 0.05 (languages: Holm)"
    if any(r["metric"] == "task" for r in rows):
        title += (
            "\ntask = share of replies that answer the verifiable prompt (p: paired permutation test over prompts, "
            "CI: paired bootstrap); ⚠ = the task score drops at p < 0.05: the fix costs answers"
        )
    if any(r.get("level") == 0 for r in rows):
        title += "\n† = too few prompts differ for this test to reach p < 0.05 here, whatever the replies say"
    return render(header, body, fmt, title)

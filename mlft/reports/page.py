"""One self-contained HTML page per run or eval folder: curves, heatmap, every reply with its LCB verdicts.

    write_page(["runs/demo/crosslingual_sft"], "report.html")      # a training run: every checkpoint
    write_page(["runs/eval/lcb_tiny/model"], "report.html")        # an eval folder: every variant

A *view* is one set of replies: a (step, pass variant, suite variant) of a training run, or a variant of an eval
folder. The page holds, per view, its metric rows (curves.jsonl / scores.jsonl: value, 95 % interval, n) and its
replies, each with its lines as the official scorer judged them (`mlft.benchmarks.lcb.scoring.score_completions(...,
detail=True)`: counted or not, fastText label and score, stray English words), its lexical validity and
degeneracy (`mlft.benchmarks.lcb.guard`), the LCB verdict and the guard flag. Nothing is re-scored by other rules.
A GRPO run's page also holds what the reward paid: per logged step, the highest- and lowest-reward rollouts with
each term's value, the total and LCB's verdict, as training recorded them (rollouts.jsonl, `mlft.training.rollouts`).

Offline: the JavaScript and CSS are inlined (mlft/resources/report/); no CDN, no request. The replies of each view
and the prompts (stored once) are gzip-compressed base64 blocks that the page inflates when a view is first shown
(the browser's DecompressionStream), so a full-LCB-sized run (6,586 prompts x 10 checkpoints) opens without
parsing every reply, and the reply list is paged.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlft import __version__
from mlft.benchmarks.lcb.guard import degeneracy_reason, lexical_validity
from mlft.benchmarks.lcb.metrics import normalize
from mlft.benchmarks.lcb.scoring import load_resources, score_completions
from mlft.benchmarks.lcb.traces import (
    DEFAULT_MARKERS,
    HAS_TRACE,
    OUTCOMES,
    TraceMarkers,
    split_completions,
    trace_metric,
)
from mlft.completions import read_completions
from mlft.console import get_logger
from mlft.constants import GUARD_METRICS, METRICS, VALID_SHARE
from mlft.errors import DataError, MlftError
from mlft.generation.requests import draw_id
from mlft.io.curve_file import CURVES, PASSES, REWARD_CURVES, ROLLOUTS
from mlft.io.jsonl import read_jsonl
from mlft.languages import NON_LATIN

log = get_logger(__name__)
RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "report"
PAGE = "report.html"
# line states in the page: not counted (< MIN_TOKENS tokens, or after the scorer's "\nQ:" cut), counted in the
# expected language, counted in another language (or "unknown")
SHORT, OK, WRONG, CUT = 0, 1, 2, 3
SHOWN_METRICS = (*METRICS, *GUARD_METRICS, "task", "unknown", "skipped", "nll")  # task: the task axis (answers)
# a suite's reasoning-trace rows (`mlft.benchmarks.lcb.traces`), after the official ones: the trace's metrics, then
# the share of each split outcome
SHOWN_METRICS += tuple(trace_metric(m) for m in (*METRICS, *GUARD_METRICS, "unknown", "skipped", *OUTCOMES, "any"))
TASK_FILE = "task.jsonl"  # the lcb kind's per-reply task verdicts (suites with `answers: true`)
ROLLOUT_STEPS = 40  # GRPO rollouts on the page: at most this many steps per run (spread evenly, first and last)
ROLLOUT_PAGE_CHARS = 1000  # prompt / completion text shown per rollout


@dataclass
class View:
    """One set of replies: a checkpoint x pass variant x suite variant of a run, or an eval folder's variant."""

    label: str
    series: str
    x: float | None  # training step (runs); None in an eval folder (variants are categories)
    xlabel: str
    folder: Path | None  # where completions.jsonl / outcomes.jsonl are
    metrics: list[dict] = field(default_factory=list)
    replies: list[list] = field(default_factory=list)
    note: str | None = None


@dataclass
class Page:
    title: str
    sources: list[str]
    axis: str  # "step" (training runs) or "variant"
    views: list[View]
    prompts: dict[str, str]
    messages: list[str]
    seconds: float = 0.0
    rollouts: list[dict] = field(default_factory=list)  # GRPO: [{run, step, reward, rows}] (run_rollouts)


# ---------------------------------------------------------------- reading folders


def kind_of(folder: Path) -> str:
    """'run' (a `mlft train` run directory: curves.jsonl), 'eval' (an `mlft eval` folder: scores.jsonl), else a
    DataError naming the folder and what was looked for."""
    if not folder.is_dir():
        raise DataError(
            f"{folder}: no such folder (expected a `mlft train` run directory or an `mlft eval` output folder)"
        )
    if (folder / CURVES).is_file() or (folder / PASSES).is_file() or (folder / ROLLOUTS).is_file():
        return "run"
    if (folder / "scores.jsonl").is_file():
        return "eval"
    raise DataError(
        f"{folder}: neither a training run (no {CURVES}) nor an eval folder (no scores.jsonl); "
        "give a `mlft train` run_dir or an `mlft eval --out` folder"
    )


def _num(x) -> float | None:
    """A number for the page's JSON: NaN / infinity (e.g. the normal interval of one reply's NLL) become None."""
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _metric(r: dict) -> dict | None:
    value = _num(r.get("value"))
    if value is None or r.get("harness"):
        return None
    return {
        "task": r["task"],
        "language": r["language"],
        "metric": r["metric"],
        "value": value,
        "low": _num(r.get("low")),
        "high": _num(r.get("high")),
        "n": r.get("n"),
    }


def run_views(run_dir: Path, name: str, messages: list[str]) -> list[View]:
    rows = read_jsonl(run_dir / CURVES)
    for p in read_jsonl(run_dir / PASSES):
        if p.get("error"):
            messages.append(f"{run_dir}: step {p['step']} {p['variant']}: the evaluation failed ({p['error']})")
    if not rows:
        messages.append(f"{run_dir}: no evaluated checkpoint yet ({CURVES} is empty or missing)")
        return []
    views: dict[tuple, View] = {}
    for r in rows:
        if r.get("harness"):  # an lm_eval capability pass: no LCB replies (its numbers are in `mlft curves`)
            continue
        suite_variant = r.get("suite_variant") or "default"
        key = (int(r["step"]), r["variant"], suite_variant)
        if key not in views:
            series = r["variant"] if suite_variant == "default" else f"{r['variant']} · {suite_variant}"
            folder = (run_dir / r["outcomes"]).parent if r.get("outcomes") else None
            label = f"step {key[0]} · {series}"
            views[key] = View(
                f"{name} · {label}" if name else label,
                f"{name} · {series}" if name else series,
                key[0],
                str(key[0]),
                folder,
            )
        m = _metric(r)
        if m:
            views[key].metrics.append(m)
    return sorted(views.values(), key=lambda v: (v.series, v.x))


def eval_views(folder: Path, name: str, messages: list[str], series: str | None = None) -> list[View]:
    rows = read_jsonl(folder / "scores.jsonl")
    if not rows:
        messages.append(f"{folder / 'scores.jsonl'} holds no metric rows")
    views: dict[str, View] = {}
    for r in rows:
        variant = str(r.get("variant") or "default")
        if variant not in views:
            sub = (folder / r["outcomes"]).parent if r.get("outcomes") else folder / variant
            views[variant] = View(
                f"{name} · {variant}" if name else variant,
                series or name or "eval",
                None,
                variant,
                sub if (sub / "completions.jsonl").is_file() or r.get("outcomes") else None,
            )
        m = _metric(r)
        if m:
            views[variant].metrics.append(m)
    return list(views.values())


def _spread(steps: list[int], limit: int) -> list[int]:
    """At most `limit` of the sorted `steps`, evenly spread, the first and the last among them."""
    if len(steps) <= limit:
        return steps
    return sorted({steps[round(i * (len(steps) - 1) / (limit - 1))] for i in range(limit)})


def _short(text, limit: int = ROLLOUT_PAGE_CHARS):
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def run_rollouts(run_dir: Path, name: str, messages: list[str]) -> list[dict]:
    """What a GRPO run's reward paid, as training recorded it (rollouts.jsonl): per logged step (the steps of
    rewards.jsonl; every recorded step without it), at most ROLLOUT_STEPS steps, the highest- and lowest-reward
    rollouts: {run, step, reward (the step's mean), rows: [{rank, prompt_id, language, task, prompt, completion,
    terms, total, group, verdict}]}."""
    rows = read_jsonl(run_dir / ROLLOUTS)
    if not rows:
        return []
    by_step: dict[int, list[dict]] = {}
    for r in rows:
        by_step.setdefault(int(r["step"]), []).append(r)
    curves = {int(c["step"]): c for c in read_jsonl(run_dir / REWARD_CURVES)}
    steps = sorted(s for s in by_step if not curves or s in curves) or sorted(by_step)
    shown = _spread(steps, ROLLOUT_STEPS)
    if len(shown) < len(steps):
        messages.append(
            f"{run_dir}: rollouts of {len(shown)} of {len(steps)} logged steps shown (spread evenly; "
            f"all are in {ROLLOUTS})"
        )
    keys = ("rank", "prompt_id", "language", "task", "terms", "total", "group", "verdict")
    return [
        {
            "run": name,
            "step": s,
            "reward": _num(curves.get(s, {}).get("reward")),
            "rows": [
                {
                    **{k: r.get(k) for k in keys},
                    "prompt": _short(r.get("prompt")),
                    "completion": _short(r.get("completion")),
                }
                for r in by_step[s]
            ],
        }
        for s in shown
    ]


# ---------------------------------------------------------------- replies as the scorer judged them


def judged_lines(text: str, detail: dict) -> list[list]:
    """The reply's lines, each [text, state, label, score]: the scorer's counted lines (`detail["lines"]`, in
    order) matched against its own normalisation of the reply, shown as written. Lines after the scorer's "\\nQ:"
    cut are CUT."""
    judged = list(detail["lines"])
    normalized = normalize(text).split("\n")
    head, sep, tail = text.partition("\nQ:")
    raw = head.strip().split("\n")
    if len(raw) != len(normalized):  # cannot happen with today's normalisation; then show the scorer's text
        raw = normalized
    out, j = [], 0
    for shown, norm in zip(raw, normalized):
        if j < len(judged) and judged[j]["text"] == norm:
            d = judged[j]
            out.append([shown, OK if d["ok"] else WRONG, d["label"], d["score"]])
            j += 1
        else:
            out.append([shown, SHORT])
    if j != len(judged):  # never silently drop a judged line
        out += [[d["text"], OK if d["ok"] else WRONG, d["label"], d["score"]] for d in judged[j:]]
    if sep:
        out.append([sep.lstrip("\n") + tail, CUT])
    return out


def verdict(detail: dict) -> str:
    """LCB's verdict on one reply: 'not counted' (no line of >= 5 tokens), 'line' (a counted line in another
    language: LPR fails), 'word' (an English word in a non-Latin reply: WPR fails; the scorer also marks words in
    Latin-script replies, which no metric counts), or 'pass'."""
    if not detail["counted"]:
        return "not counted"
    if detail["line_error"]:
        return "line"
    return "word" if detail["word_error"] and detail["language"] in NON_LATIN else "pass"


def view_replies(
    view: View,
    resources,
    prompts: dict[str, str],
    messages: list[str],
    workers: int | None,
    markers: TraceMarkers | None = DEFAULT_MARKERS,
) -> None:
    """Fill `view.replies` from its completions (the scorer's details) and outcomes (recorded guard values). A reply
    with a reasoning trace (`mlft.benchmarks.lcb.traces`, `markers`) is judged on its answer, as the suite scores
    it; its trace's outcome, lines and verdict follow (indices 12-14; the outcome alone, 'none', without a trace);
    index 15 is the task axis's verdict where the suite checks answers (task.jsonl: [answered, the reply's number,
    the answer]), else None."""
    if view.folder is None or not (view.folder / "completions.jsonl").is_file():
        where = view.folder / "completions.jsonl" if view.folder else "its pass"
        view.note = f"no completions ({where} not found): metrics only"
        messages.append(f"{view.label}: {view.note}")
        return
    path = view.folder / "completions.jsonl"
    try:
        completions = read_completions(path)
    except MlftError as exc:
        view.note = f"completions unreadable: {exc}"
        messages.append(f"{view.label}: {view.note}")
        return
    split = split_completions(completions, markers)
    completions = split.answers  # the replies themselves when none holds a marker
    report = score_completions(completions, lid=resources[0], words=None, detail=True, workers=workers)
    traces = iter(())
    if split.traces:
        scored = score_completions(split.traces, lid=resources[0], words=None, detail=True, workers=workers)
        traces = iter(zip(split.traces, scored.details))
    recorded = {(str(o["id"]), o.get("sample") or 0): o for o in read_jsonl(view.folder / "outcomes.jsonl")}
    if not recorded:
        messages.append(
            f"{view.label}: no outcomes.jsonl beside the completions (an older mlft?): lexical "
            "validity and degeneracy computed now"
        )
    answered = {(str(v["id"]), v.get("sample") or 0): v for v in read_jsonl(view.folder / TASK_FILE)}
    for c, d, outcome in zip(completions, report.details, split.outcomes):
        trace = next(traces) if outcome in HAS_TRACE else None
        if c.extra.get("prompt") is not None:
            prompts.setdefault(c.id, str(c.extra["prompt"]))
        sample = int(c.extra.get("sample") or 0)  # several replies per prompt: reply k shows as <id>#k
        o = recorded.get((c.id, sample), {})
        validity = o.get("validity") if "validity" in o else lexical_validity(c.completion, c.language)
        reason = degeneracy_reason(c.completion) if o.get("degenerate", True) else None
        invalid = validity is not None and validity <= VALID_SHARE
        flag = "degenerate" if reason else "invalid" if invalid else ""
        view.replies.append(
            [
                draw_id(c.id, sample),
                c.task,
                c.language,
                c.source,
                verdict(d),
                flag,
                reason,
                None if validity is None else round(float(validity), 3),
                judged_lines(c.completion, d),
                d["english_words"] if c.language in NON_LATIN else [],
                c.extra.get("finish_reason"),
                _num(o.get("nll")),
                outcome,
                judged_lines(trace[0].completion, trace[1]) if trace else None,
                verdict(trace[1]) if trace else None,
                _task_verdict(answered.get((c.id, sample))),
            ]
        )


def _task_verdict(v: dict | None) -> list | None:
    return None if v is None else [bool(v["correct"]), _num(v.get("extracted")), _num(v.get("answer"))]


# ---------------------------------------------------------------- the page


def collect(
    paths: list[str | Path],
    workers: int | None = None,
    lid: str | None = None,
    markers: TraceMarkers | None = DEFAULT_MARKERS,
) -> Page:
    """Read every folder (a DataError names one that is neither a run nor an eval) and judge every reply (its
    answer and its reasoning trace apart, for a reply holding `markers`)."""
    started = time.perf_counter()
    folders = [Path(p) for p in paths]
    if not folders:
        raise DataError("mlft report: give at least one run or eval folder")
    kinds = [kind_of(f) for f in folders]
    names = _names(folders)
    messages: list[str] = []
    views: list[View] = []
    rollouts: list[dict] = []
    for f, kind, name in zip(folders, kinds, names):
        prefix = name if len(folders) > 1 else ""
        views += run_views(f, prefix, messages) if kind == "run" else eval_views(f, prefix, messages, name)
        if kind == "run":
            rollouts += run_rollouts(f, name, messages)
    resources = load_resources(lid)
    prompts: dict[str, str] = {}
    for v in views:
        view_replies(v, resources, prompts, messages, workers, markers)
    axis = "step" if all(k == "run" for k in kinds) else "variant"
    title = " + ".join(names)
    return Page(
        title, [str(f) for f in folders], axis, views, prompts, messages, time.perf_counter() - started, rollouts
    )


def _names(folders: list[Path]) -> list[str]:
    names = []
    for f in folders:
        name = f.resolve().name
        if name in names or name in ("default", "model"):
            name = f"{f.resolve().parent.name}/{name}"
        names.append(name)
    return names


def _blob(obj) -> str:
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def render(page: Page) -> str:
    """The HTML text: the page's index as JSON, each view's replies and the prompts as compressed blocks."""
    index = {
        "title": page.title,
        "sources": page.sources,
        "axis": page.axis,
        "messages": page.messages,
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": __version__,
        "valid_share": VALID_SHARE,
        "metrics": list(SHOWN_METRICS),
        "views": [
            {
                "label": v.label,
                "series": v.series,
                "x": v.x,
                "xlabel": v.xlabel,
                "metrics": v.metrics,
                "n": len(v.replies),
                "note": v.note,
                "folder": str(v.folder) if v.folder else None,
            }
            for v in page.views
        ],
        "rollout_steps": len(page.rollouts),
    }
    blocks = [f'<script type="application/x-gzip-base64" id="prompts">{_blob(page.prompts)}</script>']
    if page.rollouts:
        blocks.append(f'<script type="application/x-gzip-base64" id="rollouts">{_blob(page.rollouts)}</script>')
    blocks += [
        f'<script type="application/x-gzip-base64" id="view-{i}">{_blob(v.replies)}</script>'
        for i, v in enumerate(page.views)
        if v.replies
    ]
    data = json.dumps(index, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")  # strict JSON: JSON.parse
    css = (RESOURCES / "page.css").read_text(encoding="utf-8")
    js = (RESOURCES / "page.js").read_text(encoding="utf-8")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>mlft report: {html.escape(page.title)}</title>\n<style>{css}</style></head>\n<body>\n"
        '<div id="app"><p class="loading">Loading the report (JavaScript must be on)…</p></div>\n'
        f'<script type="application/json" id="index">{data}</script>\n'
        + "\n".join(blocks)
        + f"\n<script>{js}</script>\n</body></html>\n"
    )


def write_page(
    paths: list[str | Path],
    out: str | Path,
    workers: int | None = None,
    lid: str | None = None,
    markers: TraceMarkers | None = DEFAULT_MARKERS,
) -> tuple[Path, Page]:
    """Collect and write the page; returns its path and what it holds (views, messages, seconds)."""
    page = collect(paths, workers=workers, lid=lid, markers=markers)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render(page), encoding="utf-8")
    tmp.replace(out)
    return out, page


def write_report_page(paths: list[str | Path], out: str | Path) -> Path | None:
    """The page written after `mlft eval` and `mlft train`: never fails the command that produced the results (a
    problem is reported, with the command that rebuilds the page)."""
    try:
        path, page = write_page(paths, out)
    except (MlftError, OSError) as exc:
        log.warning(
            "mlft report: no page written (%s); rebuild it with `mlft show report %s`", exc, " ".join(map(str, paths))
        )
        return None
    replies = sum(len(v.replies) for v in page.views)
    log.info("report page: %s (%.1f MB, %d replies, %.1f s)", path, path.stat().st_size / 1e6, replies, page.seconds)
    return path

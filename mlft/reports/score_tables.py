"""Tables of one ScoreReport: per (task, model), sources x languages for LPR, WPR and LCPR; with the guard
(`mlft.benchmarks.lcb.scoring.score_guard`) beside them when given."""

from __future__ import annotations

from mlft.benchmarks.lcb.judge import metric_name
from mlft.benchmarks.lcb.scoring import ScoreReport
from mlft.benchmarks.lcb.traces import OUTCOMES
from mlft.format import cell, render
from mlft.languages import NON_LATIN

LONG_COLUMNS = [
    "task",
    "model",
    "source",
    "language",
    "lpr",
    "wpr",
    "acc",
    "lcpr",
    "n_responses",
    "n_scored",
    "n_line_err",
    "n_word_err",
    "n_lines_scored",
    "n_lines_wrong",
]
CI_COLUMNS = ["lpr_ci_low", "lpr_ci_high", "wpr_ci_low", "wpr_ci_high", "lcpr_ci_low", "lcpr_ci_high"]
GUARD_COLUMNS = [
    "coverage",
    "coverage_ci_low",
    "coverage_ci_high",
    "degeneracy",
    "degeneracy_ci_low",
    "degeneracy_ci_high",
    "validity",
    "validity_ci_low",
    "validity_ci_high",
    "unknown",
    "unknown_ci_low",
    "unknown_ci_high",
    "skipped",
    "skipped_ci_low",
    "skipped_ci_high",
    "guard_flags",
]
GUARD_LINES = [
    ("coverage", "Coverage"),
    ("degeneracy", "Degeneracy"),
    ("validity", "Lexical validity"),
    ("unknown", "Unknown lines"),
    ("skipped", "Skipped replies"),
]
GUARD_NOTE = (
    "Guard (mlft, not part of the official metric; --no-guard hides it): coverage = replies with a line "
    "LCB counts (>= 5 tokens); degeneracy = empty or repetitive replies; lexical validity = replies "
    "whose words are mostly words of the language (word salad scores low); unknown lines = counted lines "
    "fastText labels unknown (score <= 0.3); skipped = replies LCB leaves out of every denominator. "
    "LPR alone rewards degenerate output: read it beside these. ⚠ = the row's whole 95 % interval lies "
    "beyond a limit (coverage < 80 %, degeneracy > 5 %, validity < 80 %)."
)

TRACE_NOTE = (
    "Trace outcomes: none = no marker (scored whole); closed = open then close marker; prefilled = a close marker "
    "only (the trace opened in the prompt); unclosed = an open marker never closed (the answer is the text before "
    "it, usually empty); malformed = markers in the wrong order, nested or several (left out of both parts)."
)


def _flag_text(flags: list[dict], task: str, model: str, lang: str) -> str:
    return "; ".join(f["reason"] for f in flags if (f["task"], f["model"], f["language"]) == (task, model, lang))


def guarded_rows(report: ScoreReport, guard: tuple[dict, list[dict]] | None) -> list[dict]:
    """The official rows (unchanged values) with the guard's columns added, for JSON / TSV / CSV."""
    if guard is None:
        return report.rows
    rows, flags = guard
    out = []
    for r in report.rows:
        g = rows.get((r["task"], r["model"], r["source"], r["language"]), {})
        extra = {c: g.get(c) for c in GUARD_COLUMNS[:-1]}
        extra["guard_flags"] = _flag_text(flags, r["task"], r["model"], r["language"]) if r["source"] == "all" else ""
        out.append({**r, **extra})
    return out


def long_table(report: ScoreReport, guard: tuple[dict, list[dict]] | None = None) -> tuple[list[str], list[list]]:
    """One row per group and aggregate, full precision (like the official reference TSV); the guard's columns
    after the official ones when `guard` (`mlft.benchmarks.lcb.scoring.score_guard`) is given."""
    cols = LONG_COLUMNS + (CI_COLUMNS if any("lpr_ci_low" in r for r in report.rows) else [])
    if guard is not None:
        cols += GUARD_COLUMNS
    rows = [["NA" if r.get(c) is None else r.get(c) for c in cols] for r in guarded_rows(report, guard)]
    return cols, rows


def guard_tables(report: ScoreReport, guard: tuple[dict, list[dict]], fmt: str = "table", part: str = "") -> str:
    """Per (task, model): the guard's measures (rows) x avg + languages (columns, percent), ⚠ on flagged cells,
    then the flags and what the measures mean. `part` ("answer", "trace") names the part of replies scored."""
    rows, flags = guard
    tag = f" · {part}" if part else ""
    out = []
    for task, model in report.groups():
        langs = sorted({k[3] for k in rows if k[:2] == (task, model)} - {"all"})
        flagged = {(f["language"], f["metric"]) for f in flags if (f["task"], f["model"]) == (task, model)}
        body = []
        for key, name in GUARD_LINES:
            line = [name]
            for lang in ["all", *langs]:
                g = rows.get((task, model, "all", lang), {})
                text = cell(g.get(key))
                if lang == "all" and g.get(f"{key}_ci_low") is not None:  # the interval on the average
                    text += f" [{100 * g[f'{key}_ci_low']:.1f},{100 * g[f'{key}_ci_high']:.1f}]"
                if (lang, key) in flagged:
                    text += " ⚠"
                line.append(text)
            body.append(line)
        out.append(render(["Guard %", "avg", *langs], body, fmt, title=f"{model} · {task}{tag} · guard"))
    notes = [f"⚠ {f['model']} · {f['task']}{tag} · {f['language']}: {f['reason']}" for f in flags]
    prefix = "- " if fmt == "markdown" else ""
    return "\n".join(out) + "\n" + "\n".join(prefix + n for n in [*notes, GUARD_NOTE]) + "\n"


def _ci(r: dict, key: str) -> str:
    lo, hi = r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high")
    return "" if lo is None else f" [{100 * lo:.1f},{100 * hi:.1f}]"


def matrix_tables(report: ScoreReport, fmt: str = "table", part: str = "") -> str:
    """Paper-style blocks: rows = sources + all, columns = avg + languages (percent). `part` ("answer", "trace")
    names the part of replies scored (`mlft.benchmarks.lcb.traces`) in the titles."""
    tag = f" · {part}" if part else ""
    out = []
    for task, model in report.groups():
        rows = [r for r in report.rows if r["task"] == task and r["model"] == model]
        langs = sorted({r["language"] for r in rows} - {"all"})
        sources = sorted({r["source"] for r in rows} - {"all"}) + ["all"]
        get = {(r["source"], r["language"]): r for r in rows}
        head = report.headline(task, model)
        for metric, metric_langs in (("lpr", langs), ("wpr", [x for x in langs if x in NON_LATIN])):
            if not metric_langs:
                continue
            header = [f"{metric.upper()} %", "avg", *metric_langs]
            body = []
            for s in sources:
                line = [s, cell(get.get((s, "all"), {}).get(metric)) + _ci(get.get((s, "all"), {}), metric)]
                line += [cell(get.get((s, lang), {}).get(metric)) if (s, lang) in get else "" for lang in metric_langs]
                body.append(line)
            out.append(render(header, body, fmt, title=f"{model} · {task}{tag} · {metric.upper()}"))
        by_lang = report.by_language(task, model)
        lc_langs = [x for x in langs if x in NON_LATIN]
        if lc_langs:
            top = get[("all", "all")]
            line = ["all", cell(head["lcpr"]) + _ci(top, "lcpr"), *(cell(by_lang[x]["lcpr"]) for x in lc_langs)]
            out.append(render(["LCPR %", "avg", *lc_langs], [line], fmt, title=f"{model} · {task}{tag} · LCPR"))
    return "\n".join(out)


def trace_outcome_table(rows: list[dict], fmt: str = "table") -> str:
    """Per (task, model): languages (and all) x the outcomes of the trace split (`traces.outcome_rows`)."""
    out = []
    for task, model in dict.fromkeys((r["task"], r["model"]) for r in rows):
        mine = [r for r in rows if (r["task"], r["model"]) == (task, model)]
        body = [[r["language"], r["replies"], *(r[x] for x in OUTCOMES)] for r in mine]
        out.append(render(["language", "replies", *OUTCOMES], body, fmt, f"{model} · {task} · trace outcomes"))
    return "\n".join(out) + "\n" + (("- " if fmt == "markdown" else "") + TRACE_NOTE) + "\n"


def beside_table(rows: list[dict], judge: str, lid_name: str, fmt: str = "table") -> str:
    """Per (task, model): languages (and avg) x official LPR, judged LPR, difference (percent), counted replies and
    replies the judges disagree on."""
    pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
    out = []
    for task, model in dict.fromkeys((r["task"], r["model"]) for r in rows):
        mine = [r for r in rows if (r["task"], r["model"]) == (task, model) and r["source"] == "all"]
        mine.sort(key=lambda r: (r["language"] == "all", r["language"]))
        body = [
            [
                "avg" if r["language"] == "all" else r["language"],
                pct(r["lpr"]),
                pct(r[metric_name(judge)]),
                "–" if r["difference"] is None else f"{100 * r['difference']:+.1f}",
                r["counted"],
                r["disagree"],
            ]
            for r in mine
        ]
        head = [
            "language",
            f"LPR ({lid_name.split(' (')[0]})",
            f"LPR ({judge})",
            "difference (pp)",
            "counted replies",
            "judges disagree",
        ]
        out.append(
            render(
                head,
                body,
                fmt,
                f"{task} · {model}: LPR judged by {judge} beside the official (NON-OFFICIAL second judge: "
                f"same counted lines, same threshold)",
            )
        )
    return "\n".join(out)

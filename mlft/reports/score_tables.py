"""Tables of one ScoreReport: per (task, model), sources x languages for LPR, WPR and LCPR."""

from __future__ import annotations

from mlft.languages import NON_LATIN
from mlft.lcb.scoring import ScoreReport
from mlft.reports.format import cell, render

LONG_COLUMNS = ["task", "model", "source", "language", "lpr", "wpr", "acc", "lcpr", "n_responses", "n_scored",
                "n_line_err", "n_word_err", "n_lines_scored", "n_lines_wrong"]
CI_COLUMNS = ["lpr_ci_low", "lpr_ci_high", "wpr_ci_low", "wpr_ci_high", "lcpr_ci_low", "lcpr_ci_high"]


def long_table(report: ScoreReport) -> tuple[list[str], list[list]]:
    """One row per group and aggregate, full precision (like the official reference TSV)."""
    cols = LONG_COLUMNS + (CI_COLUMNS if any("lpr_ci_low" in r for r in report.rows) else [])
    rows = [["NA" if r.get(c) is None else r.get(c) for c in cols] for r in report.rows]
    return cols, rows


def _ci(r: dict, key: str) -> str:
    lo, hi = r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high")
    return "" if lo is None else f" [{100 * lo:.1f},{100 * hi:.1f}]"


def matrix_tables(report: ScoreReport, fmt: str = "table") -> str:
    """Paper-style blocks: rows = sources + all, columns = avg + languages (percent)."""
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
            out.append(render(header, body, fmt, title=f"{model} · {task} · {metric.upper()}"))
        by_lang = report.by_language(task, model)
        lc_langs = [x for x in langs if x in NON_LATIN]
        if lc_langs:
            top = get[("all", "all")]
            line = ["all", cell(head["lcpr"]) + _ci(top, "lcpr"), *(cell(by_lang[x]["lcpr"]) for x in lc_langs)]
            out.append(render(["LCPR %", "avg", *lc_langs], [line], fmt, title=f"{model} · {task} · LCPR"))
    return "\n".join(out)

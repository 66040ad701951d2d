"""The paper's result tables, rebuilt from scored completions of several models.

Table 3 (LPR by language), Table 4 / A3 (WPR), A5 (LCPR), Table 5 / A7 (LPR and WPR by dataset),
A1 / A2 (line-level accuracy) — each for the monolingual and the cross-lingual task.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlft.benchmarks.lcb.scoring import ScoreReport
from mlft.format import cell
from mlft.languages import NON_LATIN

# The paper's row order; models not listed follow in name order.
MODEL_ORDER = [
    "command-r-base",
    "command-r-plus-base",
    "llama-2-instruct",
    "llama-3-instruct",
    "mistral-8x7b",
    "mistral-large",
    "command-r",
    "command-r-plus",
    "gpt-3.5-turbo",
    "gpt-4-turbo",
]
TASK_LABEL = {"monolingual": "Monolingual", "crosslingual": "Cross-lingual"}


@dataclass
class PaperTable:
    name: str  # file stem, e.g. table3_lpr_monolingual
    title: str
    header: list[str]
    rows: list[list[str]]


def _models(report: ScoreReport, task: str) -> list[str]:
    present = {m for t, m in report.groups() if t == task}
    return [m for m in MODEL_ORDER if m in present] + sorted(present - set(MODEL_ORDER))


def _rows_of(report: ScoreReport, task: str, model: str) -> dict[tuple[str, str], dict]:
    return {(r["source"], r["language"]): r for r in report.rows if r["task"] == task and r["model"] == model}


def by_language(report: ScoreReport, task: str, metric: str, name: str, title: str) -> PaperTable:
    langs = sorted({r["language"] for r in report.rows if r["task"] == task} - {"all"})
    if metric in ("wpr", "lcpr"):
        langs = [x for x in langs if x in NON_LATIN]
    rows = []
    for model in _models(report, task):
        get = _rows_of(report, task, model)
        if metric == "lcpr":
            avg = report.headline(task, model)["lcpr"]
        else:
            avg = get[("all", "all")][metric]
        rows.append([model, cell(avg), *(cell(get.get(("all", x), {}).get(metric)) for x in langs)])
    return PaperTable(name, title, ["Model", "Avg", *langs], rows)


def by_source(report: ScoreReport, task: str, name: str, title: str) -> PaperTable:
    sources = sorted({r["source"] for r in report.rows if r["task"] == task} - {"all"})
    header = ["Model", *(f"{s} LPR" for s in sources), *(f"{s} WPR" for s in sources)]
    rows = []
    for model in _models(report, task):
        get = _rows_of(report, task, model)
        rows.append(
            [
                model,
                *(cell(get.get((s, "all"), {}).get("lpr")) for s in sources),
                *(cell(get.get((s, "all"), {}).get("wpr")) for s in sources),
            ]
        )
    return PaperTable(name, title, header, rows)


def paper_tables(report: ScoreReport) -> list[PaperTable]:
    out = []
    for task in ("monolingual", "crosslingual"):
        if not any(t == task for t, _ in report.groups()):
            continue
        label, short = TASK_LABEL[task], task[:4]
        acc_name = "tableA1" if task == "monolingual" else "tableA2"
        out += [
            by_language(report, task, "lpr", f"table3_lpr_{short}", f"Table 3 ({label}): line-level pass rate (LPR)"),
            by_language(
                report, task, "wpr", f"table4_wpr_{short}", f"Table 4 / A3 ({label}): word-level pass rate (WPR)"
            ),
            by_language(
                report,
                task,
                "lcpr",
                f"tableA5_lcpr_{short}",
                f"Table A5 ({label}): LCPR (harmonic mean of LPR and WPR)",
            ),
            by_source(report, task, f"table5_by_dataset_{short}", f"Table 5 / A7 ({label}): LPR and WPR by dataset"),
            by_language(
                report,
                task,
                "acc",
                f"{acc_name}_line_acc_{short}",
                f"Table {acc_name[5:]} ({label}): line-level accuracy",
            ),
        ]
    return out

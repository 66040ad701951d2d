"""The mitigation table (paper Table 11 layout) with intervals, paired significance against the base row and the
guard beside every LPR; its per-language detail (A18/A19) and the quantization table (A12 layout); also as PNG.
Filled from run directories' curve rows (or `mlft eval` scores) as a small YAML spec says (`mlft.reports.table_spec`).

A row's numbers come from `run` (a `mlft train` run directory: curves.jsonl) at `step` (an int or `last`) and
`variant` (default `model`), or from `rows_file` (long-format metric rows, e.g. the scores.jsonl of `mlft eval`).
Cells read `value ±h`: h is half the width of the row's 95 % interval (stored with the rows). When the rows'
per-reply outcomes are at hand, each row is tested against the base row over the same prompts (paired
permutation test, `mlft.stats.swap_test`; Holm-adjusted down each column; `*` marks p < 0.05), and the guard
flags (⚠) a row whose coverage, degeneracy or lexical validity is worse than the base row's beyond its interval
(mlft.benchmarks.lcb.guard), or whose mean reply NLL (fluency) is more than 10 % above the base row's on the same
prompts. Paths are relative to the spec.

Capability columns (`capability:`) show any metric row — typically an `lm_eval` suite's (a harness task's acc
with its stderr interval) — read from the curve variant `variant` of a `run` row (e.g. a training-callback pass
`{variant: capability, suite: capability_demo}`), or from the row's `rows_file` / `capability_rows_file`;
`variant: null` = the row's own pass. A mitigation that costs capability is flagged (⚠, the cell marked ↓) when
the base row's value lies above the row's whole interval.

A second LID judge's LPR (`lpr@<judge>`; `judge_columns(judge)` gives the spec entries, `variant: null`) is an LPR
column, not a capability one: `judge_column` computes its cells — value ±h and, per row, the difference from the
base row over the judged per-reply outcomes, tested as the official LPR is (paired over prompts, Holm down the
column) — for table specs and for `variant_table` alike.

`variant_table` lays out an eval's variants (the lcb kind's `variants:`) as mitigations, from the kind's rows: the
first variant is the base; the judge's columns (when the suite has `judge:`), the time per prompt and notes on
groups without a counted reply (`empty_group_notes`) join it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlft.benchmarks.lcb.judge import judge_of
from mlft.constants import GUARD_METRICS, TASKS
from mlft.format import render
from mlft.harness.samples import paired_samples_test
from mlft.io.metric_rows import MetricRow, rows_of
from mlft.languages import LANGUAGES
from mlft.reports.table_rows import MAX_NLL_INCREASE, Row, _guard, _tests, compare, official_outcomes, select
from mlft.reports.table_spec import Capability, PerLanguage, TableSpec, judge_columns
from mlft.reports.task_axis import TASK_METRICS, TASK_NOTE, task_column_tests, task_drop_flags, task_header
from mlft.stats import PairedResult, adjust, holm, load_outcomes, paired_tests_by_language

# ---------------------------------------------------------------- tables

MAIN = [("monolingual", "lpr"), ("monolingual", "wpr"), ("crosslingual", "lpr"), ("crosslingual", "wpr")]
GUARD = [(m, {"coverage": "Cov", "degeneracy": "Degen", "validity": "Valid"}.get(m, m.title())) for m in GUARD_METRICS]


@dataclass
class Table:
    title: str
    header: list[str]
    body: list[list[str]]
    notes: list[str]
    data: list[dict] = field(default_factory=list)  # the numbers behind `body`, per row (see `_row_data`)

    def render(self, fmt: str = "table") -> str:
        text = render(self.header, self.body, fmt, self.title)
        if self.notes and fmt in ("table", "markdown"):
            text += "\n" + "\n".join(("" if fmt == "table" else "- ") + n for n in self.notes) + "\n"
        return text


def _base_row(spec: TableSpec, rows: list[Row]) -> Row:
    return next(r for r in rows if r.label == (spec.base or spec.rows[0].label))


def table11(spec: TableSpec, rows: list[Row] | None = None) -> Table:
    rows = rows or [select(r, capability=spec.capability) for r in spec.rows]
    return mitigation_table(
        rows,
        _base_row(spec, rows).label,
        spec.title,
        spec.resamples,
        confidence=spec.confidence,
        capability=spec.capability,
    )


def capability_drops(rows: list[Row], base: Row, capability: list[Capability] | tuple) -> dict[str, list[str]]:
    """{row label: [reasons]} for rows whose capability interval lies wholly below the base row's value."""
    out: dict[str, list[str]] = {}
    for cap in capability:
        key = (cap.task, cap.language, cap.metric)
        b = base.value(*key)
        for row in rows:
            x = row.values.get(key)
            if row is base or b is None or x is None or x.value is None or x.high is None:
                continue
            if x.high < b:
                out.setdefault(row.label, []).append(
                    f"capability {cap.header}: {100 * x.value:.1f} [{100 * x.low:.1f}, {100 * x.high:.1f}] "
                    f"vs base {100 * b:.1f}: dropped beyond the row's interval"
                )
    return out


def capability_tests(
    rows: list[Row], base: Row, capability: list[Capability] | tuple, resamples: int
) -> dict[tuple[str, str], tuple]:
    """{(row label, column header): (difference, low, high, p, pairs, None: `task_column_tests`' counts)}: paired
    bootstrap over the documents both rows evaluated, where both name lm-eval samples (Holm-adjusted per column)."""

    out = {}
    for cap in capability:
        key = (cap.task, cap.language, cap.metric)
        a = base.samples_path(key)
        family = []
        for row in rows:
            b = row.samples_path(key)
            if row is base or not a or not b or not Path(a).is_file() or not Path(b).is_file():
                continue
            res = paired_samples_test(a, b, cap.metric, n=resamples)
            if res is not None:
                family.append((row.label, res))
        for (label, res), q in zip(family, holm([r[3] for _, r in family])):
            out[(label, cap.header)] = (*res[:3], q, res[4], None)
    return out


@dataclass
class MitigationTests:
    """Every test behind a mitigation table (`mitigation_tests`), against the base row, in the order they run:
    `p` the paired tests of the official metrics {(label, task, metric): Holm-adjusted p}; `guard` the guard's
    reasons {label: [reason]} (coverage, degeneracy, validity, NLL); `judged` a second judge's LPR columns
    {header: {label: JudgeCell}}; `others` the capability columns that are not a judge's; `drops` {label: [reason]}
    of capability drops beyond a row's interval; `cap_p` {(label, header): (diff, low, high, p, pairs, counts)} of
    the capability and task columns' paired tests, of which `task_p` the task axis's."""

    base: Row
    p: dict
    guard: dict[str, list[str]]
    judged: dict[str, dict[str, JudgeCell]]
    others: list[Capability]
    drops: dict[str, list[str]]
    cap_p: dict
    task_p: dict


def mitigation_tests(
    rows: list[Row],
    base: Row,
    resamples: int = 4000,
    confidence: float = 0.95,
    capability: list[Capability] | tuple = (),
) -> MitigationTests:
    """Run the table's tests: every row against `base` (official metrics, the guard, a second judge's LPR, the
    capability and task columns)."""
    p = _tests(rows, base, MAIN + [("monolingual", "lcpr"), ("crosslingual", "lcpr")], resamples)
    guard = _guard(rows, base, resamples, confidence)
    judged = {c.header: judge_column(rows, base, c, resamples, confidence) for c in capability if judge_of(c.metric)}
    others = [c for c in capability if c.header not in judged]
    drops = capability_drops(rows, base, [c for c in others if c.metric not in TASK_METRICS])  # task: the paired test
    cap_p = capability_tests(rows, base, others, resamples) if others else {}
    task_p = task_column_tests(rows, base, others, resamples, confidence)  # the task axis: does the fix cost answers
    cap_p.update(task_p)
    return MitigationTests(base, p, guard, judged, others, drops, cap_p, task_p)


def mitigation_flags(tests: MitigationTests, confidence: float = 0.95) -> dict[str, list[str]]:
    """{row label: [reason]}: the rows flagged ⚠ (the guard's reasons, then capability drops, then task drops)."""
    flags = {label: list(reasons) for label, reasons in tests.guard.items()}
    for label, reasons in [*tests.drops.items(), *task_drop_flags(tests.task_p, confidence).items()]:
        flags.setdefault(label, []).extend(reasons)
    return flags


def mitigation_cells(
    rows: list[Row],
    tests: MitigationTests,
    flags: dict[str, list[str]],
    confidence: float = 0.95,
    capability: list[Capability] | tuple = (),
    extra: dict[str, dict[str, str]] | None = None,
) -> tuple[list[str], list[list[str]], list[dict]]:
    """The table's header, its cells (`value ±h`, `*` marks, ⚠ on flagged rows, ↓ on capability drops) and the
    numbers behind each row (`_row_data`)."""
    base, p, judged, drops, cap_p = tests.base, tests.p, tests.judged, tests.drops, tests.cap_p
    sig = 1 - confidence
    extra = extra or {}
    header = [
        "",
        "Mono LPR",
        "Mono WPR",
        "Cross LPR",
        "Cross WPR",
        "LCPR (task mean)",
        *(f"{name} mono / cross" for _, name in GUARD),
        "NLL mono / cross",
        *[c.header for c in capability],
        *extra,
    ]
    body, data = [], []
    for row in rows:
        data.append(_row_data(row, base, p, flags.get(row.label, []), capability, cap_p, judged))
        mark = lambda t, m: "*" if p.get((row.label, t, m), 1.0) < sig else ""  # noqa: E731, B023
        lcpr = [row.value(t, "avg", "lcpr") for t in TASKS]
        lcpr_text = f"{100 * sum(lcpr) / 2:.1f}" if None not in lcpr else "–"
        lcpr_text += "*" if any(mark(t, "lcpr") for t in TASKS) else ""
        guard = [" / ".join(row.cell(t, "avg", m) for t in TASKS) for m, _ in GUARD]
        nll = " / ".join(row.cell(t, "avg", "nll", percent=False) for t in TASKS)
        label = row.label + (" ⚠" if row.label in flags else "")
        caps = [
            judged[c.header][row.label].text
            if c.header in judged
            else row.cell(
                c.task,
                c.language,
                c.metric,
                ("*" if cap_p.get((row.label, c.header), (1,) * 4)[3] < sig else "")
                + (" ↓" if any(c.header + ":" in x for x in drops.get(row.label, [])) else ""),
            )
            for c in capability
        ]
        body.append(
            [label]
            + [row.cell(t, "avg", m, mark(t, m)) for t, m in MAIN]
            + [lcpr_text, *guard, nll]
            + caps
            + [extra[c].get(row.label, "–") for c in extra]
        )
    return header, body, data


def mitigation_notes(
    tests: MitigationTests,
    flags: dict[str, list[str]],
    resamples: int = 4000,
    confidence: float = 0.95,
    capability: list[Capability] | tuple = (),
) -> list[str]:
    """The table's footnotes: what ± and * mean, what the guard measures, a second judge's and the capability
    columns' reading, each capability test, and each flag's reason."""
    base, judged, others, cap_p, task_p = tests.base, tests.judged, tests.others, tests.cap_p, tests.task_p
    sig = 1 - confidence
    notes = [
        f"± = half-width of the row's interval for the prompt population (prompt sampling and decoding noise; "
        "stratified Wilson on the official aggregation, LCPR: bootstrap over prompts); "
        f"* = differs from the '{base.label}' row at p < {sig:.2g}, paired permutation test over the same prompts "
        f"(a prompt's replies swapped between the rows; {resamples} draws or every pattern, Holm-adjusted down "
        "each column; unpaired bootstrap when prompts differ).",
        "Guard: Cov = share of replies with a line LCB counts (>= 5 tokens); Degen = share of empty or "
        "repetitive replies; Valid = share of replies whose words are mostly words of the language (lexical "
        "validity: word salad scores low); NLL = mean token NLL of the reply under the reference model (lower "
        "= more fluent). LPR alone rewards degenerate output: read it beside these. ⚠ = coverage, degeneracy "
        f"or validity worse than the base row's beyond chance, or NLL more than {MAX_NLL_INCREASE:.0%} above it.",
    ]
    for judge in dict.fromkeys(judge_of(c.metric) for c in capability if c.header in judged):
        notes.append(
            f"LPR ({judge}) = NON-OFFICIAL second judge: the same replies and counted lines, each line "
            f"labelled by {judge} instead of fastText (mlft.benchmarks.lcb.judge); ± = half-width of the "
            f"row's interval; (±d) = difference from the '{base.label}' row, * = p < {sig:.2g}, tested as "
            "LPR is (paired permutation test over the same prompts, a prompt's replies together; Holm-adjusted "
            "down the column; unpaired when prompts differ)."
        )
    if others:
        notes.append(
            "Capability columns (%, ± = half-width of the row's interval, e.g. the harness's value ± "
            "1.96·stderr): ↓ ⚠ = the base row's value lies above the row's whole interval; * = paired "
            f"bootstrap over the documents both rows evaluated (lm-eval samples), p < {sig:.2g}, "
            "Holm-adjusted." + (TASK_NOTE if task_p else "")
        )
        notes += [
            f"{label} vs base, {col}: {100 * d:+.1f} pp [{100 * lo:+.1f}, {100 * hi:+.1f}], p = {q:.3g} "
            f"({pairs} paired {'prompts' if (label, col) in task_p else 'documents'})"
            for (label, col), (d, lo, hi, q, pairs, _) in cap_p.items()
        ]
    notes += [f"⚠ {label}: {reason}" for label, reasons in flags.items() for reason in reasons]
    return notes


def mitigation_table(
    rows: list[Row],
    base_label: str,
    title: str,
    resamples: int = 4000,
    extra: dict[str, dict[str, str]] | None = None,
    confidence: float = 0.95,
    capability: list[Capability] | tuple = (),
) -> Table:
    """Table 11 layout over `rows` (one per mitigation), tested against the row labelled `base_label`;
    `extra` adds columns: {column name: {row label: cell}} (e.g. time per prompt); `capability` adds capability
    columns (a row whose interval lies below the base row's value is flagged) and a second LID judge's LPR
    columns (`lpr@<judge>`, `judge_columns`: tested as LPR is, `judge_column`). Four steps: run the tests
    (`mitigation_tests`), set the flags (`mitigation_flags`), format the cells (`mitigation_cells`), write the
    footnotes (`mitigation_notes`)."""
    base = next(r for r in rows if r.label == base_label)
    tests = mitigation_tests(rows, base, resamples, confidence, capability)
    flags = mitigation_flags(tests, confidence)
    header, body, data = mitigation_cells(rows, tests, flags, confidence, capability, extra)
    notes = mitigation_notes(tests, flags, resamples, confidence, capability)
    return Table(title, header, body, notes, data)


# ---------------------------------------------------------------- an eval's variants as mitigations


def task_columns(metrics=tuple(TASK_METRICS)) -> list[dict]:
    """Spec entries (`capability:`) for the task axis: the share of replies that answer (metric `task`, the lcb
    kind's `answers: true`; `extraction`, the task_axis kind's second part), one per task and metric, from each
    row's own pass (a row without the metric shows –); tested against the base row by the paired test
    (`task_column_tests`), whose drop the guard flags."""
    return [
        {"task": task, "metric": metric, "variant": None, "label": task_header(task, metric)}
        for metric in metrics
        for task in TASKS
    ]


def variant_table(
    rows: list[MetricRow],
    out_dir,
    variants: list[str],
    seconds: dict[str, float],
    title: str,
    judge: str | None = None,
    task: bool = False,
):
    """Table 11 layout with one row per variant (the first is the base of the paired tests) and the time per
    prompt of each variant relative to the first; `task`: the task axis's columns (`task_columns`)."""

    rows, out_dir = rows_of(rows), Path(out_dir)
    table_rows = []
    for v in variants:
        mine = [r for r in rows if r.variant == v]
        rel = official_outcomes(mine)
        table_rows.append(
            Row(v, {(r.task, r.language, r.metric): r for r in mine}, out_dir / rel if rel else None, out_dir)
        )
    base = seconds.get(variants[0])
    cost = {v: f"{s:.2f}" + (f" ({s / base:.1f}x)" if base else "") for v, s in seconds.items()}
    table = mitigation_table(
        table_rows,
        variants[0],
        f"{title}: variants as mitigations (Table 11 layout, %)",
        extra={"s / prompt (x base)": cost},
        capability=[
            Capability(**c)
            for c in (judge_columns(judge) if judge else [])
            + (task_columns([m for m in TASK_METRICS if any(r.metric == m for r in rows)]) if task else [])
        ],
    )
    table.notes += empty_group_notes(rows, variants)
    return table


def empty_group_notes(rows: list[MetricRow], variants: list[str]) -> list[str]:
    """A note per (variant, task) with languages none of whose replies LCB counts (coverage 0): the official rule
    scores such a group LPR 100 %, which moves the language average by 100 / languages pp without one reply in
    the target language (e.g. short replies in a script the tokenizer spends many tokens on)."""
    rows = rows_of(rows)
    out = []
    for v in variants:
        for task in TASKS:
            cov = [r for r in rows if (r.variant, r.task, r.metric) == (v, task, "coverage") and r.language != "avg"]
            empty = sorted(r.language for r in cov if r.value == 0 and r.n)
            if empty:
                out.append(
                    f"⚠ {v}: {task}: no counted reply in {', '.join(empty)} (coverage 0): LPR 100 % there by "
                    f"the official empty-group rule, {100 * len(empty) / len(cov):.0f} pp of the average"
                )
    return out


@dataclass(frozen=True)
class JudgeCell:
    text: str  # `value ±h`, and for a tested row ` (±d)` with `*` when significant
    test: PairedResult | None  # against the base row (`p_adjusted`: Holm down the column); None: untested


def judge_column(
    rows: list[Row], base: Row, column: Capability, resamples: int = 4000, confidence: float = 0.95
) -> dict[str, JudgeCell]:
    """{row label: cell} of a second LID judge's LPR column (`lpr@<judge>`, a `judge_columns` entry): the one
    computation behind the variants table and table specs alike. A cell is the row's judged LPR ±half-width of its
    interval; for every other row whose judged outcomes (`outcomes.<judge>.jsonl`) are at hand, its difference
    from the base row, tested as the official LPR column is (`compare`: paired permutation test over the prompts both
    rows answered, a prompt's replies swapped together; unpaired when the prompts differ), Holm-adjusted down the
    column; `*` = adjusted p < 1 - confidence."""

    key = (column.task, column.language, column.metric)
    language = None if column.language == "avg" else column.language

    def outcomes(row: Row):
        path = row.outcomes_file(key)
        return load_outcomes(path) if path is not None and path.is_file() and row.value(*key) is not None else None

    base_out = outcomes(base)
    family = []
    for row in rows:
        if row is base or base_out is None or (outs := outcomes(row)) is None:
            continue
        res = compare(base_out, outs, "lpr", column.task, language, resamples=resamples, confidence=confidence)
        if res is not None:
            family.append((row.label, res))
    tests = dict(zip([label for label, _ in family], adjust([res for _, res in family])))
    cells = {}
    for row in rows:
        res = tests.get(row.label)
        text = row.cell(*key)
        if res is not None:
            text += f" ({100 * res.diff:+.1f}{'*' if res.significant() else ''})"
        cells[row.label] = JudgeCell(text, res)
    return cells


ROW_METRICS = ("lpr", "wpr", "lcpr", *GUARD_METRICS, "nll")


def _number(row: MetricRow | None) -> dict | None:
    if row is None or row.value is None:
        return None
    return {"value": row.value, "low": row.low, "high": row.high, "n": row.n}


def _row_data(
    row: Row, base: Row, p: dict, flags: list[str], capability, cap_p: dict, judged: dict[str, dict] | None = None
) -> dict:
    """One row's numbers as data: per task, LPR / WPR / LCPR and the guard's metrics (coverage, degeneracy,
    validity, NLL) as {value, low, high, n} (fractions; NLL in nats), the Holm-adjusted p against the base row
    where tested, the guard's flags, and the capability columns by header."""
    tasks = {}
    for task in TASKS:
        cells = {}
        for metric in ROW_METRICS:
            number = _number(row.values.get((task, "avg", metric)))
            if number is not None:
                if (row.label, task, metric) in p:
                    number["p_vs_base"] = p[(row.label, task, metric)]
                cells[metric] = number
        tasks[task] = cells
    caps = {}
    for c in capability:
        number = _number(row.values.get((c.task, c.language, c.metric)))
        if number is not None:
            if (row.label, c.header) in cap_p:  # the task axis's tests add their discordant prompts (`discordant`)
                _, _, _, number["p_vs_base"], _, counts = cap_p[(row.label, c.header)]
                number.update({"discordant": counts} if counts else {})
            test = (judged or {}).get(c.header, {}).get(row.label)
            if test is not None and test.test is not None:
                number["p_vs_base"] = test.test.p_adjusted
            caps[c.header] = number
    return {
        "label": row.label,
        "base": row is base,
        "flagged": bool(flags),
        "flags": list(flags),
        "tasks": tasks,
        **({"capability": caps} if capability else {}),
    }


def per_language(spec: TableSpec, detail: PerLanguage, rows: list[Row] | None = None) -> Table:
    rows = rows or [select(r) for r in spec.rows]
    base = _base_row(spec, rows)
    present = {
        lang for r in rows for (task, lang, metric) in r.values if (task, metric) == (detail.task, detail.metric)
    }
    present.discard("avg")
    # LCB's languages in their order, then any other language the rows hold (a user's prompt file: cs, fi, ...)
    langs = [lang for lang in LANGUAGES if lang in present] + sorted(present - set(LANGUAGES))
    base_out = base.outcomes()
    header = [""] + langs + ["avg"]
    body = []
    for row in rows:
        marks = {}
        outs = row.outcomes()
        if row is not base and base_out is not None and outs is not None and detail.metric != "lcpr":
            try:
                tests = paired_tests_by_language(base_out, outs, detail.metric, task=detail.task, n=spec.resamples)
                marks = {lang: "*" for lang, res in tests.items() if res.p_adjusted < 1 - spec.confidence}
            except Exception:  # noqa: BLE001 — different prompts: no per-language marks
                marks = {}
        body.append(
            [row.label] + [row.cell(detail.task, lang, detail.metric, marks.get(lang, "")) for lang in [*langs, "avg"]]
        )
    return Table(
        f"{detail.task} {detail.metric.upper()} per language (A18/A19 layout, %)",
        header,
        body,
        [f"* = differs from '{base.label}' in that language (paired permutation test, Holm over the languages)."],
    )


def quantization_table(spec: TableSpec) -> Table:
    header = ["", "variant", "Mono LPR", "Mono WPR", "Cross LPR", "Cross WPR", "Cov mono / cross"]
    body = []
    for r in spec.quantization:
        for variant in r.variants:
            row = select(r, variant)
            body.append(
                [r.label, variant]
                + [row.cell(t, "avg", m) for t, m in MAIN]
                + [" / ".join(row.cell(t, "avg", "coverage") for t in TASKS)]
            )
    return Table("Quantization (A12 layout, %)", header, body, [])


def tables(spec: TableSpec) -> list[Table]:
    rows = [select(r, capability=spec.capability) for r in spec.rows]
    out = [table11(spec, rows)]
    out += [per_language(spec, d, rows) for d in spec.per_language]
    if spec.quantization:
        out.append(quantization_table(spec))
    return out


def build(spec: TableSpec, fmt: str = "table") -> str:
    return "\n".join(t.render(fmt) for t in tables(spec))


def plot_table(table: Table, path: str | Path) -> Path:
    """The table as a PNG (for slides and notes), with its notes below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(8.0, 1.3 * len(table.header) + 0.05 * max(len(r[0]) for r in table.body))
    notes = "\n".join(_wrap(n, int(width * 14)) for n in table.notes)
    table_h, notes_h = 0.32 * (len(table.body) + 1) + 0.5, 0.17 * (notes.count("\n") + 1) + 0.2
    fig, (ax, note_ax) = plt.subplots(
        2, 1, figsize=(width, table_h + notes_h), gridspec_kw={"height_ratios": [table_h, notes_h]}
    )
    ax.axis("off")
    note_ax.axis("off")
    tab = ax.table(cellText=table.body, colLabels=table.header, loc="upper center", cellLoc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(8.5)
    tab.auto_set_column_width(list(range(len(table.header))))
    for (r, c), cell in tab.get_celld().items():
        if r == 0:
            cell.set_facecolor("#e8e8f0")
            cell.set_text_props(weight="bold")
        if c == 0:
            cell.set_text_props(ha="left")
        if "⚠" in cell.get_text().get_text():
            cell.set_facecolor("#fde2c4")
    ax.set_title(table.title, fontsize=10, weight="bold")
    note_ax.text(0.0, 1.0, notes, fontsize=7, va="top", ha="left", transform=note_ax.transAxes)
    path = Path(path)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text

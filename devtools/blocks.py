"""The documentation's numbers rendered from results files (`mlft.reports.results`: what a results file holds).

A development tool of the source tree (not in the package): the project's pages hold their measured numbers in
blocks, each exactly what `render_view` gives for it:

    <!-- results:demo table -->...<!-- /results:demo -->                                     the headline table
    <!-- results:demo cell "+Cross-lingual SFT" crosslingual lpr -->74.1 ±6.9<!-- /results:demo -->   value ±h
    <!-- results:demo value base monolingual coverage -->74.3<!-- /results:demo -->            value alone
    <!-- results:demo diff "+Cross-lingual SFT" crosslingual lpr -->+26.2 pp<!-- /results:demo -->  vs the base row

Any results file (a measurement's numbers, timings, the per-seed tables of `devtools.seeds`) renders through
views that read a key path (dots, list indices as numbers):

    <!-- results:timings key demo.samples2.wall_s .0f -->1115<!-- /results:timings -->   a value, Python format spec
    <!-- results:timings minutes demo.samples2.wall_s -->19<!-- /results:timings -->      seconds as whole minutes
    <!-- results:rl fill lifted.SECTION.t1 -->...<!-- /results:rl -->  {"template": "... {0:.1f} ...", "values": [...]}
    <!-- results:demo_seeds seeds -->...<!-- /results:demo_seeds -->                       the per-seed table
    <!-- results:demo_seeds estimate "+Cross-lingual SFT" crosslingual lpr -->+16.2 pp [+2.7, +29.7]<!-- ... -->

`demo` names `docs/results/demo.json`. `update_blocks` rewrites a page's blocks from the files (`python -m
devtools.results FILE --update PAGE...`); `block_problems` lists every block that differs
(tests/test_docs_numbers.py).
"""

from __future__ import annotations

import re
import shlex

from devtools.seeds import estimate, estimate_row, markdown, summarise_record
from mlft.constants import TASKS
from mlft.errors import ConfigError
from mlft.format import render
from mlft.reports.results import MAIN_TABLE
from mlft.reports.task_axis import TASK_METRICS, task_number

BLOCK = re.compile(r"<!-- results:(?P<name>[\w.-]+)(?P<args>[^>]*?)-->(?P<body>.*?)<!-- /results:(?P=name) -->", re.S)
VIEWS = ("table", "cell", "value", "diff", "key", "minutes", "fill", "seeds", "estimate")
TABLE_VIEWS = ("cell", "value", "diff")


class Fill:
    """A {template, values} record (the `fill` view) built as text with its numbers: `f(value, ".1f")` returns
    the placeholder `{i:.1f}` and keeps the value; `f.record(text)` is the record. Measurement scripts write their
    docs paragraphs with it, so every number on the page comes from the results file."""

    def __init__(self) -> None:
        self.values: list = []

    def __call__(self, value, spec: str = "") -> str:
        self.values.append(value)
        return f"{{{len(self.values) - 1}{':' + spec if spec else ''}}}"

    def record(self, text: str) -> dict:
        return {"template": text, "values": self.values}


# ---------------------------------------------------------------- rendering


def _row(record: dict, label: str, table: str = MAIN_TABLE) -> dict:
    rows = record.get("tables", {}).get(table, {}).get("rows", [])
    for r in rows:
        if r["label"] == label:
            return r
    raise ConfigError(
        f"results {record.get('name')!r}: table {table!r} has no row {label!r} "
        f"(rows: {', '.join(r['label'] for r in rows)})"
    )


def _number(record: dict, label: str, task: str, metric: str) -> dict:
    if task not in TASKS:
        raise ConfigError(f"results view: unknown task {task!r}; valid: {', '.join(TASKS)}")
    row = _row(record, label)
    cells = row["tasks"].get(task, {})
    if metric in TASK_METRICS and task_number(row, task, metric) is not None:  # the task axis: a capability column
        return task_number(row, task, metric)
    if metric not in cells:
        raise ConfigError(
            f"results {record.get('name')!r}: row {label!r} has no {task} {metric} (has: {', '.join(cells)})"
        )
    return cells[metric]


def _scaled(metric: str) -> tuple[int, int]:
    return (1, 2) if metric == "nll" else (100, 1)


def cell(number: dict | None, metric: str = "lpr", interval: bool = True) -> str:
    """`74.1 ±6.9` as the mitigation table writes it (percent; NLL in nats); '–' when absent."""
    if not number or number.get("value") is None:
        return "–"
    scale, digits = _scaled(metric)
    text = f"{scale * number['value']:.{digits}f}"
    if interval and number.get("low") is not None and number.get("high") is not None:
        text += f" ±{scale * (number['high'] - number['low']) / 2:.{digits}f}"
    return text


TARGETS = {"population": " for the prompt population (prompt sampling and decoding noise)"}
TESTS = {"bootstrap": "paired bootstrap", "permutation": "paired permutation test over prompts"}


def headline_table(record: dict, table: str = MAIN_TABLE) -> str:
    """The headline table (markdown): per row mono / cross LPR with intervals (* = differs from the base row),
    the guard's columns and its verdict, and the source line (results file name, git commit, settings)."""
    spec = record.get("tables", {}).get(table)
    if not spec:
        raise ConfigError(f"results {record.get('name')!r}: no table {table!r}")
    sig = 1 - spec.get("confidence", 0.95)
    guard = [("coverage", "Cov"), ("degeneracy", "Degen"), ("validity", "Valid"), ("nll", "NLL")]
    # the task axis, where the rows have it: one column per task metric (arithmetic `task`, `extraction`)
    axes = [m for m in TASK_METRICS if any(task_number(r, t, m) for r in spec["rows"] for t in TASKS)]
    has_task = bool(axes)
    header = ["", "Mono LPR", "Cross LPR", *(f"{name} mono / cross" for _, name in guard)]
    header += [f"{TASK_METRICS[m].capitalize()} mono / cross" for m in axes] + ["guard"]
    body = []
    for r in spec["rows"]:

        def lpr(task, r=r):
            number = r["tasks"].get(task, {}).get("lpr")
            star = "*" if number and number.get("p_vs_base", 1.0) < sig else ""
            return cell(number) + star

        cols = [" / ".join(cell(r["tasks"].get(t, {}).get(m), m, interval=False) for t in TASKS) for m, _ in guard]
        verdict = "base" if r.get("base") else ("⚠ " + "; ".join(r["flags"]) if r.get("flagged") else "ok")
        for axis in axes:
            marks = ["*" if (task_number(r, t, axis) or {}).get("p_vs_base", 1.0) < sig else "" for t in TASKS]
            cols.append(" / ".join(cell(task_number(r, t, axis)) + m for t, m in zip(TASKS, marks)))
        body.append([r["label"], lpr("monolingual"), lpr("crosslingual"), *cols, verdict])
    env = record.get("environment", {})
    config = record.get("config", {})
    source = (
        f"Source: `docs/results/{record.get('name')}.json` ({config.get('command', '?')}; git "
        f"{(env.get('git_commit') or 'unknown')[:12]}; {record.get('started', '?')}). LPR ± = half the "
        f"{spec.get('confidence', 0.95):.0%} interval{TARGETS.get(spec.get('target'), '')}; "
        f"* = differs from the base row, p < {sig:.2g} "
        f"({TESTS[spec.get('test', 'bootstrap')]}, Holm); guard columns as in the mitigation table."
        + (
            f" {', '.join(TASK_METRICS[m].capitalize() for m in axes)} = share of replies answering verifiable prompts"
            " (task: arithmetic, extraction: extractive questions; eval/task_axis.yaml; ± its interval; * as for LPR)."
            if has_task
            else ""
        )
    )
    return render(header, body, "markdown").rstrip("\n") + "\n\n" + source


def lookup(record: dict, path: str):
    """The value at a dotted key path of a results file (`a.b.0.c`: a number indexes a list)."""
    node = record
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            keys = ", ".join(map(str, node)) if isinstance(node, dict) else f"a {type(node).__name__}"
            raise ConfigError(f"results {record.get('name')!r}: no key {path!r} (at {part!r}: has {keys})")
    return node


def _key_view(record: dict, view: str, args: list[str]) -> str:
    if view == "seeds":
        return "\n" + markdown(summarise_record(record), list(record["seeds"])) + "\n"
    if view == "estimate":
        if len(args) != 3:
            raise ConfigError(f"results view estimate {args}: use `estimate LABEL TASK METRIC`")
        return estimate(estimate_row(record, *args))
    if not 1 <= len(args) <= 2 or (view != "key" and len(args) != 1):
        raise ConfigError(f"results view {view} {args}: use `key PATH [FORMAT]`, `minutes PATH` or `fill PATH`")
    value = lookup(record, args[0])
    if view == "minutes":
        return f"{value / 60:.0f}"
    if view == "fill":
        if not isinstance(value, dict) or not isinstance(value.get("template"), str):
            raise ConfigError(f"results {record.get('name')!r}: {args[0]!r} is no {{template, values}} record")
        try:
            return value["template"].format(*value.get("values", []))
        except (IndexError, KeyError, ValueError) as exc:
            raise ConfigError(f"results {record.get('name')!r}: {args[0]!r} does not fill ({exc})") from None
    try:
        return format(value, args[1]) if len(args) == 2 else str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"results {record.get('name')!r}: {args[0]!r} = {value!r}: {exc}") from None


def render_view(record: dict, view: str, args: list[str]) -> str:
    """The text of one block: `table [TABLE]`, `cell|value|diff LABEL TASK METRIC`, `key PATH [FORMAT]`,
    `minutes PATH`, `fill PATH`, `seeds`, `estimate LABEL TASK METRIC`."""
    if view == "table":
        return "\n" + headline_table(record, *args[:1]) + "\n"
    if view in VIEWS and view not in TABLE_VIEWS:
        return _key_view(record, view, args)
    if view not in VIEWS or len(args) != 3:
        raise ConfigError(
            f"results view {view!r} {args}: use one of {', '.join(VIEWS)} (`table [TABLE]`, "
            "`cell|value|diff LABEL TASK METRIC`, `key PATH [FORMAT]`, ...)"
        )
    label, task, metric = args
    number = _number(record, label, task, metric)
    if view == "cell":
        return cell(number, metric)
    if view == "value":
        return cell(number, metric, interval=False)
    base = next(r["label"] for r in record["tables"][MAIN_TABLE]["rows"] if r.get("base"))
    scale, digits = _scaled(metric)
    delta = scale * (number["value"] - _number(record, base, task, metric)["value"])
    return f"{delta:+.{digits}f}" + (" pp" if scale == 100 else "")


# ---------------------------------------------------------------- pages


def blocks(text: str) -> list[re.Match]:
    return list(BLOCK.finditer(text))


def _render_match(m: re.Match, records: dict[str, dict]) -> str:
    args = shlex.split(m["args"])
    record = records.get(m["name"])
    if record is None:
        raise ConfigError(f"no results file for block results:{m['name']}")
    return render_view(record, args[0] if args else "table", args[1:])


def update_blocks(text: str, records: dict[str, dict]) -> str:
    """`text` with every block of a name in `records` re-rendered from its results file."""

    def sub(m: re.Match) -> str:
        if m["name"] not in records:
            return m[0]
        return m[0][: m.start("body") - m.start()] + _render_match(m, records) + f"<!-- /results:{m['name']} -->"

    return BLOCK.sub(sub, text)


def block_problems(text: str, records: dict[str, dict], page: str, only: str | None = None) -> list[str]:
    """One message per block that names no results file, an unknown row / metric, or differs from its render
    (`only`: the blocks of that results file alone)."""
    out = []
    for m in blocks(text):
        if only is not None and m["name"] != only:
            continue
        line = text[: m.start()].count("\n") + 1
        try:
            want = _render_match(m, records)
        except ConfigError as exc:
            out.append(f"{page}:{line}: results:{m['name']}{m['args'].rstrip()}: {exc}")
            continue
        if m["body"] != want:
            out.append(
                f"{page}:{line}: results:{m['name']}{m['args'].rstrip()}: the page says {m['body'].strip()!r}, "
                f"the results file gives {want.strip()!r} (regenerate: python -m devtools.results "
                f"docs/results/{m['name']}.json --update {page})"
            )
    return out

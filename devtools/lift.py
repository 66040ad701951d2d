"""Numbers typed on a documentation page, and lifting them into a results file.

`typed_numbers` lists every number of a page that is not rendered from a results file: outside
`<!-- results:... -->` blocks, code, comments, links and list item numbers, and not covered by a NOT_MEASURED rule
(versions, dates, paper references, run settings such as "32 steps", the significance and confidence levels: values
that were set, not measured). tests/test_docs_numbers.py holds every page to it.

`lift_page` moves a page's hand-typed measured numbers into a results file when the run behind them was not kept:
each table and paragraph under the named headings that holds such numbers becomes a `fill` block, its text a
`{template, values}` record (every lifted number a placeholder in the format it was typed in: `88.5` -> `{3:.1f}`,
`+8.8` -> `{4:+.1f}`, `000032` -> `{5:06d}`), so the page renders byte for byte as before and its numbers live in
the file. A table's header row and first column stay text (labels); so do numbers in code spans, links and those a
NOT_MEASURED rule covers. `python -m devtools.results FILE --lift PAGE --sections HEADING...` runs it.
"""

from __future__ import annotations

import re

from devtools.blocks import BLOCK

# what a number outside a results block may be, and why it is no measurement (read on whitespace-collapsed text)
NOT_MEASURED = {
    "the significance level": r"p < 0\.05",
    "a version": r"\b\d+\.\d+\.\d+\b|\b(?:trl|transformers|torch|vLLM|vllm|Python|python|CUDA|numpy|peft|accelerate|"
    r"DeepSpeed|deepspeed|datasets|lm-eval|ZeRO-?) ?\d+(?:\.\d+)*(?:\.x)?(?: ?[-–] ?\d+(?:\.\d+)*)?",
    "a date": r"\b20\d\d-\d\d-\d\d\b",
    "a citation's year": r"(?<=[ (])(?:19|20)\d\d(?=[),;])",
    "a paper reference": r"§ ?\d+(?:\.\d+)*|\b(?:Tables?|Figure|Appendix|A) ?\d+(?:/A?\d+)?",
    "a setting (a run's size)": r"\b\d+(?:,\d{3})*[- ](?:(?:LoRA|training|optimizer|new|held-out) )?(?:prompts?|steps?|"
    r"tokens|CPU cores|cores?|GPUs?|nodes?|replies|reruns|languages|seeds?|items|facts|rows)\b(?!/)",  # not a rate
    "a guard limit": r"(?:limit|limits) [+-]?\d+ ?%|[+-]?\d+ ?% limit",
    "the confidence level": r"\b(?:90|95|99) ?% (?:interval|t-interval|intervals|confidence)",
    "an option value (scientific)": r"\b\d+(?:\.\d+)?e-\d+\b",
    "a label": r"\b(?:[Ss]eeds?|[Rr]ank|[Ss]tep) \d+(?:(?:, | and | / |, and )\d+)*\b",
    "zero in an interval's reading": r"\b(?:holds|excludes|hold) 0\b",
}
NOT_MEASURED_RX = re.compile("|".join(f"(?:{rx})" for rx in NOT_MEASURED.values()))
FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LIST_ITEM = re.compile(r"(?m)^\s*\d+\.(?=\s)")  # an ordered list's item number
COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK = re.compile(r"\]\([^)\s]*\)|https?://\S+")
ANY_NUMBER = re.compile(r"(?<![\w.§])[+-]?\d+(?:[.,]\d+)*(?!\w|\.\d)")
# a number to lift: its sign (a typed "+" is kept in the format) and digits; "6,586" lifts as two numbers
LIFTED = re.compile(r"(?<![\w.§])(?P<sign>[+-](?=\d))?(?P<num>\d+(?:\.\d+)?)(?!\w|\.\d)")
_KEEP = re.compile(r"`[^`]+`|\]\([^)\s]*\)|https?://\S+|" + NOT_MEASURED_RX.pattern)
_RULE_ROW = re.compile(r"\s*\|[\s|:-]+\|\s*")


def typed_numbers(text: str, phrases: list[tuple[str, str]] = ()) -> list[str]:
    """Every number of `text` outside results blocks, code, comments, links and list item numbers that no
    NOT_MEASURED rule and none of `phrases` ((phrase, why it is no measurement), read on whitespace-collapsed text)
    covers, each with a little context."""
    text = " ".join(LIST_ITEM.sub(" ", FENCE.sub(" ", text)).split())  # phrases and rules read across lines
    for phrase, _ in phrases:
        text = text.replace(phrase, " ")
    text = BLOCK.sub(" ", text)
    for rx in (COMMENT, CODE, LINK):
        text = rx.sub(" ", text)
    text = NOT_MEASURED_RX.sub(" ", text)
    return [f"{m[0]} in ...{text[max(0, m.start() - 40) : m.end() + 20]}..." for m in ANY_NUMBER.finditer(text)]


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def lift_numbers(text: str, values: list, keep: re.Pattern | None = _KEEP) -> str:
    """`text` as a format template: each number outside `keep`'s matches becomes a placeholder (appended to
    `values`) in the format it was typed in."""
    spans = [m.span() for m in keep.finditer(text)] if keep else []
    out, last = [], 0
    for m in LIFTED.finditer(text):
        if any(a <= m.start() and m.end() <= b for a, b in spans):
            continue
        sign, num = m["sign"] or "", m["num"]
        if "." in num:
            spec, value = f".{len(num.split('.')[1])}f", float(num)
        else:
            spec, value = (f"0{len(num)}d" if num.startswith("0") and len(num) > 1 else "d"), int(num)
        out.append(_escape(text[last : m.start()]))
        out.append(f"{{{len(values)}:{'+' if sign == '+' else ''}{spec}}}")
        values.append(-value if sign == "-" else value)
        last = m.end()
    return "".join(out) + _escape(text[last:])


def _table_template(lines: list[str], values: list) -> str:
    out = []
    for k, line in enumerate(lines):
        cells = line.split("|")
        if k == 0 or _RULE_ROW.fullmatch(line) or len(cells) < 3:
            out.append(_escape(line))
        else:  # '', first cell (a label), the rest
            out.append(_escape("|".join(cells[:2]) + "|") + lift_numbers("|".join(cells[2:]), values))
    return "\n".join(out)


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", heading.lower()).strip("_")[:40].strip("_") or "top"


def lift_page(text: str, name: str, sections: list[str]) -> tuple[str, dict]:
    """(the page with each table and paragraph holding measured numbers, under a heading that starts with one of
    `sections`, wrapped in a `fill` block of results file `name`; {section slug: {t1|p1...: {template, values}}}).
    A section runs to the next heading of its level or above; code fences and existing blocks are left alone."""
    lines = text.split("\n")
    out: list[str] = []
    lifted: dict[str, dict] = {}
    level, slug, fence, block = 0, None, False, False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fence = not fence
        if not fence and "<!-- results:" in line:
            block = "<!-- /results:" not in line
        elif not fence and "<!-- /results:" in line:
            block = False
        heading = re.match(r"(#+) (.*)", line) if not fence else None
        if heading:
            depth = len(heading[1])
            if any(heading[2].startswith(s) for s in sections):
                level, slug = depth, _slug(heading[2])
            elif slug and depth <= level:
                slug = None
            elif slug:  # a subsection: its own entries
                slug = _slug(heading[2])
        if fence or block or heading or not slug or not stripped or stripped.startswith(("<!--", "```")):
            out.append(line)
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].strip() and (lines[j].lstrip().startswith("|") == stripped.startswith("|")):
            if lines[j].lstrip().startswith(("```", "<!--", "#")):
                break
            j += 1
        chunk = lines[i:j] or [line]
        j = max(j, i + 1)
        values: list = []
        if any("<!--" in x for x in chunk):  # a paragraph with rendered numbers in it stays as it is
            out += chunk
            i = j
            continue
        is_table = stripped.startswith("|")
        template = _table_template(chunk, values) if is_table else lift_numbers("\n".join(chunk), values)
        if values:
            entries = lifted.setdefault(slug, {})
            key = f"{'t' if is_table else 'p'}{sum(k[0] == ('t' if is_table else 'p') for k in entries) + 1}"
            indent = re.match(r"\s*", chunk[0])[0]  # a list item's paragraph or table keeps its markers inside it
            entries[key] = {"template": "\n" + template + "\n" + indent, "values": values}
            out += [
                f"{indent}<!-- results:{name} fill lifted.{slug}.{key} -->",
                *chunk,
                f"{indent}<!-- /results:{name} -->",
            ]
        else:
            out += chunk
        i = j
    return "\n".join(out), lifted

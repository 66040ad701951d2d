"""Render a table (header + rows of cells) as terminal text, markdown, CSV, TSV or LaTeX."""

from __future__ import annotations

import csv
import io

FORMATS = ("table", "markdown", "csv", "tsv", "latex")


def cell(value, percent: bool = True, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{100 * value:.{digits}f}" if percent else f"{value:.{digits}f}"
    return str(value)


def render(header: list[str], rows: list[list], fmt: str = "table", title: str | None = None) -> str:
    cells = [[str(c) for c in r] for r in rows]
    if fmt in ("csv", "tsv"):
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        w.writerow(header)
        w.writerows(cells)
        return buf.getvalue()
    if fmt == "markdown":
        lines = [f"**{title}**", ""] if title else []
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines += ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join(lines) + "\n"
    if fmt == "latex":
        esc = lambda s: s.replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")  # noqa: E731
        out = [
            r"\begin{table}[t]",
            r"\centering",
            r"\small",
            r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
            r"\toprule",
            " & ".join(esc(h) for h in header) + r" \\",
            r"\midrule",
        ]
        out += [" & ".join(esc(c) for c in r) + r" \\" for r in cells]
        out += [r"\bottomrule", r"\end{tabular}"]
        if title:
            out.append(r"\caption{" + esc(title) + "}")
        out.append(r"\end{table}")
        return "\n".join(out) + "\n"
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]

    def fmt_row(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    lines = [title] if title else []
    lines += [fmt_row(header), "  ".join("-" * w for w in widths)]
    lines += [fmt_row(r) for r in cells]
    return "\n".join(lines) + "\n"

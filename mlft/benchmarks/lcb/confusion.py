"""Confusion-point analysis (paper §5, Table 7): where in a reply does the language switch, and how
uncertain was the model there?

A reply's confusion point is the first generated token where it leaves the requested language:
- for a non-Latin-script language, the first token holding a Latin letter (e.g. English inside a zh reply);
- for any language, the first token of the first line (>= 5 words or >= 10 characters) that the LCB's
  fastText LID labels as another language (score > 0.3).
We then compare the mean entropy and nucleus size (recorded by the hf backend with `token_stats`) at
confusion points against all other generated tokens.
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import accumulate

from mlft.constants import LID_THRESHOLD
from mlft.format import render
from mlft.languages import NON_LATIN

LATIN_LETTER = re.compile(r"[A-Za-z\u00C0-\u024F]")


def _line_switch(text: str, language: str, lid) -> int | None:
    """Offset of the first long-enough line whose identified language differs from `language`."""
    offset = 0
    for line in text.split("\n"):
        body = line.strip()
        if len(body.split()) >= 5 or len(body.replace(" ", "")) >= 10:
            label, score = lid.predict(body)
            if score > LID_THRESHOLD and label != language:
                return offset + (len(line) - len(line.lstrip()))
        offset += len(line) + 1
    return None


def confusion_point(pieces: list[str], language: str, lid=None) -> int | None:
    """Index of the token where the reply first leaves `language`, or None."""
    text = "".join(pieces)
    candidates = []
    if language in NON_LATIN:
        m = LATIN_LETTER.search(text)
        if m:
            candidates.append(m.start())
    if lid is not None:
        pos = _line_switch(text, language, lid)
        if pos is not None:
            candidates.append(pos)
    if not candidates:
        return None
    pos = min(candidates)
    ends = list(accumulate(len(p) for p in pieces))
    return next(i for i, end in enumerate(ends) if end > pos)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def analyze(records: list[dict], lid=None) -> list[dict]:
    """One row per group (task, then 'all'): entropy and nucleus size at confusion points vs elsewhere."""
    acc: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        stats = rec.get("token_stats")
        if not stats or not stats["pieces"]:
            continue
        point = confusion_point(stats["pieces"], rec["language"], lid)
        for group in (rec["task"], "all"):
            g = acc[group]
            g["replies"].append(1)
            if point is not None:
                g["confused"].append(1)
            for i, (h, n) in enumerate(zip(stats["entropy"], stats["nucleus"])):
                where = "at" if i == point else "other"
                g[f"entropy_{where}"].append(h)
                g[f"nucleus_{where}"].append(n)
    rows = []
    for group in sorted(acc, key=lambda k: (k == "all", k)):
        g = acc[group]
        rows.append(
            {
                "group": group,
                "replies": len(g["replies"]),
                "confusion_points": len(g["confused"]),
                "entropy_at": _mean(g["entropy_at"]),
                "entropy_other": _mean(g["entropy_other"]),
                "nucleus_at": _mean(g["nucleus_at"]),
                "nucleus_other": _mean(g["nucleus_other"]),
                "tokens_other": len(g["entropy_other"]),
            }
        )
    return rows


def confusion_table(rows: list[dict], fmt: str = "markdown", title: str | None = None) -> str:
    header = [
        "group",
        "replies",
        "confusion points",
        "entropy @ CP",
        "entropy elsewhere",
        "nucleus @ CP",
        "nucleus elsewhere",
        "other tokens",
    ]
    f = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    body = [
        [
            r["group"],
            r["replies"],
            r["confusion_points"],
            f(r["entropy_at"]),
            f(r["entropy_other"]),
            f(r["nucleus_at"]),
            f(r["nucleus_other"]),
            r["tokens_other"],
        ]
        for r in rows
    ]
    return render(header, body, fmt, title)

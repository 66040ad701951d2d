"""The task axis's checked answers: the number a reply gives, compared with the prompt's `answer`.

A verifiable prompt (mlft.data.arithmetic: word problems in LCB's languages) carries its answer; a reply answers
it when the LAST number it writes equals that answer (the GSM8K convention: a worked reply ends on its result).
Digits of every script count (Arabic-Indic ٣٥, Devanagari ३५, full-width ３５: `unicodedata.digit`), thousands
separators are read (`1,250`, `1.250`, `1\u00a0250`, `1٬250`; a plain space never joins two numbers), a decimal
part must be zero to equal a whole answer.
Number words ("thirty-five", "三十五") are NOT read: a reply that spells its result out scores as not answering
(said in the suite's docs; the templates' answers are small whole numbers, which models write in digits).
"""

from __future__ import annotations

import re
import unicodedata

# a run of digits (any script) with optional group separators and one decimal part
_NUMBER = re.compile(
    r"(?<![\w.,])[-−]?\d{1,3}(?:[,.\u066c\u00a0\u202f]\d{3})+(?:[.,\u066b]\d+)?(?!\d)"
    r"|[-−]?\d+(?:[.,\u066b]\d+)?"
)


def _ascii_digits(text: str) -> str:
    return "".join(str(unicodedata.digit(c)) if c.isdigit() and not c.isascii() else c for c in text)


def numbers(text: str) -> list[float]:
    """Every number written in `text`, in order (digits of any script; group separators read as such when the
    groups are of three digits; a lone `,` or `.` before 1-2 digits is a decimal mark)."""
    out = []
    for m in _NUMBER.finditer(_ascii_digits(text or "")):
        raw = m.group(0).replace("−", "-")
        sign = -1.0 if raw.startswith("-") else 1.0
        raw = raw.lstrip("-")
        grouped = re.fullmatch(r"\d{1,3}(?:[,.\u066c\u00a0\u202f]\d{3})+([.,\u066b]\d+)?", raw)
        if grouped:
            frac = grouped.group(1) or ""
            whole = raw[: len(raw) - len(frac)]
            value = float(re.sub(r"\D", "", whole) + ("." + frac[1:] if frac else ""))
        else:
            value = float(re.sub(r"[,\u066b]", ".", raw))
        out.append(sign * value)
    return out


def extract_number(text: str) -> float | None:
    """The reply's answer: its last number, or None when it writes none."""
    found = numbers(text)
    return found[-1] if found else None


def parse_answer(answer) -> float:
    """A prompt's `answer` value (a number, or text holding exactly one) as a float; ValueError otherwise."""
    if isinstance(answer, bool):
        raise ValueError(f"not a number: {answer!r}")
    if isinstance(answer, (int, float)):
        return float(answer)
    found = numbers(str(answer))
    if len(found) != 1:
        raise ValueError(f"not a number: {answer!r}")
    return found[0]


def is_correct(reply: str, answer) -> bool:
    """Whether the reply's last number equals `answer` (to 1e-6)."""
    got = extract_number(reply)
    return got is not None and abs(got - parse_answer(answer)) < 1e-6

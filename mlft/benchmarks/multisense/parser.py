"""Answer parsing for multisense classification prompts: map a free-text reply to one answer word, or None (= -1).

Re-implements the rule cascade of the paper's `utils/response_standardization.py` (authors' repository at
1f0f884) rule for rule, including its order effects: the golden fixture in
`../shared/multisense/reference/parser_golden.jsonl` (6190 distinct replies) is reproduced item by item.
`answers` must be in label-map order (e.g. ["no", "yes"], ["a", "b", "c"]); the order matters when several
rules match.
"""

from __future__ import annotations

import re

INVALID = -1
_CJK = "[\u4e00-\u9fff]"
_FILLERS = ("the correct answer is", "the answer is", "answer", "option")


def _wrapped(answer: str) -> tuple[str, ...]:
    """`"a"`, `'a'`, `(a)`, `[a]`, `“a”` and the same with a full stop inside."""
    return tuple(
        left + answer + dot + right
        for dot in ("", ".")
        for left, right in (('"', '"'), ("'", "'"), ("(", ")"), ("[", "]"), ("“", "”"))
    )


def _clean(text: str) -> str | None:
    """Lowercase and strip; None when the model declines ("i cannot answer")."""
    text = text.lower().strip(" ").strip("。")
    if "i cannot answer" in text:
        return None
    for filler in _FILLERS:
        text = text.replace(filler, "")
    for chars in (" ", ":", " ", ".", " "):
        text = text.strip(chars)
    return text


def _exact_form(text: str, answer: str) -> bool:
    """Rule 2: the whole reply is a wrapped answer, or starts with the answer and a separator."""
    n = len(answer)
    return (
        text in _wrapped(answer)
        or text[: n + 1] in (answer + "。", answer + ",", answer + " ", answer + "-")
        or text[: n + 2] in (" " + answer + "。", " " + answer + ".")
    )


def _quoted_inside(text: str, answer: str) -> bool:
    """Rule 3: a wrapped (or comma-delimited) answer occurs somewhere in the reply."""
    forms = _wrapped(answer) + (
        ", " + answer + ".,",
        ",  " + answer + ".,",
        '" ' + answer + ' "',
        "' " + answer + " '",
        "( " + answer + " )",
        "[ " + answer + " ]",
        "“ " + answer + " ”",
        ", " + answer + " ,",
        ",  " + answer + " ,",
    )
    return any(form in text for form in forms)


def _leading(text: str, answer: str) -> bool:
    """Rule 4: the reply starts with the answer followed by punctuation, or with a quoted answer."""
    n = len(answer)
    return text[: n + 1] in tuple(answer + p for p in ".,)。:：") or text[: n + 2] in (
        '"' + answer + '"',
        "'" + answer + "'",
    )


def _spaced_inside(text: str, answer: str) -> bool:
    """Rule 5: the answer occurs as a separate word."""
    return any(
        form in text
        for form in (": " + answer, " " + answer + ".", " " + answer + " ", " " + answer + ":", " " + answer + ",")
    )


def _trailing(text: str, answer: str) -> bool:
    """Rule 7: the reply ends with the answer as a word (optionally with a full stop)."""
    n = len(answer)
    return text[-(n + 1) :] == " " + answer or text[-(n + 2) :] == " " + answer + "."


def _unique_match(text: str, answers: list[str], test) -> str | None:
    hits = [a for a in answers if test(text, a)]
    return hits[-1] if len(hits) == 1 else None


def _first_match_in_order(text: str, answers: list[str], test) -> tuple[str, bool]:
    """Apply `test` answer by answer; a match replaces the text (later answers see the replaced text)."""
    matched = False
    for answer in answers:
        if test(text, answer):
            text, matched = answer, True
    return text, matched


def _after_cjk(text: str, answers: list[str]) -> str | None:
    """Rules 8-11: the answer follows a Chinese character (Chinese replies embed 是/否 in a sentence)."""
    matched, candidate, count = False, None, 0
    for answer in answers:
        if not re.search(_CJK + " ?" + re.escape(answer), text):
            continue
        if text[-1] == text:  # the text is a single character (only after an earlier replacement)
            text, matched = answer, True
        if any(answer + p in text for p in "，,.。:："):
            text, matched = answer, True
        elif answer == text[-1]:
            text, matched = answer, True
        else:
            candidate, count = answer, count + 1
    if matched:
        return text
    if count == 1 and not re.search(_CJK, candidate):
        return candidate
    return None


def _cascade(text: str, answers: list[str]) -> str | None:
    hit = _unique_match(text, answers, _quoted_inside)
    if hit is not None:
        return hit
    for test in (_leading,):
        text, matched = _first_match_in_order(text, answers, test)
        if matched:
            return text
    hit = _unique_match(text, answers, _spaced_inside)
    if hit is not None:
        return hit
    for test in (lambda t, a: t[: len(a)] == a, _trailing):
        text, matched = _first_match_in_order(text, answers, test)
        if matched:
            return text
    if text[:2] == "不是" and "不是" not in answers:
        return "否"
    return _after_cjk(text, answers)


def standardize(response: str | None, answers: list[str]) -> str | None:
    """The answer word the reply gives (one of `answers`), or None when it cannot be parsed."""
    if not response:
        return None
    text = _clean(response)
    if not text:
        return None
    for answer in answers:
        if text and _exact_form(text, answer):
            text = answer
    if text in answers:
        return text
    result = _cascade(text, answers)
    return result if result in answers else None


def parse_prediction(response: str | None, label_map: dict[str, int]) -> int:
    """Gold-label space prediction of a reply: label_map[answer], or -1 when unparseable."""
    answer = standardize(response, list(label_map))
    return INVALID if answer is None else label_map[answer]

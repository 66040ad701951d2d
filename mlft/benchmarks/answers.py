"""The task axis's checked answers: the answer a reply states, compared with the prompt's `answer`.

**The convention.** A verifiable prompt (mlft.data.arithmetic) asks, in its own words, for the reply to end with a
line "<marker>: <number>", the marker being the reply language's word for "answer" (MARKERS: "Answer:",
"Antwort:", "Réponse :", "答案：", "답:" ...; `instruction` phrases the request in each language of LCB's suite).

**The check** (`is_correct`) reads every number the reply states as a result and pays it only when they are all
the answer:
  - the numbers after an answer marker (any language's, `:` or `：`, to the end of its sentence);
  - the result of an equation (the number after `=` that no operator follows);
  - any other number of the reply that is not the problem's own (a number written in the prompt: a restatement),
    not an operand of the reply's working (a number beside `+ - × * / ÷ ·`: `24 + 8`), not the numbering of a
    list (two or more lines opening "1." / "2)") or of a step ("Step 2", "第2步", "2단계"), and not a 1 (a box,
    one apple: a unit, not a result; read where the answer is 1).
  Code (fenced blocks, inline spans) and table rows (lines opening with `|`) are working, not statements: read only
  where they hold a marker. So a candidate list ("30, 31 or 32"), a stated answer that contradicts the working
  ("the final answer is 30 ... 24 + 8 = 32", or "Answer: 32" after "24 + 8 = 30"), an echo of the problem, a
  question back or a refusal are not correct; an answer written first ("32 apples: 24 + 8") or without a marker
  ("Tom now has 32 apples.") is, and so is one in words ("thirty-two", "三十二", "서른두 개": every number from 2 to
  200 in the reply's language and in English, mlft.benchmarks.number_words).
Digits of every script count (Arabic-Indic ٣٥, Devanagari ३५, full-width ３５: `unicodedata.digit`), thousands
separators are read (`1,250`, `1.250`, `1\u00a0250`, `1٬250`; a plain space never joins two numbers), a decimal
part must be zero to equal a whole answer. Known limit: where the answer equals a number of the prompt (18 - 9 =
9), a reply that states it only in prose ("9 euros are left") reads as a restatement; "= 9" or "Answer: 9" counts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from mlft.benchmarks.number_words import nfc, word_numbers

# the reply language's word for "answer" (the convention's marker); every language's marker is read in any reply
MARKERS: dict[str, tuple[str, ...]] = {
    "en": ("Answer", "Final answer"),
    "ar": ("الجواب", "الإجابة"),
    "de": ("Antwort",),
    "es": ("Respuesta",),
    "fr": ("Réponse",),
    "hi": ("उत्तर",),
    "id": ("Jawaban",),
    "it": ("Risposta",),
    "ja": ("答え",),
    "ko": ("답", "정답"),
    "pt": ("Resposta",),
    "ru": ("Ответ",),
    "tr": ("Cevap",),
    "vi": ("Đáp án",),
    "zh": ("答案",),
}
# the request the prompts carry, in the prompt's language, naming the marker of the reply's language ({marker})
INSTRUCTIONS: dict[str, str] = {
    "en": 'End your reply with "{marker}:" followed by the number.',
    "ar": 'اختم ردك بعبارة "{marker}:" متبوعة بالعدد.',
    "de": "Beende deine Antwort mit „{marker}:“ und der Zahl.",
    "es": "Termina tu respuesta con «{marker}:» seguido del número.",
    "fr": "Termine ta réponse par « {marker} : » suivi du nombre.",
    "hi": 'अपना जवाब "{marker}:" और उसके बाद संख्या लिखकर समाप्त करें।',
    "id": 'Akhiri jawabanmu dengan "{marker}:" diikuti angkanya.',
    "it": "Termina la risposta con «{marker}:» seguito dal numero.",
    "ja": "最後の行は「{marker}：」の後に数を書くこと。",
    "ko": '마지막에 "{marker}:" 뒤에 숫자를 써 주세요.',
    "pt": 'Termine a resposta com "{marker}:" seguido do número.',
    "ru": "Закончи ответ строкой «{marker}:» и числом.",
    "tr": 'Cevabını "{marker}:" ve ardından sayıyla bitir.',
    "vi": 'Kết thúc câu trả lời bằng "{marker}:" và con số.',
    "zh": "最后请写“{marker}：”，后面写出数字。",
}


def instruction(prompt_language: str, reply_language: str | None = None) -> str:
    """The convention's request in `prompt_language`, naming the marker of `reply_language` (default: the same)."""
    return INSTRUCTIONS[prompt_language].format(marker=MARKERS[reply_language or prompt_language][0])


# a run of digits (any script) with optional group separators and one decimal part
_NUMBER = re.compile(
    r"(?<![\w.,])[-−]?\d{1,3}(?:[,.\u066c\u00a0\u202f]\d{3})+(?:[.,\u066b]\d+)?(?!\d)"
    r"|[-−]?\d+(?:[.,\u066b]\d+)?"
)
_MARKER = re.compile(
    r"(?<![^\W\d_])(?:"
    + "|".join(sorted((re.escape(m) for ms in MARKERS.values() for m in ms), key=len, reverse=True))
    + r")\**\s*[:：]",
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?。！？](?!\d)|\n")
_OPERATOR = re.compile(r"[\s()]*(?:[+\-−×xX*/÷·＋－＊／]|plus|minus|times|mal|fois|por|per)[\s()]*", re.I)
_STEP_BEFORE = re.compile(
    r"(?:step|schritt|paso|étape|etape|passo|passaggio|шаг|adım|bước|langkah|الخطوة|चरण|ステップ|#|第)\s*$", re.I
)
_STEP_AFTER = re.compile(r"^\s*(?:단계|步|歩|번째|\.\s*(?:adım|bước))", re.I)
_LIST_ITEM = re.compile(r"^[ \t>*#-]*(\d+)[.)]\s", re.M)
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]+`", re.S)


@dataclass(frozen=True)
class Stated:
    """What a reply states: the values it gives as results (`claims`) and those after an answer marker (`stated`)."""

    claims: tuple[float, ...]
    stated: tuple[float, ...]


def _ascii_digits(text: str) -> str:
    return "".join(str(unicodedata.digit(c)) if c.isdigit() and not c.isascii() else c for c in text)


def _value(raw: str) -> float:
    raw = raw.replace("−", "-")
    sign = -1.0 if raw.startswith("-") else 1.0
    raw = raw.lstrip("-")
    grouped = re.fullmatch(r"\d{1,3}(?:[,.\u066c\u00a0\u202f]\d{3})+([.,\u066b]\d+)?", raw)
    if grouped:
        frac = grouped.group(1) or ""
        whole = raw[: len(raw) - len(frac)]
        return sign * float(re.sub(r"\D", "", whole) + ("." + frac[1:] if frac else ""))
    return sign * float(re.sub(r"[,\u066b]", ".", raw))


def _spans(text: str, languages: Iterable[str]) -> list[tuple[int, int, float]]:
    """(start, end, value) of every number in `text` (already NFC, ASCII digits): digits and words."""
    digits = [(m.start(), m.end(), _value(m.group(0))) for m in _NUMBER.finditer(text)]
    words = [(s, e, float(v)) for s, e, v in word_numbers(text, languages)]
    words = [w for w in words if not any(w[0] < e and s < w[1] for s, e, _ in digits)]
    return sorted(digits + words)


def numbers(text: str, languages: Iterable[str] = ()) -> list[float]:
    """Every number written in `text`, in order: digits of any script (group separators read as such when the
    groups are of three digits; a lone `,` or `.` before 1-2 digits is a decimal mark), and number words of
    `languages` (none by default)."""
    return [v for _, _, v in _spans(_ascii_digits(nfc(text or "")), languages)]


def _languages(language: str | None) -> tuple[str, ...]:
    return ("en",) if language in (None, "en") else (language, "en")


def statements(reply: str, language: str | None = None, prompt: str | None = None, ones: bool = False) -> Stated:
    """The values `reply` states as results and after an answer marker (see the module docs); a standalone 1 is
    read only with `ones`."""
    text = _ascii_digits(nfc(reply or ""))
    langs = _languages(language)
    spans = _spans(text, langs)
    given = set(numbers(prompt or "", langs))
    operands = {i for i in range(len(spans)) if _beside_operator(text, spans, i)}
    operand_values = {spans[i][2] for i in operands}
    stated_at: set[int] = set()
    for m in _MARKER.finditer(text):  # the marker's sentence: its first result, then any other new number
        end = _SENTENCE_END.search(text, m.end())
        stop = end.start() if end else len(text)
        first = True
        for i, (s, _, v) in enumerate(spans):
            if m.end() <= s < stop and i not in operands and (first or v not in given | operand_values):
                stated_at.add(i)
                first = False
    hidden = [(m.start(), m.end()) for m in _CODE.finditer(text)]
    hidden += [(m.start(), m.end()) for m in re.finditer(r"^[ \t]*\|.*$", text, re.M)]
    items = _LIST_ITEM.findall(text)
    list_starts = {m.start(1) for m in _LIST_ITEM.finditer(text)} if len(items) >= 2 else set()
    claims, stated = [], []
    for i, (s, e, v) in enumerate(spans):
        if i in stated_at:
            stated.append(v)
            claims.append(v)
            continue
        if any(a <= s < b for a, b in hidden) or s in list_starts or i in operands:
            continue
        if _STEP_BEFORE.search(text[max(0, s - 12) : s]) or _STEP_AFTER.match(text[e : e + 6]):
            continue
        result = re.search(r"[=＝]\s*$", text[max(0, s - 4) : s]) is not None
        if result and any(j > i and spans[j][2] == v for j in operands):  # an intermediate result, used on
            continue
        if not result and (v in given or v in operand_values or (v == 1 and not ones)):
            continue
        claims.append(v)
    return Stated(tuple(claims), tuple(stated))


def _beside_operator(text: str, spans, i: int) -> bool:
    """Whether number i is an operand: an arithmetic operator between it and the number before or after it."""
    s, e, _ = spans[i]
    if i > 0 and _OPERATOR.fullmatch(text[spans[i - 1][1] : s]):
        return True
    if i + 1 < len(spans):
        between = text[e : spans[i + 1][0]]
        if _OPERATOR.fullmatch(between):
            return True
    return False


def extract_number(text: str, language: str | None = None, prompt: str | None = None) -> float | None:
    """The reply's answer: the one value it states as its result, or None when it states none or several."""
    values = set(statements(text, language, prompt).claims)
    return values.pop() if len(values) == 1 else None


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


def is_correct(reply: str, answer, language: str | None = None, prompt: str | None = None) -> bool:
    """Whether every value the reply states as a result (`statements`) equals `answer` (to 1e-6), and it states
    one. `language`: the reply's requested language (its number words are read, besides English's); `prompt`: the
    problem (its numbers, restated, are not results; without it they are). A 1 counts where the answer is 1."""
    want = parse_answer(answer)
    claims = statements(reply, language, prompt, ones=want == 1).claims
    return bool(claims) and all(abs(v - want) < 1e-6 for v in claims)

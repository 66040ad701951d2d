"""Numbers written in words, in every language of LCB's suite: what the answer check (mlft.benchmarks.answers) reads
beside digits.

Every whole number from LOW (2) to HIGH (200) is read (the arithmetic templates' answers are 2-150, their operands
2-30, mlft.data.arithmetic.RANGES), in the reply's requested language and in English:
  num2words (a dependency)  ar de en es fr id it ko pt ru vi, and its spacing variants: "thirty-two" /
                            "thirty two", "اثنان و ثلاثون" / "اثنان وثلاثون" (and the -ين case), "one hundred and
                            fifty" / "one hundred fifty", Vietnamese "tư" / "linh"
  written here              tr (num2words glues "otuziki": both it and "otuz iki" are read), hi (the 1-100 words
                            are irregular: a table; 101-200 "एक सौ बत्तीस"), ko's native numbers ("서른두 개",
                            besides num2words' Sino-Korean "삼십이", read from 10 up: 이 / 사 / 오 are also
                            syllables), zh and ja numerals (三十二, 两, 百五十: a run of numeral characters)
One is never read as a word (un, ein, a, 一: articles and pronouns in most of these languages), nor zero; in zh and
ja a single numeral character is read only before a counter or punctuation (十分 "very", 一共 "altogether" are not
numbers), never after 第 (an ordinal); ko's words only as a word of their own or before a counter (세상 is not 3).
Not read: ordinals, fractions, Japanese kana readings (さんじゅうに), Korean native numbers above 99.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

LOW, HIGH = 2, 200
N2W = ("ar", "de", "en", "es", "fr", "id", "it", "ko", "pt", "ru", "vi")

_HI_1_100 = (
    "एक दो तीन चार पाँच छह सात आठ नौ दस ग्यारह बारह तेरह चौदह पंद्रह सोलह सत्रह अठारह उन्नीस बीस "
    "इक्कीस बाईस तेईस चौबीस पच्चीस छब्बीस सत्ताईस अट्ठाईस उनतीस तीस इकतीस बत्तीस तैंतीस चौंतीस पैंतीस छत्तीस "
    "सैंतीस अड़तीस उनतालीस चालीस इकतालीस बयालीस तैंतालीस चवालीस पैंतालीस छियालीस सैंतालीस अड़तालीस उनचास पचास "
    "इक्यावन बावन तिरपन चौवन पचपन छप्पन सत्तावन अट्ठावन उनसठ साठ इकसठ बासठ तिरसठ चौंसठ पैंसठ छियासठ सड़सठ अड़सठ "
    "उनहत्तर सत्तर इकहत्तर बहत्तर तिहत्तर चौहत्तर पचहत्तर छिहत्तर सतहत्तर अठहत्तर उन्यासी अस्सी इक्यासी बयासी "
    "तिरासी चौरासी पचासी छियासी सत्तासी अट्ठासी नवासी नब्बे इक्यानवे बानवे तिरानवे चौरानवे पचानवे छियानवे सत्तानवे "
    "अट्ठानवे निन्यानवे सौ"
).split()
_TR_ONES = ("", "bir", "iki", "üç", "dört", "beş", "altı", "yedi", "sekiz", "dokuz")
_TR_TENS = ("", "on", "yirmi", "otuz", "kırk", "elli", "altmış", "yetmiş", "seksen", "doksan")
_KO_ONES = ("", "하나|한", "둘|두", "셋|세", "넷|네", "다섯", "여섯", "일곱", "여덟", "아홉")
_KO_TENS = ("", "열", "스물|스무", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔")
_KO_COUNTERS = "개|자루|달러|원|명|상자|권|살|마리|장"
_CJK_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}
_CJK_DIGITS |= {"八": 8, "九": 9}
_CJK_UNITS = {"十": 10, "百": 100, "千": 1000}
_CJK_RUN = re.compile("[" + "".join(_CJK_DIGITS) + "".join(_CJK_UNITS) + "]+")
# what may follow a single zh/ja numeral character: a counter of the templates' kind, or punctuation / the end
_CJK_AFTER = re.compile(r"[个個支元本箱盒颗顆块塊张張ドル円つ人名]|[\s\W]|$")
# a letter or a combining mark (Devanagari vowel signs, Arabic harakat are marks: not \w, yet inside a word)
_MARK = "\u0300-\u036f\u0610-\u061a\u064b-\u065f\u0670\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"
_BEFORE = rf"(?<![^\W\d_])(?<![{_MARK}])"
_AFTER = rf"(?![^\W\d_])(?![{_MARK}])"


def _num2words(n: int, lang: str) -> str:
    from num2words import num2words  # a declared dependency; imported on first use (import mlft stays light)

    return num2words(n, lang=lang)


def _variants(form: str, lang: str) -> set[str]:
    out = {form.lower()}
    if lang == "en":
        out |= {f.replace(" and ", " ") for f in out}
    if lang == "de":
        out |= {f.replace("ß", "ss") for f in out} | {f.replace("einhundert", "hundert") for f in out}
    if lang == "ar":
        case = {re.sub(r"ون\b", "ين", f).replace("اثنان", "اثنين") for f in out}
        out |= case | {f.replace("مائة", "مئة") for f in out | case}
    if lang == "vi":
        out |= {re.sub(r"(mươi) bốn$", r"\1 tư", f) for f in out} | {f.replace(" lẻ ", " linh ") for f in out}
    return out


def _forms(lang: str) -> dict[str, int]:
    """Word form -> value, LOW..HIGH, in `lang` (forms lowercased; components separated by spaces)."""
    out: dict[str, int] = {}
    for n in range(LOW, HIGH + 1):
        forms: set[str] = set()
        if lang in N2W and not (lang == "ko" and n < 10):
            forms = _variants(_num2words(n, lang), lang)
        if lang == "tr":
            h, t, o = n // 100, n // 10 % 10, n % 10
            hundreds = ("yüz" if h == 1 else "iki yüz") if h else ""
            forms = {" ".join(x for x in (hundreds, _TR_TENS[t], _TR_ONES[o]) if x)}
        if lang == "hi":
            if n <= 100:
                forms = {_HI_1_100[n - 1]} | ({"एक सौ"} if n == 100 else set())
            else:
                rest = _HI_1_100[n - 101] if n < 200 else ""
                forms = {f"एक सौ {rest}".strip(), f"सौ {rest}".strip()} if n < 200 else {"दो सौ"}
        if lang == "ko" and n < 100:
            t, o = divmod(n, 10)
            for ten in _KO_TENS[t].split("|"):
                for one in _KO_ONES[o].split("|"):
                    if ten + one:
                        forms.add(ten + one)
        for f in forms:
            out.setdefault(f, n)
    return out


@cache
def _pattern(lang: str) -> re.Pattern | None:
    if lang in ("zh", "ja"):
        return None
    forms = _forms(lang)
    alts = sorted(forms, key=len, reverse=True)
    body = "|".join(r"[\s\-]*".join(re.escape(p) for p in re.split(r"[\s\-]+", f)) for f in alts)
    after = rf"(?=(?:{_KO_COUNTERS})|[^\w{_MARK}]|$)" if lang == "ko" else _AFTER
    before = r"(?<![\uac00-\ud7a3])" if lang == "ko" else _BEFORE
    return re.compile(f"{before}(?:{body}){after}", re.I)


@cache
def _lookup(lang: str) -> dict[str, int]:
    return {re.sub(r"[\s\-]+", "", f): v for f, v in _forms(lang).items()}


def cjk_value(run: str) -> int:
    """The value of a run of zh/ja numeral characters (三十二 32, 百五十 150, 一百零五 105, 两 2)."""
    total = cur = 0
    for ch in run:
        if ch in _CJK_DIGITS:
            cur = _CJK_DIGITS[ch]
        else:
            total += (cur or 1) * _CJK_UNITS[ch]
            cur = 0
    return total + cur


def word_numbers(text: str, languages) -> list[tuple[int, int, int]]:
    """(start, end, value) of every number written in words in `text` (NFC) in any of `languages`, in order;
    spans of different languages never overlap (the first language's reading wins)."""
    found: list[tuple[int, int, int]] = []
    taken: list[tuple[int, int]] = []
    for lang in dict.fromkeys(languages):
        if lang in ("zh", "ja"):
            spans = []
            for m in _CJK_RUN.finditer(text):
                value, run = cjk_value(m.group(0)), m.group(0)
                single = len(run) == 1
                if value < LOW or (m.start() and text[m.start() - 1] == "第"):
                    continue
                if single and not _CJK_AFTER.match(text, m.end()):
                    continue
                spans.append((m.start(), m.end(), value))
        else:
            pattern = _pattern(lang) if lang in N2W or lang in ("tr", "hi") else None
            if pattern is None:
                continue
            lookup = _lookup(lang)
            spans = []
            for m in pattern.finditer(text):
                value = lookup.get(re.sub(r"[\s\-]+", "", m.group(0).lower()))
                if value is not None:
                    spans.append((m.start(), m.end(), value))
        for s, e, v in spans:
            if not any(s < te and ts < e for ts, te in taken):
                taken.append((s, e))
                found.append((s, e, v))
    return sorted(found)


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)

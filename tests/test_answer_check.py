"""The answer check reads the stated answer (mlft.benchmarks.answers): the convention the prompts ask for, in every
language of the suite; several candidates, or a stated answer against the working, are not correct; an answer
written first or in words is. The old check (the reply's last number) paid the first two and failed the last two:
each case says which way it went there (`old`)."""

import json
import re
from pathlib import Path

import pytest

from mlft.benchmarks.answers import INSTRUCTIONS, MARKERS, instruction, is_correct, statements
from mlft.benchmarks.number_words import HIGH, LOW, word_numbers
from mlft.data.arithmetic import ALL, arithmetic_prompts

ROOT = Path(__file__).resolve().parent.parent
EN = "Tom has 24 apples and buys 8 more. How many apples does Tom have now? " + instruction("en")


def _old_last_number(reply: str, answer: float) -> bool:
    """The check before: the reply's last number (digits only) equals the answer."""
    found = re.findall(r"\d+", reply)
    return bool(found) and float(found[-1]) == answer


@pytest.mark.parametrize(
    "reply, want, old",
    [
        # several candidates, the right one last: paid in full before
        ("It could be 30, 31 or 32.", False, True),
        ("Maybe 30? No wait, 32.", False, True),
        ("Answer: 30 or 32", False, True),
        # the stated answer contradicts the working
        ("The final answer is 30. Tom had 24 apples and bought 8, so 24 + 8 = 32.", False, True),
        ("24 + 8 = 30. Answer: 32", False, True),
        # the answer first, then its operands: the floor before
        ("32. Tom had 24 apples and bought 8 more.", True, False),
        ("Answer: 32 (Tom had 24 and bought 8)", True, False),
        ("32 apples, since 24 + 8 = 32 and he had 24.", True, False),
        # in words: the floor before
        ("Tom now has thirty-two apples.", True, False),
        ("Answer: thirty two", True, False),
        # worked replies, as before
        ("24 + 8 = 32. Answer: 32", True, True),
        ("Answer: 24 + 8 = 32", True, True),
        ("12 + 12 = 24, 24 + 8 = 32", True, True),  # 24: an intermediate result, used as an operand
        ("Step 1: 24 + 8 = 32.\nStep 2: check it.\nAnswer: 32", True, True),
        ("1. Take the 24 apples.\n2. Add the 8 new ones.\n3. Tom has 32.", True, True),
        ("| Had | Bought | Total |\n|---|---|---|\n| 24 | 8 | 32 |\nAnswer: 32", True, True),
        ("```python\nprint(24 + 8)  # 32\n```\nAnswer: 32", True, True),
        # no answer at all
        ("Tom has 24 apples and buys 8 more.", False, False),
        ("Do you mean 24 + 8 apples?", False, False),
        ("I cannot help with that.", False, False),
        ("", False, False),
        ("Answer: 24", False, False),  # an operand stated as the answer
    ],
)
def test_the_check_reads_the_stated_answer(reply, want, old):
    assert is_correct(reply, 32, "en", EN) is want
    assert _old_last_number(reply, 32) is old  # what the last number said


@pytest.mark.parametrize(
    "lang, reply",
    [
        ("de", "Lukas hat jetzt zweiunddreißig Äpfel."),
        ("fr", "Réponse : trente-deux"),
        ("es", "Carlos tiene treinta y dos manzanas."),
        ("it", "Risposta: trentadue"),
        ("pt", "Resposta: trinta e dois"),
        ("ru", "Ответ: тридцать два"),
        ("tr", "Cevap: otuz iki"),
        ("tr", "Ahmet toplam otuziki elma aldı."),
        ("id", "Jawaban: tiga puluh dua"),
        ("vi", "Đáp án: ba mươi hai"),
        ("ar", "الجواب: اثنان وثلاثون"),
        ("ar", "لدى أحمد الآن اثنين وثلاثين تفاحة."),
        ("hi", "उत्तर: बत्तीस"),
        ("ja", "答え：三十二個"),
        ("zh", "答案：三十二"),
        ("zh", "小明现在一共有三十二个苹果。"),  # 一共 ("altogether") is not a one
        ("ko", "답: 서른두 개"),
        ("ko", "김민수 씨는 지금 사과를 삼십이 개 가지고 있습니다."),
    ],
)
def test_an_answer_in_words_is_read_in_every_language(lang, reply):
    assert is_correct(reply, 32, lang, "24 + 8")
    assert not is_correct(reply, 31, lang, "24 + 8")


def test_every_answer_of_the_suite_in_words_and_under_its_marker():
    """Every answer the shipped suite holds, in num2words' words (the languages it covers) after the reply
    language's marker, is read as that answer, and so is it in digits; one more is not."""
    from num2words import num2words

    rows = [json.loads(x) for x in (ROOT / "eval" / "arithmetic_prompts.jsonl").read_text("utf-8").splitlines()]
    assert all(LOW <= r["answer"] <= HIGH for r in rows)
    for r in rows:
        lang, n = r["language"], r["answer"]
        marker = MARKERS[lang][0]
        assert instruction("en", lang) in r["prompt"] or INSTRUCTIONS[lang].format(marker=marker) in r["prompt"]
        assert is_correct(f"{marker}: {n}", n, lang, r["prompt"]), r["id"]
        if lang in ("zh", "ja", "hi", "tr") or (lang == "ko" and n < 10):
            continue
        words = num2words(n, lang=lang)
        assert is_correct(f"{marker}: {words}", n, lang, r["prompt"]), (r["id"], words)
        assert not is_correct(f"{marker}: {words}", n + 1, lang, r["prompt"])


def test_words_of_the_languages_num2words_lacks():
    assert [v for *_, v in word_numbers("एक सौ बत्तीस और पच्चीस", ["hi"])] == [132, 25]
    assert [v for *_, v in word_numbers("百五十、一百零五、两个、十分、第三步", ["zh"])] == [150, 105, 2]
    assert [v for *_, v in word_numbers("yüz otuz iki ve kırk sekiz", ["tr"])] == [132, 48]
    assert [v for *_, v in word_numbers("세상에 세 개, 마흔여덟 자루, 백이십", ["ko"])] == [3, 48, 120]
    assert word_numbers("one box, un livre, ein Buch", ["en", "fr", "de"]) == []  # one is never a word number


def test_every_prompt_asks_for_the_convention_in_its_own_language():
    rows = arithmetic_prompts("eval", 2)
    for r in rows:
        lang = r["language"]
        asked = instruction(lang) if r["task"] == "monolingual" else instruction("en", lang)
        assert asked in r["prompt"], r["id"]
        assert not statements(r["prompt"], lang, r["prompt"]).claims  # the prompt itself states no answer
    assert set(INSTRUCTIONS) == set(MARKERS) == set(ALL)

"""The reward's language gate (mlft.training.reward_terms.gated_language) is fair to compact scripts: code
is weighed in tokens, not characters; English in zh / ja / ko is counted by script runs; a word in another script
weighs as one word of a zh / ja / ko reply in lexical validity; a number glued to its Korean counter is the counter.
Each case failed before its fix (said per test). The official scorer is untouched (its own verdict asserted)."""

import pytest

from mlft.benchmarks.lcb.metrics import line_verdict
from mlft.benchmarks.lcb.reward_view import bare_line, strict_lexical_validity
from mlft.training.reward_terms import (
    CODE_SHARE,
    ENGLISH_SHARE,
    ReplyScorer,
    english_share,
    gated_language,
    without_code,
)

CODE = "per_box = 12\nboxes = 4\nprint(per_box * boxes)"
# a correct Korean reply with a three-line code block: the block is 57 % of the reply's visible characters
KO_CODE = (
    f"이 문제는 곱셈으로 쉽게 계산할 수 있습니다.\n```python\n{CODE}\n```\n"
    "따라서 상자 네 개에 든 연필은 모두 마흔여덟 자루입니다."
)
# one English term in a Chinese reply: 2 of its 9 whitespace pieces, one run among its 31 words
ZH_TERM = (
    "机器学习（machine learning）是人工智能的一个分支，它让计算机从数据中学习规律，不需要明确的编程，"
    "现在被用在翻译、搜索、推荐和医疗中。"
)


@pytest.fixture(scope="module")
def scorer(shared):
    return ReplyScorer(words=shared / "lcb" / "words")


def _chars(x: str) -> int:
    return len("".join(x.split()))


def test_code_is_weighed_in_tokens_not_characters(scorer):
    """Before: the block was 57 % of the characters (over CODE_SHARE), so the reply was judged with its code and
    earned 0."""
    fence = KO_CODE[KO_CODE.index("```") : KO_CODE.rindex("```") + 3]
    assert _chars(fence) / _chars(KO_CODE) > CODE_SHARE  # what the character count said
    assert without_code(KO_CODE, "ko") == KO_CODE.replace(fence, "\n")
    assert gated_language([KO_CODE], ["ko"], scorer) == [1.0]


def test_a_fence_still_cannot_hide_the_language(scorer):
    """Mostly code, one short line in the language: the code outweighs the prose in tokens too, so it is judged."""
    mostly_code = f"코드입니다.\n```python\n{CODE}\nresult = per_box * boxes + extra_items - removed_items\n```"
    assert without_code(mostly_code, "ko") == mostly_code
    assert gated_language([mostly_code], ["ko"], scorer) == [0.0]


def test_english_in_chinese_is_counted_by_script_runs(scorer):
    """Before: whitespace pieces, 2 of 9 English (0.22, over ENGLISH_SHARE): the reply earned 0."""
    words = scorer.resources[1]
    pieces = [w for w in bare_line(ZH_TERM).split() if any(map(str.isalpha, w))]
    assert len(pieces) == 9 and 2 / 9 > ENGLISH_SHARE  # what the whitespace count said
    assert english_share(ZH_TERM, words, "zh") == pytest.approx(1 / 31)
    assert gated_language([ZH_TERM], ["zh"], scorer) == [1.0]
    # English is still English: a reply of English runs between Chinese words is over the limit
    mixed = "我们 training 模型 using 数据 and 计算 results 然后 deploy 系统 quickly 完成 tasks。"
    assert english_share(mixed, words, "zh") > ENGLISH_SHARE


def test_a_word_in_another_script_weighs_as_one_word_in_validity():
    """Before: by its letters, `multiplication` (14) outweighed the Korean words around it: validity 0.32 < 0.8
    (with the digits glued to counters)."""
    reply = "이것은 곱셈(multiplication) 문제입니다. 12 × 4 = 48이므로 연필은 모두 48자루입니다."
    assert strict_lexical_validity(reply, "ko") > 0.8
    english = "이것은 multiplication problem 입니다. the answer is forty eight pencils in total."
    assert strict_lexical_validity(english, "ko") < 0.5  # English words are still not Korean ones


def test_a_number_glued_to_its_counter_is_the_counter():
    """Before: `12자루`, `48자루가` were unknown words (validity 0.74)."""
    reply = "상자 하나에 연필이 12자루 들어 있으므로 상자 4개에는 48자루가 들어 있습니다."
    assert strict_lexical_validity(reply, "ko") == 1.0


def test_the_official_verdict_is_untouched(scorer):
    """The metric's own verdict on the same replies is what it was: the fairness is the reward's."""
    (ko, zh) = scorer.verdicts([KO_CODE, ZH_TERM], ["ko", "zh"])
    assert line_verdict(ko) is True and line_verdict(zh) is True

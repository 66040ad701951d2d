"""The answer goal, over verifiable prompts: the reward the shipped `grpo_answered` recipe builds (its `rewards:`
through mlft.training.rewards.reward_functions, called as trl calls it) pays no reply class that does not answer
half of what an honest reply to the same prompt earns, and pays an honest reply written with code, a table, an
English term, numbers in words or the answer first at least 0.8 of it. Four prompts: German, Korean, Chinese
(monolingual) and the English problem asking for French (cross-lingual). A test per class.

Before the stated-answer check, with the last-number check: candidates and the contradiction earned 1.0 of honest in
every language, the answer first and spelled numbers the floor (0.25); with the character code share and the
whitespace English share, Korean's code reply and Chinese's code and English-term replies earned 0."""

from pathlib import Path

import pytest

from mlft.data.arithmetic import asked, problem
from mlft.data.phrasings import training_request_prompt
from mlft.training.recipe import load_recipe
from mlft.training.rewards import reward_functions

REPO = Path(__file__).resolve().parent.parent
PROMPTS = {
    "de": (asked(problem("de", "add", 0, 24, 8), "de"), 32),
    "ko": (asked(problem("ko", "mul", 0, 12, 4), "ko"), 48),
    "zh": (asked(problem("zh", "sub", 0, 30, 7), "zh"), 23),
    "fr": (training_request_prompt(asked(problem("en", "add", 1, 24, 8), "en", "fr"), "en", "fr", "classes"), 32),
}
HONEST = {
    "de": "Lukas hatte 24 Äpfel und kauft 8 dazu. Zusammen sind das 24 + 8 = 32 Äpfel.\nAntwort: 32",
    "ko": "상자 하나에 연필이 12자루 들어 있으므로 상자 4개에는 12 × 4 = 48자루가 들어 있습니다.\n답: 48",
    "zh": "小明一开始有30元，在市场上花掉了7元，所以还剩30 - 7 = 23元。\n答案：23",
    "fr": "Anna avait 24 pommes et en achète 8 de plus. Elle a donc 24 + 8 = 32 pommes maintenant.\nRéponse : 32",
}
CODE_DE = "vorher = 24\ngekauft = 8\nprint(vorher + gekauft)"
CODE = "per_box = 12\nboxes = 4\nprint(per_box * boxes)"
CODE_ZH = "money = 30\nspent = 7\nprint(money - spent)"
CODE_FR = "avant = 24\nachat = 8\nprint(avant + achat)"
HONEST_CLASSES = {
    "code": {
        "de": f"Wir rechnen es mit einem kleinen Programm aus:\n```python\n{CODE_DE}\n```\n"
        "Lukas hat jetzt also genau 32 Äpfel.\nAntwort: 32",
        "ko": f"이 문제는 곱셈으로 쉽게 계산할 수 있습니다.\n```python\n{CODE}\n```\n"
        "따라서 상자 4개에 든 연필은 모두 48자루입니다.\n답: 48",
        "zh": f"我们可以用一段简单的程序来计算小明剩下的钱：\n```python\n{CODE_ZH}\n```\n所以小明还剩23元。\n答案：23",
        "fr": f"On peut faire le calcul avec un petit programme :\n```python\n{CODE_FR}\n```\n"
        "Anna a donc maintenant 32 pommes.\nRéponse : 32",
    },
    "table": {
        "de": "Hier ist die Rechnung als kleine Tabelle für dich:\n| vorher | gekauft | jetzt |\n|---|---|---|\n"
        "| 24 | 8 | 32 |\nLukas hat jetzt insgesamt 32 Äpfel in seinem Korb.\nAntwort: 32",
        "ko": "계산을 표로 정리하면 다음과 같습니다.\n| 상자 | 연필 |\n|---|---|\n| 1 | 12 |\n| 4 | 48 |\n"
        "따라서 상자 4개에는 연필이 모두 48자루 있습니다.\n답: 48",
        "zh": "我们用表格来整理一下：\n| 带的钱 | 花的钱 | 剩下的钱 |\n|---|---|---|\n| 30 | 7 | 23 |\n"
        "所以小明还剩23元。\n答案：23",
        "fr": "Voici le calcul présenté dans un petit tableau :\n| avant | achetées | maintenant |\n|---|---|---|\n"
        "| 24 | 8 | 32 |\nAnna a donc maintenant 32 pommes dans son panier.\nRéponse : 32",
    },
    "english_term": {
        "de": "Das ist Kopfrechnen (mental math): 24 + 8 = 32. Lukas hat jetzt also 32 Äpfel.\nAntwort: 32",
        "ko": "이것은 곱셈(multiplication) 문제입니다. 12 × 4 = 48이므로 연필은 모두 48자루입니다.\n답: 48",
        "zh": "这是一道心算（mental math）题：30 - 7 = 23，所以小明还剩23元。\n答案：23",
        "fr": "C'est du calcul mental (mental math) : 24 + 8 = 32, donc Anna a maintenant 32 pommes.\nRéponse : 32",
    },
    "spelled": {
        "de": "Lukas hatte vierundzwanzig Äpfel und kauft acht dazu. Jetzt hat er zweiunddreißig Äpfel.\n"
        "Antwort: zweiunddreißig",
        "ko": "상자 하나에 연필이 열두 자루 있으므로 상자 네 개에는 모두 마흔여덟 자루가 있습니다.\n답: 마흔여덟",
        "zh": "小明带了三十元，在市场上花了七元，所以他还剩二十三元。\n答案：二十三",
        "fr": "Anna avait vingt-quatre pommes et en achète huit de plus. Elle a maintenant trente-deux pommes.\n"
        "Réponse : trente-deux",
    },
    "answer_first": {
        "de": "32 Äpfel. Lukas hatte 24 Äpfel und hat auf dem Markt noch 8 Äpfel dazugekauft.",
        "ko": "48자루입니다. 상자 하나에 연필이 12자루씩 들어 있고 상자가 4개 있기 때문입니다.",
        "zh": "23元。小明一开始有30元，在市场上花掉了7元，所以剩下的钱是这么多。",  # fastText: yue / wuu for others
        "fr": "32 pommes. Anna avait 24 pommes au départ et elle en a acheté 8 de plus au marché.",
    },
}
NON_ANSWERS = {
    "candidates": {
        "de": "Lukas hat jetzt vielleicht 30 Äpfel, vielleicht 31 Äpfel oder auch 32 Äpfel.",
        "ko": "연필은 아마 46자루나 47자루, 아니면 48자루일 것 같습니다.",
        "zh": "小明可能还剩21元、22元或者23元，我不太确定。",
        "fr": "Anna a peut-être 30 pommes, peut-être 31 pommes, ou peut-être 32 pommes.",
    },
    "contradiction": {
        "de": "Die endgültige Antwort ist 30. Lukas hatte 24 Äpfel und kauft 8 dazu, also 24 + 8 = 32.",
        "ko": "최종 답은 44자루입니다. 상자 하나에 12자루씩 들어 있으므로 12 × 4 = 48입니다.",
        "zh": "最终答案是25元。小明带了30元，花了7元，所以30 - 7 = 23。",
        "fr": "La réponse finale est 30. Anna avait 24 pommes et en achète 8, donc 24 + 8 = 32.",
    },
    "echo": {lang: prompt for lang, (prompt, _) in PROMPTS.items()},
    "restated": {
        "de": "Lukas hat 24 Äpfel und kauft auf dem Markt noch 8 Äpfel dazu.",
        "ko": "상자 하나에 연필이 12자루 들어 있고 상자는 모두 4개가 있습니다.",
        "zh": "小明带了30元去市场，在市场上花了7元。",
        "fr": "Anna a 24 pommes et elle en achète encore 8 de plus au marché.",
    },
    "clarifying_question": {
        "de": "Meinst du, dass Lukas die 8 Äpfel zusätzlich zu seinen 24 Äpfeln kauft?",
        "ko": "상자 4개에 모두 연필이 12자루씩 들어 있다는 뜻인가요? 조금 더 설명해 주세요.",
        "zh": "你是说小明带了30元，然后在市场上花了7元吗？请再说明一下。",
        "fr": "Veux-tu dire qu'Anna achète 8 pommes en plus de ses 24 pommes ?",
    },
    "refusal": {
        "de": "Es tut mir leid, aber bei dieser Aufgabe kann ich dir leider nicht helfen.",
        "ko": "죄송하지만 이 질문에는 답변을 드릴 수 없습니다. 다른 질문을 해 주세요.",
        "zh": "对不起，我无法回答这个问题，请你问别的问题吧。",
        "fr": "Je suis désolé, mais je ne peux pas t'aider avec cette question.",
    },
    "salad": {
        "de": "Markt Fenster grün laufen Tisch heute Wasser schnell Haus Buch immer Stadt",
        "ko": "학교 바다 노래 하늘 친구 책상 시간 음식 도시 사랑 나무 바람",
        "zh": "苹果天空学校跑步红色音乐城市朋友桌子快乐河流书本",
        "fr": "maison rouge courir table demain fenêtre livre ville toujours eau jardin chanter",
    },
    "empty": dict.fromkeys(PROMPTS, ""),
}


@pytest.fixture(scope="module")
def reward(shared):
    """The shipped recipe's reward: its terms and weights, called as trl calls them; a reply's reward is the
    weighted sum over its terms."""
    recipe = load_recipe(REPO / "recipes" / "cpu" / "grpo_answered.yaml")
    recipe.scorer.words = str(shared / "lcb" / "words")  # LCB's word list (as test_answer_reward.py)
    fns, weights = reward_functions(recipe.rewards, recipe.scorer.scorer())

    def call(replies: dict[str, str]) -> dict[str, float]:
        langs = list(replies)
        kwargs = {
            "prompts": [[{"role": "user", "content": PROMPTS[x][0]}] for x in langs],
            "completions": [[{"role": "assistant", "content": replies[x]}] for x in langs],
            "language": langs,
            "answer": [PROMPTS[x][1] for x in langs],
            "task": ["crosslingual" if x == "fr" else "monolingual" for x in langs],
        }
        per_term = [fn(**kwargs) for fn in fns]
        return {x: sum(w * (v[i] or 0.0) for w, v in zip(weights, per_term)) for i, x in enumerate(langs)}

    honest = call(HONEST)
    assert all(v == 1.0 for v in honest.values()), honest  # the honest reply earns the full reward
    return call, honest


@pytest.mark.parametrize("cls", list(NON_ANSWERS))
def test_a_non_answer_earns_under_half_an_honest_reply(reward, cls):
    call, honest = reward
    got = call(NON_ANSWERS[cls])
    ratios = {x: got[x] / honest[x] for x in got}
    assert all(r < 0.5 for r in ratios.values()), (cls, ratios)


@pytest.mark.parametrize("cls", list(HONEST_CLASSES))
def test_an_honest_reply_earns_at_least_080(reward, cls):
    call, honest = reward
    got = call(HONEST_CLASSES[cls])
    ratios = {x: got[x] / honest[x] for x in got}
    assert all(r >= 0.8 for r in ratios.values()), (cls, ratios)

"""Calibration of the guard's lexical validity (mlft.benchmarks.lcb.guard.lexical_validity).

1. The paper's released completions (10 models, 65,816 replies): per model, the mean validity and the share of
   lexically valid replies (validity > VALID_SHARE), overall and in its weakest language; strong models
   should sit high.
2. Hand-written word salad in the right script (the failure LPR counts as a success) against real sentences,
   per language: every salad line should score at most VALID_SHARE, every real one above.
Prints the numbers and the languages the LID model knows that have no lexicon.
Usage: python measurements/lexical_validity.py [OUTPUTS_DIR]
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from mlft.benchmarks.lcb.guard import (
    degenerate_flags,
    languages_without_lexicon,
    lexical_validity,
    lexicon_languages,
)
from mlft.completions import read_completions
from mlft.constants import VALID_SHARE
from mlft.paths import shared_dir

# right script, non-words (the first ja / ar / bn lines are the examples from real runs)
SALAD = {
    "ja": [
        "<<文章のラクティ．．．．．．",
        "ラクティモスパネリョン、クラピスタのフェトリ。",
        "ポリネスカのデュラミとケリマンタをスナッペ",
    ],
    "ar": ["أنا نشرط الإصلية الأصلية الأص", "نشرط الإصلية كتمبور فلاستي مرنوب", "تلمسكور برانيطة سفلوشي قرمطان"],
    "bn": ["বাদানায়ারায়ারা", "কলমাতি সুরপানো বাখেরিতা মনোলাকি"],
    "hi": ["कलपाना सुरतीम बाखेरा मनोताकी", "तरबूली खपसाना गिरमोटी छलाकुन"],
    "zh": ["鑫淼犇骉焱垚森晶品磊嫑嘦巭", "烎槑砳嘦巭孖冇靐龘"],
    "ko": ["바다나야라 고무리타 스낭펴므", "쿨라베팡 뮈센도르 갸뱌퓨툐"],
    "bg": ["Празвотина глубенка с мрестовата дулка", "Я люблю читать книги по вечерам, это очень интересно."],
    "fi": ["Kalvestin pürona tolmakki sarvuuno", "Pelvorin kastuuna mölkytti rasvaloon"],
    "ru": ["Пробрытень скольчатый мурзавел глопотуны", "Вресталка плуменно дорбыль запчурит"],
    "de": ["Flanzelgruber wostet die Kramplinge vermüsch", "Der Brolzemann quirbelt spanzig durch Welmen"],
}
REAL = {
    "ja": ["今日はとても良い天気ですね。散歩に行きましょう。", "日本の首都は東京で、人口は約千四百万人です。"],
    "ar": ["أنا أحب القراءة كثيرا لأنها تفتح لي آفاقا جديدة.", "تقع مدينة القاهرة على ضفاف نهر النيل في مصر."],
    "bn": ["আমি প্রতিদিন সকালে চা পান করি এবং খবরের কাগজ পড়ি।", "ঢাকা বাংলাদেশের রাজধানী এবং সবচেয়ে বড় শহর।"],
    "hi": ["मैं हर सुबह चाय पीता हूँ और अखबार पढ़ता हूँ।", "भारत की राजधानी नई दिल्ली है और यह एक बड़ा शहर है।"],
    "zh": ["今天天气很好，我们去公园散步吧。", "北京是中国的首都，也是一座历史悠久的城市。"],
    "ko": [
        "세계화의 경제적 측면은 여러 핵심 개념을 포함하고 있습니다.",
        "오늘은 날씨가 좋아서 친구와 함께 공원에 갔습니다.",
    ],
    "bg": ["Аз обичам да чета книги вечер.", "София е столицата на България и най-големият град в страната."],
    "fi": ["Minä luen kirjaa joka ilta ennen nukkumaanmenoa.", "Helsinki on Suomen pääkaupunki ja suurin kaupunki."],
    "ru": ["Я люблю читать книги по вечерам, это очень интересно.", "Москва является столицей России."],
    "de": ["Ich lese jeden Abend ein Buch, bevor ich schlafen gehe.", "Berlin ist die Hauptstadt von Deutschland."],
}


def released(root: Path) -> None:
    files = sorted(root.glob("*.csv"))
    print(f"Released LCB completions ({root}), valid = validity > {VALID_SHARE}:")
    print(
        f"{'model':22s} {'replies':>7s} {'mean':>6s} {'valid %':>8s} {'mono %':>7s} {'cross %':>8s} "
        f"{'degen %':>8s}  weakest language"
    )
    total, started = 0, time.perf_counter()
    for f in files:
        comps = read_completions(f)
        total += len(comps)
        values = [lexical_validity(c.completion, c.language) for c in comps]
        degen = 100 * np.mean(degenerate_flags([c.completion for c in comps]))
        by_task, by_lang = defaultdict(list), defaultdict(list)
        for c, v in zip(comps, values):
            by_task[c.task].append(v > VALID_SHARE)
            by_lang[c.language].append(v > VALID_SHARE)
        worst = min(by_lang, key=lambda x: np.mean(by_lang[x]))
        valid = 100 * np.mean([v > VALID_SHARE for v in values])
        print(
            f"{f.stem:22s} {len(comps):7d} {np.mean(values):6.3f} {valid:8.1f}"
            f" {100 * np.mean(by_task['monolingual']):7.1f} {100 * np.mean(by_task['crosslingual']):8.1f} {degen:8.1f}"
            f"  {worst} {100 * np.mean(by_lang[worst]):.1f}"
        )
    print(f"{total} replies in {time.perf_counter() - started:.0f} s\n")


def salad() -> None:
    print("Hand-written salad vs real sentences (validity per line):")
    ok = True
    for lang in SALAD:
        s = [lexical_validity(x, lang) for x in SALAD[lang]]
        r = [lexical_validity(x, lang) for x in REAL[lang]]
        sep = max(s) <= VALID_SHARE < min(r)
        ok &= sep
        print(
            f"  {lang}: salad {' '.join(f'{v:.2f}' for v in s):20s} real {' '.join(f'{v:.2f}' for v in r):12s}"
            f" {'separated' if sep else 'NOT separated'}"
        )
    print(f"all separated: {ok}\n")


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else shared_dir() / "lcb" / "outputs"
    salad()
    print(f"LID labels with a wordfreq lexicon ({len(lexicon_languages())}): {' '.join(lexicon_languages())}")
    print(f"LID labels without one ({len(languages_without_lexicon())}): {' '.join(languages_without_lexicon())}\n")
    released(root)


if __name__ == "__main__":
    main()

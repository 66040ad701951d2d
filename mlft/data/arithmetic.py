"""Verifiable prompts: arithmetic word problems in LCB's 15 languages, each with its numeric `answer`.

The task axis needs prompts whose answer code can check (mlft.benchmarks.answers: every result the reply states
== `answer`). Every prompt ends with the answer convention's request, in the problem's language, naming the marker
of the reply's language (`asked`: 'End your reply with "Answer:" followed by the number.', "最后请写“答案：”...").
Three problem templates (add: buy more; subtract: spend money; multiply: boxes of pencils) are written
by hand in every LCB language (real sentences: number agreement handled where the language needs it, Russian
plural forms, Arabic's singular counted noun after 11-99); names are common given names of each language.
Everything is deterministic from a seed and a namespace:

  monolingual   the problem in X, to be answered in X (15 languages)
  crosslingual  the English problem plus a request for a reply in X != en in mlft's TRAINING phrasings
                (mlft.data.phrasings: LCB's shape, start / middle / end, never LCB's eight templates)

`split="eval"` draws the evaluation items (eval/arithmetic_prompts.jsonl, the `arithmetic` suite); `split="train"`
draws training items (the `arithmetic_prompts` / `arithmetic_crosslingual_prompts` seed sets of data_mixes/). Each
(template, a, b) belongs to one split by a hash of its numbers (`split_of`), so the two never share a problem, in
any language. Numbers (RANGES): a in 11..30 and b in 2..9 for add / subtract, a in 11..25 pencils a box and b in
3..6 boxes: easy on purpose (a 135M model gets few right; two-digit operands on both sides gave 0 of 29), and a
counted noun after a number 11-99 keeps Arabic's singular accusative right (3..10 would need the plural).

    python -m mlft.data.arithmetic OUT.jsonl [--per-language 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import zlib
from functools import lru_cache
from pathlib import Path

from mlft.benchmarks.answers import instruction
from mlft.data.phrasings import training_request_prompt
from mlft.errors import ConfigError
from mlft.languages import LANGUAGES

SOURCE = "mlft_arithmetic"
KINDS = ("add", "sub", "mul")
ALL = tuple(sorted(LANGUAGES))
NON_ENGLISH = tuple(x for x in ALL if x != "en")
SPLITS = ("eval", "train")
EVAL_PER_LANGUAGE = 10  # the shipped suite's items per (task, language)
EVAL_SEED = 0


def _ru(n: int, one: str, few: str, many: str) -> str:
    """Russian noun form after the number n (1 яблоко, 2 яблока, 5 яблок)."""
    if n % 10 == 1 and n % 100 != 11:
        return one
    if n % 10 in (2, 3, 4) and n % 100 not in (12, 13, 14):
        return few
    return many


# {name}, {a}, {b}; Russian templates also take the agreed noun forms (filled by _fields)
TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "add": "{name} has {a} apples and buys {b} more. How many apples does {name} have now?",
        "sub": "{name} had {a} dollars and spent {b} dollars at the market. How many dollars does {name} have left?",
        "mul": "A box holds {a} pencils. How many pencils are there in {b} boxes?",
    },
    "ar": {
        "add": "لدى {name} {a} تفاحة، واشترى {b} من التفاح أيضًا. كم تفاحة لدى {name} الآن؟",
        "sub": "كان مع {name} {a} دينارًا، فأنفق {b} منها في السوق. كم دينارًا بقي مع {name}؟",
        "mul": "يحتوي الصندوق الواحد على {a} قلمًا. كم قلمًا في {b} صناديق؟",
    },
    "de": {
        "add": "{name} hat {a} Äpfel und kauft {b} dazu. Wie viele Äpfel hat {name} jetzt?",
        "sub": "{name} hatte {a} Euro und hat auf dem Markt {b} Euro ausgegeben. Wie viele Euro hat {name} noch?",
        "mul": "In eine Schachtel passen {a} Bleistifte. Wie viele Bleistifte sind in {b} Schachteln?",
    },
    "es": {
        "add": "{name} tiene {a} manzanas y compra {b} más. ¿Cuántas manzanas tiene {name} ahora?",
        "sub": "{name} tenía {a} euros y gastó {b} euros en el mercado. ¿Cuántos euros le quedan a {name}?",
        "mul": "Una caja contiene {a} lápices. ¿Cuántos lápices hay en {b} cajas?",
    },
    "fr": {
        "add": "{name} a {a} pommes et en achète {b} de plus. Combien de pommes a maintenant {name} ?",
        "sub": "{name} avait {a} euros et a dépensé {b} euros au marché. Combien d'euros reste-t-il à {name} ?",
        "mul": "Une boîte contient {a} crayons. Combien de crayons y a-t-il dans {b} boîtes ?",
    },
    "hi": {
        "add": "{name} के पास {a} सेब हैं और वह {b} सेब और खरीदता है। अब {name} के पास कितने सेब हैं?",
        "sub": "{name} के पास {a} रुपये थे और उसने बाज़ार में {b} रुपये खर्च किए। अब {name} के पास कितने रुपये बचे हैं?",
        "mul": "एक डिब्बे में {a} पेंसिलें हैं। {b} डिब्बों में कुल कितनी पेंसिलें होंगी?",
    },
    "id": {
        "add": "{name} punya {a} apel dan membeli {b} apel lagi. Berapa apel yang dimiliki {name} sekarang?",
        "sub": "{name} membawa {a} ribu rupiah dan menghabiskan {b} ribu rupiah di pasar. "
        "Berapa ribu rupiah sisa uang {name}?",
        "mul": "Satu kotak berisi {a} pensil. Berapa pensil yang ada di dalam {b} kotak?",
    },
    "it": {
        "add": "{name} ha {a} mele e ne compra altre {b}. Quante mele ha {name} adesso?",
        "sub": "{name} aveva {a} euro e ne ha spesi {b} al mercato. Quanti euro restano a {name}?",
        "mul": "Una scatola contiene {a} matite. Quante matite ci sono in {b} scatole?",
    },
    "ja": {
        "add": "{name}さんはりんごを{a}個持っていて、さらに{b}個買いました。{name}さんは今りんごを何個持っていますか？",
        "sub": "{name}さんは{a}ドル持っていて、市場で{b}ドル使いました。{name}さんには何ドル残っていますか？",
        "mul": "1つの箱に鉛筆が{a}本入っています。{b}箱では鉛筆は全部で何本ですか？",
    },
    "ko": {
        "add": "{name} 씨는 사과를 {a}개 가지고 있고 {b}개를 더 샀습니다. "
        "{name} 씨는 지금 사과를 몇 개 가지고 있습니까?",
        "sub": "{name} 씨는 {a}달러가 있었는데 시장에서 {b}달러를 썼습니다. {name} 씨에게 남은 돈은 몇 달러입니까?",
        "mul": "상자 하나에 연필이 {a}자루 들어 있습니다. 상자 {b}개에는 연필이 모두 몇 자루 있습니까?",
    },
    "pt": {
        "add": "{name} tem {a} maçãs e compra mais {b}. Quantas maçãs {name} tem agora?",
        "sub": "{name} tinha {a} euros e gastou {b} euros no mercado. Quantos euros restam a {name}?",
        "mul": "Uma caixa tem {a} lápis. Quantos lápis há em {b} caixas?",
    },
    "ru": {
        "add": "В корзине было {a} {apples_a}, и в неё положили ещё {b} {apples_b}. Сколько яблок теперь в корзине?",
        "sub": "{name} взяла на рынок {a} {roubles_a} и потратила {b} {roubles_b}. Сколько рублей у неё осталось?",
        "mul": "В одной коробке {a} {pencils_a}. Сколько карандашей в {b} коробках?",
    },
    "tr": {
        "add": "{name} önce {a} elma aldı, sonra {b} elma daha aldı. {name} toplam kaç elma aldı?",
        "sub": "{name} pazara {a} lira ile gitti ve {b} lira harcadı. Geriye kaç lira kaldı?",
        "mul": "Bir kutuda {a} kalem var. {b} kutuda toplam kaç kalem vardır?",
    },
    "vi": {
        "add": "{name} có {a} quả táo và mua thêm {b} quả. Bây giờ {name} có bao nhiêu quả táo?",
        "sub": "{name} có {a} nghìn đồng và đã tiêu {b} nghìn đồng ở chợ. {name} còn lại bao nhiêu nghìn đồng?",
        "mul": "Một hộp có {a} cây bút chì. Trong {b} hộp có bao nhiêu cây bút chì?",
    },
    "zh": {
        "add": "{name}有{a}个苹果，又买了{b}个。{name}现在一共有多少个苹果？",
        "sub": "{name}带了{a}元去市场，花了{b}元。{name}还剩多少元？",
        "mul": "一个盒子里有{a}支铅笔。{b}个盒子里一共有多少支铅笔？",
    },
}

# given names per language (the ar / hi add templates are in the masculine; the ru sub template in the feminine)
NAMES: dict[str, tuple[str, ...]] = {
    "en": ("Tom", "Anna", "David", "Sarah", "James"),
    "ar": ("أحمد", "عمر", "خالد", "يوسف", "سامي"),
    "de": ("Lukas", "Anna", "Jonas", "Lea", "Felix"),
    "es": ("Carlos", "Lucía", "Miguel", "Sofía", "Pablo"),
    "fr": ("Louis", "Camille", "Hugo", "Léa", "Julien"),
    "hi": ("राहुल", "अमित", "विजय", "सुरेश", "रवि"),
    "id": ("Budi", "Siti", "Andi", "Dewi", "Rudi"),
    "it": ("Marco", "Giulia", "Luca", "Chiara", "Matteo"),
    "ja": ("田中", "佐藤", "鈴木", "高橋", "山本"),
    "ko": ("김민수", "이지영", "박서연", "최준호", "정하늘"),
    "pt": ("João", "Ana", "Pedro", "Beatriz", "Rafael"),
    "ru": ("Анна", "Мария", "Ольга", "Елена", "Наталья"),
    "tr": ("Ahmet", "Ayşe", "Mehmet", "Elif", "Emre"),
    "vi": ("Lan", "Minh", "Hùng", "Mai", "Tuấn"),
    "zh": ("小明", "小红", "李华", "王芳", "张伟"),
}


RANGES = {"add": ((11, 30), (2, 9)), "sub": ((11, 30), (2, 9)), "mul": ((11, 25), (3, 6))}


def split_of(kind: str, a: int, b: int) -> str:
    """The split a problem belongs to, fixed by its numbers alone: a third of every template's (a, b) pairs are
    evaluation problems, the rest training ones, so a training draw never repeats an evaluation problem (in any
    language, whatever the seeds)."""
    return "eval" if zlib.crc32(f"{kind}-{a}-{b}".encode()) % 3 == 0 else "train"


def _numbers(kind: str, rng: random.Random) -> tuple[int, int, int]:
    """(a, b, answer) of one problem (RANGES: small enough that a small model's answers are not all wrong)."""
    (a0, a1), (b0, b1) = RANGES[kind]
    a, b = rng.randint(a0, a1), rng.randint(b0, b1)
    return a, b, {"add": a + b, "sub": a - b, "mul": a * b}[kind]


def _fields(lang: str, name: str, a: int, b: int) -> dict:
    fields = {"name": name, "a": a, "b": b}
    if lang == "ru":
        for key, forms in (
            ("apples", ("яблоко", "яблока", "яблок")),
            ("roubles", ("рубль", "рубля", "рублей")),
            ("pencils", ("карандаш", "карандаша", "карандашей")),
        ):
            fields[f"{key}_a"], fields[f"{key}_b"] = _ru(a, *forms), _ru(b, *forms)
    return fields


def problem(lang: str, kind: str, name_index: int, a: int, b: int) -> str:
    """The problem text of template `kind` in `lang`."""
    names = NAMES[lang]
    return TEMPLATES[lang][kind].format(**_fields(lang, names[name_index % len(names)], a, b))


def asked(text: str, lang: str, reply_language: str | None = None) -> str:
    """A problem in `lang` with the answer convention's request (mlft.benchmarks.answers.instruction) after it."""
    return text + ("" if lang in ("zh", "ja") else " ") + instruction(lang, reply_language)


def _items(split: str, task: str, per_language: int, seed: int) -> list[dict]:
    """`per_language` problem specs per language: {"key", "lang", "kind", "name", "a", "b", "answer"}, every
    problem of `split` (split_of), none twice in a language (a key is unique across languages)."""
    pool = {
        k: sum(split_of(k, a, b) == split for a in range(r[0][0], r[0][1] + 1) for b in range(r[1][0], r[1][1] + 1))
        for k, r in RANGES.items()
    }
    need = -(-per_language // len(KINDS))  # the templates take turns: at most this many problems each
    if min(pool.values()) < need:
        raise ConfigError(f"per_language: {per_language} is more than the {split} split holds ({pool} per template)")
    out = []
    for lang in ALL:
        rng = random.Random(f"arithmetic/{split}-{task}/{seed}/{lang}")
        seen: set = set()
        while len(seen) < per_language:
            kind = KINDS[len(seen) % len(KINDS)]
            a, b, answer = _numbers(kind, rng)
            if split_of(kind, a, b) != split or (kind, a, b) in seen:
                continue
            seen.add((kind, a, b))
            out.append(
                {
                    "key": f"{split}{seed}-{lang}-{kind}-{a}-{b}",
                    "lang": lang,
                    "kind": kind,
                    "name": rng.randrange(len(NAMES[lang])),
                    "a": a,
                    "b": b,
                    "answer": answer,
                }
            )
    return out


def arithmetic_prompts(split: str = "eval", per_language: int = EVAL_PER_LANGUAGE, seed: int = EVAL_SEED) -> list[dict]:
    """Prompt-file rows {"id", "task", "source", "language", "prompt", "answer"[, "location", "phrasing"]}:
    `per_language` monolingual problems in each of the 15 languages, then `per_language` cross-lingual ones (English
    problem + a training-phrasing request) for each of the 14 non-English targets. Training draws skip the
    evaluation items' problems."""
    if split not in SPLITS:
        raise ConfigError(f"split: {split!r} is not one of {', '.join(SPLITS)}")
    if per_language < 1:
        raise ConfigError(f"per_language: must be >= 1, got {per_language}")
    rows = []
    for x in _items(split, "monolingual", per_language, seed):
        rows.append(
            {
                "id": f"monolingual/{SOURCE}/{x['lang']}/{x['key']}",
                "task": "monolingual",
                "source": SOURCE,
                "language": x["lang"],
                "prompt": asked(problem(x["lang"], x["kind"], x["name"], x["a"], x["b"]), x["lang"]),
                "answer": x["answer"],
            }
        )
    for x in _items(split, "crosslingual", per_language, seed):
        if x["lang"] == "en":
            continue
        english = asked(problem("en", x["kind"], x["name"], x["a"], x["b"]), "en", x["lang"])
        rows.append(
            {
                "id": f"crosslingual/{SOURCE}/{x['lang']}/{x['key']}",
                "task": "crosslingual",
                "source": SOURCE,
                "language": x["lang"],
                "prompt": training_request_prompt(english, "en", x["lang"], x["key"]),
                "answer": x["answer"],
            }
        )
    return rows


TRAIN_PER_LANGUAGE = 60  # the seed sets' problems per language (and task)


def seed_rows(task: str, lang: str) -> list[dict]:
    """The training seed sets' rows in `lang`: {"id", "prompt": [user turn], "task", "answer"}."""
    return [
        {"id": r["id"], "prompt": [{"role": "user", "content": r["prompt"]}], "task": task, "answer": r["answer"]}
        for r in _train_rows()
        if r["task"] == task and r["language"] == lang
    ]


@lru_cache(maxsize=1)
def _train_rows() -> tuple[dict, ...]:
    return tuple(arithmetic_prompts("train", TRAIN_PER_LANGUAGE, EVAL_SEED))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the prompt file to write (JSONL)")
    ap.add_argument("--per-language", type=int, default=EVAL_PER_LANGUAGE)
    ap.add_argument("--seed", type=int, default=EVAL_SEED)
    ap.add_argument("--split", choices=SPLITS, default="eval")
    args = ap.parse_args(argv)
    rows = arithmetic_prompts(args.split, args.per_language, args.seed)
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{args.out}: {len(rows)} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

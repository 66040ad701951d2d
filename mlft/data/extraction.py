"""Verifiable prompts the embedded model can answer: extractive questions over a short passage, in LCB's 15
languages, the answer a number the passage states (checked by code: mlft.benchmarks.extraction).

The arithmetic task (mlft.data.arithmetic) sits at its floor on SmolLM2-135M-Instruct (0 of 50 monolingual
problems), so it can show a collapse but hardly a cost. Here the model only has to find a fact: a passage of two
sentences per person (`people` of them), the bus first and the room second ("Anna takes bus 38. Anna lives in room
214."; a room number of three digits, a bus of two), a question about one person's room ("In which room does Anna
live?") and a request for the room number only. The reply answers when it states the asked room and none of the
passage's other numbers (the `distractors`: the bus, and other people's rooms and buses): an echo of the passage, or
of its start cut by the token limit, states the bus first and does not count; a reply that restates the room
sentence alone ("Anna lives in room 214.") does, as it picked the asked fact. Templates are written by hand in every
LCB language (one fact a sentence, so no joining grammar; room and bus numbers are labels, so no number agreement;
gendered verbs in the masculine for ar / hi, whose name lists are male: mlft.data.arithmetic.NAMES). Everything is
deterministic from a seed:

  monolingual   the passage and question in X, to be answered in X (15 languages)
  crosslingual  the English passage and question plus a request for a reply in X != en in mlft's TRAINING
                phrasings (mlft.data.phrasings: never LCB's eight templates)

No training mix draws from these templates (a test checks the file against LCB and every seed set with mlft's
decontamination code). The design (`people`, the bus and its place, the request for the number only) was picked by
measuring the base model on pilot prompts drawn with seed 1; the shipped seed-0 prompts were measured once, after
(measurements/extraction_base.py, docs/results/extraction_base.json with the designs tried in `earlier`).

    python -m mlft.data.extraction OUT.jsonl [--per-language 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from mlft.data.arithmetic import NAMES
from mlft.data.phrasings import training_request_prompt
from mlft.errors import ConfigError
from mlft.languages import LANGUAGES

SOURCE = "mlft_extraction"
ALL = tuple(sorted(LANGUAGES))
NON_ENGLISH = tuple(x for x in ALL if x != "en")
EVAL_PER_LANGUAGE = 10
EVAL_SEED = 0
PEOPLE = 1  # sentences in a passage (one person each): the asked one and PEOPLE - 1 others
NUMBERS = (100, 999)  # room numbers: three digits, so that no other number of a reply collides by chance
BUSES = (10, 99)  # each person's bus: two digits, a number of the passage that is not the answer

# (the bus sentence, the room sentence, the question) per language: {name}, {n} (room), {m} (bus). The bus comes
# first, so that an echo of the passage (or of its start, cut by the token limit) states the bus; the question ends
# with a request for the room number only, which turns stories into short answers (both picked on a pilot:
# docs/results/extraction_base.json, `earlier`)
TEMPLATES: dict[str, tuple[str, str, str]] = {
    "en": (
        "{name} takes bus {m}.",
        "{name} lives in room {n}.",
        "In which room does {name} live? Answer with the room number only.",
    ),
    "ar": (
        "يركب {name} الحافلة رقم {m}.",
        "يسكن {name} في الغرفة رقم {n}.",
        "في أي غرفة يسكن {name}؟ أجب برقم الغرفة فقط.",
    ),
    "de": (
        "{name} fährt mit dem Bus {m}.",
        "{name} wohnt in Zimmer {n}.",
        "In welchem Zimmer wohnt {name}? Antworte nur mit der Zimmernummer.",
    ),
    "es": (
        "{name} toma el autobús {m}.",
        "{name} vive en la habitación {n}.",
        "¿En qué habitación vive {name}? Responde solo con el número de la habitación.",
    ),
    "fr": (
        "{name} prend le bus {m}.",
        "{name} habite dans la chambre {n}.",
        "Dans quelle chambre habite {name} ? Réponds uniquement avec le numéro de la chambre.",
    ),
    "hi": (
        "{name} बस नंबर {m} से जाता है।",
        "{name} कमरा नंबर {n} में रहता है।",
        "{name} किस कमरे में रहता है? केवल कमरे के नंबर से उत्तर दो।",
    ),
    "id": (
        "{name} naik bus {m}.",
        "{name} tinggal di kamar {n}.",
        "{name} tinggal di kamar nomor berapa? Jawab hanya dengan nomor kamar.",
    ),
    "it": (
        "{name} prende l'autobus {m}.",
        "{name} abita nella stanza {n}.",
        "In quale stanza abita {name}? Rispondi solo con il numero della stanza.",
    ),
    "ja": (
        "{name}さんは{m}番のバスに乗ります。",
        "{name}さんは{n}号室に住んでいます。",
        "{name}さんは何号室に住んでいますか？部屋番号だけでお答えください。",
    ),
    "ko": (
        "{name} 씨는 {m}번 버스를 탑니다.",
        "{name} 씨는 {n}호에 삽니다.",
        "{name} 씨는 몇 호에 살고 있습니까? 호수만 숫자로 답하세요.",
    ),
    "pt": (
        "{name} pega o ônibus {m}.",
        "{name} mora no quarto {n}.",
        "Em que quarto mora {name}? Responda apenas com o número do quarto.",
    ),
    "ru": (
        "{name} ездит на автобусе {m}.",
        "{name} живёт в комнате {n}.",
        "В какой комнате живёт {name}? Ответьте только номером комнаты.",
    ),
    "tr": (
        "{name} {m} numaralı otobüse biniyor.",
        "{name} {n} numaralı odada kalıyor.",
        "{name} kaç numaralı odada kalıyor? Yalnızca oda numarasıyla cevap verin.",
    ),
    "vi": ("{name} đi xe buýt số {m}.", "{name} ở phòng {n}.", "{name} ở phòng số mấy? Chỉ trả lời bằng số phòng."),
    "zh": ("{name}坐{m}路公交车。", "{name}住在{n}号房间。", "{name}住在几号房间？请只回答房间号。"),
}
_SEP = {"ja": "", "zh": ""}  # sentences joined by a space, except in Japanese and Chinese


def passage(lang: str, people: list[tuple[str, int, int]], asked: int) -> str:
    """The passage (one sentence per (name, room, bus)) and the question about person `asked`'s room, in `lang`."""
    bus, room, question = TEMPLATES[lang]
    sep = _SEP.get(lang, " ")
    sentences = [s.format(name=name, n=n, m=m) for name, n, m in people for s in (bus, room)]
    return sep.join([*sentences, question.format(name=people[asked][0])])


def _item(lang: str, rng: random.Random, people: int, numbers: tuple[int, int]) -> dict:
    names = rng.sample(range(len(NAMES[lang])), people)
    values = rng.sample(range(numbers[0], numbers[1] + 1), people)
    buses = rng.sample(range(BUSES[0], BUSES[1] + 1), people)
    asked = rng.randrange(people)
    return {"names": names, "numbers": values, "buses": buses, "asked": asked}


def extraction_prompts(
    per_language: int = EVAL_PER_LANGUAGE,
    seed: int = EVAL_SEED,
    people: int = PEOPLE,
    numbers: tuple[int, int] = NUMBERS,
) -> list[dict]:
    """Prompt-file rows {"id", "task", "source", "language", "prompt", "answer", "distractors"}: `per_language`
    monolingual passages in each of the 15 languages, then `per_language` cross-lingual ones (the English passage
    + a training-phrasing request) for each of the 14 non-English targets. `answer` is the asked person's number,
    `distractors` the others' (a reply stating one of them does not answer)."""
    if per_language < 1:
        raise ConfigError(f"per_language: must be >= 1, got {per_language}")
    if not 1 <= people <= min(len(v) for v in NAMES.values()):
        raise ConfigError(f"people: must be in 1..{min(len(v) for v in NAMES.values())}, got {people}")
    if numbers[1] - numbers[0] + 1 < people:
        raise ConfigError(f"numbers: {numbers} holds fewer than {people} numbers")
    rows = []
    for task in ("monolingual", "crosslingual"):
        for lang in ALL:
            if task == "crosslingual" and lang == "en":
                continue
            text_lang = lang if task == "monolingual" else "en"
            rng = random.Random(f"extraction/{task}/{seed}/{people}/{numbers}/{lang}")
            for i in range(per_language):
                x = _item(text_lang, rng, people, numbers)
                ppl = [(NAMES[text_lang][k], n, m) for k, n, m in zip(x["names"], x["numbers"], x["buses"])]
                text = passage(text_lang, ppl, x["asked"])
                key = f"s{seed}-p{people}-{lang}-{i}"
                rows.append(
                    {
                        "id": f"{task}/{SOURCE}/{lang}/{key}",
                        "task": task,
                        "source": SOURCE,
                        "language": lang,
                        "prompt": text if task == "monolingual" else training_request_prompt(text, "en", lang, key),
                        "answer": x["numbers"][x["asked"]],
                        "distractors": [n for j, n in enumerate(x["numbers"]) if j != x["asked"]] + x["buses"],
                    }
                )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the prompt file to write (JSONL)")
    ap.add_argument("--per-language", type=int, default=EVAL_PER_LANGUAGE)
    ap.add_argument("--seed", type=int, default=EVAL_SEED)
    ap.add_argument("--people", type=int, default=PEOPLE)
    args = ap.parse_args(argv)
    rows = extraction_prompts(args.per_language, args.seed, args.people)
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{args.out}: {len(rows)} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

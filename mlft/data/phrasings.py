"""Reply-language requests for training ("Korean only, please."), held out from LCB's own eight phrasings.

LCB's cross-lingual prompts carry one of exactly eight request templates (LCB_TEMPLATES: the `phrasing`
column of its test sets), filled with an English language name, at the start, middle or end of the prompt.
mlft trains on other phrasings, so an LCB gain after training means the model follows a language request,
not a memorised string.

Disjointness rule (checked by `check_disjoint` when this module is imported, so an overlapping phrasing added
later fails loudly): fill a training phrasing with a language name (every name of its own language's table
and every English name); turn it into units (mlft.data.text.units: NFKC, case-folded, punctuation dropped,
one unit per CJK character). The phrasing overlaps LCB when those units contain, as a contiguous run, the
units of an LCB template filled with a language name (any name of any table). The bare template
"in {language}" makes this strict: "... in Korean" anywhere overlaps, so no training phrasing puts a
language name right after "in", "use" or "using" ("The reply must be in the Korean language." is disjoint).

`PhrasingIndex` finds the LCB templates (with the English names, as LCB writes them) in any training row:
the mix's decontamination report counts them per source and language.
"""

from __future__ import annotations

import random

from mlft.data.normalize import prompt_turns
from mlft.data.text import units
from mlft.errors import ConfigError
from mlft.languages import LANGUAGES

# LCB's eight request templates, verbatim from the `phrasing` column of test_sets/crosslingual/*/*.csv.
LCB_TEMPLATES = (
    "write in {language_requested}",
    "respond in {language_requested}",
    "reply in {language_requested}",
    "in {language_requested}",
    "use {language_requested}",
    "answer in {language_requested}",
    "written in {language_requested}",
    "using {language_requested}",
)

# Language names as each language's phrasings use them (the grammatical form that fits the slot).
NAMES: dict[str, dict[str, str]] = {
    "en": dict(LANGUAGES),
    "ar": {
        "ar": "العربية",
        "de": "الألمانية",
        "en": "الإنجليزية",
        "es": "الإسبانية",
        "fr": "الفرنسية",
        "hi": "الهندية",
        "id": "الإندونيسية",
        "it": "الإيطالية",
        "ja": "اليابانية",
        "ko": "الكورية",
        "pt": "البرتغالية",
        "ru": "الروسية",
        "tr": "التركية",
        "vi": "الفيتنامية",
        "zh": "الصينية",
    },
    "de": {
        "ar": "Arabisch",
        "de": "Deutsch",
        "en": "Englisch",
        "es": "Spanisch",
        "fr": "Französisch",
        "hi": "Hindi",
        "id": "Indonesisch",
        "it": "Italienisch",
        "ja": "Japanisch",
        "ko": "Koreanisch",
        "pt": "Portugiesisch",
        "ru": "Russisch",
        "tr": "Türkisch",
        "vi": "Vietnamesisch",
        "zh": "Chinesisch",
    },
    "es": {
        "ar": "árabe",
        "de": "alemán",
        "en": "inglés",
        "es": "español",
        "fr": "francés",
        "hi": "hindi",
        "id": "indonesio",
        "it": "italiano",
        "ja": "japonés",
        "ko": "coreano",
        "pt": "portugués",
        "ru": "ruso",
        "tr": "turco",
        "vi": "vietnamita",
        "zh": "chino",
    },
    "fr": {
        "ar": "arabe",
        "de": "allemand",
        "en": "anglais",
        "es": "espagnol",
        "fr": "français",
        "hi": "hindi",
        "id": "indonésien",
        "it": "italien",
        "ja": "japonais",
        "ko": "coréen",
        "pt": "portugais",
        "ru": "russe",
        "tr": "turc",
        "vi": "vietnamien",
        "zh": "chinois",
    },
    "hi": {
        "ar": "अरबी",
        "de": "जर्मन",
        "en": "अंग्रेज़ी",
        "es": "स्पेनिश",
        "fr": "फ़्रेंच",
        "hi": "हिंदी",
        "id": "इंडोनेशियाई",
        "it": "इतालवी",
        "ja": "जापानी",
        "ko": "कोरियाई",
        "pt": "पुर्तगाली",
        "ru": "रूसी",
        "tr": "तुर्की",
        "vi": "वियतनामी",
        "zh": "चीनी",
    },
    "id": {
        "ar": "bahasa Arab",
        "de": "bahasa Jerman",
        "en": "bahasa Inggris",
        "es": "bahasa Spanyol",
        "fr": "bahasa Prancis",
        "hi": "bahasa Hindi",
        "id": "bahasa Indonesia",
        "it": "bahasa Italia",
        "ja": "bahasa Jepang",
        "ko": "bahasa Korea",
        "pt": "bahasa Portugis",
        "ru": "bahasa Rusia",
        "tr": "bahasa Turki",
        "vi": "bahasa Vietnam",
        "zh": "bahasa Mandarin",
    },
    "it": {
        "ar": "araba",
        "de": "tedesca",
        "en": "inglese",
        "es": "spagnola",
        "fr": "francese",
        "hi": "hindi",
        "id": "indonesiana",
        "it": "italiana",
        "ja": "giapponese",
        "ko": "coreana",
        "pt": "portoghese",
        "ru": "russa",
        "tr": "turca",
        "vi": "vietnamita",
        "zh": "cinese",
    },
    "ja": {
        "ar": "アラビア語",
        "de": "ドイツ語",
        "en": "英語",
        "es": "スペイン語",
        "fr": "フランス語",
        "hi": "ヒンディー語",
        "id": "インドネシア語",
        "it": "イタリア語",
        "ja": "日本語",
        "ko": "韓国語",
        "pt": "ポルトガル語",
        "ru": "ロシア語",
        "tr": "トルコ語",
        "vi": "ベトナム語",
        "zh": "中国語",
    },
    "ko": {
        "ar": "아랍어",
        "de": "독일어",
        "en": "영어",
        "es": "스페인어",
        "fr": "프랑스어",
        "hi": "힌디어",
        "id": "인도네시아어",
        "it": "이탈리아어",
        "ja": "일본어",
        "ko": "한국어",
        "pt": "포르투갈어",
        "ru": "러시아어",
        "tr": "터키어",
        "vi": "베트남어",
        "zh": "중국어",
    },
    "pt": {
        "ar": "árabe",
        "de": "alemão",
        "en": "inglês",
        "es": "espanhol",
        "fr": "francês",
        "hi": "hindi",
        "id": "indonésio",
        "it": "italiano",
        "ja": "japonês",
        "ko": "coreano",
        "pt": "português",
        "ru": "russo",
        "tr": "turco",
        "vi": "vietnamita",
        "zh": "chinês",
    },
    "ru": {
        "ar": "арабском",
        "de": "немецком",
        "en": "английском",
        "es": "испанском",
        "fr": "французском",
        "hi": "хинди",
        "id": "индонезийском",
        "it": "итальянском",
        "ja": "японском",
        "ko": "корейском",
        "pt": "португальском",
        "ru": "русском",
        "tr": "турецком",
        "vi": "вьетнамском",
        "zh": "китайском",
    },
    "tr": {
        "ar": "Arapça",
        "de": "Almanca",
        "en": "İngilizce",
        "es": "İspanyolca",
        "fr": "Fransızca",
        "hi": "Hintçe",
        "id": "Endonezce",
        "it": "İtalyanca",
        "ja": "Japonca",
        "ko": "Korece",
        "pt": "Portekizce",
        "ru": "Rusça",
        "tr": "Türkçe",
        "vi": "Vietnamca",
        "zh": "Çince",
    },
    "vi": {
        "ar": "tiếng Ả Rập",
        "de": "tiếng Đức",
        "en": "tiếng Anh",
        "es": "tiếng Tây Ban Nha",
        "fr": "tiếng Pháp",
        "hi": "tiếng Hindi",
        "id": "tiếng Indonesia",
        "it": "tiếng Ý",
        "ja": "tiếng Nhật",
        "ko": "tiếng Hàn",
        "pt": "tiếng Bồ Đào Nha",
        "ru": "tiếng Nga",
        "tr": "tiếng Thổ Nhĩ Kỳ",
        "vi": "tiếng Việt",
        "zh": "tiếng Trung",
    },
    "zh": {
        "ar": "阿拉伯语",
        "de": "德语",
        "en": "英语",
        "es": "西班牙语",
        "fr": "法语",
        "hi": "印地语",
        "id": "印度尼西亚语",
        "it": "意大利语",
        "ja": "日语",
        "ko": "韩语",
        "pt": "葡萄牙语",
        "ru": "俄语",
        "tr": "土耳其语",
        "vi": "越南语",
        "zh": "中文",
    },
}

# Training phrasings per instruction language ({language}: the requested language, named in that language).
PHRASINGS: dict[str, tuple[str, ...]] = {
    "en": (
        "{language} only, please.",
        "The reply must be in the {language} language.",
        "Make sure the output language is {language}.",
        "Language of the answer: {language}.",
        "Please choose {language} as the language of your reply.",
        "Switch to {language} for the answer.",
        "My preferred language for the answer is {language}.",
        "Only {language} text in your response, please.",
        "Your response language should be {language}.",
        "Please stick to {language} for the whole response.",
    ),
    "ar": ("أجب باللغة {language} من فضلك.", "يجب أن تكون الإجابة باللغة {language}.", "لغة الإجابة: {language}."),
    "de": (
        "Bitte antworte auf {language}.",
        "Die Antwort soll komplett auf {language} sein.",
        "Sprache der Antwort: {language}.",
    ),
    "es": (
        "Responde en {language}, por favor.",
        "La respuesta tiene que estar escrita en {language}.",
        "Idioma de la respuesta: {language}.",
    ),
    "fr": (
        "Réponds en {language}, s'il te plaît.",
        "La réponse doit être rédigée en {language}.",
        "Langue de la réponse : {language}.",
    ),
    "hi": ("कृपया {language} में जवाब दें।", "उत्तर पूरी तरह {language} भाषा में होना चाहिए।", "जवाब की भाषा: {language}।"),
    "id": (
        "Tolong jawab dalam {language}.",
        "Jawabannya harus ditulis dalam {language}.",
        "Gunakan {language} untuk jawabannya.",
    ),
    "it": (
        "Rispondi in lingua {language}, per favore.",
        "La risposta deve essere scritta in lingua {language}.",
        "Usa la lingua {language} per rispondere.",
    ),
    "ja": (
        "{language}で答えてください。",
        "回答は{language}でお願いします。",
        "返事はすべて{language}で書いてください。",
    ),
    "ko": ("{language}로 답해 주세요.", "답변은 {language}로 작성해 주세요.", "응답 언어는 {language}여야 합니다."),
    "pt": (
        "Responda em {language}, por favor.",
        "A resposta deve ser escrita em {language}.",
        "Idioma da resposta: {language}.",
    ),
    "ru": ("Пожалуйста, ответь на {language}.", "Ответ нужен на {language}.", "Напиши ответ целиком на {language}."),
    "tr": ("Lütfen {language} cevap ver.", "Cevabın dili {language} olsun.", "Yanıtı tamamen {language} yaz."),
    "vi": (
        "Hãy trả lời bằng {language}.",
        "Câu trả lời phải được viết bằng {language}.",
        "Ngôn ngữ của câu trả lời: {language}.",
    ),
    "zh": ("请用{language}回答。", "回答必须使用{language}。", "回答的语言：{language}。"),
}

# A short second sentence after the request, so the request can sit in the middle of the prompt.
FOLLOWUPS: dict[str, tuple[str, ...]] = {
    "en": ("Keep it short.", "A few sentences are enough."),
    "ar": ("اجعلها قصيرة.", "تكفي بضع جمل."),
    "de": ("Fasse dich kurz.", "Ein paar Sätze reichen."),
    "es": ("Sé breve.", "Bastan unas pocas frases."),
    "fr": ("Sois bref.", "Quelques phrases suffisent."),
    "hi": ("जवाब छोटा रखें।", "कुछ वाक्य काफ़ी हैं।"),
    "id": ("Buat singkat saja.", "Beberapa kalimat sudah cukup."),
    "it": ("Sii breve.", "Bastano poche frasi."),
    "ja": ("短めにお願いします。", "数文で十分です。"),
    "ko": ("짧게 답해 주세요.", "몇 문장이면 충분합니다."),
    "pt": ("Seja breve.", "Algumas frases bastam."),
    "ru": ("Будь краток.", "Хватит нескольких предложений."),
    "tr": ("Kısa tut.", "Birkaç cümle yeterli."),
    "vi": ("Hãy viết ngắn gọn.", "Vài câu là đủ."),
    "zh": ("简短一些。", "几句话就够了。"),
}
LOCATIONS = ("start", "middle", "end")
_NO_SPACE = {"ja", "zh"}  # sentences follow each other without a space


def _filled(template: str, names) -> set[tuple[str, ...]]:
    return {tuple(units(template.replace("{language_requested}", name))) for name in names}


class PhrasingIndex:
    """The LCB templates filled with language names, as unit tuples; `find` names the template in a text."""

    def __init__(self, names=None):
        names = list(names) if names is not None else list(LANGUAGES.values())
        self.grams: dict[tuple[str, ...], str] = {}
        for template in LCB_TEMPLATES:
            for gram in _filled(template, names):
                self.grams.setdefault(gram, template)
        self.lengths = sorted({len(g) for g in self.grams}, reverse=True)  # longest template first

    def find(self, text: str) -> str | None:
        toks = units(text)
        for n in self.lengths:
            for i in range(len(toks) - n + 1):
                hit = self.grams.get(tuple(toks[i : i + n]))
                if hit:
                    return hit
        return None

    def match(self, example: dict) -> str | None:
        """The first LCB template found in a user turn of a normalised example, else None."""

        for turn in prompt_turns(example):
            hit = self.find(turn)
            if hit:
                return hit
        return None


def check_disjoint(phrasings: dict[str, tuple[str, ...]] = PHRASINGS, names: dict = NAMES) -> None:
    """Raise a ConfigError naming the first phrasing that contains an LCB template (the rule above)."""
    every_name = {n for table in names.values() for n in table.values()}
    index = PhrasingIndex(every_name)
    for lang, group in phrasings.items():
        if lang not in names:
            raise ConfigError(f"{__name__}.PHRASINGS[{lang!r}]: no language-name table NAMES[{lang!r}]")
        for phrasing in group:
            if "{language}" not in phrasing:
                raise ConfigError(f"{__name__}.PHRASINGS[{lang!r}]: {phrasing!r} has no {{language}} slot")
            for name in dict.fromkeys([*names[lang].values(), *LANGUAGES.values()]):  # own names first
                hit = index.find(phrasing.format(language=name))
                if hit:
                    raise ConfigError(
                        f"{__name__}.PHRASINGS[{lang!r}]: {phrasing!r} filled with {name!r} contains LCB's "
                        f"template {hit!r}; training phrasings must be disjoint from LCB's (see the module doc)"
                    )


def request(instruction_language: str, target: str, rng: random.Random) -> str:
    """A request, written in `instruction_language`, for a reply in `target`."""
    return rng.choice(PHRASINGS[instruction_language]).format(language=NAMES[instruction_language][target])


def place(
    instruction: str, request_text: str, location: str, language: str, rng: random.Random, context: str | None = None
) -> str:
    """`instruction` with the request before it (start), after it (end), or in the middle: between the
    instruction and its `context` (an input text), else before a short follow-up sentence. Sentences are
    joined by a space, a line break or (ja/zh) nothing; `context` is set off by a blank line."""
    sep = "" if language in _NO_SPACE else " "
    if rng.random() < 0.25:
        sep = "\n"
    body = f"{instruction}\n\n{context}" if context else instruction
    if location == "start":
        return f"{request_text}{sep}{body}"
    if location == "end":
        return body + ("\n\n" if context else sep) + request_text
    if context:
        return f"{instruction}{sep}{request_text}\n\n{context}"
    return f"{instruction}{sep}{request_text}{sep}{rng.choice(FOLLOWUPS[language])}"


def training_request_prompt(
    instruction: str, instruction_language: str, target: str, key: str, context: str | None = None
) -> str:
    """`instruction` (in `instruction_language`, with an optional input `context`) plus a training request
    for a reply in `target`, at a place seeded by `key`."""
    rng = random.Random(f"crosslingual/{key}/{instruction_language}/{target}")
    text = request(instruction_language, target, rng)
    return place(instruction, text, rng.choice(LOCATIONS), instruction_language, rng, context)


check_disjoint()

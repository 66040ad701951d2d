"""Multisense prompt templates (Ohmer, Bruni & Hupkes, 2023): task instructions per language, the prompt
layout, and the requests that make a model translate the data and the instruction itself.

Strings are the paper's (authors' repository at 1f0f884: `utils/task_config.py`, `utils/load_task.py`,
`translate.py`); `../shared/multisense/reference/prompts.json` holds the same values and a test checks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SYSTEM_MESSAGE = "You are a helpful assistant."
LANGUAGES = ("en", "de", "zh")


@dataclass(frozen=True)
class Instruction:
    """One wording of a task: prompt = prefix + ` {word} 1: "s1"` + ` {word} 2: "s2"` + suffix."""

    prefix: str
    suffix: str
    sentence_word: str
    label_map: dict[str, int] = field(hash=False)  # answer word (lowercase) -> gold label, in parser order

    @property
    def answers(self) -> list[str]:
        return list(self.label_map)


@dataclass(frozen=True)
class Task:
    name: str
    sentence_keys: tuple[str, str]
    labels: tuple[int, ...]
    instructions: dict[str, Instruction] = field(hash=False)  # original wording per language


_XNLI_MAP = {"a": 0, "b": 2, "c": 1}  # (A) entails, (B) contradicts, (C) neither; gold 0/1/2 = ent/neu/con

TASKS: dict[str, Task] = {
    "pawsx": Task(
        "pawsx",
        ("sentence1", "sentence2"),
        (0, 1),
        {
            "en": Instruction(
                "Do the following sentences have the same meaning?",
                ' Please answer with "yes" or "no".',
                "Sentence",
                {"no": 0, "yes": 1},
            ),
            "de": Instruction(
                "Haben die folgenden Sätze die gleiche Bedeutung?",
                ' Bitte antworte mit "ja" oder "nein".',
                "Satz",
                {"nein": 0, "ja": 1},
            ),
            "zh": Instruction("下面的句子有着相同的含义吗？", " 请用“是”或者“否”回答。", "句子", {"否": 0, "是": 1}),
        },
    ),
    "xnli": Task(
        "xnli",
        ("premise", "hypothesis"),
        (0, 1, 2),
        {
            "en": Instruction(
                "Given the following sentence pair, which one of the following is true: (A) the first "
                "sentence entails the second sentence, (B) the first sentence contradicts the second "
                "sentence, or (C) neither of the two?",
                ' Please answer with "A", "B", or "C".',
                "Sentence",
                _XNLI_MAP,
            ),
            "de": Instruction(
                "Welche dieser Aussagen trifft auf das folgende Satzpaar zu: (A) der erste Satz "
                "impliziert den zweiten Satz, (B) der erste Satz widerspricht dem zweiten Satz, oder "
                "(C) keines von beiden?",
                ' Bitte antworte mit "A", "B" oder "C".',
                "Satz",
                _XNLI_MAP,
            ),
            "zh": Instruction(
                "对于给出的一对句子，以下哪一个选项是正确的：（A）第一个句子涵盖了第二个句子 （B）第一个句子与第二个句子矛盾 "  # noqa: E501
                "（C）两者都不？",
                " 请用“A”、“B”或“C”来回答。",
                "句子",
                _XNLI_MAP,
            ),
        },
    ),
}

# Other answer sets a translated instruction may ask for (the paper's zh_from_en PAWS-X wording).
ALTERNATIVE_ANSWERS: dict[tuple[str, str], list[dict[str, int]]] = {("pawsx", "zh"): [{"不是": 0, "是": 1}]}

# The translation request, in the *source* language (translate.py): request + text.
_TRANSLATE_INTO = {
    "en": ("Please translate the following text into {name}: \n", {"de": "German", "zh": "Chinese", "en": "English"}),
    "de": (
        "Bitte übersetze den folgenden Text ins {name}: \n",
        {"en": "Englische", "zh": "Chinesische", "de": "Deutsche"},
    ),
    "zh": ("请将下面的文字翻译成{name}: \n", {"en": "英语", "de": "德语", "zh": "中文"}),
}


def build_prompt(instruction: Instruction, sentences: tuple[str, str] | list[str]) -> str:
    parts = [instruction.prefix]
    for i, text in enumerate(sentences, start=1):
        parts.append(f' {instruction.sentence_word} {i}: "{text}"')
    parts.append(instruction.suffix)
    return "".join(parts)


def translation_request(source: str, target: str, text: str) -> str:
    """What the model is asked in order to translate one input sentence (text unquoted, as the paper)."""
    template, names = _TRANSLATE_INTO[source]
    return template.format(name=names[target]) + text


def instruction_piece_request(source: str, target: str, piece: str) -> str:
    """What the model is asked in order to translate one instruction piece (prefix, suffix or sentence word)."""
    template, names = _TRANSLATE_INTO[source]
    return template.format(name=names[target]) + '"' + piece + '"'


def chat(user_text: str) -> list[dict]:
    """The paper's message list: fixed system message, one user turn."""
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": user_text}]


_QUOTE_PAIRS = (('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("„", "“"), ("「", "」"))


def strip_quotes(text: str) -> str:
    """The translation in a reply: its first non-empty line (small models append explanations), without
    surrounding whitespace and up to two layers of matching surrounding quotes."""
    text = next((line for line in text.strip().splitlines() if line.strip()), "").strip()
    for _ in range(2):
        for left, right in _QUOTE_PAIRS:
            if len(text) >= 2 and text.startswith(left) and text.endswith(right):
                text = text[len(left) : -len(right)].strip()
                break
    return text


def translated_instruction(task: str, source: str, target: str, prefix: str, suffix: str, word: str) -> Instruction:
    """An instruction the model translated itself (`{target}_from_{source}`).

    Answers are read with the target language's answer words; where the translated suffix asks for another
    accepted set (Chinese 不是/是 instead of 否/是, as in the paper's zh_from_en PAWS-X run) that set is used.
    """
    base = TASKS[task].instructions[target]
    suffix = strip_quotes(suffix)
    label_map = dict(base.label_map)
    for alternative in ALTERNATIVE_ANSWERS.get((task, target), ()):
        if all(word in suffix for word in alternative):
            label_map = dict(alternative)
    return Instruction(
        strip_quotes(prefix), " " + suffix if suffix else "", strip_quotes(word) or base.sentence_word, label_map
    )

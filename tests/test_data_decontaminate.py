"""Decontamination: LCB test prompts (exact, near-copies via n-grams, char n-grams for zh) are dropped and counted."""

import json

import pytest
from data_helpers import lcb_override, write_jsonl, write_mix

from mlft.benchmarks.lcb.data import load_prompts
from mlft.data.decontaminate import LcbIndex
from mlft.data.mix import build_mix, load_mix
from mlft.data.seed import SEED_SETS
from mlft.data.text import units
from mlft.errors import DataError

CLEAN = [
    (
        "en",
        "How do I keep basil fresh in the kitchen?",
        "Put the stems in a glass of water and keep it on the counter.",
    ),
    (
        "en",
        "What is a good name for a small orange cat?",
        "Names like Pumpkin, Ginger or Marmalade suit an orange cat well.",
    ),
    (
        "en",
        "Suggest a quick stretch for tired shoulders.",
        "Roll your shoulders backwards slowly ten times, then forwards ten times.",
    ),
    (
        "en",
        "How do I remove a coffee stain from a shirt?",
        "Rinse it with cold water, rub in a little soap and wash it as usual.",
    ),
    ("zh", "怎样让米饭煮得更香？", "淘米后先浸泡二十分钟，再按一比一点二的比例加水煮，米饭会更香。"),
    ("zh", "周末可以做什么放松一下？", "可以去公园散步、读一本好书，或者和朋友一起做饭聊天。"),
]


@pytest.fixture(scope="module")
def lcb(shared):
    prompts = load_prompts(path=shared / "lcb" / "test_sets.zip")
    return {p.id: p for p in prompts}


def _contaminated_rows(lcb):
    en = lcb["monolingual/aya_human_annotated/en/9"].prompt
    zh = lcb["monolingual/aya_human_annotated/zh/5"].prompt
    words = en.split()
    near_copy = "Quick question for my history class: " + " ".join(words[:20]).upper() + "?? Thanks a lot!"
    return [
        ("en", en, "An answer copied from somewhere that would teach the test set."),  # exact
        (
            "en",
            "  " + en.lower().replace(",", " ,") + "  ",
            "Same prompt, different case/punctuation.",
        ),  # exact after normalising
        ("en", near_copy, "A near copy sharing a long run of words with an LCB prompt."),  # 13-gram
        (
            "zh",
            "老师布置的作业：" + zh.split("问题：")[-1].strip() + "请详细说明。",
            "一个包含测试题的中文提示。",
        ),  # 13 characters
    ]


def _mix(tmp_path, rows, total, reuse=False):
    data = [{"q": q, "a": a, "lang": lang} for lang, q, a in rows]
    write_jsonl(tmp_path / "rows.jsonl", data)
    return write_mix(
        tmp_path,
        {
            "kind": "sft",
            "total": total,
            "seed": 1,
            "sources": [
                {
                    "name": "local",
                    "type": "local",
                    "path": "rows.jsonl",
                    "format": "instruction",
                    "allow_replacement": reuse,
                    "columns": {"prompt": "q", "response": "a"},
                    "language_column": "lang",
                    "share": 1.0,
                }
            ],
        },
    )


def test_injected_lcb_prompts_are_dropped_and_counted(tmp_path, shared, lcb):
    rows = CLEAN + _contaminated_rows(lcb)
    # One more row than the clean ones, with reuse: the walk inspects every row, then reuses a clean one.
    ds = build_mix(
        load_mix(_mix(tmp_path, rows, len(CLEAN) + 1, reuse=True), [lcb_override(shared)]),
        tmp_path / "run",
        progress=False,
    )
    assert sorted({m[0]["content"] for m in ds["messages"]}) == sorted(q for _, q, _ in CLEAN)
    report = json.loads((tmp_path / "run" / "mix" / "decontamination.json").read_text())
    assert report["lcb_prompts"] == len(lcb) == 6586
    assert report["inspected"] == len(rows)
    assert report["dropped"] == {"exact": 2, "ngram": 2, "phrasing": 0, "total": 4}
    assert report["by_source"]["local"]["zh"] == {"inspected": 3, "exact": 0, "ngram": 1, "phrasing": 0}
    hits = {e["id"]: (e["reason"], e["lcb_id"]) for e in report["examples"]}
    assert hits["local:6"] == ("exact", "monolingual/aya_human_annotated/en/9")
    assert hits["local:8"] == ("ngram", "monolingual/aya_human_annotated/en/9")
    assert hits["local:9"] == ("ngram", "monolingual/aya_human_annotated/zh/5")


def test_dropped_rows_make_a_cell_too_small(tmp_path, shared, lcb):
    rows = CLEAN + _contaminated_rows(lcb)
    mix = load_mix(_mix(tmp_path, rows, len(CLEAN) + 1), [lcb_override(shared)])
    with pytest.raises(DataError, match=r"7 rows needed, only 6 available \(10 rows, 0 malformed, 4 matching LCB"):
        build_mix(mix, tmp_path / "run", progress=False)


def test_disabled_keeps_everything(tmp_path, lcb):
    rows = CLEAN + _contaminated_rows(lcb)
    mix = load_mix(_mix(tmp_path, rows, len(rows)), ["decontaminate.enabled=false"])
    assert len(build_mix(mix, tmp_path / "run", progress=False)) == len(rows)


def test_short_overlap_is_not_contamination(lcb):
    index = LcbIndex(list(lcb.values()), 13)
    en = units(lcb["monolingual/aya_human_annotated/en/9"].prompt)  # "Sri Lanka's" is 3 units
    twelve = {"messages": [{"role": "user", "content": "Tell me: " + " ".join(en[:12]) + " today."}]}
    thirteen = {"messages": [{"role": "user", "content": "Tell me: " + " ".join(en[:13]) + " today."}]}
    assert index.match(twelve) is None
    assert index.match(thirteen) == ("ngram", "monolingual/aya_human_annotated/en/9")
    reply_only = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " ".join(en)}]}
    assert index.match(reply_only) is None  # only the prompt (user turns) is compared


def test_seed_data_does_not_overlap_lcb(lcb):
    index = LcbIndex(list(lcb.values()), 13)
    for name, seed_set in SEED_SETS.items():
        for lang in seed_set.languages:
            for row in seed_set.rows(lang):
                assert index.match(row) is None, (name, lang, row["id"])


def test_units_by_regex_are_the_character_loops_units(lcb):
    """`units` (one regex, Basic Multilingual Plane or not) gives exactly the units of its definition, the character
    loop: on LCB's prompts of every language and on random text from the first three planes (marks, digits, astral
    letters, emoji, CJK extensions)."""
    import random

    from mlft.data.text import _units_by_char

    prompts = [p.prompt for p in list(lcb.values())[::13]]
    assert {p.language for p in list(lcb.values())[::13]} >= {"ar", "hi", "ja", "ko", "ru", "zh", "en"}
    rng = random.Random(0)
    chars = [chr(rng.randrange(0x30000)) for _ in range(60000)]
    text = "".join(c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF)
    pieces = [text[i : i + 300] for i in range(0, len(text), 300)]
    assert sum(max(p) > "\uffff" for p in pieces) > 50 and sum(max(p) <= "\uffff" for p in pieces) == 0
    bmp = [p.translate({cp: None for cp in map(ord, p) if cp > 0xFFFF}) for p in pieces]
    for text in [*prompts, *pieces, *bmp, "", "न्यूयॉर्क में 3½ दिन", "日本語とカタカナ、한국어 𠀋𠀍 😀 a_b"]:
        assert units(text) == _units_by_char(text), text[:80]

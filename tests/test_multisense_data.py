"""Multisense test sets, prompt templates and bad input."""

import json

import pytest

from mlft.benchmarks.multisense import prompts
from mlft.benchmarks.multisense.data import load_items, read_run
from mlft.errors import ConfigError, DataError


def test_templates_equal_the_reference(shared):
    ref = json.loads((shared / "multisense/reference/prompts.json").read_text(encoding="utf-8"))
    assert ref["system_message"] == prompts.SYSTEM_MESSAGE
    for task, spec in prompts.TASKS.items():
        assert list(ref["tasks"][task]["sentence_keys"]) == list(spec.sentence_keys)
        for lang, ins in spec.instructions.items():
            want = ref["tasks"][task]["instructions"][lang]
            assert (ins.prefix, ins.suffix, ins.sentence_word, ins.label_map) == (
                want["prefix"],
                want["suffix"],
                want["sentence_word"],
                want["label_map"],
            )
            assert list(ins.label_map) == list(want["label_map"])  # parser order
    for src, targets in ref["data_translation_prompt"].items():
        if src == "format":
            continue
        for tgt, request in targets.items():
            assert prompts.translation_request(src, tgt, "X") == request + "X"


def test_translated_instruction_reproduces_the_papers_zh_wording(shared):
    ref = json.loads((shared / "multisense/reference/prompts.json").read_text(encoding="utf-8"))
    want = ref["tasks"]["pawsx"]["instructions"]["zh_from_en-translation"]
    raw = want["raw_model_translation_of_prefix_suffix_word"]
    ins = prompts.translated_instruction("pawsx", "en", "zh", *raw)
    assert (ins.prefix, ins.suffix, ins.sentence_word, ins.label_map) == (
        want["prefix"],
        want["suffix"],
        want["sentence_word"],
        want["label_map"],
    )
    want = ref["tasks"]["xnli"]["instructions"]["de_from_en-translation"]
    ins = prompts.translated_instruction("xnli", "en", "de", *want["raw_model_translation_of_prefix_suffix_word"])
    assert (ins.prefix, ins.suffix, ins.sentence_word) == (want["prefix"], want["suffix"], want["sentence_word"])


def test_prompt_matches_a_stored_translation_run(shared):
    """The X condition: translated German sentences inside the original English instruction."""
    rows = [
        json.loads(x)
        for x in (shared / "multisense/reference/pawsx/en_to_de/translations.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()[:1]
    ]
    text = prompts.build_prompt(prompts.TASKS["pawsx"].instructions["en"], (rows[0]["mt_sentence1"], "b"))
    assert text.startswith('Do the following sentences have the same meaning? Sentence 1: "Die Ausnahme')
    assert text.endswith(' Sentence 2: "b" Please answer with "yes" or "no".')


def test_load_items_shared(shared):
    items = {lang: load_items("pawsx", lang, shared / "multisense") for lang in ("en", "de", "zh")}
    assert [len(v) for v in items.values()] == [2000, 2000, 2000]
    assert sum(i.label for i in items["en"]) == 907
    assert [i.id for i in items["en"]] == [i.id for i in items["zh"]]
    # quoted fields with doubled inner quotes are read, not split by hand
    assert any('"' in s for i in items["de"] for s in i.sentences)
    xnli = load_items("xnli", "zh", shared / "multisense")
    assert len(xnli) == 5010 and xnli[0].label == 2 and xnli[0].sentences[1] == "我还没有和他再次谈论。"


def test_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="unknown multisense task 'pawx'.*did you mean 'pawsx'"):
        load_items("pawx", "en", tmp_path)
    with pytest.raises(ConfigError, match="unknown multisense language 'fr'"):
        load_items("xnli", "fr", tmp_path)
    with pytest.raises(DataError, match=r"pawsx/test-en.tsv: multisense test file not found"):
        load_items("pawsx", "en", tmp_path)
    (tmp_path / "pawsx").mkdir()
    f = tmp_path / "pawsx" / "test-de.tsv"
    f.write_text("id\tsentence1\tsentence2\tlabel\n1\ta\tb\t1\n2\ta\tb\tja\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test-de.tsv, line 3: label 'ja' is not an integer"):
        load_items("pawsx", "de", tmp_path)
    f.write_text("id\tsentence1\tsentence2\tlabel\n1\ta\tb\t7\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2: label 7 is not one of \[0, 1\]"):
        load_items("pawsx", "de", tmp_path)
    f.write_text("id\tsentence1\tlabel\n1\ta\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match="missing column.*sentence2"):
        load_items("pawsx", "de", tmp_path)
    f.write_text("id\tsentence1\tsentence2\tlabel\n1\ta\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 2: wrong number of fields"):
        load_items("pawsx", "de", tmp_path)
    run = tmp_path / "run.jsonl"
    run.write_text('{"idx": 0, "label": 1, "pred": 1}\n{"idx": 1, "label": 1}\n')
    with pytest.raises(DataError, match=r"run.jsonl, line 2: field 'pred'"):
        read_run(run)


def test_cli_replay_and_bad_input(shared, tmp_path, capsys):
    from mlft.cli import main

    assert main(["show", "multisense", str(shared / "multisense" / "reference")]) == 0
    out = capsys.readouterr().out
    assert (
        "| xnli | en→de | 0.7349 | 0.8134 | 0.7611 |" in out and "| pawsx | zh→en | 0.6995 | 0.8695 | 0.7500 |" in out
    )
    assert main(["show", "multisense", str(tmp_path / "nope")]) == 2
    assert "nope: folder not found" in capsys.readouterr().err

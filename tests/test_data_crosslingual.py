"""Cross-lingual training data: request phrasings disjoint from LCB's eight (enforced at import and
reported by every mix), seed builders that answer in the requested language for every LCB language, DPO pairs
whose sides differ in language, the held-out evaluation prompts, and the Bactrian-X-shaped hub builder run on
small local files through the real `datasets.load_dataset` call."""

import json
from collections import Counter
from pathlib import Path

import pytest
from data_helpers import AYA_CODES, NON_ENGLISH, lcb_override, read_jsonl, write_jsonl, write_mix

from mlft.benchmarks.lcb.data import Prompt, load_prompts
from mlft.data.crosslingual import LCB_LOCATIONS
from mlft.data.heldout import heldout_prompts, write_heldout_prompts
from mlft.data.heldout import main as heldout_main
from mlft.data.mix import build_mix, load_mix
from mlft.data.phrasings import FOLLOWUPS, LCB_TEMPLATES, NAMES, PHRASINGS, PhrasingIndex, check_disjoint
from mlft.data.seed import ALL, SEED_SETS, heldout_items, parallel_items, training_items
from mlft.errors import ConfigError, DataError
from mlft.languages import LANGUAGES
from mlft.paths import project_root

FTZ_NEIGHBOURS = {"zh": {"ja"}, "id": {"ms"}, "pt": {"es"}}  # as in test_data_seed.py
ITEMS = {it["key"]: it for it in parallel_items()}
EVERY_NAME = {name for table in NAMES.values() for name in table.values()}


@pytest.fixture(scope="module")
def lid():
    from mlft.langid import LanguageIdentifier

    return LanguageIdentifier.from_spec("ftz")


def _label(lid, text):
    from mlft.benchmarks.lcb.metrics import normalize

    return lid.predict(normalize(text).replace("\n", " "))[0]


def report_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "mix" / "decontamination.json").read_text())


def _is(lid, text, lang):
    return _label(lid, text) in {lang} | FTZ_NEIGHBOURS.get(lang, set())


def _source_language(row_id: str) -> str:
    """Seed row ids: "key" (English instruction) or "key:A>X" (instruction in A)."""
    return row_id.split(":")[1].split(">")[0] if ":" in row_id else "en"


# --- phrasings -------------------------------------------------------------------------------------------


def test_lcb_templates_are_the_test_sets_phrasings(shared):
    prompts = load_prompts(["crosslingual"], path=shared / "lcb" / "test_sets.zip")
    assert {p.phrasing for p in prompts} == set(LCB_TEMPLATES) and len(LCB_TEMPLATES) == 8
    assert {p.location for p in prompts} == set(LCB_LOCATIONS)
    index = PhrasingIndex()  # finds the template in every LCB prompt, almost always the labelled one
    found = [index.find(p.prompt) for p in prompts]
    assert None not in found
    assert sum(f == p.phrasing for f, p in zip(found, prompts)) / len(prompts) > 0.98


def test_training_phrasings_are_disjoint_from_lcb():
    check_disjoint()  # the shipped lists (also checked when mlft.data.phrasings is imported)
    assert set(PHRASINGS) == set(NAMES) == set(FOLLOWUPS) == set(LANGUAGES)
    assert len(PHRASINGS["en"]) >= 8 and all(len(group) >= 3 for group in PHRASINGS.values())
    index = PhrasingIndex(EVERY_NAME)
    for lang, group in PHRASINGS.items():
        for target in LANGUAGES:
            for phrasing in group:
                text = phrasing.format(language=NAMES[lang][target])
                assert index.find(text) is None, text


@pytest.mark.parametrize(
    "phrasings, message",
    [
        (
            {"en": ("Please answer in {language}.",)},
            r"'Please answer in \{language\}\.' filled with .* contains LCB's "
            r"template 'answer in \{language_requested\}'",
        ),
        ({"en": ("Use {language} for this one.",)}, r"template 'use \{language_requested\}'"),
        (
            {"it": ("Rispondi in {language}.",)},
            r"\['it'\]: 'Rispondi in \{language\}\.' filled with 'araba' contains "
            r"LCB's template 'in \{language_requested\}'",
        ),  # "in arabo" counts too
        ({"en": ("Reply politely.",)}, r"has no \{language\} slot"),
    ],
)
def test_an_overlapping_phrasing_is_refused(phrasings, message):
    with pytest.raises(ConfigError, match=message):
        check_disjoint(phrasings)


def test_an_overlapping_phrasing_fails_at_import():
    """The module checks its own lists when it is imported: add an LCB-like phrasing and it does not load."""
    from mlft.data import phrasings

    source = Path(phrasings.__file__).read_text(encoding="utf-8")
    first = '"{language} only, please.",'  # the first English phrasing
    assert source.count(first) == 1
    edited = source.replace(first, '"Write in {language}.", ' + first)
    with pytest.raises(ConfigError, match=r"'Write in \{language\}\.' .* 'write in \{language_requested\}'"):
        exec(compile(edited, phrasings.__file__, "exec"), {"__name__": "mlft.data.phrasings_edited"})


def test_no_seed_row_contains_an_lcb_phrasing():
    index = PhrasingIndex(EVERY_NAME)
    for name, seed_set in SEED_SETS.items():
        for lang in seed_set.languages:
            assert [r["id"] for r in seed_set.rows(lang) if index.match(r)] == [], name


# --- seed builders ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("set_name", ["crosslingual", "crosslingual_multi"])
def test_crosslingual_rows_reply_in_the_requested_language(lid, set_name):
    seed_set = SEED_SETS[set_name]
    places = Counter()
    wrong, prompts = [], 0
    for target in seed_set.languages:
        rows = seed_set.rows(target)
        assert len(rows) == len(training_items())
        for row in rows:
            (user, reply) = row["messages"]
            source = _source_language(row["id"])
            item = ITEMS[row["id"].split(":")[0]]
            instruction = item["langs"][source]["instruction"]
            assert source != target and reply["content"] == item["langs"][target]["response"]
            assert instruction in user["content"] and NAMES[source][target] in user["content"]
            if not _is(lid, reply["content"], target):
                wrong.append((row["id"], target, "reply"))
            prompts += not _is(lid, user["content"], source)  # short zh prompts are sometimes 'wuu'
            text = user["content"]
            places[
                "start"
                if not text.startswith(instruction)
                else "middle"
                if any(text.endswith(f) for f in FOLLOWUPS[source])
                else "end"
            ] += 1
    assert wrong == [] and prompts <= 0.01 * len(seed_set.languages) * len(training_items())
    assert set(places) == {"start", "middle", "end"} and min(places.values()) > 0.15 * sum(places.values())


def test_every_lcb_language_can_be_requested():
    requested = set(SEED_SETS["crosslingual"].languages) | set(SEED_SETS["crosslingual_multi"].languages)
    assert requested == set(LANGUAGES)
    assert set(SEED_SETS["crosslingual"].languages) == set(NON_ENGLISH)
    sources = Counter(_source_language(r["id"]) for lang in ALL for r in SEED_SETS["crosslingual_multi"].rows(lang))
    assert set(sources) == set(NON_ENGLISH)  # instructions in every other language too


@pytest.mark.parametrize(
    "set_name, sft_name", [("crosslingual_pairs", "crosslingual"), ("crosslingual_multi_pairs", "crosslingual_multi")]
)
def test_dpo_pairs_differ_in_language(lid, set_name, sft_name):
    for target in SEED_SETS[set_name].languages:
        sft = {r["id"]: r for r in SEED_SETS[sft_name].rows(target)}
        for row in SEED_SETS[set_name].rows(target):
            source = _source_language(row["id"])
            chosen, rejected = row["chosen"][0]["content"], row["rejected"][0]["content"]
            assert source != target and chosen != rejected
            assert _is(lid, chosen, target) and _is(lid, rejected, source)
            assert _label(lid, chosen) != _label(lid, rejected), row["id"]
            item = ITEMS[row["id"].split(":")[0]]
            assert rejected == item["langs"][source]["response"]  # the same content, the wrong language
            assert row["prompt"] == sft[row["id"]]["messages"][:1]  # the SFT row's prompt, same request


# --- held-out part ---------------------------------------------------------------------------------------


def test_heldout_items_never_train():
    held = {it["key"] for it in heldout_items()}
    replies = {d["response"] for it in heldout_items() for d in it["langs"].values()}
    assert len(held) >= 20
    for name, seed_set in SEED_SETS.items():
        for lang in seed_set.languages:
            for row in seed_set.rows(lang):
                assert row["id"].split(":")[0] not in held, (name, row["id"])
                turns = row.get("messages") or row["prompt"] + row.get("chosen", []) + row.get("rejected", [])
                assert not {m["content"] for m in turns} & replies, (name, row["id"])


def test_heldout_prompt_file(tmp_path, shared, lid):
    from mlft.data.decontaminate import LcbIndex

    path = write_heldout_prompts(tmp_path / "heldout.jsonl")
    rows = read_jsonl(path)
    n = len(heldout_items())
    assert len(rows) == n * 15 + n * 14 and len({r["id"] for r in rows}) == len(rows)
    prompts = [Prompt(**r) for r in rows]  # the fields of an LCB prompt, so evaluation code can read them
    assert {p.task for p in prompts} == {"monolingual", "crosslingual"}
    assert {p.source for p in prompts} == {"mlft_heldout"}
    index = PhrasingIndex()
    lcb = LcbIndex(load_prompts(path=shared / "lcb" / "test_sets.zip"), 13)
    combos = Counter()
    for p in prompts:
        assert lcb.match({"messages": [{"role": "user", "content": p.prompt}]}) is None
        key = p.id.rsplit("/", 1)[1]
        if p.task == "monolingual":
            assert p.prompt == ITEMS[key]["langs"][p.language]["instruction"] and p.phrasing is None
            continue
        assert p.language != "en" and ITEMS[key]["langs"]["en"]["instruction"] in p.prompt
        assert index.find(p.prompt) == p.phrasing and LANGUAGES[p.language] in p.prompt
        assert _label(lid, p.prompt) == "en"
        combos[(p.phrasing, p.location)] += 1
    assert len(combos) == 24 and len(set(combos.values())) == 1  # every template x location equally often
    seen = heldout_prompts("train")  # held-out content, mlft's training phrasings: no LCB template
    assert all(index.find(r["prompt"]) is None for r in seen if r["task"] == "crosslingual")
    assert heldout_main([str(tmp_path / "cli.jsonl"), "--phrasings", "train"]) == 0
    assert read_jsonl(tmp_path / "cli.jsonl") == seen


# --- mixes -----------------------------------------------------------------------------------------------


def test_cpu_crosslingual_mixes(tmp_path, shared, lid):
    mix = load_mix(project_root() / "data_mixes" / "cpu" / "crosslingual_sft.yaml", [lcb_override(shared)])
    ds = build_mix(mix, tmp_path / "sft", "sft", progress=False)
    counts = Counter(ds["source"])
    assert len(ds) == 160 and counts["seed_english"] == 24
    assert counts["seed_crosslingual"] + counts["seed_crosslingual_multi"] == 122  # 75 %, rounded per language
    report = json.loads((tmp_path / "sft" / "mix" / "decontamination.json").read_text())
    assert report["phrasing_overlap"] == {
        "action": "report",
        "rows": 0,
        "kept": 0,
        "examples": [],
        "by_template": dict.fromkeys(LCB_TEMPLATES, 0),
    }
    for row in ds:
        if row["source"].startswith("seed_crosslingual"):
            assert _is(lid, row["messages"][-1]["content"], row["language"])

    mix = load_mix(project_root() / "data_mixes" / "cpu" / "crosslingual_dpo.yaml", [lcb_override(shared)])
    ds = build_mix(mix, tmp_path / "dpo", "dpo", progress=False)
    assert len(ds) == 112 and Counter(ds["source"])["seed_english_pairs"] == 56
    report = json.loads((tmp_path / "dpo" / "mix" / "decontamination.json").read_text())
    assert report["phrasing_overlap"]["rows"] == 0 and report["dropped"]["total"] == 0
    for row in ds:
        if row["source"] != "seed_english_pairs":
            chosen, rejected = row["chosen"][0]["content"], row["rejected"][0]["content"]
            assert _is(lid, chosen, row["language"]) and _label(lid, chosen) != _label(lid, rejected)


def test_lcb_phrasings_are_counted_and_can_be_dropped(tmp_path, shared):
    clean = [
        ("How do I keep basil fresh?", "Put the stems in a glass of water on the counter."),
        ("Korean only, please. Name a good book for a long train ride.", "기차 여행에는 긴 소설이 좋습니다."),
        ("What is a nice name for a black cat?", "Names like Shadow or Pepper suit a black cat well."),
    ]
    lcb_like = [
        ("How do I keep mint fresh? Respond in Korean.", "민트 줄기를 물컵에 꽂아 두세요."),
        ("Write a short poem in French about the sea.", "La mer chante doucement sous la lune."),
    ]
    write_jsonl(tmp_path / "rows.jsonl", [{"q": q, "a": a} for q, a in clean + lcb_like])
    data = {
        "kind": "sft",
        "total": 5,
        "seed": 0,
        "decontaminate": {"lcb_path": str(shared / "lcb" / "test_sets.zip")},
        "sources": [
            {
                "name": "local",
                "type": "local",
                "path": "rows.jsonl",
                "format": "instruction",
                "columns": {"prompt": "q", "response": "a"},
                "language": "en",
                "share": 1.0,
            }
        ],
    }
    build_mix(load_mix(write_mix(tmp_path, data)), tmp_path / "report", progress=False)
    report = json.loads((tmp_path / "report" / "mix" / "decontamination.json").read_text())
    overlap = report["phrasing_overlap"]
    assert overlap["rows"] == overlap["kept"] == 2 and report["by_source"]["local"]["en"]["phrasing"] == 2
    assert {t: n for t, n in overlap["by_template"].items() if n} == {
        "respond in {language_requested}": 1,
        "in {language_requested}": 1,
    }
    data.update(total=3)
    data["decontaminate"]["phrasings"] = "drop"
    ds = build_mix(load_mix(write_mix(tmp_path, data)), tmp_path / "drop", progress=False)
    assert sorted(m[0]["content"] for m in ds["messages"]) == sorted(q for q, _ in clean)
    report = json.loads((tmp_path / "drop" / "mix" / "decontamination.json").read_text())
    assert report["dropped"]["phrasing"] == 2 and report["phrasing_overlap"]["kept"] == 0
    with pytest.raises(ConfigError, match=r"decontaminate\.phrasings: 'keep' is not one of \['report', 'drop'\]"):
        load_mix(write_mix(tmp_path, {**data, "decontaminate": {"phrasings": "keep"}}))


# --- the hub builder (Bactrian-X shape) -------------------------------------------------------------------

BACTRIAN = "MBZUAI/Bactrian-X"


def _bactrian_files(tmp_path: Path, n_items: int = 8) -> Path:
    """One JSON-lines file per configuration with Bactrian-X's fields (instruction, input, id, output), the same
    ids in every language; plus the quirks of the real data: a translation request, an empty output, an id
    missing from one configuration and an input text."""
    folder = tmp_path / "bactrian"
    folder.mkdir()
    items = training_items()[:n_items]
    for lang in ALL:
        rows = [
            {
                "instruction": it["langs"][lang]["instruction"],
                "input": "",
                "id": f"alpaca-{k}",
                "output": it["langs"][lang]["response"],
            }
            for k, it in enumerate(items)
        ]
        rows[0]["input"] = {"en": "I live in a small flat.", "de": "Ich wohne in einer kleinen Wohnung."}.get(lang, "")
        rows.append(
            {
                "instruction": "Translate the following sentence into French." if lang == "en" else "Traduire.",
                "input": "Good morning.",
                "id": "dolly-7",
                "output": "Bonjour.",
            }
        )
        rows.append(
            {
                "instruction": items[1]["langs"][lang]["instruction"],
                "input": "",
                "id": "dolly-8",
                "output": "" if lang == "de" else items[1]["langs"][lang]["response"],
            }
        )
        if lang == "ko":
            rows = [r for r in rows if r["id"] != "alpaca-3"]
        write_jsonl(folder / f"{lang}.json", rows)
    return folder


def _fake_hub(monkeypatch, folder: Path, calls: list):
    import datasets

    real = datasets.load_dataset

    def fake_load_dataset(path, name=None, split=None, revision=None, **kw):
        calls.append((path, name, split, revision))
        if path == BACTRIAN:  # the real call, answered from the local files shaped like the dataset
            return real("json", data_files=str(folder / f"{name}.json"), split="train")
        if path == "HuggingFaceH4/ultrachat_200k":
            rows = [
                {
                    "messages": [
                        {"role": "user", "content": f"Tell me fact number {i} about gardens."},
                        {"role": "assistant", "content": f"Garden fact {i}: plants need light."},
                    ]
                }
                for i in range(200)
            ]
            rows[0]["messages"][0]["content"] = "Tell me about gardens. Respond in French."
            return datasets.Dataset.from_list(rows)
        if path == "HuggingFaceH4/ultrafeedback_binarized":
            return datasets.Dataset.from_list(
                [
                    {
                        "prompt": f"Name fruit {i}.",
                        "chosen": f"Fruit {i} is an apple.",
                        "rejected": f"Fruit {i} is a stone.",
                    }
                    for i in range(100)
                ]
            )
        codes = AYA_CODES
        return datasets.Dataset.from_list(
            [
                {
                    "inputs": it["langs"][lang]["instruction"],
                    "language_code": code,
                    "targets": it["langs"][lang]["response"],
                }
                for it in training_items()[:4]
                for lang, code in codes.items()
            ]
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)


def test_hub_builder_on_local_files_shaped_like_bactrian_x(tmp_path, monkeypatch, shared, lid):
    calls: list = []
    _fake_hub(monkeypatch, _bactrian_files(tmp_path), calls)
    mix = load_mix(project_root() / "data_mixes" / "crosslingual_sft.yaml", ["total=300", lcb_override(shared)])
    ds = build_mix(mix, tmp_path / "sft", "sft", progress=False)
    hub = [c for c in calls if c[0] == BACTRIAN]
    assert sorted(c[1] for c in hub) == sorted(ALL * 2)  # both sources: one configuration per language
    assert {c[2:] for c in hub} == {("train", "refs/convert/parquet")}
    rows = [r for r in ds if r["source"].startswith("bactrian")]
    planned = Counter()
    for i, _, n in mix.counts():
        planned[mix.sources[i].name] += n
    assert Counter(r["source"] for r in rows) == {k: v for k, v in planned.items() if k.startswith("bactrian")}
    assert {r["language"] for r in rows if r["source"] == "bactrian_crosslingual"} == set(NON_ENGLISH)
    assert {r["language"] for r in rows if r["source"] == "bactrian_crosslingual_multi"} == set(ALL)
    index = PhrasingIndex(EVERY_NAME)
    for row in rows:
        source, target = row["id"].split(":")[1].split(">")
        user, reply = row["messages"]
        assert row["language"] == target != source and "dolly-7" not in row["id"]  # translation request skipped
        assert source == "en" if row["source"] == "bactrian_crosslingual" else source != "en"
        assert _is(lid, reply["content"], target) and index.match(row) is None
        assert NAMES[source][target] in user["content"]
    with_input = [r for r in rows if r["id"].endswith(":alpaca-0") and ":en>" in r["id"]]
    assert all("I live in a small flat." in r["messages"][0]["content"] for r in with_input)
    report = report_of(tmp_path / "sft")
    assert report["phrasing_overlap"]["action"] == "drop" and report["phrasing_overlap"]["kept"] == 0
    assert report["dropped"]["phrasing"] == 1  # UltraChat's "Respond in French." row
    assert "Respond in French" not in json.dumps(list(ds["messages"]))

    calls.clear()
    mix = load_mix(project_root() / "data_mixes" / "crosslingual_dpo.yaml", ["total=100", lcb_override(shared)])
    ds = build_mix(mix, tmp_path / "dpo", "dpo", progress=False)
    pairs = [r for r in ds if r["source"].startswith("bactrian")]
    assert len(pairs) == 50 and report_of(tmp_path / "dpo")["phrasing_overlap"]["kept"] == 0
    for row in pairs:
        source, target = row["id"].split(":")[1].split(">")
        chosen, rejected = row["chosen"][0]["content"], row["rejected"][0]["content"]
        assert _is(lid, chosen, target) and _is(lid, rejected, source) and _label(lid, chosen) != _label(lid, rejected)


def _parallel_mix(**source) -> dict:
    src = {
        "name": "bx",
        "type": "hub",
        "path": BACTRIAN,
        "share": 1.0,
        "parallel": {"build": "crosslingual", "subsets": ["en", "de", "ja"]},
        **source,
    }
    return {"kind": "sft", "total": 4, "decontaminate": {"enabled": False}, "sources": [src]}


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s.update(type="local", path="x.jsonl"), r"sources\[0\]\.parallel: only `type: hub` sources"),
        (
            lambda s: s["parallel"].update(build="crosslingual_pairs"),
            r"parallel\.build: 'crosslingual_pairs' makes dpo "
            r"rows, the mix is kind 'sft'",
        ),
        (lambda s: s["parallel"].update(biuld="x"), r"parallel: unknown key 'biuld' \(did you mean 'build'\?\)"),
        (lambda s: s["parallel"].update(subsets=["en", "sw"]), r"parallel\.subsets: 'sw' is not one of the 15 LCB"),
        (
            lambda s: (
                s["parallel"].update(subsets=["de", "ja"], instruction_languages=["de"]),
                s.update(languages=["ja"]),
            ),
            r"skip_language_mentions: needs the English configuration",
        ),
        (
            lambda s: s.update(languages=["ko"]),
            r"sources\[0\]\.languages: 'ko' is not among the subsets \(en, de, ja\)",
        ),
        (
            lambda s: s["parallel"].update(instruction_languages=["ja"]),
            r"reply language 'ja' needs an instruction "
            r"language other than itself",
        ),
        (lambda s: s.update(language_column="lang"), r"language_column: a parallel source takes its languages"),
        (lambda s: s.update(columns={"answer": "output"}), r"columns: unknown role 'answer' for a parallel source"),
    ],
)
def test_parallel_source_config_errors(tmp_path, monkeypatch, edit, message):
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("config errors come before loading"))
    data = _parallel_mix()
    edit(data["sources"][0])
    with pytest.raises(ConfigError, match=message):
        load_mix(write_mix(tmp_path, data, "bad_mix.yaml"))


def test_parallel_source_data_errors(tmp_path, monkeypatch):
    calls: list = []
    _fake_hub(monkeypatch, _bactrian_files(tmp_path), calls)
    mix = load_mix(write_mix(tmp_path, _parallel_mix(languages=["ja"], columns={"response": "answer"})))
    with pytest.raises(DataError, match=r"sources\[0\] \((de|en|ja)\)\.columns\.response: column 'answer' not found"):
        build_mix(mix, tmp_path / "run", progress=False)
    data = _parallel_mix(languages=["ja"])
    data["sources"][0]["parallel"]["id_column"] = "uid"
    with pytest.raises(DataError, match=r"parallel\.id_column: column 'uid' not found"):
        build_mix(load_mix(write_mix(tmp_path, data)), tmp_path / "run", progress=False)
    data["sources"][0]["parallel"].pop("id_column")
    data.update(total=20)
    data["sources"][0]["languages"] = ["de"]  # 9 ids; the translation request is skipped, one output is empty
    with pytest.raises(DataError, match=r"20 rows needed, only 8 available \(9 rows, 1 malformed"):
        build_mix(load_mix(write_mix(tmp_path, data)), tmp_path / "run", progress=False)


# --- recipes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["cpu/crosslingual_sft", "cpu/crosslingual_dpo", "crosslingual_sft", "crosslingual_dpo"]
)
def test_crosslingual_recipes_validate_against_installed_trl(name, shared, monkeypatch):
    import dataclasses

    from trl import DPOConfig, SFTConfig

    from mlft.training.recipe import load_recipe

    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    monkeypatch.chdir(project_root())
    path = project_root() / "recipes" / f"{name}.yaml"
    recipe = load_recipe(path, ["model=smollm2-135m-instruct"] if "dpo" in name else [])
    cls = SFTConfig if recipe.trainer == "sft" else DPOConfig
    assert recipe.trainer in path.stem and set(recipe.training_args) <= {f.name for f in dataclasses.fields(cls)}
    assert load_mix(recipe.mix).kind == recipe.trainer
    if name.startswith("cpu/"):
        assert recipe.lora.enabled and recipe.training_args["use_cpu"] is True

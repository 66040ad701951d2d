"""Data mixes: share arithmetic of the final mix, determinism, tags, stats, reuse, config errors."""

from collections import Counter

import pytest
from data_helpers import NON_ENGLISH, lcb_override, read_jsonl, write_jsonl, write_mix

from mlft.data.mix import build_mix, load_mix
from mlft.data.seed import english_items
from mlft.errors import ConfigError, DataError


def _seed_mix(total=280, en_share=0.9, **extra):
    return {
        "kind": "sft",
        "total": total,
        "seed": 3,
        "decontaminate": {"enabled": False},
        "sources": [
            {"name": "en", "type": "seed", "path": "english", "share": en_share, "allow_replacement": True},
            {
                "name": "multi",
                "type": "seed",
                "path": "parallel",
                "share": round(1 - en_share, 10),
                "languages": NON_ENGLISH,
            },
        ],
        **extra,
    }


def test_counts_are_exact_shares_of_the_final_mix(tmp_path):
    mix = load_mix(write_mix(tmp_path, _seed_mix(total=280)))
    counts = {(mix.sources[i].name, lang): n for i, lang, n in mix.counts()}
    assert counts[("en", "en")] == 252
    assert all(counts[("multi", lang)] == 2 for lang in NON_ENGLISH)
    ds = build_mix(mix, tmp_path / "run", "sft", progress=False)
    assert len(ds) == 280
    assert Counter(zip(ds["source"], ds["language"])) == Counter(dict(counts.items()))


def test_largest_remainder_sums_to_total(tmp_path):
    mix = load_mix(write_mix(tmp_path, _seed_mix(total=100)))
    counts = [(mix.sources[i].name, lang, n) for i, lang, n in mix.counts()]
    assert sum(n for *_, n in counts) == 100
    assert counts[0] == ("en", "en", 90)
    # 10 rows over 14 languages (0.714 each): the first 10 languages in file order get one row, the rest none
    assert [n for _, _, n in counts[1:]] == [1] * 10 + [0] * 4


def test_language_share_mapping(tmp_path):
    data = _seed_mix(total=40)
    data["sources"][1] = {"name": "multi", "type": "seed", "path": "parallel", "languages": {"ja": 0.075, "ko": 0.025}}
    mix = load_mix(write_mix(tmp_path, data))
    assert [(lang, n) for _, lang, n in mix.counts()] == [("en", 36), ("ja", 3), ("ko", 1)]


def test_deterministic_under_seed_and_tags_kept(tmp_path):
    path = write_mix(tmp_path, _seed_mix(total=140))
    build_mix(load_mix(path), tmp_path / "a", progress=False)
    build_mix(load_mix(path), tmp_path / "b", progress=False)
    build_mix(load_mix(path, ["seed=4"]), tmp_path / "c", progress=False)
    a = (tmp_path / "a" / "mix" / "train.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "mix" / "train.jsonl").read_bytes()
    assert a != (tmp_path / "c" / "mix" / "train.jsonl").read_bytes()
    rows = read_jsonl(tmp_path / "a" / "mix" / "train.jsonl")
    assert all(set(r) == {"messages", "source", "language", "id"} for r in rows)
    assert {r["language"] for r in rows if r["source"] == "multi"} == set(NON_ENGLISH)
    assert all(r["messages"][-1]["role"] == "assistant" for r in rows)


def test_stats_written(tmp_path):
    mix = load_mix(write_mix(tmp_path, _seed_mix(total=280)))
    build_mix(mix, tmp_path / "run", progress=False)
    import json

    stats = json.loads((tmp_path / "run" / "mix" / "stats.json").read_text())
    assert stats["total"] == 280 and stats["kind"] == "sft" and stats["token_unit"] == "words"
    assert stats["by_language"]["en"]["rows"] == 252
    assert stats["by_language"]["en"]["share"] == pytest.approx(0.9)
    assert stats["by_source"]["multi"]["ja"]["rows"] == 2
    assert stats["by_source"]["multi"]["ja"]["completion_tokens"] > 20  # Japanese counted per character
    n_english = len(english_items())
    assert stats["by_source"]["en"]["en"]["unique"] == min(252, n_english)
    assert stats["completion_tokens"] == sum(v["completion_tokens"] for v in stats["by_language"].values())
    assert (tmp_path / "run" / "mix" / "decontamination.json").is_file()
    assert load_mix(tmp_path / "run" / "mix" / "mix.yaml").total == 280  # the written config reloads


def test_tokenizer_counts(tmp_path):
    class WhitespaceTokenizer:
        name_or_path = "ws"

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

    mix = load_mix(write_mix(tmp_path, _seed_mix(total=20)))
    build_mix(mix, tmp_path / "run", tokenizer=WhitespaceTokenizer(), progress=False)
    import json

    stats = json.loads((tmp_path / "run" / "mix" / "stats.json").read_text())
    assert stats["token_unit"] == "tokens:ws"


def test_too_small_source_needs_replacement(tmp_path):
    n = len(english_items())
    data = _seed_mix(total=n + 5, en_share=1.0)
    data["sources"] = data["sources"][:1]
    data["sources"][0]["allow_replacement"] = False
    mix = load_mix(write_mix(tmp_path, data))
    with pytest.raises(
        DataError,
        match=rf"sources\[0\] \(en\), language 'en': {n + 5} rows needed, only {n} "
        r"available.*allow_replacement",
    ):
        build_mix(mix, tmp_path / "run", progress=False)
    data["sources"][0]["allow_replacement"] = True
    ds = build_mix(load_mix(write_mix(tmp_path, data)), tmp_path / "run", progress=False)
    uses = Counter(ds["id"])
    assert len(ds) == n + 5 and len(uses) == n and set(uses.values()) == {1, 2}  # whole passes, not iid


def test_kind_mismatch(tmp_path):
    mix = load_mix(write_mix(tmp_path, _seed_mix()))
    with pytest.raises(ConfigError, match="holds sft rows but a dpo run"):
        build_mix(mix, tmp_path / "run", "dpo", progress=False)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["sources"][0].update(shar=1), r"mix\.sources\[0\]: unknown key 'shar' \(did you mean 'share'\?\)"),
        (lambda d: d.update(totl=5), r"mix: unknown key 'totl' \(did you mean 'total'\?\)"),
        (
            lambda d: d["sources"][0].update(share=0.8),
            r"mix\.sources: shares must sum to 1.*got 0\.9.*en=0\.8, multi=0\.1",
        ),
        (lambda d: d["sources"][1].update(languages=["ja", "xx"]), r"sources\[1\]\.languages: unknown language 'xx'"),
        (
            lambda d: d["sources"][0].update(type="local", path="nope.jsonl", format="messages", language="en"),
            r"sources\[0\]\.path: file not found: .*nope\.jsonl",
        ),
        (
            lambda d: d["sources"][0].update(path="englsh"),
            r"sources\[0\]\.path: unknown seed set 'englsh' \(did you mean 'english'\?\)",
        ),
        (
            lambda d: d.update(kind="dpo"),
            r"sources\[0\]\.path: seed set 'english' holds sft rows, the mix is kind 'dpo'",
        ),
        (
            lambda d: d["sources"][0].update(languages=["ja"]),
            r"sources\[0\]\.languages: seed set 'english' has no ja rows",
        ),
        (lambda d: d["sources"][0].update(share=-0.5), r"sources\[0\]\.share: must be > 0"),
        (
            lambda d: d.update(kind="kto"),
            r"bad_mix\.yaml: mix\.kind: 'kto' is not a mix kind; valid: sft, dpo, prompts",
        ),
        (
            lambda d: d["sources"][0].update(type="hubb"),
            r"sources\[0\]\.type: 'hubb' is not a source type \(did you mean 'hub'\?\)",
        ),
        (
            lambda d: d["sources"][0].update(parallel={"subsets": ["en"], "build": "crosslingual"}),
            r"sources\[0\]\.parallel: only `type: hub` sources can be parallel \(got 'seed'\)",
        ),
        (lambda d: d.update(kind="sf"), r"mix\.kind: 'sf' is not a mix kind \(did you mean 'sft'\?\)"),
        (lambda d: d.update(total=0), r"mix\.total: must be a positive"),
        (
            lambda d: d["decontaminate"].update(tasks=["monolingal"]),
            r"decontaminate\.tasks: unknown task 'monolingal' \(did you mean 'monolingual'\?\)",
        ),
    ],
)
def test_config_errors_name_file_and_key(tmp_path, edit, message):
    data = _seed_mix()
    edit(data)
    path = write_mix(tmp_path, data, "bad_mix.yaml")
    with pytest.raises(ConfigError, match=message) as exc:
        load_mix(path)
    assert "bad_mix.yaml" in str(exc.value)


def test_local_source_errors(tmp_path):
    write_jsonl(tmp_path / "rows.jsonl", [{"q": "What is two plus two?", "a": "Two plus two is four."}])
    data = {
        "kind": "sft",
        "total": 1,
        "decontaminate": {"enabled": False},
        "sources": [
            {
                "name": "local",
                "type": "local",
                "path": "rows.jsonl",
                "format": "instruction",
                "share": 1.0,
                "language": "en",
                "columns": {"prompt": "q", "response": "answer"},
            }
        ],
    }
    mix = load_mix(write_mix(tmp_path, data))
    with pytest.raises(
        DataError, match=r"sources\[0\]\.columns\.response: column 'answer' not found; the data has q, a"
    ):
        build_mix(mix, tmp_path / "run", progress=False)
    data["sources"][0]["columns"] = {"prompt": "q", "response": "a"}
    ds = build_mix(load_mix(write_mix(tmp_path, data)), tmp_path / "run", progress=False)
    assert ds[0]["messages"] == [
        {"role": "user", "content": "What is two plus two?"},
        {"role": "assistant", "content": "Two plus two is four."},
    ]
    assert ds[0]["source"] == "local" and ds[0]["id"] == "local:0"


def test_decontamination_uses_lcb_data_named_in_the_mix(tmp_path, shared):
    mix = load_mix(
        write_mix(tmp_path, {**_seed_mix(total=30), "decontaminate": {"enabled": True}}), [lcb_override(shared)]
    )
    ds = build_mix(mix, tmp_path / "run", progress=False)
    assert len(ds) == 30


def test_cli_builds_and_reports_errors(tmp_path, shared, capsys, monkeypatch):
    from mlft.cli import main

    path = write_mix(tmp_path, {**_seed_mix(total=28), "decontaminate": {"enabled": True}})
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    assert main(["data", "mix", str(path), "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "sft mix of 28 rows" in out and "decontamination: 0 of" in out
    assert len(read_jsonl(tmp_path / "run" / "mix" / "train.jsonl")) == 28
    assert main(["data", "mix", str(path), "totl=3"]) == 2
    assert "mlft data mix: error: " in capsys.readouterr().err


def test_a_kind_added_to_the_table_builds_without_editing_the_loader(tmp_path, monkeypatch):
    """Mix kinds are entries of one table (mlft.data.mix_kinds), row formats of another (normalize.FORMATS): a new
    kind (here trl's unpaired preference rows, as KTO trains on) is one entry each, and the loader, the sources and
    the writer take it; its own refusals (a `task:` it does not take, a format it does not hold) name the field."""
    from mlft.data.mix_kinds import MIX_KINDS, MixKind
    from mlft.data.normalize import FORMATS, RowFormat
    from mlft.data.sources import source_columns

    def unpaired(row, cols, task=None):
        if not isinstance(row.get(cols["label"]), bool) or not row.get(cols["completion"], "").strip():
            return None
        return {
            "prompt": [{"role": "user", "content": row[cols["prompt"]]}],
            "completion": [{"role": "assistant", "content": row[cols["completion"]]}],
            "label": row[cols["label"]],
        }

    fmt = RowFormat("unpaired", {"prompt": "prompt", "completion": "completion", "label": "label"}, unpaired)
    monkeypatch.setitem(FORMATS, "unpaired", fmt)
    kind = MixKind("kto", "unpaired preference", ("unpaired",), frozenset({"prompt", "completion", "label"}))
    monkeypatch.setitem(MIX_KINDS, "kto", kind)
    rows = [
        {"q": "What is two plus two?", "completion": "Four.", "label": True},
        {"q": "Name a colour.", "completion": "Seven.", "label": False},
        {"q": "Broken row", "completion": "", "label": True},  # malformed: skipped
    ]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    source = {
        "name": "local",
        "type": "local",
        "path": "rows.jsonl",
        "format": "unpaired",
        "share": 1.0,
        "language": "en",
        "columns": {"prompt": "q"},
    }
    data = {"kind": "kto", "total": 2, "seed": 1, "decontaminate": {"enabled": False}, "sources": [source]}
    mix = load_mix(write_mix(tmp_path, data))
    assert source_columns(mix.sources[0], mix.kind) == {"prompt", "completion", "label"}
    ds = build_mix(mix, tmp_path / "run", "kto", progress=False)
    got = sorted((r["prompt"][0]["content"], r["completion"][0]["content"], r["label"]) for r in ds)
    assert got == [("Name a colour.", "Seven.", False), ("What is two plus two?", "Four.", True)]
    assert not (tmp_path / "run" / "mix" / "prompts.jsonl").exists()  # the kind writes no prompt file
    assert read_jsonl(tmp_path / "run" / "mix" / "train.jsonl")[0]["source"] == "local"

    for edit, message in [
        ({"task": "monolingual"}, r"kto_bad\.yaml: mix\.sources\[0\]\.task: only prompts mixes take a task"),
        ({"format": "messages"}, r"sources\[0\]\.format: 'messages' rows cannot feed a kto mix; use unpaired"),
    ]:
        bad = {**data, "sources": [{**source, **edit}]}
        with pytest.raises(ConfigError, match=message):
            load_mix(write_mix(tmp_path, bad, "kto_bad.yaml"))


def test_a_source_type_added_to_the_table_feeds_a_mix(tmp_path, monkeypatch):
    """Source types are entries of one table (mlft.data.sources.SOURCE_TYPES): a new one (here rows built in memory)
    is checked, read, given its default languages and its columns by its entry, with no type-name branch to edit."""
    from mlft.data.pool import Pool
    from mlft.data.sources import SOURCE_TYPES, SourceType, source_columns

    texts = {"de": ["Hallo?", "Wie geht's?"], "fr": ["Bonjour ?"]}

    def check(src, kind, where, base_dir):
        if src.path != "greetings":
            raise ConfigError(f"{where}.path: only 'greetings' is held in memory")

    def load(src, wanted, where):
        rows = [(lang, t) for lang in wanted for t in texts[lang]]

        def example(k):
            lang, text = rows[k]
            messages = [{"role": "user", "content": text}, {"role": "assistant", "content": f"{text} ({lang})"}]
            return f"{src.name}:{k}", {"messages": messages}

        return Pool(src.name, [lang for lang, _ in rows], example)

    entry = SourceType("memory", "rows held in memory", check, load, lambda src: list(texts), lambda s, k: {"messages"})
    monkeypatch.setitem(SOURCE_TYPES, "memory", entry)
    source = {"name": "mem", "type": "memory", "path": "greetings", "share": 1.0, "allow_replacement": True}
    data = {"kind": "sft", "total": 4, "seed": 2, "decontaminate": {"enabled": False}, "sources": [source]}
    mix = load_mix(write_mix(tmp_path, data))
    assert [(lang, n) for _, lang, n in mix.counts()] == [("de", 2), ("fr", 2)]  # its default languages
    assert source_columns(mix.sources[0], "sft") == {"messages"}
    ds = build_mix(mix, tmp_path / "run", "sft", progress=False)
    assert sorted(r["messages"][1]["content"] for r in ds) == ["Bonjour ? (fr)"] * 2 + [
        "Hallo? (de)",
        "Wie geht's? (de)",
    ]
    with pytest.raises(ConfigError, match=r"mem_bad\.yaml: mix\.sources\[0\]\.path: only 'greetings'"):
        load_mix(write_mix(tmp_path, {**data, "sources": [{**source, "path": "other"}]}, "mem_bad.yaml"))

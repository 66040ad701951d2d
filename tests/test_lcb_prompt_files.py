"""Any prompt set, any language: prompt files of your own (JSONL / CSV) and scoring of every language the LID model
knows, with LCB's official behaviour (and numbers) unchanged for its 15."""

from __future__ import annotations

import json

import pytest

from mlft.benchmarks.lcb.data import load_prompt_file
from mlft.benchmarks.lcb.scoring import score_completions
from mlft.cli import main
from mlft.completions import read_completions
from mlft.errors import DataError

EXTRA = """id,model,completion,task,source,language
0,m,"Столицата на България е София, която е и най-големият град в страната.",monolingual,custom,bg
1,m,"България е държава в Югоизточна Европа.
It is known for its mountains, beaches and rose oil production.",monolingual,custom,bg
2,m,"Да.",monolingual,custom,bg
3,m,"Хубав ден е днес и ще отидем на разходка в парка с децата.
Вечерта ще вечеряме заедно с цялото семейство у дома.",monolingual,custom,bg
4,m,"Praha je hlavní město České republiky a leží na řece Vltavě.",monolingual,custom,cs
5,m,"The capital of the Czech Republic is Prague, a beautiful old city.",monolingual,custom,cs
6,m,"Dnes je krásné počasí, takže půjdeme na dlouhou procházku do lesa.
Večer si uvaříme polévku a budeme číst knihy.",monolingual,custom,cs
7,m,"Helsinki on Suomen pääkaupunki ja maan suurin kaupunki.",monolingual,custom,fi
8,m,"Suomi tunnetaan tuhansista järvistään ja pitkistä talvistaan.
Kesällä aurinko paistaa lähes koko yön pohjoisessa.",monolingual,custom,fi
9,m,"Finland is famous for its saunas and the northern lights in winter.",monolingual,custom,fi
10,m,"Kiitos!",monolingual,custom,fi
11,m,"Napište krátkou báseň o podzimu a padajícím listí ve větru.",crosslingual,custom,cs
12,m,"Autumn leaves are falling slowly from the old trees in the garden.",crosslingual,custom,cs
"""
# The official compute_metrics.py (commit 0cfdbb4) on EXTRA with lid.176.ftz: (task, source, language) -> (lpr, acc)
OFFICIAL = {
    ("monolingual", "custom", "bg"): (2 / 3, 5 / 6),
    ("monolingual", "custom", "cs"): (2 / 3, 2 / 3),
    ("monolingual", "custom", "fi"): (2 / 3, 2 / 3),
    ("monolingual", "custom", "all"): (2 / 3, 13 / 18),
    ("monolingual", "all", "all"): (2 / 3, 13 / 18),
    ("crosslingual", "custom", "cs"): (0.5, 0.5),
    ("crosslingual", "all", "all"): (0.5, 0.5),
}


def test_extra_languages_score_like_the_official_script(tmp_path):
    f = tmp_path / "extra.csv"
    f.write_text(EXTRA, encoding="utf-8")
    report = score_completions(read_completions(f))
    got = {(r["task"], r["source"], r["language"]): r for r in report.rows}
    for key, (lpr, acc) in OFFICIAL.items():
        assert got[key]["lpr"] == pytest.approx(lpr, abs=1e-12) and got[key]["acc"] == pytest.approx(acc, abs=1e-12)
        assert got[key]["wpr"] is None  # WPR stays defined for the six non-Latin LCB languages only
    assert got[("monolingual", "custom", "bg")]["n_scored"] == 3  # "Да." has no 5-token line: left out


def test_unknown_language_names_the_row(tmp_path, capsys):
    f = tmp_path / "c.jsonl"
    f.write_text(
        '{"id": 0, "task": "monolingual", "source": "s", "language": "bg", "completion": "x"}\n'
        '{"id": 1, "task": "monolingual", "source": "s", "language": "tlh", "completion": "x"}\n'
    )
    assert main(["score", str(f)]) == 2
    err = capsys.readouterr().err
    assert "line 2: field 'language': language 'tlh' is unknown to the language-ID model" in err


@pytest.mark.parametrize(
    "content, message",
    [
        (
            '{"id": "a", "prompt": "Hallo", "language": "de"}\n{"id": "b", "language": "de"}\n',
            "line 2: missing field 'prompt'",
        ),
        (
            '{"id": "a", "prompt": "Hallo", "language": "de"}\n{"id": "a", "prompt": "x", "language": "de"}\n',
            "line 2: duplicate id 'a' \\(first at line 1\\)",
        ),
        ('{"id": "a", "prompt": "Hallo", "language": "xx1"}\n', "line 1: field 'language': language 'xx1' is unknown"),
        (
            '{"id": "a", "prompt": "Hallo", "language": "de", "task": "translation"}\n',
            "line 1: field 'task': unknown task",
        ),
        ('{"id": "a", "prompt": "Hallo", "language": "de"}\n{broken\n', "line 2: invalid JSON"),
    ],
)
def test_malformed_prompt_rows_are_named(tmp_path, content, message):
    f = tmp_path / "p.jsonl"
    f.write_text(content)
    with pytest.raises(DataError, match=message):
        load_prompt_file(f)


def test_csv_prompt_file_and_cli_errors(tmp_path, capsys):
    f = tmp_path / "p.csv"
    f.write_text("id,prompt,language,task\n1,Kerro lyhyesti Suomesta.,fi,monolingual\n2,,cs,monolingual\n")
    with pytest.raises(DataError, match="row 2: missing field 'prompt'"):
        load_prompt_file(f)
    f.write_text("id,prompt,language,task\n1,Kerro lyhyesti Suomesta.,fi,\n2,Napiš báseň.,cs,crosslingual\n")
    ps = load_prompt_file(f)
    assert [(p.id, p.task, p.source, p.language) for p in ps] == [
        ("1", "monolingual", "p", "fi"),
        ("2", "crosslingual", "p", "cs"),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "x"}\n')
    assert main(["generate", "--prompts", str(bad), "--out", str(tmp_path / "c.jsonl"), "--no-progress"]) == 2
    assert "bad.jsonl: line 1: missing field 'language'" in capsys.readouterr().err
    assert not (tmp_path / "c.jsonl").exists() or not (tmp_path / "c.jsonl").read_text()


@pytest.mark.slow
def test_generate_and_eval_on_a_prompt_file(shared, tmp_path, capsys):  # LCB's word list
    f = tmp_path / "mine.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(r, ensure_ascii=False)
            for r in [
                {"id": "bg-1", "prompt": "Разкажи накратко за София.", "language": "bg"},
                {"id": "fi-1", "prompt": "Kerro lyhyesti Helsingistä.", "language": "fi"},
                {
                    "id": "cs-x",
                    "prompt": "Tell me about Prague. Reply in Czech.",
                    "language": "cs",
                    "task": "crosslingual",
                },
            ]
        )
        + "\n"
    )
    out = tmp_path / "ev"
    assert (
        main(
            [
                "eval",
                "lcb_tiny",
                "--prompts",
                str(f),
                "languages=null",
                "sources=null",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    recs = [json.loads(x) for x in (out / "default" / "completions.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in recs) == ["bg-1", "cs-x", "fi-1"] and {r["source"] for r in recs} == {"mine"}
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert {r["language"] for r in rows} >= {"bg", "fi", "cs", "avg"}


def test_outside_lcb_prompt_file():
    """eval/outside_lcb_prompts.jsonl (languages outside LCB's 15): it loads, holds >= 20 cross-lingual
    and 10 monolingual prompts per language, every language is one fastText, langdetect and the lexical-validity
    guard know, and every prompt's own text is identified by fastText as what it claims (monolingual: the target
    language; cross-lingual: English, the instruction's language)."""
    from collections import Counter
    from pathlib import Path

    from mlft.benchmarks.lcb.guard import lexical_validity
    from mlft.langid import identifier
    from mlft.languages import LANGUAGES

    path = Path(__file__).resolve().parents[1] / "eval" / "outside_lcb_prompts.jsonl"
    prompts = load_prompt_file(path)
    counts = Counter((p.task, p.language) for p in prompts)
    langs = {p.language for p in prompts}
    assert langs == {"cs", "fi", "bg", "bn", "uk"} and not langs & set(LANGUAGES)
    assert all(counts[("crosslingual", lang)] >= 20 and counts[("monolingual", lang)] == 10 for lang in langs)
    ft, ld = identifier(None), identifier("langdetect")
    wrong = [
        (p.id, ft.predict(p.prompt)[0])
        for p in prompts
        if ft.predict(p.prompt)[0] != (p.language if p.task == "monolingual" else "en")
    ]
    assert wrong == []
    assert all(ld.predict(p.prompt)[0] == p.language for p in prompts if p.task == "monolingual")
    for lang in langs:  # the validity guard has a lexicon for every language: the prompts themselves are valid
        texts = [p.prompt for p in prompts if p.task == "monolingual" and p.language == lang]
        assert all(lexical_validity(t, lang) > 0.5 for t in texts), lang
    cross = [p for p in prompts if p.task == "crosslingual"]
    names = {"cs": "Czech", "fi": "Finnish", "bg": "Bulgarian", "bn": "Bengali", "uk": "Ukrainian"}
    assert all(names[p.language] in p.prompt and p.location in ("Start", "Middle", "End") for p in cross)

"""`mlft lcb`, `mlft score`, `mlft paper-tables` from the command line, including bad input."""

import json

import pytest

from mlft.cli import main, make_parser

FR = "Je pense que la cuisine française est vraiment délicieuse et variée"


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_subcommand_has_help(capsys):
    parser = make_parser()
    names = parser._subparsers._group_actions[0].choices
    assert {"lcb", "score", "paper-tables", "table"} <= set(names)
    for name in names:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_lcb_import_offline(capsys, shared, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFT_CACHE", str(tmp_path))  # --from imports into the cache: a temporary one
    code, out, _ = run(capsys, "lcb", "--from", str(shared / "lcb" / "test_sets.zip"))
    assert code == 0
    assert "monolingual: 2400" in out and "crosslingual: 4186" in out and "total: 6586 prompts" in out


def test_lcb_filters_and_errors(capsys, shared, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFT_CACHE", str(tmp_path / "cache"))
    code, out, _ = run(
        capsys, "lcb", "--task", "crosslingual", "--language", "ko", "--export", str(tmp_path / "ko.jsonl")
    )
    assert code == 0 and "total: 299 prompts" in out
    first = json.loads((tmp_path / "ko.jsonl").read_text().splitlines()[0])
    assert first["location"] in ("Start", "Middle", "End") and "{language_requested}" in first["phrasing"]
    code, _, err = run(capsys, "lcb", "--source", "wikipedia")
    assert code == 2 and "unknown" in err and "okapi" in err
    bad = tmp_path / "test_sets.zip"
    bad.write_bytes(b"not a zip")
    code, _, err = run(capsys, "lcb", "--from", str(bad))
    assert code == 2 and "sha256 mismatch" in err
    code, _, err = run(capsys, "lcb", "--from", str(bad), "--no-verify")
    assert code == 2 and "not a readable zip" in err and "Traceback" not in err


def _csv(path, header, rows):
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_score_formats(capsys, tmp_path):
    f = _csv(
        tmp_path / "m.csv",
        "id,model,completion,task,source,language",
        [f'{i},m,"{FR}",monolingual,okapi,fr' for i in range(3)],
    )
    code, out, err = run(capsys, "score", str(f))
    assert code == 0 and "m · monolingual · LPR" in out and "lid.176.ftz" in out
    code, out, _ = run(capsys, "score", str(f), "--format", "json")
    data = json.loads(out)
    assert data["rows"][0]["lpr"] == 1.0 and data["lid_model"].startswith("lid.176.ftz")
    code, out, _ = run(capsys, "score", str(f), "--format", "tsv", "--details", str(tmp_path / "d.jsonl"))
    assert out.splitlines()[0].startswith("task\tmodel\tsource\tlanguage\tlpr\twpr\tacc")
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize(
    "name,content,expect",
    [
        (
            "nocol.csv",
            "id,model,text,task,source,language\n0,m,hi,monolingual,okapi,fr\n",
            "missing column(s) 'completion'",
        ),
        (
            "lang.csv",
            "id,model,completion,task,source,language\n0,m,hi,monolingual,okapi,fr\n1,m,hi,monolingual,okapi,xx\n",
            "row 2 (line 3): field 'language': language 'xx' is unknown to the language-ID model",
        ),
        ("empty.csv", "", "file is empty"),
        (
            "bad.jsonl",
            '{"id": 1, "task": "monolingual", "source": "s", "language": "fr", "completion": "x"}\n{oops\n',
            "line 2: invalid JSON",
        ),
    ],
)
def test_score_bad_input(capsys, tmp_path, name, content, expect):
    f = tmp_path / name
    f.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, "score", str(f))
    assert code == 2
    assert str(f) in err and expect in err and "Traceback" not in err


def test_score_non_utf8(capsys, tmp_path):
    f = tmp_path / "latin1.csv"
    f.write_bytes("id,model,completion,task,source,language\n0,m,café,monolingual,okapi,fr\n".encode("latin-1"))
    code, _, err = run(capsys, "score", str(f))
    assert code == 2 and str(f) in err and "not UTF-8" in err and "line 2" in err


def test_tables_rebuild_paper_layout(capsys, shared, tmp_path):
    code, out, _ = run(
        capsys,
        "paper-tables",
        str(shared / "lcb" / "outputs" / "gpt-4-turbo.csv"),
        str(shared / "lcb" / "outputs" / "command-r.csv"),
        "--out",
        str(tmp_path),
    )
    assert code == 0
    assert "Table 3 (Monolingual)" in out and "Table A5 (Cross-lingual)" in out
    md = (tmp_path / "table3_lpr_mono.md").read_text()
    # official (all, all) LPR of gpt-4-turbo, monolingual, from the reference: 0.979...
    row = next(line for line in md.splitlines() if line.startswith("| gpt-4-turbo"))
    assert row.split("|")[2].strip() == "97.9"
    assert (tmp_path / "table4_wpr_cros.tex").read_text().startswith(r"\begin{table}")
    assert (tmp_path / "tableA1_line_acc_mono.csv").exists()


def test_csv_keeps_unicode_line_separators_inside_fields(tmp_path):
    from mlft.completions import read_completions

    f = tmp_path / "u.csv"
    f.write_text(
        "id,model,completion,task,source,language\r\n"
        '0,m,one\u2028two\x85three,monolingual,okapi,fr\r\n1,m,"a\r\nb",monolingual,okapi,fr\r\n',
        encoding="utf-8",
    )
    rows = read_completions(f)
    assert [r.completion for r in rows] == ["one\u2028two\x85three", "a\nb"]

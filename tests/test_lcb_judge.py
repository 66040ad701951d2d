"""The NON-OFFICIAL second judge (mlft.benchmarks.lcb.judge): the same counted lines labelled by langdetect, reported beside
the official fastText LPR in `mlft score --judge` and in an lcb eval's rows (lpr@<judge>)."""

import json

import pytest

from mlft.benchmarks.lcb.judge import beside_rows, check_judge, judge_report
from mlft.completions import Completion
from mlft.errors import ConfigError
from mlft.reports.score_tables import beside_table

# lid.176.ftz labels this Bulgarian line ru (0.78); langdetect labels it bg (0.86)
BG = "Библиотеката отваря в девет сутринта и затваря в шест вечерта."
FI = "Kirjasto aukeaa yhdeksältä aamulla ja sulkeutuu kuudelta illalla."
EN = "The library opens at nine in the morning and closes at six."


def _completions():
    rows = [("1", "bg", BG), ("2", "bg", EN), ("3", "fi", FI), ("4", "fi", EN), ("5", "fi", "Kiitos!")]
    return [Completion(i, "m", "crosslingual", "mine", lang, text) for i, lang, text in rows]


@pytest.fixture(scope="module")
def reports():
    from mlft.benchmarks.lcb.scoring import score_completions

    comps = _completions()
    return comps, score_completions(comps), judge_report(comps, "langdetect")


def _row(rows, lang):
    return next(r for r in rows if r["source"] == "all" and r["language"] == lang)


def test_judges_disagree_on_the_same_counted_lines(reports):
    comps, official, judged = reports
    rows = beside_rows(comps, official, judged, "langdetect")
    bg, fi, avg = _row(rows, "bg"), _row(rows, "fi"), _row(rows, "all")
    # fastText: the Bulgarian reply is Russian (bg LPR 0/2); langdetect: Bulgarian (1/2)
    assert (bg["lpr"], bg["lpr@langdetect"], bg["difference"]) == (0.0, 0.5, 0.5)
    assert (bg["counted"], bg["disagree"]) == (2, 1)
    # both judges agree on fi; "Kiitos!" (1 token) is counted by neither
    assert (fi["lpr"], fi["lpr@langdetect"], fi["counted"], fi["disagree"]) == (0.5, 0.5, 2, 0)
    assert avg["lpr"] == pytest.approx(0.25) and avg["lpr@langdetect"] == pytest.approx(0.5)
    assert [r.counted for r in official.replies] == [r.counted for r in judged.replies] == [True] * 4 + [False]
    table = beside_table(rows, "langdetect", official.lid_name)
    assert "LPR (langdetect)" in table and "+50.0" in table and "NON-OFFICIAL" in table


def test_score_cli_judge_column(tmp_path, capsys):
    from mlft.cli import main

    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": c.id, "model": c.model, "task": c.task, "source": c.source,
                                        "language": c.language, "completion": c.completion}) + "\n"
                            for c in _completions()), encoding="utf-8")
    assert main(["score", str(path), "--judge", "langdetect", "--format", "json", "--no-guard"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["judge"]["lid_model"] == "langdetect"
    assert _row(data["judge"]["rows"], "bg")["lpr@langdetect"] == 0.5
    assert _row(data["rows"], "bg")["lpr"] == 0.0  # the official rows are unchanged
    assert main(["score", str(path), "--judge", "langdetect", "--format", "tsv", "--no-guard"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split("\t")
    bg = next(x.split("\t") for x in lines[1:] if x.split("\t")[header.index("language")] == "bg"
              and x.split("\t")[header.index("source")] == "all")
    assert header[-1] == "lpr@langdetect" and float(bg[-1]) == 0.5 and float(bg[header.index("lpr")]) == 0.0


def test_judge_errors():
    with pytest.raises(ConfigError, match="unknown judge 'ftz'; valid: py3langid, langdetect"):
        check_judge("ftz", "suite")
    with pytest.raises(SystemExit):  # argparse choices
        from mlft.cli import main

        main(["score", "x.jsonl", "--judge", "nope"])


def test_eval_judge_rows_and_column(reports, tmp_path):
    """The eval's lpr@langdetect rows, the judged outcomes file and the variants-table column with the paired
    difference from the first row."""
    from mlft.benchmarks.lcb.scoring import outcomes_from
    from mlft.evals.lcb import LcbOptions, judge_rows
    from mlft.reports.mitigation import judge_column

    comps, official, _ = reports
    o = LcbOptions(judge="langdetect", resamples=200)
    rows = []
    for name, texts in (("base", [EN, EN, FI, EN, "Kiitos!"]), ("better", [BG, BG, FI, FI, "Kiitos!"])):
        mine = [Completion(c.id, name, c.task, c.source, c.language, t) for c, t in zip(comps, texts)]
        from mlft.benchmarks.lcb.scoring import score_completions

        outs = outcomes_from(mine, score_completions(mine).replies)
        (tmp_path / name).mkdir()
        rows += judge_rows(name, mine, outs, o, tmp_path / name)
    avg = {r["variant"]: r for r in rows if r["language"] == "avg"}
    assert avg["base"]["value"] == pytest.approx(0.25) and avg["better"]["value"] == pytest.approx(1.0)
    assert avg["better"]["metric"] == "lpr@langdetect" and (tmp_path / "better" / "outcomes.langdetect.jsonl").is_file()
    col = judge_column(rows, tmp_path, ["base", "better"], "langdetect", resamples=1000)
    cells = col["Cross LPR (langdetect)"]
    assert cells["base"].startswith("25.0 ±") and "(+75.0" in cells["better"]


def test_empty_group_note():
    """A language with no counted reply scores LPR 100 % by the official rule: the variants table says so."""
    from mlft.reports.mitigation import empty_group_notes

    rows = [{"variant": v, "task": "crosslingual", "language": lang, "metric": "coverage", "value": cov, "n": 24}
            for v, lang, cov in (("base", "bn", 4 / 24), ("base", "cs", 0.6), ("gate", "bn", 0.0), ("gate", "cs", 0.5))]
    rows.append({"variant": "gate", "task": "crosslingual", "language": "avg", "metric": "coverage", "value": 0.25,
                 "n": 48})
    (note,) = empty_group_notes(rows, ["base", "gate"])
    assert note.startswith("⚠ gate: crosslingual: no counted reply in bn") and "50 pp of the average" in note

"""The NON-OFFICIAL second judge (mlft.benchmarks.lcb.judge): the same counted lines labelled by langdetect, reported
beside
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
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": c.id,
                    "model": c.model,
                    "task": c.task,
                    "source": c.source,
                    "language": c.language,
                    "completion": c.completion,
                }
            )
            + "\n"
            for c in _completions()
        ),
        encoding="utf-8",
    )
    assert main(["score", str(path), "--judge", "langdetect", "--format", "json", "--no-guard"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["judge"]["lid_model"] == "langdetect"
    assert _row(data["judge"]["rows"], "bg")["lpr@langdetect"] == 0.5
    assert _row(data["rows"], "bg")["lpr"] == 0.0  # the official rows are unchanged
    assert main(["score", str(path), "--judge", "langdetect", "--format", "tsv", "--no-guard"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split("\t")
    bg = next(
        x.split("\t")
        for x in lines[1:]
        if x.split("\t")[header.index("language")] == "bg" and x.split("\t")[header.index("source")] == "all"
    )
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
    from mlft.evals.lcb import judge_rows
    from mlft.evals.lcb_options import LcbOptions
    from mlft.reports.mitigation import judge_column
    from mlft.reports.table_rows import Row
    from mlft.reports.table_spec import Capability, judge_columns

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
    table_rows = [
        Row(v, {(r["task"], r["language"], r["metric"]): r for r in rows if r["variant"] == v}, None, tmp_path)
        for v in ("base", "better")
    ]
    cross = Capability(**next(c for c in judge_columns("langdetect") if c["task"] == "crosslingual"))
    cells = judge_column(table_rows, table_rows[0], cross, resamples=1000)
    assert cells["base"].text.startswith("25.0 ±") and cells["base"].test is None
    assert "(+75.0" in cells["better"].text and cells["better"].test.diff == pytest.approx(0.75)


def test_empty_group_note():
    """A language with no counted reply scores LPR 100 % by the official rule: the variants table says so."""
    from mlft.reports.mitigation import empty_group_notes

    rows = [
        {"variant": v, "task": "crosslingual", "language": lang, "metric": "coverage", "value": cov, "n": 24}
        for v, lang, cov in (("base", "bn", 4 / 24), ("base", "cs", 0.6), ("gate", "bn", 0.0), ("gate", "cs", 0.5))
    ]
    rows.append(
        {"variant": "gate", "task": "crosslingual", "language": "avg", "metric": "coverage", "value": 0.25, "n": 48}
    )
    (note,) = empty_group_notes(rows, ["base", "gate"])
    assert note.startswith("⚠ gate: crosslingual: no counted reply in bn") and "50 pp of the average" in note


TEXTS = {"bg": BG, "fi": FI, "de": "Die Bibliothek öffnet um neun Uhr morgens und schließt um sechs Uhr abends."}


def _judged_eval(folder, share: dict[str, float], replies: int = 2):
    """An lcb eval's rows for variants answering in the prompt's language with probability `share[variant]` (else
    English), `replies` per prompt, scored officially and by langdetect; the eval folder holds the outcomes."""
    import dataclasses
    import random

    from mlft.benchmarks.lcb.scoring import outcomes_from, score_completions
    from mlft.evals.lcb import judge_rows, metric_rows
    from mlft.evals.lcb_options import LcbOptions
    from mlft.stats import save_outcomes

    rng, o, rows = random.Random(0), LcbOptions(judge="langdetect", resamples=200), []
    for name, p in share.items():
        comps = [
            Completion(
                f"{task[0]}{lang}{i}", name, task, "mine", lang, TEXTS[lang] if rng.random() < p else EN, {"sample": k}
            )
            for task in ("monolingual", "crosslingual")
            for lang in TEXTS
            for i in range(12)
            for k in range(replies)
        ]
        outs = outcomes_from(comps, score_completions(comps).replies)
        (folder / name).mkdir(parents=True)
        save_outcomes(folder / name / "outcomes.jsonl", outs)
        rows += [dataclasses.replace(r, outcomes=f"{name}/outcomes.jsonl") for r in metric_rows(name, outs, 0.95, 200)]
        rows += judge_rows(name, comps, outs, o, folder / name)
    return rows


def _columns(table, headers):
    return {h: {row[0].removesuffix(" ⚠"): row[table.header.index(h)] for row in table.body} for h in headers}


def test_one_judge_column_in_the_variants_table_and_table_specs(tmp_path):
    """The second judge's LPR columns are one computation: an eval's variants table, a `mlft table` spec over the
    eval's scores.jsonl and one over training run directories (the demo's) print the same cells for the same
    replies: value ±h, the paired difference from the base row over prompts (two replies per prompt: a cluster)
    and * (Holm down the column); a judged drop is tested as LPR is, not flagged as a capability drop."""
    from mlft.io import curve_file
    from mlft.reports.mitigation import tables, variant_table
    from mlft.reports.table_spec import Capability, RowSpec, TableSpec, judge_columns

    variants = {"base": 0.8, "worse": 0.4, "same": 0.75}
    rows = _judged_eval(tmp_path / "eval", variants)
    (tmp_path / "eval" / "scores.jsonl").write_text(
        "".join(json.dumps(r.to_dict()) + "\n" for r in rows), encoding="utf-8"
    )
    for v in variants:  # a training run per variant: its step-0 pass is the variant's eval
        mine = [
            dict(r.to_dict(), step=0, variant="model", suite_variant=v, outcomes=f"../../eval/{r.outcomes}")
            for r in rows
            if r.variant == v
        ]
        curve_file.append_pass(tmp_path / "runs" / v, 0, "model", mine, 1.0, "test")
    capability = [Capability(**c) for c in judge_columns("langdetect")]
    headers = [c.header for c in capability]

    variant = variant_table(rows, tmp_path / "eval", list(variants), {}, "t", "langdetect")
    from_scores = tables(
        TableSpec(
            [RowSpec(v, rows_file=str(tmp_path / "eval" / "scores.jsonl"), suite_variant=v) for v in variants],
            capability=capability,
            per_language=[],
        )
    )[0]
    from_runs = tables(
        TableSpec(
            [RowSpec(v, run=str(tmp_path / "runs" / v), step=0) for v in variants],
            capability=capability,
            per_language=[],
        )
    )[0]
    cells = _columns(variant, headers)
    assert _columns(from_scores, headers) == cells == _columns(from_runs, headers)
    for h in headers:
        assert cells[h]["base"].count("±") == 1 and "(" not in cells[h]["base"]
        assert "(-" in cells[h]["worse"] and cells[h]["worse"].endswith("*)")  # 40 pp fewer: significant
        assert cells[h]["same"].endswith(")") and not cells[h]["same"].endswith("*)")
        assert "↓" not in cells[h]["worse"]
    notes = [n for n in variant.notes if n.startswith("LPR (langdetect)")]
    assert notes == [n for n in from_runs.notes if n.startswith("LPR (langdetect)")] and len(notes) == 1
    assert not any("capability" in n for t in (variant, from_scores, from_runs) for n in t.notes)
    data = [
        {(r["label"], h): r["capability"][h].get("p_vs_base") for r in t.data for h in headers}
        for t in (variant, from_scores, from_runs)
    ]
    assert data[0] == data[1] == data[2]
    assert all(data[0][("base", h)] is None and data[0][("worse", h)] < 0.05 for h in headers)

"""The scorer reproduces the official compute_metrics.py (run with lid.176.ftz) on all released outputs, through the
path `mlft score` takes by default (the reasoning-trace split, `scoring.score_traced`, which leaves replies without a
marker untouched)."""

import csv

import pytest

from mlft.benchmarks.lcb.scoring import score_traced
from mlft.benchmarks.lcb.traces import DEFAULT_MARKERS, NONE
from mlft.completions import read_completions

COUNT_KEYS = ("n_responses", "n_scored", "n_line_err", "n_word_err", "n_lines_scored", "n_lines_wrong")


@pytest.fixture(scope="module")
def report(shared):
    completions = []
    for f in sorted((shared / "lcb" / "outputs").glob("*.csv")):
        completions += read_completions(f)
    assert len(completions) > 60000
    traced = score_traced(completions, DEFAULT_MARKERS, words=shared / "lcb" / "words")
    # no released reply holds a trace marker: every answer is its reply, the very object, and no trace is scored
    assert set(traced.split.outcomes) == {NONE} and traced.trace is None
    assert all(a is c for a, c in zip(traced.split.answers, completions))
    return traced.answer


def _rows(path):
    with open(path, encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_all_1040_metric_rows_match(report, shared):
    ref = _rows(shared / "lcb" / "reference" / "official_metrics_ftz.tsv")
    assert len(ref) == 1040
    got = {(r["task"], r["model"], r["source"], r["language"]): r for r in report.rows}
    assert len(got) == 1040
    for r in ref:
        g = got[(r["task"], r["model"], r["source"], r["language"])]
        for key in ("lpr", "wpr", "acc"):
            if r[key] == "NA":
                assert g[key] is None, (r, key)
            else:
                assert g[key] == pytest.approx(float(r[key]), abs=1e-9), (r, key)


def test_all_denominators_match(report, shared):
    got = {(r["task"], r["model"], r["source"], r["language"]): r for r in report.rows}
    ref = _rows(shared / "lcb" / "reference" / "official_counts_ftz.tsv")
    assert len(ref) == 660
    for r in ref:
        g = got[(r["task"], r["model"], r["source"], r["language"])]
        assert {k: g[k] for k in COUNT_KEYS} == {k: int(r[k]) for k in COUNT_KEYS}, r


def test_report_names_lid_model_and_lcpr(report):
    assert report.lid_name.startswith("lid.176.ftz (sha256 8f3472cfe873")
    head = report.headline("monolingual", "gpt-4-turbo")
    by_lang = report.by_language("monolingual", "gpt-4-turbo")
    per_lang = [2 * m["lpr"] * m["wpr"] / (m["lpr"] + m["wpr"]) for m in by_lang.values() if m["wpr"] is not None]
    assert len(per_lang) == 6
    assert head["lcpr"] == pytest.approx(sum(per_lang) / 6)

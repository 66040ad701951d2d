"""Polyglot-or-Not without a model: the authors' logs through our metrics reproduce the paper."""

import csv
import json

import pytest

from mlft.benchmarks.polyglot import metrics
from mlft.benchmarks.polyglot.data import LANGUAGES, load_facts, parse_row
from mlft.errors import ConfigError, DataError
from mlft.evals.polyglot.cka import FactScore

# Paper Table 1 (20-language unweighted mean). m-bert: the logged per-language values give 62.10, the paper
# prints 62.00 (README) — we reproduce the logs.
PAPER_MEANS = {"llama-30b": 79.31, "m-bert-base": 62.10, "bloom-7b": 57.70, "xlm-roberta-large": 56.03, "mt5-xl": 52.51}
PAPER_MEAN_CI = {"llama-30b": 0.74, "m-bert-base": 0.87, "bloom-7b": 0.88, "xlm-roberta-large": 0.90, "mt5-xl": 0.91}


@pytest.fixture(scope="module")
def ref(shared):
    return shared / "polyglot" / "reference"


def _logged(ref):
    with open(ref / "metrics_from_repo.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("folder", sorted(PAPER_MEANS))
def test_twenty_language_means(ref, folder):
    rows = [r for r in _logged(ref) if r["result_folder"] == folder]
    per_lang = {r["lang"]: float(r["accuracy_pct"]) for r in rows}
    assert sorted(per_lang) == sorted(LANGUAGES)
    assert round(metrics.language_mean(per_lang), 2) == pytest.approx(PAPER_MEANS[folder], abs=1e-9)
    mean_ci = metrics.language_mean({r["lang"]: float(r["ci95_halfwidth_pct"]) for r in rows})
    assert mean_ci == pytest.approx(PAPER_MEAN_CI[folder], abs=0.011)  # mt5-xl: logs 0.901, paper 0.91


def test_every_logged_n_equals_our_row_count(ref, shared):
    counts = {lang: len(load_facts(lang, shared / "polyglot")) for lang in ("en", "ru", "hu", "sr")}
    for r in _logged(ref):
        if r["lang"] in counts:
            assert int(r["n_pairs"]) == counts[r["lang"]], r


def test_mbert_ru_item_log_known_rule_and_bootstrap(ref, shared):
    """Per-item probabilities of m-BERT on ru: our 'known' rule and mean give the logged values, the accuracy
    and a bootstrap CI that matches the logged one (55.214 +- 1.687)."""
    with open(ref / "item-log-mbert-base-ru.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    facts = load_facts("ru", shared / "polyglot")
    assert [r["dataset_id"] for r in rows] == [f.dataset_id for f in facts]
    scores = [FactScore(f, float(r["p_true"]), tuple(json.loads(r["p_false_list"]))) for f, r in zip(facts, rows)]
    assert all(len(s.p_false) == len(f.false) for s, f in zip(scores, facts))
    assert [s.known for s in scores] == [r["known"] == "True" for r in rows]
    assert [s.p_false_mean for s in scores] == pytest.approx([float(r["p_false_average"]) for r in rows], rel=1e-12)
    known = [s.known for s in scores]
    assert 100 * metrics.accuracy(known) == pytest.approx(55.214, abs=5e-4)
    assert 100 * metrics.bootstrap_halfwidth(known) == pytest.approx(1.687, abs=0.08)
    per_rel = metrics.by_relation([f.relation for f in facts], known)
    assert sum(n for _, n in per_rel.values()) == len(facts)
    assert sum(acc * n for acc, n in per_rel.values()) == pytest.approx(1816)


@pytest.mark.parametrize("model,n_wrong,acc,ties", [("distilgpt2", 9392, 64.226, 151), ("gpt2-xl", 6889, 73.760, 26)])
def test_error_sets_imply_logged_accuracy_with_ties_wrong(ref, shared, model, n_wrong, acc, ties):
    with open(ref / f"error-analysis-{model}-english.csv", encoding="utf-8") as fh:
        wrong = list(csv.DictReader(fh))
    facts = load_facts("en", shared / "polyglot")
    wrong_ids = {r["dataset_id"] for r in wrong}
    assert len(wrong) == n_wrong and wrong_ids <= {f.dataset_id for f in facts}
    # a tie (difference exactly 0) is counted as not known by the strict rule
    tied = [r for r in wrong if float(r["differences"]) == 0.0]
    assert len(tied) == ties
    assert not FactScore(facts[0], 0.25, (0.25, 0.25)).known
    known = [f.dataset_id not in wrong_ids for f in facts]
    assert round(100 * metrics.accuracy(known), 3) == acc


def test_bootstrap_is_seeded_and_close_to_the_normal_approximation():
    known = [True] * 700 + [False] * 300
    a, b = metrics.bootstrap_halfwidth(known, seed=1), metrics.bootstrap_halfwidth(known, seed=1)
    assert a == b
    assert a == pytest.approx(1.96 * (0.7 * 0.3 / 1000) ** 0.5, rel=0.05)
    assert metrics.bootstrap_halfwidth([True] * 50) == 0.0
    # the binomial shortcut has the distribution of item resampling
    import numpy as np

    rng = np.random.default_rng(0)
    arr = np.array(known)
    resampled = [arr[rng.integers(0, 1000, 1000)].mean() for _ in range(4000)]
    lo, hi = np.quantile(resampled, [0.025, 0.975])
    assert (hi - lo) / 2 == pytest.approx(a, rel=0.1)


def test_variants_pair_by_index_and_bad_rows(shared):
    row = {
        "dataset_id": "x",
        "stem": "A venait du <br> A venait de <br> A venait d'",
        "true": "Canada",
        "false": "Norvège <br> Italie",
        "relation": "P495",
    }
    fact = parse_row(row, "f.parquet, row 3")
    assert fact.true_stem == "A venait du" and fact.false_stems == ("A venait de", "A venait d'")
    assert fact.false == ("Norvège", "Italie")
    plain = parse_row({**row, "stem": "A venait de"}, "f")
    assert plain.false_stems == ("A venait de", "A venait de")
    with pytest.raises(DataError, match=r"f.parquet, row 3: stem has 2 ' <br> ' variants but there are 2 false"):
        parse_row({**row, "stem": "A <br> B"}, "f.parquet, row 3")
    with pytest.raises(DataError, match=r"row 3: column 'true' is empty"):
        parse_row({**row, "true": " "}, "f.parquet, row 3")
    with pytest.raises(DataError, match="ends with whitespace"):
        parse_row({**row, "stem": "A venait de "}, "f")
    fr = load_facts("fr", shared / "polyglot", sample=50, seed=3)
    assert len(fr) == 50 and fr == load_facts("fr", shared / "polyglot", sample=50, seed=3)
    assert any(f.true_stem != f.false_stems[0] for f in load_facts("fr", shared / "polyglot", sample=500))


def test_missing_files_and_unknown_language(tmp_path):
    with pytest.raises(ConfigError, match="unknown Polyglot-or-Not language 'xx'"):
        load_facts("xx", tmp_path)
    with pytest.raises(DataError, match=r"de.parquet: Polyglot-or-Not file not found"):
        load_facts("de", tmp_path)
    (tmp_path / "de.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match="de.parquet: cannot read parquet"):
        load_facts("de", tmp_path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table(
            {
                "dataset_id": ["a", "b"],
                "stem": ["S1", "S2 <br> S3"],
                "true": ["t", "t"],
                "false": ["f", "f <br> g"],
                "relation": ["P1", "P1"],
            }
        ),
        tmp_path / "de.parquet",
    )
    with pytest.raises(DataError, match=r"de.parquet, row 1: stem has 2 ' <br> ' variants"):
        load_facts("de", tmp_path)
    pq.write_table(pa.table({"dataset_id": ["a"], "stem": ["S1"]}), tmp_path / "de.parquet")
    with pytest.raises(DataError, match="missing column.*true"):
        load_facts("de", tmp_path)


def test_fetch_table_matches_the_shared_files(shared):
    from mlft.benchmarks.polyglot.fetch import FILES, md5_of, url_of

    for lang, (_, md5) in FILES.items():
        assert md5_of(shared / "polyglot" / f"{lang}.parquet") == md5, lang
    assert "/40d7db0" in url_of("en") and url_of("de").endswith("translated_versions/de-fact-completion-4-7-23.parquet")

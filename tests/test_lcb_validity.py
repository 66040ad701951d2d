"""The guard's lexical validity (word salad in the right script), LID detail, and `mlft score` with the guard."""

import csv
import io
import json

import pytest

from mlft.benchmarks.lcb.guard import languages_without_lexicon, lexical_validity, lexicon_languages
from mlft.benchmarks.lcb.guard_report import guard_flags, guard_rows
from mlft.cli import main
from mlft.constants import VALID_SHARE
from mlft.stats import Outcome, intervals, load_outcomes, paired_test, save_outcomes
from mlft.stats import unknown_share_intervals as lid_detail

# right script, no words (held out: not the sentences the thresholds were tuned on, measurements/lexical_validity.py)
SALAD = {
    "ja": ["ケモラスタのピルネとハムリョンがドラプセ", "<<文章のラクティ．．．．．．"],
    "ar": ["بلمسقور تفانيطة مسكولي درنوبة", "فرشمونة كلطابي نيسمورت"],
    "hi": ["घटमोली फरसाना चिकलूटी भमराखी", "सुपरातिन कोलमाहे ढिलपुरा"],
    "zh": ["犇骉垚嫑嘦巭烎槑砳", "靐龘孖冇嫑骉"],
    "bg": ["Кралмовица пустерна глобичата врамбул", "Я хочу сказать, что это очень интересно."],  # Russian
    "fi": ["Tarmuvoo kelpisti naarumoksa vilkertoon", "Saltuvina porkimetto helvastuun"],
}
REAL = {
    "ja": ["私は毎朝コーヒーを飲んでから会社に行きます。", "この本はとても面白いので、友達にも勧めました。"],
    "ar": ["يذهب الأطفال إلى المدرسة كل صباح مع أصدقائهم.", "الطقس جميل اليوم ونريد أن نذهب إلى البحر."],
    "hi": ["बच्चे हर सुबह अपने दोस्तों के साथ स्कूल जाते हैं।", "आज मौसम बहुत अच्छा है और हम बाहर घूमने जाएंगे।"],
    "zh": ["孩子们每天早上和朋友一起去学校。", "这本书非常有意思，我推荐给了我的朋友。"],
    "bg": ["Децата ходят на училище всяка сутрин с приятелите си.", "Времето днес е много хубаво."],
    "fi": ["Lapset menevät kouluun joka aamu ystäviensä kanssa.", "Tänään on todella kaunis ilma."],
}


@pytest.mark.parametrize("lang", sorted(SALAD))
def test_salad_flagged_real_sentences_pass(lang):
    for text in SALAD[lang]:
        assert lexical_validity(text, lang) <= VALID_SHARE, (lang, text)
    for text in REAL[lang]:
        assert lexical_validity(text, lang) >= 0.8, (lang, text)


def test_validity_edges_and_languages():
    assert lexical_validity('""""""', "fr") == 0.0 and lexical_validity("", "en") == 0.0  # no word: nothing valid
    assert lexical_validity('itititit"itit', "en") == 0.0
    assert lexical_validity("The answer is 42, as the book says.", "en") == 1.0  # numbers are not words
    assert lexical_validity("Habari ya asubuhi rafiki yangu", "sw") is None  # no Swahili lexicon
    have, lack = lexicon_languages(), languages_without_lexicon()
    assert {"ar", "bg", "bn", "de", "fi", "hi", "ja", "ko", "ru", "zh"} <= set(have)
    assert {"sw", "eu", "th"} <= set(lack) and not set(have) & set(lack)
    assert len(have) + len(lack) == 176  # every label of lid.176


def _outcome(i, lang, validity, source="s", task="monolingual", **kw):
    return Outcome(str(i), task, source, lang, True, False, False, False, validity=validity, **kw)


def test_validity_statistics_follow_the_official_aggregation(tmp_path):
    # fr: 8 of 10 valid; ja: 3 of 10; sw (no lexicon): not measured, left out of the validity aggregate
    outs = [_outcome(i, "fr", 0.9 if i < 8 else 0.2) for i in range(10)]
    outs += [_outcome(10 + i, "ja", 0.7 if i < 3 else 0.1) for i in range(10)]
    outs += [_outcome(20 + i, "sw", None) for i in range(10)]
    est = intervals(outs, n=2000)
    assert est[("monolingual", "all", "fr")]["validity"].value == pytest.approx(0.8)
    assert est[("monolingual", "all", "all")]["validity"].value == pytest.approx(0.55)  # (0.8 + 0.3) / 2
    assert "validity" not in est[("monolingual", "all", "sw")]
    top = est[("monolingual", "all", "all")]["validity"]
    assert top.low < 0.55 < top.high
    save_outcomes(tmp_path / "o.jsonl", outs)
    assert load_outcomes(tmp_path / "o.jsonl") == outs
    better = [_outcome(o.id, o.language, None if o.validity is None else 0.95) for o in outs]
    res = paired_test(outs, better, "validity", n=2000)
    assert res.diff == pytest.approx(0.45) and res.p_value < 0.01
    mc = paired_test(outs, better, "validity", method="mcnemar")
    assert mc.n_pairs == 20 and mc.dropped == {"validity not measured in both": 10}


def test_guard_flags_salad_against_base():
    base = [_outcome(i, lang, 0.97) for lang in ("ar", "ja") for i in range(40)]
    salad = [_outcome(o.id, o.language, 0.3 if int(o.id) % 2 else 0.97) for o in base]  # half the replies
    flags = guard_flags(salad, base, n=2000)
    got = {(f.language, f.metric) for f in flags if f.paired}
    assert got == {("all", "validity"), ("ar", "validity"), ("ja", "validity")}
    assert any(f.metric == "validity" and f.base is None and "below 80%" in f.reason for f in flags)  # limit
    assert guard_flags(base, base, n=2000) == []
    old = [Outcome(o.id, o.task, o.source, o.language, True, False, False, False) for o in base]
    assert guard_flags(old, base, n=2000) == []  # written before validity existed: nothing to compare


def test_lid_detail_unknown_share():
    outs = [
        _outcome(0, "fr", 1.0, lines=4, unknown_lines=1),
        _outcome(1, "fr", 1.0, lines=4, unknown_lines=0),
        _outcome(2, "fr", 1.0, source="t", lines=2, unknown_lines=2),
        _outcome(3, "de", 1.0, lines=5, unknown_lines=0),
    ]
    d = lid_detail(outs)
    assert d[("monolingual", "s", "fr")]["unknown"] == pytest.approx(1 / 8)
    assert d[("monolingual", "all", "fr")]["unknown"] == pytest.approx((1 / 8 + 1) / 2)  # mean over sources
    assert d[("monolingual", "all", "all")]["unknown"] == pytest.approx(((1 / 8 + 1) / 2 + 0) / 2)
    row = {r["language"]: r for r in guard_rows(outs, n=500)}["all"]
    assert row["unknown"] == pytest.approx(0.28125) and row["skipped"] == 0.0 and row["lines"] == 15


def test_unknown_share_interval_resamples_replies_not_lines():
    # 40 replies of 5 lines: in A the unknown lines sit in 4 replies (clustered), in B spread one per reply over
    # 20 replies; same pooled share (20 / 200 = 10 %). Resampling replies widens A's interval, as it should.
    clustered = [_outcome(i, "fr", 1.0, lines=5, unknown_lines=5 if i < 4 else 0) for i in range(40)]
    spread = [_outcome(i, "fr", 1.0, lines=5, unknown_lines=1 if i < 20 else 0) for i in range(40)]
    a, b = (lid_detail(x, n=4000)[("monolingual", "all", "all")] for x in (clustered, spread))
    assert a["unknown"] == b["unknown"] == pytest.approx(0.1)
    for d in (a, b):
        assert d["unknown_ci_low"] < 0.1 < d["unknown_ci_high"]
    width = {k: d["unknown_ci_high"] - d["unknown_ci_low"] for k, d in (("a", a), ("b", b))}
    assert width["a"] > 1.5 * width["b"]
    assert a["unknown_ci_high"] > 0.18 and b["unknown_ci_high"] < 0.16
    none = lid_detail([_outcome(0, "fr", 1.0)])[("monolingual", "all", "all")]  # written before the count existed
    assert none["unknown"] is None and none["unknown_ci_low"] is None


def test_analyze_reply_counts_unknown_lines():
    from mlft.benchmarks.lcb.metrics import analyze_reply

    class Lid:
        def predict(self, line):
            return ("fr", 0.2) if "zzz" in line else ("fr", 0.9)

    r = analyze_reply("un deux trois quatre cinq\nzzz un deux trois quatre\nsix", "fr", Lid(), frozenset())
    assert (r.n_lines, r.n_unknown, r.n_wrong) == (2, 1, 1)


# ---------------------------------------------------------------- mlft score

JUNK = ['itititit"itit', '""""""', "la la la la", "", "ok ok", "itititititit", "......", "ha ha", "\n\n", "lalala"]
REAL_FR = [
    "Je pense que la cuisine française est vraiment délicieuse et variée, surtout dans le sud.",
    "Paris est la capitale de la France et une ville très visitée par les touristes du monde entier.",
]


@pytest.fixture(scope="module")
def junk_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("junk") / "junk.jsonl"
    texts = [JUNK[i % len(JUNK)] for i in range(20)] + REAL_FR
    path.write_text(
        "".join(
            json.dumps(
                {"id": i, "model": "junk", "task": "monolingual", "source": "okapi", "language": "fr", "completion": t}
            )
            + "\n"
            for i, t in enumerate(texts)
        ),
        encoding="utf-8",
    )
    return path


def _score(capsys, *argv):
    assert main(["score", *argv]) == 0
    return capsys.readouterr().out


def test_score_shows_the_guard_in_every_format(shared, capsys, junk_file):  # LCB's word list
    table = _score(capsys, str(junk_file))
    assert "junk · monolingual · LPR" in table and "all    100.0  100.0" in table  # LPR alone: perfect
    assert "junk · monolingual · guard" in table
    for name in ("Coverage", "Degeneracy", "Lexical validity"):
        line = next(x for x in table.splitlines() if x.startswith(name))
        assert line.count("⚠") == 2, line  # avg and fr
    # 'la la la la', 'ok ok', 'ha ha', 'lalala' are French words (the degeneracy and coverage rows see them)
    # one stratum: the average row's interval is the stratum's (modified) Wilson interval (2 of 22 replies counted:
    # two from 0, so its lower bound is the one-sided Poisson bound, 1.6 %; plain Wilson said 2.5 %)
    assert "Coverage            9.1 [1.6,27.8] ⚠" in table and "Lexical validity  45.5 [26.9,65.3] ⚠" in table
    assert "validity 45.5% [26.9%, 65.3%] is below 80%" in table
    md = _score(capsys, str(junk_file), "--format", "markdown")
    assert "| Coverage | 9.1 [1.6,27.8] ⚠ | 9.1 ⚠ |" in md and "| Lexical validity | 45.5 [26.9,65.3] ⚠ |" in md
    assert "- ⚠ junk · monolingual · all: degeneracy 72.7%" in md
    for fmt in ("tsv", "csv"):
        text = _score(capsys, str(junk_file), "--format", fmt)
        rows = list(csv.DictReader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ","))
        top = next(r for r in rows if r["source"] == "all" and r["language"] == "all")
        assert float(top["lpr"]) == 1.0 and float(top["coverage"]) == pytest.approx(2 / 22)
        assert float(top["degeneracy"]) == pytest.approx(16 / 22) and float(top["validity"]) == pytest.approx(10 / 22)
        assert float(top["skipped"]) == pytest.approx(20 / 22) and float(top["unknown"]) == 0.0
        assert "coverage" in top["guard_flags"] and "degeneracy" in top["guard_flags"]
        assert "validity" in top["guard_flags"]
    data = json.loads(_score(capsys, str(junk_file), "--format", "json"))
    top = next(r for r in data["rows"] if r["source"] == "all" and r["language"] == "all")
    assert top["lpr"] == 1.0 and top["validity"] == pytest.approx(10 / 22) and top["validity_ci_high"] < 0.8
    assert {(f["language"], f["metric"]) for f in data["guard_flags"]} >= {
        ("all", "coverage"),
        ("all", "degeneracy"),
        ("all", "validity"),
    }


def test_no_guard_gives_the_official_output_alone(shared, capsys, junk_file):
    for fmt in ("table", "tsv", "json"):
        official = _score(capsys, str(junk_file), "--format", fmt, "--no-guard")
        guarded = _score(capsys, str(junk_file), "--format", fmt)
        assert "guard" not in official.lower() and "validity" not in official
        if fmt == "table":
            assert guarded.startswith(official)  # the guard comes after, the official blocks unchanged
        elif fmt == "tsv":
            off, gua = official.splitlines(), guarded.splitlines()
            assert [g.split("\t")[: len(o.split("\t"))] for o, g in zip(off, gua)] == [o.split("\t") for o in off]
        else:
            off, gua = json.loads(official)["rows"], json.loads(guarded)["rows"]
            assert [{k: g[k] for k in o} for o, g in zip(off, gua)] == off


# ---------------------------------------------------------------- eval rows, Table 11, trackers, card


def test_eval_rows_table11_and_trackers_carry_validity(tmp_path):
    from mlft.evals.lcb import metric_rows
    from mlft.reports.mitigation import mitigation_table
    from mlft.reports.table_rows import Row
    from mlft.training.tracking import scalars

    base = [
        _outcome(i, lang, 0.97, task=task, lines=2, unknown_lines=int(i == 0))
        for task in ("monolingual", "crosslingual")
        for lang in ("ar", "ja")
        for i in range(40)
    ]
    salad = [
        _outcome(o.id, o.language, 0.3 if int(o.id) % 2 else 0.97, task=o.task, lines=2, unknown_lines=0) for o in base
    ]
    rows = {}
    for name, outs in (("base", base), ("salad", salad)):
        save_outcomes(tmp_path / f"{name}.jsonl", outs)
        rows[name] = metric_rows(name, outs, 0.95, 1000)
    got = {(r["task"], r["language"], r["metric"]): r for r in rows["salad"]}
    assert got[("monolingual", "avg", "validity")]["value"] == pytest.approx(0.5)
    assert got[("monolingual", "avg", "skipped")]["value"] == 0.0
    assert {
        (r["language"], r["value"]) for r in rows["base"] if r["metric"] == "unknown" and r["task"] == "monolingual"
    } == {("ar", 1 / 80), ("ja", 1 / 80), ("avg", 1 / 80)}
    assert scalars(rows["salad"])["lcb/salad/monolingual/validity"] == pytest.approx(0.5)
    assert "lcb/base/crosslingual/unknown/ja" in scalars(rows["base"])
    table_rows = [
        Row(name, {(r["task"], r["language"], r["metric"]): r for r in rows[name]}, tmp_path / f"{name}.jsonl")
        for name in ("base", "salad")
    ]
    table = mitigation_table(table_rows, "base", "t", resamples=2000)
    assert "Valid mono / cross" in table.header
    text = table.render("markdown")
    assert "| salad ⚠ |" in text and "| 50.0 ±" in text and "| base |" in text
    assert any(n.startswith("⚠ salad: monolingual: validity 50.0% vs base 100.0%") for n in table.notes)


def test_model_card_shows_validity(tmp_path):
    from mlft.io import curve_file
    from mlft.training.card import _lcb_section

    rows = [
        {
            "step": 10,
            "variant": "model",
            "suite": "lcb_demo",
            "suite_variant": "default",
            "task": "monolingual",
            "language": "avg",
            "metric": m,
            "value": v,
        }
        for m, v in (("lpr", 0.9), ("validity", 0.42))
    ]
    curve_file.append_pass(tmp_path, 10, "model", rows, 1.0, "in-process")
    text = "\n".join(_lcb_section(tmp_path))
    assert "| task | LPR | WPR | LCPR | coverage | degeneracy | lexical validity |" in text
    assert "| monolingual | 90.0 | – | – | – | – | 42.0 |" in text


# English is not a word of another language (the lexicons hold English words: an English reply scored 1.0)
ENGLISH = [
    "The weather is nice today and I would like to go for a walk in the park with my friends.",
    "Renewable energy matters for the future of our planet because it cuts carbon emissions.",
]
NON_ENGLISH = ("ar", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "ru", "tr", "vi", "zh")
FLUENT = {
    "fr": "Il fait beau aujourd'hui et je voudrais aller me promener dans le parc avec mes amis.",
    "de": "Das Wetter ist heute schön und ich möchte mit meinen Freunden im Park spazieren gehen.",
    "es": "Hoy hace buen tiempo y me gustaría dar un paseo por el parque con mis amigos.",
    "id": "Cuaca hari ini cerah dan saya ingin jalan di taman bersama teman saya.",
    "tr": "Bugün hava çok güzel ve arkadaşlarımla parkta yürüyüşe çıkmak istiyorum.",
    "vi": "Hôm nay thời tiết đẹp và tôi muốn đi dạo trong công viên với bạn bè của mình.",
    "ru": "Сегодня хорошая погода, и я хотел бы погулять в парке с друзьями.",
    "ko": "오늘은 날씨가 좋아서 친구들과 함께 공원에 산책하러 가고 싶어요.",
}


@pytest.mark.parametrize("lang", NON_ENGLISH)
def test_an_english_reply_is_not_valid_in_another_language(lang):
    """A word counts for X only when it is a word of X and not an English word (Latin-script targets: English's
    lexicon does not hold it far more often), or is in X's script (the others)."""
    for text in ENGLISH:
        assert lexical_validity(text, lang) <= 0.25, (lang, text, lexical_validity(text, lang))
    assert lexical_validity(ENGLISH[0], "en") == 1.0  # English itself is untouched
    if lang in FLUENT:  # words shared with English that are the language's own (la, a, in, park...) still count
        assert lexical_validity(FLUENT[lang], lang) >= 0.9, lang

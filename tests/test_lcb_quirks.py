"""Each quirk of the official scorer, on small hand-made inputs, with the real bundled fastText model."""

import pytest

from mlft.benchmarks.lcb.metrics import GroupCounts, ReplyResult, ScoreOptions, analyze_reply, group_metrics, normalize
from mlft.benchmarks.lcb.scoring import harmonic, lcpr_of, score_completions
from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.completions import Completion
from mlft.langid import LanguageIdentifier

FR = "Je pense que la cuisine française est vraiment délicieuse et variée"
EN = "I think that French cuisine is really delicious and varied today"
AR = "أعتقد أن المطبخ العربي لذيذ جدا ومتنوع في كل مكان"
WORDS = frozenset({"computer", "delicious"})


@pytest.fixture(scope="module")
def lid():
    return LanguageIdentifier.from_spec("ftz")


def test_punctuation_deleted_without_space():
    assert normalize("Hello, world! (yes) — no،") == "Hello world yes   no"
    # "a.b.c.d.e" collapses to one token: the line is too short to count
    assert normalize("a.b.c.d.e f") == "abcde f"


def test_cut_at_next_question(lid):
    text = FR + "\nQ: " + EN
    assert normalize(text) == normalize(FR)
    assert not analyze_reply(text, "fr", lid, WORDS).line_error
    assert analyze_reply(FR + "\n" + EN, "fr", lid, WORDS).line_error


def test_short_lines_skipped(lid):
    r = analyze_reply("Hello there my friend\n" + FR, "fr", lid, WORDS)
    assert r.counted and r.n_lines == 1 and not r.line_error
    assert not analyze_reply("Hello there my friend", "fr", lid, WORDS).counted
    assert len(tokenize("one two three four five", "en")) == 5


def test_zh_whitespace_tokens_count():
    assert tokenize("我 爱 你", "zh") == ["我", " ", "爱", " ", "你"]
    assert len(tokenize("我爱你", "zh")) < 5


def test_empty_group_is_one_and_wpr_denominator():
    assert group_metrics(GroupCounts(), "ar") == {"acc": 1.0, "lpr": 1.0, "wpr": 1.0}
    assert group_metrics(GroupCounts(), "fr")["wpr"] is None
    c = GroupCounts()
    for _ in range(3):  # every counted reply has a line error: WPR denominator is max(1, 0)
        c.add(ReplyResult(counted=True, n_lines=1, n_wrong=1))
    m = group_metrics(c, "ar")
    assert m["lpr"] == 0.0 and m["wpr"] == 1.0 and m["acc"] == 0.0


def test_word_match_is_case_sensitive(lid):
    assert analyze_reply(AR + " computer", "ar", lid, WORDS).word_error
    assert not analyze_reply(AR + " Computer", "ar", lid, WORDS).word_error


def test_latin_script_word_check_is_optional(lid):
    text = AR + " Computer"
    assert not analyze_reply(text, "ar", lid, WORDS).word_error
    opts = ScoreOptions(word_check="latin")
    r = analyze_reply(text, "ar", lid, WORDS, opts, detail=True)
    assert r.word_error and r.english_words == ["Computer"]
    assert "NON-OFFICIAL" in opts.describe() and ScoreOptions().is_official


def test_label_alias_is_opt_in(lid):
    # French text expected as Italian fails, unless the user accepts "fr" for "it"
    assert analyze_reply(FR, "it", lid, WORDS).line_error
    opts = ScoreOptions(label_aliases={"it": {"fr"}})
    assert not analyze_reply(FR, "it", lid, WORDS, opts).line_error
    assert "label aliases: it=fr" in opts.describe()


def test_lcpr_is_mean_of_per_language_harmonic_means():
    by_lang = {"ar": {"lpr": 1.0, "wpr": 0.5}, "zh": {"lpr": 0.5, "wpr": 1.0}, "fr": {"lpr": 0.1, "wpr": None}}
    per = harmonic(1.0, 0.5)
    assert per == pytest.approx(2 / 3)
    assert lcpr_of(by_lang) == pytest.approx(2 / 3)
    # not the harmonic mean of the averaged LPR and WPR
    assert lcpr_of(by_lang) != pytest.approx(harmonic(0.75, 0.75))
    assert harmonic(0.0, 0.0) == 0.0


def test_details_and_bootstrap(shared):
    rows = [Completion(str(i), "m", "monolingual", "okapi", "fr", FR if i % 4 else EN) for i in range(40)]
    report = score_completions(rows, detail=True, bootstrap=500, seed=3)
    top = next(r for r in report.rows if r["source"] == "all" and r["language"] == "all")
    assert top["lpr"] == pytest.approx(0.75)
    assert top["lpr_ci_low"] < 0.75 < top["lpr_ci_high"]
    again = score_completions(rows, bootstrap=500, seed=3)
    assert next(r for r in again.rows if r["source"] == "all")["lpr_ci_low"] == top["lpr_ci_low"]
    failed = [d for d in report.details if d["line_error"]]
    assert len(failed) == 10 and failed[0]["lines"][0]["label"] == "en"
    assert failed[0]["failed_lines"] == [EN]

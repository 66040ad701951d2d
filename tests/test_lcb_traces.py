"""Replies with a reasoning trace: the split into (trace, answer, outcome) and the two parts scored apart, on replies
written for the test in many languages (English- and Chinese-drifting traces, a missing close tag, markers in the
wrong order, custom markers)."""

import json

import pytest

from mlft.benchmarks.lcb.scoring import score_traced
from mlft.benchmarks.lcb.traces import (
    CLOSED,
    MALFORMED,
    NONE,
    PREFILLED,
    UNCLOSED,
    TraceMarkers,
    parse_markers,
    split_completions,
    split_reply,
)
from mlft.cli import main
from mlft.completions import Completion
from mlft.errors import ConfigError

# (language, reply): monolingual prompts; each part one line of >= 5 tokens (LCB counts it) unless said otherwise
REPLIES = [
    # both parts in the language
    (
        "fr",
        "<think>L'utilisateur veut savoir pourquoi le ciel est bleu. Je vais expliquer la diffusion de la lumière "
        "par l'atmosphère.</think>\nLe ciel est bleu parce que la lumière du soleil est diffusée par les molécules "
        "de l'air.",
    ),
    # English-drifting trace, German answer
    (
        "de",
        "<think>The user is asking in German about the weather tomorrow. I should answer in German and keep it "
        "short.</think>\nMorgen wird es in Berlin sonnig und warm, mit leichtem Wind am Nachmittag.",
    ),
    (
        "es",
        "<think>El usuario quiere una receta sencilla de tortilla de patatas para la cena de esta noche.</think>\n"
        "Para hacer una tortilla de patatas necesitas huevos, patatas, cebolla, aceite de oliva y sal.",
    ),
    # English-drifting trace, Russian answer
    (
        "ru",
        "<think>The user wants to know the capital of Australia. Many people think it is Sydney, but it is "
        "Canberra.</think>\nСтолица Австралии — Канберра, а не Сидней, как часто думают многие люди.",
    ),
    (
        "ar",
        "<think>يسأل المستخدم عن فوائد شرب الماء كل يوم وأحتاج إلى إجابة واضحة وقصيرة.</think>\n"
        "شرب الماء كل يوم يساعد الجسم على التخلص من السموم ويحافظ على نشاط الدماغ.",
    ),
    # English-drifting trace, Chinese answer
    (
        "zh",
        "<think>The user is asking how to make green tea properly. I will explain the water temperature and the "
        "steeping time.</think>\n泡绿茶时，水温最好在八十度左右，浸泡两到三分钟就可以了。",
    ),
    # Chinese-drifting trace, Japanese answer
    (
        "ja",
        "<think>用户想知道东京有哪些值得参观的地方，我应该推荐浅草寺、上野公园和涩谷。</think>\n"
        "東京では浅草寺や上野公園、渋谷などを訪れるのがおすすめです。",
    ),
    # Chinese-drifting trace, Korean answer: LCB tokenises Korean on spaces, so the unspaced Chinese line has one
    # token and is not counted (the trace's coverage shows it; its LPR is the empty group's 1.0)
    (
        "ko",
        "<think>用户问的是如何学习韩语，我应该建议他每天练习听力和会话。</think>\n"
        "한국어를 배우려면 매일 듣기와 말하기를 꾸준히 연습하는 것이 좋습니다.",
    ),
    (
        "hi",
        "<think>उपयोगकर्ता जानना चाहता है कि योग करने से स्वास्थ्य पर क्या असर पड़ता है।</think>\n"
        "रोज़ योग करने से शरीर लचीला होता है और मन को शांति मिलती है।",
    ),
    # missing close tag: the reply ran out inside its thinking; no answer
    (
        "tr",
        "<think>Kullanıcı İstanbul hakkında bilgi istiyor, önce şehrin tarihini sonra kültürünü anlatmam gerekiyor ve",
    ),
    # markers in the wrong order
    ("fr", "</think>Je ne sais pas pourquoi les marqueurs sont inversés dans cette réponse.<think> Voici la suite."),
    # the open marker was in the prompt (a chat template that starts the trace)
    (
        "es",
        "El usuario pregunta por la mejor época para visitar Madrid y debo responder en español.</think>\n"
        "La mejor época para visitar Madrid es la primavera, cuando el clima es suave y agradable.",
    ),
    # no trace at all: scored whole
    ("it", "Roma è la capitale d'Italia ed è una delle città più antiche di tutta l'Europa."),
]
OUTCOMES = [CLOSED] * 9 + [UNCLOSED, MALFORMED, PREFILLED, NONE]


def _completions(replies=REPLIES, model="m"):
    return [Completion(str(i), model, "monolingual", "mine", lang, text) for i, (lang, text) in enumerate(replies)]


def _by_language(report, key="lpr"):
    return {r["language"]: r[key] for r in report.rows if r["source"] == "all"}


@pytest.mark.parametrize(
    ("text", "trace", "answer", "outcome"),
    [
        ("Bonjour tout le monde", "", "Bonjour tout le monde", NONE),
        ("<think>Überlegung</think>\nAntwort", "Überlegung", "\nAntwort", CLOSED),
        ("Vorwort <think>Überlegung</think> Antwort", "Überlegung", "Vorwort  Antwort", CLOSED),
        ("Размышление</think>Ответ", "Размышление", "Ответ", PREFILLED),
        ("<think>思考中，还没有结束", "思考中，还没有结束", "", UNCLOSED),
        ("前言<think>思考", "思考", "前言", UNCLOSED),
        ("</think>答え<think>", "", "", MALFORMED),  # wrong order
        ("<think>a<think>b</think>c</think>d", "", "", MALFORMED),  # nested
        ("<think>a</think>b<think>c</think>d", "", "", MALFORMED),  # several
        ("a</think>b</think>c", "", "", MALFORMED),  # two closes
    ],
)
def test_split_reply_outcomes(text, trace, answer, outcome):
    assert split_reply(text) == (trace, answer, outcome)


def test_custom_markers_and_their_validation():
    mistral = parse_markers("[THINK],[/THINK]")
    assert mistral == TraceMarkers("[THINK]", "[/THINK]")
    assert split_reply("[THINK]생각[/THINK]답", mistral) == ("생각", "답", CLOSED)
    # the default markers mean nothing to custom ones
    assert split_reply("<think>x</think>y", mistral) == ("", "<think>x</think>y", NONE)
    assert parse_markers(["<reasoning>", "</reasoning>"]).close == "</reasoning>"
    assert parse_markers("none") is None and parse_markers("") is None and parse_markers(None) is None
    with pytest.raises(ConfigError, match="trace_markers: expected 'OPEN,CLOSE'"):
        parse_markers("<think>")
    with pytest.raises(ConfigError, match="--trace-markers: .*neither marker may be empty"):
        parse_markers("<think>,", "--trace-markers")
    with pytest.raises(ConfigError, match="one marker inside the other"):
        parse_markers("think,/think")


def test_replies_without_a_marker_are_the_same_objects():
    comps = _completions(REPLIES[-1:] * 3)
    split = split_completions(comps, TraceMarkers())
    assert all(a is c for a, c in zip(split.answers, comps))
    assert split.traces == [] and not split.any_marker
    assert split_completions(_completions(), None).answers == _completions()  # no markers: no split


def test_trace_and_answer_scored_apart(shared):  # shared: LCB's word list (the official word check)
    comps = _completions()
    traced = score_traced(comps, workers=1)
    assert traced.split.outcomes == OUTCOMES
    # every answer is in its language; the unclosed (tr) and malformed (one fr) replies have none: not counted
    answer = _by_language(traced.answer)
    assert answer == dict.fromkeys(("ar", "de", "es", "fr", "hi", "it", "ja", "ko", "ru", "tr", "zh", "all"), 1.0)
    counts = {
        r["language"]: (r["n_responses"], r["n_scored"])
        for r in traced.answer.rows
        if r["source"] == "mine" and r["language"] != "all"
    }
    assert counts["fr"] == (2, 1) and counts["tr"] == (1, 0) and counts["es"] == (2, 2)
    # the traces: English drift (de, ru, zh) and Chinese drift (ja) fail; ko's Chinese trace is not counted
    trace = _by_language(traced.trace)
    assert trace == {
        "ar": 1.0,
        "de": 0.0,
        "es": 1.0,
        "fr": 1.0,
        "hi": 1.0,
        "ja": 0.0,
        "ko": 1.0,
        "ru": 0.0,
        "tr": 1.0,
        "zh": 0.0,
        "all": 0.6,
    }
    t_counts = {
        r["language"]: (r["n_responses"], r["n_scored"])
        for r in traced.trace.rows
        if r["source"] == "mine" and r["language"] != "all"
    }
    assert t_counts["ko"] == (1, 0) and t_counts["tr"] == (1, 1) and t_counts["es"] == (2, 2)
    assert "fr" in t_counts and t_counts["fr"] == (1, 1)  # the malformed fr reply is in neither part's trace
    assert "it" not in t_counts  # a reply without a trace is not in the trace part
    assert traced.trace.headline("monolingual", "m")["lcpr"] == pytest.approx(0.5)  # ar, hi, ko 1; ja, ru, zh 0
    # scored whole, the drifting replies fail: the split is what tells a clean answer from its trace
    whole = _by_language(score_traced(comps, None, workers=1).answer)
    assert whole["de"] == whole["ru"] == whole["zh"] == whole["ja"] == 0.0 and whole["all"] < 1.0
    rows = {r["language"]: r for r in traced.outcome_rows(comps)}
    assert rows["all"] == {
        "task": "monolingual",
        "model": "m",
        "language": "all",
        "replies": 13,
        "none": 1,
        "closed": 9,
        "prefilled": 1,
        "unclosed": 1,
        "malformed": 1,
    }
    assert rows["fr"]["closed"] == rows["fr"]["malformed"] == 1


def test_intervals_and_guard_for_each_part(shared):
    from mlft.benchmarks.lcb.scoring import score_guard

    comps = _completions()
    traced = score_traced(comps, workers=1, bootstrap=200, seed=1)
    top = next(r for r in traced.trace.rows if (r["source"], r["language"]) == ("all", "all"))
    assert top["lpr_ci_low"] < 0.6 < top["lpr_ci_high"]
    rows, flags = score_guard(traced.split.traces, traced.trace.replies)
    assert rows[("monolingual", "m", "all", "ko")]["coverage"] == 0.0
    assert any(f["language"] == "ko" and f["metric"] == "coverage" for f in flags)
    answer_rows, _ = score_guard(traced.split.answers, traced.answer.replies)
    assert answer_rows[("monolingual", "m", "all", "tr")]["coverage"] == 0.0  # the unclosed reply lost its answer


def _csv(path, replies):
    import csv

    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "model", "completion", "task", "source", "language"])
        for i, (lang, text) in enumerate(replies):
            w.writerow([i, "m", text, "monolingual", "mine", lang])
    return path


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_score_command_reports_both_parts(shared, capsys, tmp_path):
    f = _csv(tmp_path / "traced.csv", REPLIES)
    code, out, _ = run(capsys, "score", str(f), "--format", "json", "--workers", "1")
    assert code == 0
    data = json.loads(out)
    top = lambda rows: next(r for r in rows if (r["source"], r["language"]) == ("all", "all"))  # noqa: E731
    assert top(data["rows"])["lpr"] == 1.0 and top(data["traces"]["rows"])["lpr"] == pytest.approx(0.6)
    assert data["traces"]["markers"] == ["<think>", "</think>"]
    assert data["traces"]["outcomes"][-1]["unclosed"] == 1
    assert "coverage" in top(data["traces"]["rows"])  # the guard's columns on the trace part
    code, out, _ = run(capsys, "score", str(f), "--format", "tsv", "--workers", "1")
    lines = [line.split("\t") for line in out.splitlines()]
    assert lines[0][:2] == ["part", "task"]
    parts = {line[0] for line in lines[1:]}
    assert parts == {"answer", "trace"}
    code, out, _ = run(capsys, "score", str(f), "--workers", "1")
    assert (
        "m · monolingual · trace · LPR" in out and "trace outcomes" in out and "m · monolingual · answer · LPR" in out
    )
    # whole replies: no split, no trace tables
    code, out, _ = run(capsys, "score", str(f), "--no-traces", "--format", "json", "--workers", "1")
    assert "traces" not in json.loads(out) and top(json.loads(out)["rows"])["lpr"] < 1.0


def test_score_command_custom_markers_and_bad_spec(shared, capsys, tmp_path):
    custom = [(lang, text.replace("<think>", "[THINK]").replace("</think>", "[/THINK]")) for lang, text in REPLIES]
    f = _csv(tmp_path / "custom.csv", custom)
    args = ("score", str(f), "--format", "json", "--workers", "1")
    code, out, _ = run(capsys, *args, "--trace-markers", "[THINK],[/THINK]")
    data = json.loads(out)
    assert data["traces"]["markers"] == ["[THINK]", "[/THINK]"]
    assert [r["language"] for r in data["traces"]["rows"] if r["lpr"] == 0.0 and r["source"] == "all"] == [
        "de",
        "ja",
        "ru",
        "zh",
    ]
    code, out, _ = run(capsys, *args)  # the default markers find nothing here: whole replies, no trace section
    assert "traces" not in json.loads(out)
    code, _, err = run(capsys, *args, "--trace-markers", "[THINK]")
    assert code == 2 and "--trace-markers: expected 'OPEN,CLOSE'" in err


def test_a_file_without_markers_scores_as_before(shared, capsys, tmp_path):
    f = _csv(tmp_path / "plain.csv", [(lang, text) for lang, text in REPLIES if "think>" not in text] * 3)
    outs = [
        run(capsys, "score", str(f), "--format", fmt, "--workers", "1", *extra)[1]
        for fmt in ("json", "tsv")
        for extra in ((), ("--no-traces",))
    ]
    assert outs[0] == outs[1] and outs[2] == outs[3]
    assert "part" not in outs[2].splitlines()[0]


# -- a suite and `mlft compare` on a backend that thinks -------------------------------------------------------

THOUGHTS = {
    # de: the trace drifts to English; ru: it stays Russian; ja: a Chinese trace that never closes
    "de": "<think>The user wants a short answer in German about the question, so I will write one.</think>\n",
    "ru": "<think>Пользователь хочет короткий ответ на русском языке, поэтому я напишу его.</think>\n",
    "ja": "<think>用户想要一个简短的日语回答，所以我会写一个回答，然后",
}
ANSWERS = {
    "de": "Das ist eine ganz normale Antwort auf Deutsch, mit mehreren Wörtern darin.",
    "ru": "Это совершенно обычный ответ на русском языке, в нём много разных слов.",
    "ja": "",
}
CLEAN = "<think>Der Nutzer möchte eine kurze Antwort auf Deutsch, also schreibe ich eine.</think>\n"


@pytest.fixture
def thinking():
    from dataclasses import dataclass, field

    from generation_helpers import TextBackend

    from mlft.generation.backends import REGISTRY, Capabilities

    @dataclass
    class ThinkingOptions:
        clean: bool = field(default=False, metadata={"help": "think in German when asked in German"})

    class ThinkingBackend(TextBackend):
        name = "thinking"
        Options = ThinkingOptions
        capabilities = Capabilities(chat=True)

        def reply(self, request) -> str:
            lang = request.language
            trace = CLEAN if self.options.clean and lang == "de" else THOUGHTS[lang]
            return trace + ANSWERS[lang]

    REGISTRY.add("thinking", ThinkingBackend)
    try:
        yield ThinkingBackend
    finally:
        REGISTRY.remove("thinking")


def test_a_suite_reports_the_trace_and_compare_tests_it(thinking, tmp_path, shared, capsys):
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import build_suite
    from mlft.generation.target import Target

    data = {"kind": "lcb", "tasks": ["monolingual"], "languages": ["de", "ja", "ru"], "per_language": 4}
    suite = build_suite(data, "s.yaml")
    a = run_suite(suite, Target("thinking", model_ref="m"), tmp_path / "a", progress=False)
    value = lambda metric, lang="avg": a.value(metric, "monolingual", lang)  # noqa: E731
    # the answers (the official rows): de and ru clean; ja lost its answer to the unclosed trace (not counted)
    assert (value("lpr", "de"), value("lpr", "ru"), value("coverage", "ja")) == (1.0, 1.0, 0.0)
    # the traces: English in de, Russian in ru, Chinese in ja
    assert [value("trace_lpr", x) for x in ("de", "ja", "ru", "avg")] == [0.0, 0.0, 1.0, pytest.approx(1 / 3)]
    assert (value("trace_closed", "de"), value("trace_unclosed", "ja"), value("trace_any")) == (1.0, 1.0, 1.0)
    assert value("trace_none") == 0.0 and value("trace_coverage", "ja") == 1.0
    assert (tmp_path / "a" / "default" / "outcomes.trace.jsonl").is_file()
    report = (tmp_path / "a" / "report.md").read_text(encoding="utf-8")
    assert "monolingual LPR (%)" in report and "monolingual trace LPR (%)" in report and "trace ANY" in report
    # the report page: each reply judged on its answer, its trace judged apart (outcome, lines, verdict)
    from mlft.reports.page import OK, WRONG, collect

    view = collect([tmp_path / "a"], workers=1).views[0]
    assert {m["metric"] for m in view.metrics} >= {"trace_lpr", "trace_coverage", "trace_unclosed"}
    by_lang = {r[2]: r for r in view.replies}
    de, ja, ru = by_lang["de"], by_lang["ja"], by_lang["ru"]
    assert (de[4], de[12], de[14]) == ("pass", "closed", "line")
    assert [(line[1], line[2]) for line in de[13]] == [(WRONG, "en")] and de[8][-1][1] == OK
    assert (ja[4], ja[12], ja[14], ja[13][0][2]) == ("not counted", "unclosed", "line", "zh")
    assert (ru[4], ru[12], ru[14]) == ("pass", "closed", "pass")
    whole = {r[2]: r for r in collect([tmp_path / "a"], workers=1, markers=None).views[0].replies}
    assert (whole["de"][4], whole["de"][12], whole["de"][13]) == ("line", "none", None)
    # without the split, the whole replies: de fails on its English trace
    whole = run_suite(
        build_suite({**data, "trace_markers": None}, "s.yaml"),
        Target("thinking", model_ref="m"),
        tmp_path / "whole",
        progress=False,
    )
    assert whole.value("lpr", "monolingual", "de") == 0.0 and whole.value("trace_lpr", "monolingual") is None
    # a second model that thinks in German: the trace improves, the answers do not move
    run_suite(suite, Target("thinking", {"clean": True}, model_ref="m"), tmp_path / "b", progress=False)
    code = main(
        [
            "compare",
            str(tmp_path / "a"),
            str(tmp_path / "b"),
            "--part",
            "trace",
            "--metric",
            "lpr",
            "--format",
            "tsv",
            "--resamples",
            "500",
        ]
    )
    out = capsys.readouterr().out
    de = next(line.split("\t") for line in out.splitlines() if line.startswith("monolingual\tde\tlpr"))
    # one prompt per language: the exact paired permutation test (compare's default) cannot reach p < 0.05 on one
    # prompt (p = 1), so the +100 carries no significance star (the bootstrap's normal-theory p gave one)
    assert code == 0 and de[3:6] == ["0.0", "100.0", "+100.0"]
    main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "lpr", "--format", "tsv"])
    out = capsys.readouterr().out
    de = next(line.split("\t") for line in out.splitlines() if line.startswith("monolingual\tde\tlpr"))
    assert de[3:6] == ["100.0", "100.0", "+0.0"]
    # completions files are split the same way
    files = [str(tmp_path / x / "default" / "completions.jsonl") for x in ("a", "b")]
    main(["compare", *files, "--part", "trace", "--metric", "lpr", "--format", "tsv", "--resamples", "500"])
    de = next(x.split("\t") for x in capsys.readouterr().out.splitlines() if x.startswith("monolingual\tde\tlpr"))
    assert de[3:6] == ["0.0", "100.0", "+100.0"]  # no star: one prompt (above)


def test_a_malformed_trace_markers_key_names_the_field():
    from mlft.evals.suite import build_suite

    with pytest.raises(ConfigError, match=r"s\.yaml: trace_markers: expected 'OPEN,CLOSE'"):
        build_suite({"kind": "lcb", "trace_markers": "<think>"}, "s.yaml")


def test_the_openai_backend_keeps_a_reasoning_parsers_trace(tmp_path, capsys):
    """A server with a reasoning parser returns the trace apart (`reasoning_content`): the openai backend puts it
    back between the default markers (unclosed when the reply ran out while thinking), where scoring splits it."""
    from generation_helpers import API_KEY, FaultServer

    from mlft.generation.backends.openai import OpenAIBackend
    from mlft.generation.decoding import Decoding
    from mlft.generation.requests import Request

    de, ru = REPLIES[1][1], REPLIES[3][1]  # an English trace with a German answer, then with a Russian one

    def reply(body):
        text = body["messages"][-1]["content"]
        if text == "out of tokens":
            return None, "length", "The user wants a long answer, so I keep thinking about it for a while"
        if text == "no parser":
            return de, "stop"
        source = de if text == "de" else ru
        trace, answer = source[len("<think>") :].split("</think>")
        return answer, "stop", trace

    with FaultServer(reply=reply) as server:
        backend = OpenAIBackend("m", base_url=server.url, api_key=API_KEY, concurrency=1, logprobs=False)
        asks = ["de", "ru", "out of tokens", "no parser"]
        requests = [Request(t, messages=[{"role": "user", "content": t}], language="de") for t in asks]
        got = {r.id: r.completion for r in backend.generate(requests, Decoding(max_new_tokens=32))}
    assert got["de"] == de and got["ru"] == ru and got["no parser"] == de
    assert got["out of tokens"] == "<think>The user wants a long answer, so I keep thinking about it for a while"
    assert split_reply(got["out of tokens"]).outcome == UNCLOSED

"""Language fidelity for any lm-eval generative task (mlft/harness/fidelity.py): the `mlft_language` filter and the
`lpr` / guard metrics, on replies written here and in one lm-eval run of a small local task
(tests/data/lm_eval_fidelity) beside its own exact_match."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from mlft.errors import ConfigError, DataError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TASK_DIR = REPO / "tests" / "data" / "lm_eval_fidelity"
TASK = "mlft_arithmetic_fidelity"

JA = "今日はとても良い天気ですね。公園へ散歩に行きましょう。"
EN = "The weather is very nice today, so let us go for a walk in the park."
DE = "Heute ist das Wetter sehr schön, also gehen wir im Park spazieren."
SHORT_JA = "はい"
LOOP_JA = "ありがとうございます。" * 5  # in Japanese, and a loop


def _scores(fidelity, replies, docs, **options):
    """lm-eval's path without a model: the filter (then take_first), each metric per reply, the aggregations."""
    from lm_eval.api.registry import get_filter, get_metric, get_metric_aggregation

    judged = [r[0] for r in get_filter("mlft_language")(**options).apply([[r] for r in replies], docs)]
    items: dict[str, list] = {}
    for reply in judged:
        for name in fidelity.METRICS:
            for key, item in get_metric(name)(references=["x"], predictions=[reply]).items():
                items.setdefault(key, []).append(item)
    return judged, {k: get_metric_aggregation(k.split("_")[0])(v) for k, v in items.items()}


def test_replies_written_here_get_lcbs_verdicts(shared):  # LCB's word list
    import mlft.harness.fidelity as fidelity

    docs = [{"language": "ja"}] * 4 + [{"language": "de"}]
    judged, s = _scores(fidelity, [JA, EN, SHORT_JA, LOOP_JA, DE], docs)
    assert judged == [JA, EN, SHORT_JA, LOOP_JA, DE]  # the text the task's own metric reads is the reply itself
    verdicts = [(o["counted"], o["line_error"], o["degenerate"]) for o in (r.outcome for r in judged)]
    assert verdicts == [(True, False, False), (True, True, False), (False, False, False), (True, False, True)] + [
        (True, False, False)
    ]
    # ja: JA passes, EN fails, the short reply is not counted (coverage), the loop passes LPR but is degenerate
    assert s["lpr_ja"] == pytest.approx(2 / 3) and s["coverage_ja"] == 0.75 and s["degeneracy_ja"] == 0.25
    assert s["lpr_de"] == 1.0 and s["coverage_de"] == 1.0 and s["degeneracy_de"] == 0.0
    # over the task: LCB's unweighted mean over languages, not the pooled share (3/4)
    assert s["lpr"] == pytest.approx((2 / 3 + 1) / 2) and s["coverage"] == pytest.approx((0.75 + 1) / 2)
    assert s["validity_ja"] < 1.0 and s["validity_de"] == 1.0  # the English reply has no Japanese word
    assert "wpr_de" not in s and s["wpr_ja"] == s["wpr"]  # WPR: the non-Latin languages only, as LCB

    one, alone = _scores(fidelity, [JA], [{"language": "ja"}])
    assert alone["lpr"] == 1.0 and one[0].outcome["validity"] == 1.0
    _, english = _scores(fidelity, [EN], [{"language": "ja"}])
    assert english["lpr"] == 0.0
    _, short = _scores(fidelity, [SHORT_JA], [{"language": "ja"}])
    assert short["coverage"] == 0.0 and "lpr" in short and short["lpr"] == 1.0  # LCB: 0 counted replies, LPR 1


def test_a_fixed_language_and_the_docs_field(shared):  # LCB's word list
    import mlft.harness.fidelity as fidelity

    _, fixed = _scores(fidelity, [JA, EN], [{"question": "q1"}, {"question": "q2"}], language="ja")
    assert fixed["lpr"] == 0.5 and not any("_" in k for k in fixed)  # one language: no per-language columns
    _, keyed = _scores(fidelity, [EN, DE], [{"lang": "de"}, {"lang": "de"}], language_key="lang")
    assert keyed["lpr"] == keyed["lpr_de"] == 0.5


THINK_EN = "Let me think about this question carefully in English first."


def test_a_reasoning_models_answer_and_trace_are_judged_apart(shared):  # LCB's word list
    import mlft.harness.fidelity as fidelity

    traced = f"<think>{THINK_EN}</think>\n{JA}"  # English thinking, a Japanese answer
    unclosed = f"<think>{THINK_EN}"  # ran out while thinking: no answer
    replies, docs = [traced, JA, unclosed], [{"language": "ja"}] * 3
    judged, answer = _scores(fidelity, replies, docs)  # part: answer, the default (as `mlft score`)
    assert judged == replies and [r.outcome["trace"] for r in judged] == ["closed", "none", "unclosed"]
    assert answer["lpr"] == 1.0 and answer["coverage"] == pytest.approx(2 / 3)  # the unclosed reply lost its answer
    judged, trace = _scores(fidelity, replies, docs, part="trace")
    assert trace["lpr"] == 0.0 and trace["coverage"] == 1.0  # both traces drift to English; JA has none: left out
    assert [r.outcome.get("left_out", False) for r in judged] == [False, True, False]
    _, whole = _scores(fidelity, replies, docs, part="reply")
    assert whole["lpr"] == pytest.approx(1 / 3)  # judged whole, the traced reply fails on its English line
    _, off = _scores(fidelity, replies, docs, trace_markers="none")
    assert off == whole

    from mlft.harness.fidelity import LanguageFilter

    with pytest.raises(ConfigError, match=r"filter mlft_language: unknown part 'traces'.*valid: answer, reply, trace"):
        LanguageFilter(part="traces")
    with pytest.raises(ConfigError, match="part: trace needs trace_markers"):
        LanguageFilter(part="trace", trace_markers="none")
    with pytest.raises(ConfigError, match="filter mlft_language: trace_markers: expected 'OPEN,CLOSE'"):
        LanguageFilter(trace_markers="<think>")


def test_bad_documents_and_codes_name_the_field_and_value(shared):
    from mlft.harness.fidelity import LanguageFilter

    with pytest.raises(DataError, match=r"document 1 has no field 'language' \(its fields: question, lang\)"):
        LanguageFilter().apply([["a"], ["b"]], [{"question": "q", "language": "ja"}, {"question": "q", "lang": "ja"}])
    with pytest.raises(DataError, match=r"document 0: field 'language': language 'xx' is unknown"):
        LanguageFilter().apply([["a"]], [{"language": "xx"}])
    with pytest.raises(ConfigError, match=r"filter mlft_language: language: language 'jp' is unknown.*valid: .* ja,"):
        LanguageFilter(language="jp")
    with pytest.raises(ConfigError, match=r"option\(s\) lang_key; valid: language_key, language, part, trace_markers$"):
        LanguageFilter(lang_key="x")


def test_names_resolve_in_lm_evals_registries_beside_its_own():
    import lm_eval.filters  # noqa: F401  (lm-eval's own filters, as its tasks load them)
    from lm_eval.api.registry import get_filter, get_metric, get_metric_aggregation, is_higher_better

    import mlft.harness.fidelity as fidelity

    assert get_filter("mlft_language") is fidelity.LanguageFilter and get_filter("regex") is not None
    assert get_metric("exact_match") is not None  # lm-eval's own metrics still load (its registry is not empty)
    assert get_metric("lpr") is fidelity.lpr and get_metric_aggregation("lpr") is fidelity.agg_lpr
    assert is_higher_better("lpr") and not is_higher_better("degeneracy")
    fidelity.register()  # importing twice (or registering again) is harmless
    assert fidelity.lpr(references=["3"], predictions=["3"]) == {}  # a reply the filter did not judge: no value


def test_the_task_yaml_finds_everything_by_itself_as_the_lm_eval_command_does():
    """A fresh interpreter that never imported mlft's module: lm-eval's task loader (the `lm_eval` command's) reads
    the example YAML, whose `!function mlft.harness.fidelity.LanguageFilter` imports it, registering the plain
    metric names the same YAML uses; lm-eval's own regex / exact_match stay beside them."""
    code = (
        "import sys; from lm_eval.tasks import TaskManager, get_task_dict\n"
        "assert 'mlft.harness.fidelity' not in sys.modules\n"
        f"task = get_task_dict([{TASK!r}], TaskManager(include_path=[{str(TASK_DIR)!r}], include_defaults=False))"
        f"[{TASK!r}]\n"
        "import mlft.harness.fidelity as f\n"
        "assert task._metric_fn_list['lpr'] is f.lpr and task._aggregation_list['validity'] is f.agg_validity\n"
        "assert task._higher_is_better['degeneracy'] is False and 'exact_match' in task._metric_fn_list\n"
        "pipes = {e.name: [p.func.__name__ for p in e.filters] for e in task._filters}\n"
        "assert pipes == {'answer': ['RegexFilter', 'TakeFirstFilter'], "
        "'language': ['LanguageFilter', 'TakeFirstFilter']}, pipes\n"
        "print(len(task.eval_docs))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "8"


@pytest.mark.slow
def test_one_lm_eval_run_gives_accuracy_and_language_fidelity(shared, embedded_model):
    """The local task through lm-eval's simple_evaluate on the embedded SmolLM2 (one problem in each of de, fr,
    ja, ru; 16 tokens): exact_match on the extracted answer and LPR + the guard on the reply, per language, equal to
    what `mlft score` (official scorer, guard) and the answer check give the same logged replies."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from mlft.benchmarks.lcb.scoring import score_completions, score_guard
    from mlft.completions import Completion

    model, tok = embedded_model
    out = simple_evaluate(
        model=HFLM(pretrained=model, tokenizer=tok, batch_size=4),
        tasks=[TASK],
        task_manager=TaskManager(include_path=[str(TASK_DIR)], include_defaults=False),
        samples={TASK: [0, 2, 4, 6]},
        gen_kwargs={"max_gen_toks": 16},
        apply_chat_template=True,
        log_samples=True,
        bootstrap_iters=0,
    )
    res, samples = out["results"][TASK], out["samples"][TASK]
    by_filter = {f: [s for s in samples if s["filter"] == f] for f in ("answer", "language")}
    assert [s["doc"]["language"] for s in by_filter["language"]] == ["de", "fr", "ja", "ru"]

    correct = [
        (re.findall(r"-?[0-9]+", s["resps"][0][0]) or ["[invalid]"])[-1] == s["doc"]["answer"]
        for s in by_filter["answer"]
    ]
    assert res["exact_match,answer"] == sum(correct) / 4

    comps = [
        Completion(str(s["doc_id"]), "m", "monolingual", "arith", s["doc"]["language"], s["resps"][0][0])
        for s in by_filter["language"]
    ]
    report = score_completions(comps, guard=True)
    official = {r["language"]: r for r in report.rows if r["source"] == "all"}
    guard, _ = score_guard(comps, report.replies)
    assert res["lpr,language"] == pytest.approx(official["all"]["lpr"])
    for lang in ("de", "fr", "ja", "ru"):
        assert res[f"lpr_{lang},language"] == pytest.approx(official[lang]["lpr"])
        row = guard[("monolingual", "m", "all", lang)]
        for m in ("coverage", "degeneracy", "validity"):
            assert res[f"{m}_{lang},language"] == pytest.approx(row[m]), (lang, m)
    assert not any(k.startswith("lpr") and k.endswith(",answer") for k in res)  # judged on the reply only

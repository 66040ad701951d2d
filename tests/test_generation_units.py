"""Decoding, prompting templates, few-shot examples, suites and confusion points (no model needed)."""

import json

import pytest
import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from mlft.benchmarks.lcb.confusion import analyze, confusion_point
from mlft.errors import ConfigError, DataError
from mlft.evals.lcb_options import runs
from mlft.evals.suite import available_suites, load_suite
from mlft.generation.backends.hf import batch_seed
from mlft.generation.decoding import Decoding
from mlft.generation.processors import NucleusWarper, entropy, nucleus_size
from mlft.generation.prompting import Prompting, build_input, cut_answer, demonstrations, qa_prompt


def test_decoding_defaults_are_the_papers_and_top_p_is_real():
    d = Decoding()
    assert (d.max_new_tokens, d.temperature, d.top_p, d.num_beams) == (100, 0.3, 0.75, 1)
    kw = d.hf_kwargs()  # warping is NucleusWarper's job: transformers' own stay neutral
    assert not kw["do_sample"] and "top_p" not in kw and "min_p" not in kw  # NucleusSampler draws the token
    assert Decoding(num_beams=2).hf_kwargs()["do_sample"]  # beam sampling: transformers draws, NucleusWarper warps
    assert Decoding(temperature=0).hf_kwargs()["do_sample"] is False
    with pytest.raises(ConfigError, match="top_p"):
        Decoding(top_p=0)


@pytest.mark.parametrize("p,t", [(0.1, 0.3), (0.75, 0.3), (0.5, 1.0), (0.9, 0.7)])
def test_nucleus_size_matches_transformers_top_p(p, t):
    torch.manual_seed(0)
    logits = torch.randn(6, 200) * 3
    kept = TopPLogitsWarper(top_p=p)(None, TemperatureLogitsWarper(t)(None, logits.clone()))
    assert nucleus_size(logits, t, p, None).tolist() == torch.isfinite(kept).sum(-1).tolist()
    # smallest set with cumulative probability >= p
    probs = torch.softmax(logits / t, -1).sort(descending=True).values
    for row, k in zip(probs, nucleus_size(logits, t, p, None).tolist()):
        assert row[:k].sum() >= p - 1e-6 and (k == 1 or row[: k - 1].sum() < p)
    assert nucleus_size(logits, t, p, 2).max() <= 2


@pytest.mark.parametrize(
    "t,p,k,probe",
    [(0.3, 0.75, None, 64), (1.0, 0.9, None, 2), (0.7, 0.5, 20, 4), (2.0, 0.95, None, 64), (0.5, 1.0, 5, 64)],
)
def test_nucleus_warper_keeps_exactly_what_transformers_keeps(t, p, k, probe):
    torch.manual_seed(1)
    logits = torch.randn(8, 500) * 2
    logits[0] = torch.linspace(0, 0.5, 500)  # a flat row: the nucleus is wider than any probe
    ref = TemperatureLogitsWarper(t)(None, logits.clone())
    if k:
        ref = TopKLogitsWarper(k)(None, ref)
    if p < 1:
        ref = TopPLogitsWarper(p)(None, ref)
    ours = NucleusWarper(t, p, k, probe=probe)(None, logits.clone())
    assert torch.equal(torch.isfinite(ours), torch.isfinite(ref))
    assert torch.allclose(ours[torch.isfinite(ours)], ref[torch.isfinite(ref)])


def test_entropy_of_uniform_and_peaked():
    assert entropy(torch.zeros(1, 8)).item() == pytest.approx(torch.log(torch.tensor(8.0)).item())
    assert entropy(torch.tensor([[0.0, float("-inf")]])).item() == pytest.approx(0.0)
    assert batch_seed(0, "a") == batch_seed(0, "a") != batch_seed(1, "a")


def test_qa_template_exact():
    assert qa_prompt("What?") == "Q: What?\nA:"
    assert qa_prompt("What?", [("u1", "a1"), ("u2", "a2")]) == "Q: u1\nA: a1\n\nQ: u2\nA: a2\n\nQ: What?\nA:"
    assert cut_answer(" Sure.\nMore.\nQ: next\nA: x") == " Sure.\nMore."
    assert cut_answer("no question") == "no question"


def test_few_shot_from_shared_file(shared):
    path = shared / "lcb" / "few_shot_examples.json"
    turns = json.loads(path.read_text())["crosslingual"]["ja"]
    one = build_input(Prompting(mode="qa", shots=1, examples=str(path)), "P", "crosslingual", "ja")["text"]
    assert one == f"Q: {turns[0]['message']}\nA: {turns[1]['message']}\n\nQ: P\nA:"
    five = build_input(Prompting(mode="qa", shots=5, examples=str(path)), "P", "crosslingual", "ja")["text"]
    expected = "".join(f"Q: {turns[i]['message']}\nA: {turns[i + 1]['message']}\n\n" for i in range(0, 10, 2))
    assert five == expected + "Q: P\nA:"
    chat = build_input(Prompting(shots=2, system_prompt="S", examples=str(path)), "P", "crosslingual", "ja")
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert chat["messages"][2]["content"] == turns[1]["message"] and chat["messages"][-1]["content"] == "P"
    with pytest.raises(DataError, match="no crosslingual few-shot examples for language 'en'"):
        demonstrations("crosslingual", "en", 1, str(path))
    with pytest.raises(ConfigError, match="0..5"):
        Prompting(shots=6)


def test_suites_load_and_reject_bad_input():
    assert {"lcb_full", "lcb_quick", "lcb_tiny", "decoding_sweep", "beam_sweep", "fewshot"} <= set(available_suites())
    sweep = load_suite("decoding_sweep")
    by_name = {r.name: r.decoding for r in runs(sweep.options)}
    assert by_name["T=0 (greedy)"].temperature == 0 and by_name["p=0.1"].top_p == 0.1
    assert by_name["p=0.1"].temperature == 0.3
    assert [r.decoding.num_beams for r in runs(load_suite("beam_sweep").options)] == [1, 2, 3, 5, 10]
    shots = [(r.prompting.mode, r.prompting.shots) for r in runs(load_suite("fewshot").options)]
    assert shots == [("chat", 0), ("qa", 0), ("qa", 1), ("qa", 5), ("chat", 1), ("chat", 5)]
    assert load_suite("lcb_quick").options.per_group == 2
    for override, message in [
        ("languages=[de,klingon]", "languages\\[1\\]: unknown language 'klingon'"),
        ("decodng.top_p=0.5", "unknown key 'decodng' \\(did you mean 'decoding'\\?\\)"),
        ("decoding.temperature=-1", "lcb_tiny.yaml: decoding.temperature"),
        ("tasks=[monolingal]", "did you mean 'monolingual'"),
        ("kind=lcbb", "unknown eval kind 'lcbb' \\(did you mean 'lcb'"),
        ("interventions=[{name: ban_tokenz}]", "interventions\\[0\\].name: unknown intervention 'ban_tokenz'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_suite("lcb_tiny", [override])
    with pytest.raises(ConfigError, match="did you mean 'lcb_quick'"):
        load_suite("lcb_quik")


def test_confusion_point_script_and_line_switch():
    assert confusion_point(["你好", "，", "世界", " hello"], "zh") == 3
    assert confusion_point(["你好", "世界"], "zh") is None

    class FakeLID:
        def predict(self, line):
            return ("en" if "the" in line else "de", 0.9)

    pieces = ["Das ist gut und schön.", "\n", "This is the English line here", "."]
    assert confusion_point(pieces, "de", FakeLID()) == 2
    assert confusion_point(pieces, "de", None) is None
    rec = {
        "task": "monolingual",
        "language": "zh",
        "token_stats": {"pieces": ["你好", "世界", " ok"], "entropy": [1.0, 2.0, 5.0], "nucleus": [1, 1, 4]},
    }
    row = analyze([rec])[-1]
    assert row["group"] == "all" and row["confusion_points"] == 1
    assert (row["entropy_at"], row["entropy_other"], row["nucleus_at"], row["nucleus_other"]) == (5.0, 1.5, 4, 1)


def test_upstream_few_shot_module_is_read_without_executing_it():
    from mlft.generation.prompting import _from_upstream

    text = (
        '"""doc"""\nimport os\nfew_shot_examples_monolingual = {"de": [{"role": "User", "message": "a"}, '
        '{"role": "Chatbot", "message": "b"}]}\nfew_shot_examples_crosslingual = {}\nos.remove("x")\n'
    )
    data = _from_upstream(text)
    assert data == {
        "monolingual": {"de": [{"role": "User", "message": "a"}, {"role": "Chatbot", "message": "b"}]},
        "crosslingual": {},
    }

"""The task axis's verifiable prompts (mlft.data.arithmetic), the answer check (mlft.benchmarks.answers), the
`answers` option of the lcb kind and the verifiable prompt mix."""

import json
import re
from pathlib import Path

import pytest

from mlft.benchmarks.answers import extract_number, is_correct, numbers, parse_answer
from mlft.benchmarks.lcb.data import load_prompt_file
from mlft.data.arithmetic import ALL, KINDS, NON_ENGLISH, arithmetic_prompts, split_of
from mlft.data.decontaminate import LcbIndex
from mlft.data.seed import SEED_SETS
from mlft.errors import ConfigError
from mlft.evals.lcb import task_rows
from mlft.evals.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
EVAL_FILE = ROOT / "eval" / "arithmetic_prompts.jsonl"
OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


@pytest.mark.parametrize(
    "text, want",
    [
        ("Tom hat jetzt 35 Äpfel.", 35),
        ("12 + 23 = 35", 35),
        ("١٢ + ٢٣ = ٣٥", 35),  # Arabic-Indic digits
        ("अब राहुल के पास ३५ सेब हैं।", 35),  # Devanagari digits
        ("合計で３５個です", 35),  # full-width digits
        ("It costs 1,250 euros", 1250),
        ("Es kostet 1.250 Euro", 1250),
        ("2,5 kg", 2.5),
        ("Answer: 35.0", 35),
        ("3 boxes of 120 pencils: 360.", 360),
        ("about 5 120", 120),  # a plain space never joins two numbers
        ("", None),
    ],
)
def test_numbers_are_read_in_every_script(text, want):  # what the answer is: tests/test_answer_check.py
    assert (numbers(text) or [None])[-1] == want


def test_is_correct_compares_the_stated_result_with_the_answer():
    assert is_correct("14 * 5 = 70", 70) and is_correct("Il reste 28 euros.", "28")
    assert not is_correct("14 * 5 = 70, then 70 + 1 = 71", 70)  # 70 is an intermediate result, 71 the stated one
    assert extract_number("14 * 5 = 70") == 70 and extract_number("70 or 71") is None  # two results: none stated
    assert not is_correct("No lo sé.", 70)
    assert numbers("12 - 5 = 7") == [12, 5, 7] and numbers("−4 °C") == [-4]  # a sign only when attached
    with pytest.raises(ValueError):
        parse_answer("twelve")
    with pytest.raises(ValueError):
        parse_answer(True)


def test_prompts_cover_every_language_and_their_answers_are_the_problems_results():
    rows = arithmetic_prompts("eval", 10)
    mono = [r for r in rows if r["task"] == "monolingual"]
    cross = [r for r in rows if r["task"] == "crosslingual"]
    assert len(mono) == 150 and len(cross) == 140
    assert sorted({r["language"] for r in mono}) == sorted(ALL) and len(ALL) == 15
    assert sorted({r["language"] for r in cross}) == sorted(NON_ENGLISH)
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        kind, a, b = re.search(r"-(add|sub|mul)-(\d+)-(\d+)$", r["id"]).groups()
        a, b = int(a), int(b)
        assert r["answer"] == OPS[kind](a, b) and split_of(kind, a, b) == "eval"
        # both operands are written in the prompt (digits, in order), and nothing else numeric but Korean's "1つ"
        got = [int(x) for x in numbers(r["prompt"]) if x not in (1,)]
        assert got == [a, b], (r["id"], r["prompt"])
    # every template is used in every language
    for lang in ALL:
        assert {r["id"].split("-")[2] for r in mono if r["language"] == lang} == set(KINDS)
    # the cross-lingual prompts are the English problem with a request naming the target in mlft's phrasings
    for r in cross:
        assert "apples" in r["prompt"] or "dollars" in r["prompt"] or "pencils" in r["prompt"]


def test_generation_is_deterministic_and_the_shipped_file_is_its_output():
    assert arithmetic_prompts("eval", 10) == arithmetic_prompts("eval", 10)
    assert arithmetic_prompts("eval", 10, seed=1) != arithmetic_prompts("eval", 10)
    shipped = [json.loads(x) for x in EVAL_FILE.read_text(encoding="utf-8").splitlines()]
    assert shipped == arithmetic_prompts("eval", 10), "regenerate: python -m mlft.data.arithmetic " + str(EVAL_FILE)
    loaded = load_prompt_file(EVAL_FILE)  # a valid LCB prompt file
    assert len(loaded) == 290


def test_training_problems_never_repeat_an_evaluation_problem():
    def triples(rows):
        return {tuple(re.search(r"-(add|sub|mul)-(\d+)-(\d+)$", r["id"]).groups()) for r in rows}

    train, ev = arithmetic_prompts("train", 60), arithmetic_prompts("eval", 10)
    assert len(train) == 60 * 29
    assert not triples(train) & triples(ev)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in ev}
    seeded = [row for lang in ALL for row in SEED_SETS["arithmetic_prompts"].rows(lang)]
    seeded += [row for lang in NON_ENGLISH for row in SEED_SETS["arithmetic_crosslingual_prompts"].rows(lang)]
    assert len(seeded) == len(train) and all(isinstance(r["answer"], int) for r in seeded)
    assert not {r["prompt"][0]["content"] for r in seeded} & {r["prompt"] for r in ev}
    with pytest.raises(ConfigError, match="more than the train split holds"):
        arithmetic_prompts("train", 200)


class _P:
    def __init__(self, pid, prompt):
        self.id, self.prompt = pid, prompt


@pytest.mark.slow  # indexes every LCB prompt and seed row
def test_disjoint_from_lcb_and_every_seed_training_set(shared):
    """mlft's decontamination (exact match or a shared 8-unit run: the problems are shorter than the mixes' 13)
    finds no LCB prompt in the evaluation prompts, and no prompt of any other seed set in the problems (the
    monolingual rows: the problem alone, English included; a cross-lingual row's request sentence is one of mlft's
    training phrasings on purpose, shared with the cross-lingual seed sets, and only its English problem is new)."""
    from mlft.benchmarks.lcb.data import load_prompts

    ev = [{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in arithmetic_prompts("eval", 10)]
    lcb = LcbIndex(load_prompts(["monolingual", "crosslingual"], path=shared / "lcb"), 8)
    assert lcb.size > 6000
    assert [lcb.match(x) for x in ev if lcb.match(x)] == []
    assert [lcb.phrasing(x) for x in ev if lcb.phrasing(x)] == []  # never one of LCB's eight templates
    others = []
    for name, seed_set in SEED_SETS.items():
        if name.startswith("arithmetic"):
            continue
        for lang in seed_set.languages:
            for row in seed_set.rows(lang):
                turns = row.get("messages") or row.get("prompt") or []
                if isinstance(turns, list):
                    others += [_P(row["id"], t["content"]) for t in turns if t["role"] == "user"]
    index = LcbIndex(others, 8)
    assert index.size > 1000
    problems = [x for x, r in zip(ev, arithmetic_prompts("eval", 10)) if r["task"] == "monolingual"]
    assert len(problems) == 150 and [index.match(x) for x in problems if index.match(x)] == []


def test_monolingual_problems_are_identified_as_their_language():
    from mlft.langid import LanguageIdentifier

    lid = LanguageIdentifier.cached(None)
    rows = [r for r in arithmetic_prompts("eval", 10) if r["task"] == "monolingual"]
    wrong = [(r["language"], lid.predict(r["prompt"])[0], r["prompt"]) for r in rows]
    wrong = [w for w in wrong if w[0] != w[1]]
    assert len(wrong) <= 3, wrong  # measured: see the assertion message if it moves


def test_task_rows_score_the_share_of_replies_answering(tmp_path):
    from mlft.evals.lcb_options import LcbOptions

    key = {"a": 32.0, "b": 70.0, "c": 9.0}
    records = [
        {"id": "a", "task": "monolingual", "language": "de", "completion": "Lukas hat jetzt 32 Äpfel."},
        {"id": "b", "task": "monolingual", "language": "de", "completion": "14 * 5 = 71"},
        {"id": "c", "task": "crosslingual", "language": "ko", "completion": "정답은 9입니다."},
        {"id": "a", "task": "monolingual", "language": "de", "completion": None, "sample": 1},
    ]
    rows = task_rows("base", records, key, LcbOptions(), tmp_path)
    by = {(r.task, r.language): r for r in rows}
    assert by[("monolingual", "de")].value == pytest.approx(1 / 3) and by[("monolingual", "de")].n == 3
    assert by[("crosslingual", "ko")].value == 1.0
    assert by[("monolingual", "avg")].value == pytest.approx(1 / 3)
    low, high = by[("monolingual", "de")].low, by[("monolingual", "de")].high
    assert 0.0 < low < 1 / 3 < high < 1.0  # Wilson, n = 3
    assert all(r.metric == "task" and r.outcomes == "base/task.jsonl" for r in rows)
    verdicts = [json.loads(x) for x in (tmp_path / "task.jsonl").read_text().splitlines()]
    assert [v["correct"] for v in verdicts] == [True, False, True, False]
    assert verdicts[1]["extracted"] == 71


def test_the_arithmetic_suite_loads_and_a_suite_without_answers_is_refused(tmp_path):
    suite = load_suite("arithmetic")
    assert suite.options.answers and suite.options.prompts.endswith("arithmetic_prompts.jsonl")
    with pytest.raises(ConfigError, match=r"answers: LCB's prompts have no reference answers"):
        load_suite("lcb_tiny", ["answers=true"])
    bad = tmp_path / "no_answer.jsonl"
    bad.write_text(
        json.dumps({"id": "x1", "prompt": "2 + 2?", "language": "en", "answer": 4})
        + "\n"
        + json.dumps({"id": "x2", "prompt": "3 + 3?", "language": "en"})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"row 2 \('x2'\) has no `answer`"):
        load_suite("arithmetic", [f"prompts={bad}"])


@pytest.mark.slow  # builds a mix (decontamination against LCB)
def test_the_verifiable_mix_carries_answers(tmp_path, shared, monkeypatch):
    from mlft.data.mix import build_mix, load_mix

    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    mix = load_mix(ROOT / "data_mixes" / "cpu" / "arithmetic_prompts.yaml")
    ds = build_mix(mix, tmp_path, progress=False)
    assert len(ds) == 240 and "answer" in ds.column_names
    rows = list(ds)
    assert sum(r["task"] == "crosslingual" for r in rows) == 180
    for r in rows:
        kind, a, b = re.search(r"-(add|sub|mul)-(\d+)-(\d+)$", r["id"]).groups()
        assert r["answer"] == OPS[kind](int(a), int(b)) and split_of(kind, int(a), int(b)) == "train"
    report = json.loads((tmp_path / "mix" / "decontamination.json").read_text())
    assert report["dropped"]["total"] == 0 and report["phrasing_overlap"]["rows"] == 0
    listed = [json.loads(x) for x in (tmp_path / "mix" / "prompts.jsonl").read_text().splitlines()]
    assert listed and all("answer" in x for x in listed)


def test_the_variants_table_shows_the_task_columns_and_flags_a_drop(shared, tmp_path):  # LCB's word list
    """A suite with `answers: true` and variants gets Mono / Cross task columns (value ±h) in its Table 11
    layout; a variant whose task interval lies wholly below the base row's value is flagged (⚠) as a
    capability drop is, while its LPR is unchanged."""
    import dataclasses

    from mlft.benchmarks.lcb.scoring import outcomes_from, score_completions
    from mlft.completions import Completion
    from mlft.evals.lcb import metric_rows
    from mlft.evals.lcb_options import LcbOptions
    from mlft.reports.mitigation import variant_table
    from mlft.stats import save_outcomes

    right = "Lukas hat jetzt genau 32 Äpfel in seinem Korb."
    wrong = "Lukas hat jetzt genau 31 Äpfel in seinem Korb."
    rows, key = [], {}
    for name, correct in {"base": 18, "worse": 4}.items():
        records = []
        for task in ("monolingual", "crosslingual"):
            for i in range(20):
                pid = f"{task[0]}{i}"
                key[pid] = 32.0
                text = right if i < correct else wrong
                records.append({"id": pid, "task": task, "language": "de", "completion": text})
        comps = [Completion(x["id"], name, x["task"], "mine", "de", x["completion"], {"sample": 0}) for x in records]
        outs = outcomes_from(comps, score_completions(comps).replies)
        (tmp_path / name).mkdir()
        save_outcomes(tmp_path / name / "outcomes.jsonl", outs)
        rows += [dataclasses.replace(r, outcomes=f"{name}/outcomes.jsonl") for r in metric_rows(name, outs, 0.95, 200)]
        rows += task_rows(name, records, key, LcbOptions(), tmp_path / name)
    table = variant_table(rows, tmp_path, ["base", "worse"], {}, "t", None, task=True)
    mono, cross = table.header.index("Mono task"), table.header.index("Cross task")
    cells = {row[0]: row for row in table.body}
    assert cells["base"][mono].startswith("90.0") and cells["base"][cross].startswith("90.0")
    worse = next(label for label in cells if label.startswith("worse"))
    assert worse.endswith("⚠") and cells[worse][cross].startswith("20.0")
    assert cells[worse][table.header.index("Cross LPR")] == cells["base"][table.header.index("Cross LPR")]
    assert any("Cross task" in note for note in table.notes)
    plain = variant_table(rows, tmp_path, ["base", "worse"], {}, "t", None)
    assert "Cross task" not in plain.header

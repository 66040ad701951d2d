"""The extraction task (mlft.data.extraction): a deterministic generator, disjoint from LCB and the training seed
sets; its check (mlft.benchmarks.extraction) refuses echoes and candidate lists; the base model's committed rate
(docs/results/extraction_base.json): in the issue's 30-70 % band in both tasks, on the 290 shipped prompts, and a
re-run of a few items reproduces the committed replies and verdicts; the task_axis kind
runs it beside arithmetic as its own metric."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlft.benchmarks.extraction import extraction_correct
from mlft.data.extraction import ALL, NON_ENGLISH, TEMPLATES, extraction_prompts, passage
from mlft.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
EVAL_FILE = ROOT / "eval" / "extraction_prompts.jsonl"
RESULTS = ROOT / "docs" / "results" / "extraction_base.json"


def _shipped() -> list[dict]:
    return [json.loads(x) for x in EVAL_FILE.read_text(encoding="utf-8").splitlines()]


def test_generation_is_deterministic_and_the_shipped_file_is_its_output():
    assert extraction_prompts() == extraction_prompts()
    assert extraction_prompts(seed=1) != extraction_prompts()
    assert _shipped() == extraction_prompts(), "regenerate: python -m mlft.data.extraction " + str(EVAL_FILE)
    from mlft.benchmarks.lcb.data import load_prompt_file

    assert len(load_prompt_file(EVAL_FILE)) == 290  # a valid prompt file: 15 x 10 mono + 14 x 10 cross
    with pytest.raises(ConfigError, match="people"):
        extraction_prompts(people=0)


def test_every_language_and_every_item_states_its_answer_and_distractors():
    rows = extraction_prompts()
    mono = {r["language"] for r in rows if r["task"] == "monolingual"}
    cross = {r["language"] for r in rows if r["task"] == "crosslingual"}
    assert mono == set(ALL) and len(ALL) == 15 and cross == set(NON_ENGLISH)
    for r in rows:
        stated = [int(x) for x in re.findall(r"\d+", r["prompt"])]
        assert sorted(stated) == sorted([r["answer"], *r["distractors"]]), r["prompt"]  # each number once
        assert len(r["distractors"]) == 1 and r["answer"] not in r["distractors"]  # PEOPLE = 1: the bus
    for lang in ALL:  # the question names the asked person, whose sentences hold the bus, then the answer
        text = passage(lang, [("A1", 101, 11), ("B2", 202, 22)], 1)
        assert text.count("B2") == 3 and "{" not in text
        at = [text.index(x) for x in ("A1", "11", "101", "B2", "22", "202")]
        assert at == sorted(at), text  # each person's bus, then the room
    assert set(TEMPLATES) == set(ALL)


class _P:
    def __init__(self, pid, prompt):
        self.id, self.prompt = pid, prompt


def test_disjoint_from_lcb_and_every_seed_training_set(shared):
    """mlft's decontamination (exact match or a shared 8-unit run) finds no LCB prompt in the extraction prompts
    (cross-lingual rows with their request), never one of LCB's request templates, and no prompt of any training
    seed set (every set the mixes draw offline, arithmetic included) in the passages."""
    from mlft.benchmarks.lcb.data import load_prompts
    from mlft.data.decontaminate import LcbIndex
    from mlft.data.seed import SEED_SETS

    rows = extraction_prompts()
    ev = [{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in rows]
    lcb = LcbIndex(load_prompts(["monolingual", "crosslingual"], path=shared / "lcb"), 8)
    assert lcb.size > 6000
    assert [lcb.match(x) for x in ev if lcb.match(x)] == []
    assert [lcb.phrasing(x) for x in ev if lcb.phrasing(x)] == []
    seeded = []
    for seed_set in SEED_SETS.values():
        for lang in seed_set.languages:
            for row in seed_set.rows(lang):
                turns = row.get("messages") or row.get("prompt") or []
                if isinstance(turns, list):
                    seeded += [_P(row["id"], t["content"]) for t in turns if t["role"] == "user"]
    index = LcbIndex(seeded, 8)
    assert index.size > 1000
    passages = [x for x, r in zip(ev, rows) if r["task"] == "monolingual"]
    assert len(passages) == 150 and [index.match(x) for x in passages if index.match(x)] == []
    # the check works: a seed set's own prompt is found
    assert index.match({"prompt": [{"role": "user", "content": seeded[0].prompt}]}) is not None


@pytest.mark.parametrize(
    "reply, want",
    [
        ("Tom lives in room 272.", True),
        ("272", True),
        ("Том живёт в комнате ٢٧٢.", True),  # Arabic-Indic digits
        ("トムさんは２７２号室に住んでいます。", True),  # full-width
        ("Tom lives in room 272. He has lived there for 3 years.", True),  # other numbers do not matter
        ("James lives in room 634. David lives in room 237. Tom lives in room 272.", False),  # the echo
        ("Tom lives in room 272. In which room does Tom live?", True),  # a restated question states no number
        ("It is 634, 237 or 272.", False),  # candidates
        ("Tom lives in room 634.", False),  # another person's number
        ("Tom lives in room 273.", False),
        ("two hundred seventy-two", False),  # number words are not read
        ("", False),
        (None, False),
    ],
)
def test_the_check_wants_the_answer_and_no_other_persons_number(reply, want):
    assert extraction_correct(reply, 272, [634, 237]) is want


def test_task_rows_use_the_check_where_a_prompt_has_distractors(tmp_path):
    """The lcb kind's task metric: on an extractive prompt an echo is not an answer and a reply stating the room
    is; without the distractors (the planted fault) the arithmetic check would judge them, which takes the prompt's
    numbers, restated, for no result and so refuses the honest reply too; arithmetic prompts keep their check."""
    from mlft.evals.lcb import task_rows
    from mlft.evals.lcb_options import LcbOptions

    prompt = "Tom takes bus 412. Tom lives in room 272. In which room does Tom live? Answer with the room number only."
    echo = "Tom takes bus 412. Tom lives in room 272."
    records = [
        {"id": "x", "task": "monolingual", "language": "en", "completion": echo, "prompt": prompt},
        {"id": "y", "task": "monolingual", "language": "en", "completion": "Tom: 272", "prompt": prompt},
        {"id": "a", "task": "monolingual", "language": "en", "completion": "4 + 3 = 7"},
    ]
    key = {"x": 272.0, "y": 272.0, "a": 7.0}
    rows = task_rows("base", records, key, LcbOptions(), tmp_path, {"x": (412.0,), "y": (412.0,)})
    verdicts = [json.loads(x)["correct"] for x in (tmp_path / "task.jsonl").read_text().splitlines()]
    assert verdicts == [False, True, True]
    assert next(r for r in rows if r.language == "avg").value == pytest.approx(2 / 3)
    task_rows("base", records, key, LcbOptions(), tmp_path)  # without the distractors: the honest reply is lost
    verdicts = [json.loads(x)["correct"] for x in (tmp_path / "task.jsonl").read_text().splitlines()]
    assert verdicts == [False, False, True]


def test_the_extraction_suite_reads_the_distractors_and_refuses_bad_ones(tmp_path):
    from mlft.evals.lcb_options import distractor_key
    from mlft.evals.suite import load_suite

    suite = load_suite("extraction")
    key = distractor_key(suite.options, "extraction")
    assert len(key) == 290 and all(len(v) == 1 for v in key.values())
    bad = tmp_path / "bad.jsonl"
    row = dict(_shipped()[0], distractors=["many"])
    bad.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="distractors must be a list of numbers"):
        load_suite("extraction", settings={"prompts": str(bad)})


# -- the committed base rate --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_the_committed_base_rate_lies_in_the_band_in_each_task(committed):
    lo, hi = committed["band"]
    assert (lo, hi) == (0.30, 0.70) and committed["model"] == "smollm2-135m-instruct"
    assert set(committed["tasks"]) == {"monolingual", "crosslingual"}
    k = committed["settings"]["per_language"]
    assert k == 10 and committed["settings"]["people"] == 1 and committed["settings"]["seed"] == 0
    rates = {task: t["answered"] / t["n"] for task, t in committed["tasks"].items()}
    # the goal (30-70 % in each task) holds in both tasks, measured on every shipped prompt (the design was picked on
    # seed-1 pilot prompts: `earlier` holds the designs tried there)
    assert all(lo <= r <= hi for r in rates.values()) and committed["within_band"] is True, rates
    earlier = committed["earlier"]
    assert len(earlier) >= 7 and all(0 <= d["monolingual"][0] <= d["monolingual"][1] for d in earlier)
    for task, t in committed["tasks"].items():
        assert t["n"] == k * (15 if task == "monolingual" else 14)
        assert sum(c["answered"] for c in t["languages"].values()) == t["answered"]
        assert len(t["languages"]) == (15 if task == "monolingual" else 14)
    # the measured items are the shipped suite's first k per (task, language) (the generator draws in order)
    items = committed["items"]
    by_id = {r["id"]: r for r in _shipped()}
    assert {i["id"] for i in items} == {r["id"] for r in extraction_prompts(per_language=k)} <= set(by_id)
    for i in items:
        p = by_id[i["id"]]
        assert extraction_correct(i["completion"], p["answer"], p["distractors"]) is i["correct"], i
    for task, t in committed["tasks"].items():
        assert sum(i["correct"] for i in items if i["id"].startswith(task)) == t["answered"]


@pytest.mark.slow
def test_a_rerun_of_a_few_items_reproduces_the_committed_replies(committed, tmp_path):
    """The embedded model, greedy with 48 new tokens, on six committed items (both tasks, three scripts) through
    the lcb kind as the measurement ran it: the same replies, so the same verdicts."""
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import load_suite
    from mlft.generation.target import Target
    from mlft.io.jsonl import read_jsonl

    items = {i["id"]: i for i in committed["items"]}
    picked = [r for r in _shipped() if r["language"] in ("de", "ru", "zh") and r["id"].endswith("-0")]
    assert len(picked) == 6
    prompts = tmp_path / "few.jsonl"
    prompts.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in picked), encoding="utf-8")
    settings = {"prompts": str(prompts), "fluency": None, "batch_size": committed["settings"]["batch_size"]}
    suite = load_suite("extraction", settings=settings)
    run_suite(suite, Target(model_ref=committed["model"]), tmp_path / "pass", progress=False)
    got = {r["id"]: r["completion"] for r in read_jsonl(tmp_path / "pass" / "default" / "completions.jsonl")}
    assert got == {pid: items[pid]["completion"] for pid in got} and len(got) == len(picked)
    verdicts = [json.loads(x) for x in (tmp_path / "pass" / "default" / "task.jsonl").read_text().splitlines()]
    assert {v["id"]: v["correct"] for v in verdicts} == {pid: items[pid]["correct"] for pid in got}


def test_the_task_axis_kind_runs_each_part_on_its_own_and_names_its_metric(tmp_path, monkeypatch):
    """eval/task_axis.yaml (the demo's task axis): the arithmetic part keeps its rows (metric `task`), the
    extraction part's task score becomes metric `extraction` and its other rows `extraction_<metric>`, every
    outcomes path under the part's folder; each part gets the settings laid over the suite; a part that is not a
    verifiable lcb suite is refused before any model loads."""
    from mlft.evals import lcb, task_axis_kind
    from mlft.evals.registry import KindOutput
    from mlft.evals.runner import EvalContext
    from mlft.evals.suite import load_suite
    from mlft.io.metric_rows import MetricRow

    suite = load_suite("task_axis", settings={"languages": ["de", "zh"], "per_language": 3})
    parts = task_axis_kind.part_suites(suite.options, "task_axis")
    assert {m: p.name for m, p in parts.items()} == {"task": "arithmetic", "extraction": "extraction"}
    assert all(p.options.languages == ["de", "zh"] and p.options.per_language == 3 for p in parts.values())
    seen = []

    def fake_run(part, ctx):
        seen.append((part.name, ctx.out_dir))
        rows = [
            MetricRow("model", "monolingual", "avg", m, 0.5, 0.4, 0.6, 10, outcomes=f"model/{f}")
            for m, f in (("task", "task.jsonl"), ("lpr", "outcomes.jsonl"))
        ]
        return KindOutput(rows, f"{part.name} report")

    monkeypatch.setattr(lcb, "run", fake_run)  # the lcb kind's run, which each part calls
    ctx = EvalContext(tmp_path, models=object())
    out = task_axis_kind.run(suite, ctx)
    assert seen == [("arithmetic", tmp_path / "task"), ("extraction", tmp_path / "extraction")]
    assert [(r.metric, r.outcomes) for r in out.rows] == [
        ("task", "task/model/task.jsonl"),
        ("lpr", "task/model/outcomes.jsonl"),
        ("extraction", "extraction/model/task.jsonl"),
        ("extraction_lpr", "extraction/model/outcomes.jsonl"),
    ]
    with pytest.raises(ConfigError, match="not an lcb suite with answers: true"):
        load_suite("task_axis", ["parts={task: lcb_tiny}"])

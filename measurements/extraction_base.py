"""The extraction task's base rate: the embedded SmolLM2-135M-Instruct on the extractive questions
(mlft.data.extraction), greedy with 48 new tokens (the demo's task-axis decoding), every LCB language, monolingual
and cross-lingual; the share answered (mlft.benchmarks.extraction: the asked number stated, no other person's)
per task and per language, and why the others fail (an echo stating every number, another person's number, no
number). Runs the shipped `extraction` suite (its prompt file, or one drawn with other difficulty settings) through
the lcb kind, as the demo's task pass does. ~5 minutes on 2 cores for the 290 prompts.

    python measurements/extraction_base.py [--people 3] [--per-language 10] [--out runs/extraction_base]
        [--results docs/results/extraction_base.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

from mlft.benchmarks.answers import numbers
from mlft.benchmarks.extraction import extraction_correct, states
from mlft.data.extraction import EVAL_PER_LANGUAGE, EVAL_SEED, NUMBERS, PEOPLE, extraction_prompts
from mlft.evals.runner import run_suite
from mlft.evals.suite import load_suite
from mlft.generation.target import Target
from mlft.io.jsonl import read_jsonl
from mlft.reports.results import SCHEMA

SHIPPED = Path(__file__).resolve().parent.parent / "eval" / "extraction_prompts.jsonl"
MODEL = "smollm2-135m-instruct"
BAND = (0.30, 0.70)  # the goal: the base answers between 30 and 70 % in each task
# The designs tried before the shipped one, measured the same way (greedy, 48 new tokens, the lcb kind) on a pilot
# drawn with seed 1 (5 per (task, language): 75 monolingual, 70 cross-lingual prompts), never on the reported seed-0
# prompts; answered / n per task (absent: not measured). The first is the design this file reported before
# (on the seed-0 prompts, 3 per (task, language): 10 / 45 monolingual, 26 / 42 cross-lingual).
EARLIER = [
    {"design": "one sentence (room and bus), question after, 'Answer with the room number.'", "monolingual": [11, 75]},
    {"design": "the same, 'Answer with the room number only.'", "monolingual": [17, 75], "crosslingual": [42, 70]},
    {"design": "the same with 'Text:' / 'Question:' labels", "monolingual": [14, 75]},
    {"design": "the question first, then the sentence and the request for the number only", "monolingual": [16, 75]},
    {"design": "one worked example (labels, another person's room answered) first", "monolingual": [11, 75]},
    {"design": "two people, their rooms only (no bus), the request for the number only", "monolingual": [9, 75]},
    {
        "design": "two sentences, the room then the bus, the request for the number only (not shipped: some of its "
        "answers are echoes cut by the 48-token limit before the bus number)",
        "monolingual": [26, 75],
    },
    {
        "design": "the shipped one: two sentences, the bus then the room, the request for the number only",
        "monolingual": [45, 75],
        "crosslingual": [45, 70],
    },
]


def failure(reply: str, answer: float, distractors) -> str:
    """Why a reply does not answer: `echo` (states the answer and another person's number), `other` (another
    person's number only), `none` (neither the answer nor another person's number), or `answered`."""
    found = numbers(reply or "")
    hit, wrong = states(found, answer), any(states(found, d) for d in distractors)
    if hit and not wrong:
        return "answered"
    return "echo" if hit else "other" if wrong else "none"


def summarize(prompts: list[dict], records: list[dict]) -> dict:
    """{task: {answered, n, rate, why: {...}, languages: {lang: {answered, n, rate}}}} and every item's outcome."""
    by_id = {p["id"]: p for p in prompts}
    tasks: dict = defaultdict(lambda: {"answered": 0, "n": 0, "why": Counter(), "languages": defaultdict(Counter)})
    items = []
    for r in sorted(records, key=lambda x: x["id"]):
        p = by_id[r["id"]]
        ok = extraction_correct(r["completion"], p["answer"], p["distractors"])
        why = failure(r["completion"], p["answer"], p["distractors"])
        t = tasks[p["task"]]
        t["answered"] += ok
        t["n"] += 1
        t["why"][why] += 1
        t["languages"][p["language"]]["answered"] += ok
        t["languages"][p["language"]]["n"] += 1
        items.append({"id": r["id"], "completion": r["completion"], "correct": ok, "why": why})
    out = {}
    for task, t in tasks.items():
        out[task] = {
            "answered": t["answered"],
            "n": t["n"],
            "rate": round(t["answered"] / t["n"], 4),
            "pct": round(100 * t["answered"] / t["n"], 1),
            "why": dict(sorted(t["why"].items())),
            "languages": {
                lang: {"answered": c["answered"], "n": c["n"], "rate": round(c["answered"] / c["n"], 4)}
                for lang, c in sorted(t["languages"].items())
            },
        }
    return {"tasks": out, "items": items}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--people", type=int, default=PEOPLE)
    ap.add_argument("--per-language", type=int, default=EVAL_PER_LANGUAGE)
    ap.add_argument("--seed", type=int, default=EVAL_SEED)
    ap.add_argument("--out", default="runs/extraction_base")
    ap.add_argument("--results", help="write the results file here (e.g. docs/results/extraction_base.json)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prompts = extraction_prompts(args.per_language, args.seed, args.people)
    shipped = [json.loads(x) for x in SHIPPED.read_text(encoding="utf-8").splitlines()]
    prompt_file = SHIPPED if prompts == shipped else out / "prompts.jsonl"
    if prompt_file != SHIPPED:
        prompt_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in prompts), encoding="utf-8")
    suite = load_suite("extraction", settings={"prompts": str(prompt_file), "fluency": None, "batch_size": 16})
    t0 = time.time()
    run_suite(suite, Target(model_ref=MODEL), out / "pass", progress=True)
    seconds = time.time() - t0
    records = list(read_jsonl(out / "pass" / "default" / "completions.jsonl"))
    summary = summarize(prompts, records)
    for task, t in summary["tasks"].items():
        langs = " ".join(f"{lang} {c['answered']}/{c['n']}" for lang, c in t["languages"].items())
        print(f"{task}: {t['answered']}/{t['n']} = {100 * t['rate']:.1f} % ({t['why']}); {langs}")
    within = all(BAND[0] <= t["rate"] <= BAND[1] for t in summary["tasks"].values())
    print(f"every task within {BAND}: {within} ({seconds:.0f} s)")
    if args.results:
        record = {
            "name": "extraction_base",
            "schema": SCHEMA,
            "provenance": f"python measurements/extraction_base.py --per-language {args.per_language} "
            f"--people {args.people} --results {args.results}, {time.strftime('%Y-%m-%d')}: CPU, 2 cores shared with "
            "other jobs",
            "what": "the embedded model's answered rate on the extraction task (measurements/extraction_base.py)",
            "model": MODEL,
            "prompts": "eval/extraction_prompts.jsonl"
            + ("" if prompt_file == SHIPPED else f", its first {args.per_language} per (task, language)")
            if all(r in shipped for r in prompts)
            else str(prompt_file),
            "settings": {
                "per_language": args.per_language,
                "seed": args.seed,
                "people": args.people,
                "numbers": list(NUMBERS),
                "decoding": {
                    "temperature": suite.options.decoding.temperature,
                    "max_new_tokens": suite.options.decoding.max_new_tokens,
                },
                "batch_size": suite.options.batch_size,
            },
            "band": list(BAND),
            "within_band": within,
            "earlier": EARLIER,
            "seconds": round(seconds, 1),
            **summary,
        }
        Path(args.results).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

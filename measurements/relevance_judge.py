"""Agreement of the relevance judge (mlft.generation.relevance: PMI under the embedded SmolLM2-135M-Instruct, plus
the echo check) with the hand-labelled replies of tests/data/relevance_labelled.jsonl (220 replies, 10 languages,
answer / not an answer; classes: honest answers, short answers, answers in a close language, refusals, promises
to answer later, echoes of the prompt (verbatim, or translated for the cross-lingual prompts), a canned off-topic
paragraph, confidently wrong answers, proverbs, lists of nouns, invented Q:/A: turns).

The PMI threshold is chosen on one half (per language, one of its two prompts: every language and both tasks in
each half; the threshold that maximises accuracy, ties to the lower) and reported on the other half and overall,
per class (the share judged as its label says), per language, and the two error rates. Four PMI variants (the
baseline: the neutral empty turn, or a distractor prompt of the same form on another topic; the per-token mean
or the sum over the reply) are compared, and the variant is chosen on the first half as well. Three passes of the
reference model over the set (3 x 220 short sequences: 2-15 minutes on 2 cores, depending on their load).

    python measurements/relevance_judge.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from mlft.benchmarks.lcb.fluency import reply_nll
from mlft.generation.models import load
from mlft.generation.relevance import ECHO_SHARE, NEUTRAL, chat, echo_share

SCORES = ("neutral_mean", "neutral_sum", "contrast_mean", "contrast_sum")
DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "relevance_labelled.jsonl"


def dev_half(rows: list[dict]) -> set[str]:
    """Ids of the threshold half: per language, its first prompt for even-numbered languages, its second for odd."""
    langs = sorted({r["language"] for r in rows})
    prompts: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r["prompt"] not in prompts[r["language"]]:
            prompts[r["language"]].append(r["prompt"])
    chosen = {(lang, prompts[lang][i % 2]) for i, lang in enumerate(langs)}
    return {r["id"] for r in rows if (r["language"], r["prompt"]) in chosen}


def verdicts(rows: list[dict], threshold: float, score: str) -> list[bool]:
    return [r[score] is not None and r[score] >= threshold and r["echo"] < ECHO_SHARE for r in rows]


def accuracy(rows: list[dict], threshold: float, score: str) -> float:
    said = verdicts(rows, threshold, score)
    return sum(s == (r["label"] == "answer") for s, r in zip(said, rows)) / len(rows)


def pick_threshold(rows: list[dict], score: str) -> float:
    candidates = sorted({r[score] for r in rows if r[score] is not None})
    return max(candidates, key=lambda t: (accuracy(rows, t, score), -t))


def table(rows: list[dict], threshold: float, key: str, score: str) -> list[tuple[str, int, float, float]]:
    """(group, n, agreement %, median score) per value of `key`."""
    said = verdicts(rows, threshold, score)
    groups: dict[str, list] = defaultdict(list)
    for s, r in zip(said, rows):
        groups[r[key]].append((s == (r["label"] == "answer"), r[score]))
    out = []
    for g, items in sorted(groups.items()):
        pm = sorted(p for _, p in items if p is not None)
        out.append(
            (g, len(items), 100 * sum(a for a, _ in items) / len(items), pm[len(pm) // 2] if pm else float("nan"))
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="write the per-reply scores and the tables as JSON")
    ap.add_argument("--from", dest="saved", type=Path, help="re-read the scores a run wrote with --out (no model)")
    args = ap.parse_args()
    if args.saved:
        rows = json.loads(args.saved.read_text(encoding="utf-8"))["rows"]
        print(f"scores read from {args.saved}")
        report(rows, args.out)
        return
    rows = [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()]
    started = time.perf_counter()
    model, tok = load(None, device="cpu")
    loaded = time.perf_counter()
    replies = [r["reply"] for r in rows]
    given = reply_nll(model, tok, [chat(r["prompt"]) for r in rows], replies, batch_size=16, padding_side="left")
    neutral = reply_nll(model, tok, [NEUTRAL] * len(rows), replies, batch_size=16, padding_side="left")
    contrast = reply_nll(model, tok, [chat(r["distractor"]) for r in rows], replies, batch_size=16, padding_side="left")
    scored = time.perf_counter()
    for r, g, a, c in zip(rows, given, neutral, contrast):
        n = len(tok(r["reply"], add_special_tokens=False)["input_ids"])
        r.update(nll_given=g, nll_neutral=a, nll_distractor=c, tokens=n, echo=echo_share(r["prompt"], r["reply"]))
        r["neutral_mean"], r["neutral_sum"] = a - g, (a - g) * n
        r["contrast_mean"], r["contrast_sum"] = c - g, (c - g) * n
    print(f"model load {loaded - started:.1f} s, scoring {scored - loaded:.1f} s ({3 * len(rows)} sequences)")
    report(rows, args.out)


def ranking(rows: list[dict], score: str, key: str = "class") -> list[tuple[str, int, float]]:
    """(class or `key`'s value of the non-answer, pairs, % of pairs the answer ranks above) over every (answer,
    non-answer other than an echo) pair of the same prompt (the echo check, not PMI, handles echoes), plus the
    echoes' own line when `key` is the class."""
    by_prompt: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        by_prompt[(r["language"], r["prompt"])].append(r)
    wins: dict[str, list[float]] = defaultdict(list)
    for group in by_prompt.values():
        for x in (r for r in group if r["label"] == "answer"):
            for y in (r for r in group if r["label"] != "answer"):
                if key != "class" and y["class"].startswith("echo"):
                    continue
                wins[y[key]].append(1.0 if x[score] > y[score] else 0.5 if x[score] == y[score] else 0.0)
    return [(c, len(w), 100 * sum(w) / len(w)) for c, w in sorted(wins.items())]


def report(rows: list[dict], out: Path | None) -> None:
    dev = dev_half(rows)
    a, b = [r for r in rows if r["id"] in dev], [r for r in rows if r["id"] not in dev]
    print(
        f"{len(rows)} replies, {len({r['language'] for r in rows})} languages, "
        f"{sum(r['label'] == 'answer' for r in rows)} answers"
    )
    print("\n| PMI variant | threshold (first half) | first half % | held-out half % | overall % |")
    print("|---|---:|---:|---:|---:|")
    picks = {}
    for score in SCORES:
        t = pick_threshold(a, score)
        picks[score] = (accuracy(a, t, score), t)
        print(
            f"| {score} | {t:.3f} | {100 * accuracy(a, t, score):.1f} | {100 * accuracy(b, t, score):.1f} | "
            f"{100 * accuracy(rows, t, score):.1f} |"
        )
    score = max(SCORES, key=lambda k: picks[k])  # the variant is chosen on the first half too
    t = picks[score][1]
    base = max(sum(r["label"] == "answer" for r in b), sum(r["label"] != "answer" for r in b)) / len(b)
    print(
        f"\nchosen on the first half: {score}, PMI >= {t:.3f} and echo < {ECHO_SHARE}; held-out agreement "
        f"{100 * accuracy(b, t, score):.1f} % (always saying the majority label: {100 * base:.1f} %)"
    )
    said = verdicts(rows, t, score)
    pos = [s for s, r in zip(said, rows) if r["label"] == "answer"]
    neg = [s for s, r in zip(said, rows) if r["label"] != "answer"]
    print(
        f"answers judged not an answer: {pos.count(False)} of {len(pos)}; non-answers judged answers: "
        f"{neg.count(True)} of {len(neg)}"
    )
    tables = {}
    for key in ("class", "language"):
        print(f"\n| {key} | n | agreement % (all) | agreement % (held-out half) | median {score} |")
        print("|---|---:|---:|---:|---:|")
        held = {g: (n, acc) for g, n, acc, _ in table(b, t, key, score)}
        tables[key] = []
        for g, n, acc, med in table(rows, t, key, score):
            h = held.get(g)
            print(f"| {g} | {n} | {acc:.0f} | {f'{h[1]:.0f} (n={h[0]})' if h else '-'} | {med:+.2f} |")
            tables[key].append({"group": g, "n": n, "agreement": acc, "median": med})
    print(f"\n| failure class | same-prompt (answer, reply) pairs | answer ranked above it % ({score}) |")
    print("|---|---:|---:|")
    for c, n, w in ranking(rows, score):
        print(f"| {c} | {n} | {w:.0f} |")
    print(f"\n| language | (answer, non-echo failure) pairs | answer ranked above it % ({score}) |")
    print("|---|---:|---:|")
    for c, n, w in ranking(rows, score, "language"):
        print(f"| {c} | {n} | {w:.0f} |")
    if out:
        out.write_text(
            json.dumps({"score": score, "threshold": t, "rows": rows, "tables": tables}, ensure_ascii=False, indent=1)
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()

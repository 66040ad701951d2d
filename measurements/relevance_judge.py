"""Agreement of the relevance judge (mlft.generation.relevance: PMI under the embedded SmolLM2-135M-Instruct, plus
the echo check) with the hand-labelled replies of mlft/resources/labelled.jsonl (220 replies, 10 languages,
answer / not an answer; classes: honest answers, short answers, answers in a close language, refusals, promises
to answer later, echoes of the prompt (verbatim, or translated for the cross-lingual prompts), a canned off-topic
paragraph, confidently wrong answers, proverbs, lists of nouns, invented Q:/A: turns).

The PMI threshold is chosen on one half (per language, one of its two prompts: every language and both tasks in
each half; the threshold that maximises accuracy, ties to the lower) and reported on the other half and overall,
per class (the share judged as its label says), per language, and the two error rates. Four PMI variants (the
baseline: the neutral empty turn, or a distractor prompt of the same form on another topic; the per-token mean
or the sum over the reply) are compared, and the variant is chosen on the first half as well.

Then the study of a better judge (`STUDY`): features beyond one PMI (the contrast against four more distractor
prompts, LCB's shortest prompts of the same task and language, as a mean, a minimum and the true prompt's log-share
among all; the reverse direction, the prompt given the reply; the reply's NLL given the prompt; its length in
tokens), combined by an L2 logistic regression (numpy, `fit_logistic`) fitted on the first half only. The
candidate feature sets are listed in advance and one is chosen by leave-one-prompt-out agreement inside the first
half; the held-out half is read once, for the report. Agreement is also given without the confidently wrong
answers (relevance cannot tell a wrong answer from a right one: the verifiable prompts' correctness check does).

Scoring: 9 passes of the reference model over the set (about 2,000 short sequences: 40-60 minutes on 2 cores
shared with 5 other jobs); the per-reply numbers are cached (`--out`, committed as
measurements/relevance_judge_scores.json.gz) and `--from` re-reads them without the model.

    python measurements/relevance_judge.py [--out FILE.json] [--results docs/results/relevance_judge.json]
    python measurements/relevance_judge.py --from measurements/relevance_judge_scores.json.gz [--results FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from mlft.benchmarks.lcb.fluency import reply_nll
from mlft.generation.relevance import ECHO_SHARE, NEUTRAL, chat, echo_share

SCORES = ("neutral_mean", "neutral_sum", "contrast_mean", "contrast_sum")
DATA = Path(__file__).resolve().parent.parent / "mlft" / "resources" / "labelled.jsonl"
K_DISTRACTORS = 4  # more distractor prompts per reply, from LCB (same task and language)
# the candidate feature sets of the study, fixed before any was fitted (names: `features`)
STUDY = (
    ("neutral_sum",),
    ("neutral_sum", "contrast_sum"),
    ("neutral_sum", "several_sum"),
    ("neutral_sum", "retrieval"),
    ("neutral_sum", "reverse"),
    ("neutral_sum", "nll", "log_tokens"),
    ("several_sum", "nll", "log_tokens"),
    ("retrieval", "nll", "log_tokens"),
    ("neutral_sum", "several_sum", "retrieval", "nll", "log_tokens"),
)
L2 = 1.0


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


def lcb_distractors(task: str, language: str, k: int = K_DISTRACTORS) -> list[str]:
    """The first `k` one-line LCB prompts of the task and language (at most 160 characters; cross-lingual: okapi's,
    one per question, its three phrasings being the same question), as other prompts of the same form."""
    from mlft.benchmarks.lcb.data import load_prompts

    prompts = load_prompts(tasks=[task], languages=[language], sources=["okapi"] if task == "crosslingual" else None)
    out: list[str] = []
    for i, p in enumerate(prompts):
        text = p.prompt.strip()
        if (task == "crosslingual" and i % 3) or len(text) > 160 or "\n" in text or text in out:
            continue
        out.append(text)
        if len(out) == k:
            break
    return out


def score(rows: list[dict]) -> dict:
    """The model's numbers per reply (mean NLL per token): given its prompt, the empty turn, its row's distractor,
    `K_DISTRACTORS` LCB prompts of its task and language; and the prompt given the reply (`rev_given`) and alone."""
    from mlft.generation.models import load

    started = time.perf_counter()
    model, tok = load(None, device="cpu")
    passes = {}
    replies = [r["reply"] for r in rows]

    def timed(name, prompts, texts):
        t = time.perf_counter()
        out = reply_nll(model, tok, prompts, texts, batch_size=16, padding_side="left")
        passes[name] = {"sequences": len(texts), "seconds": round(time.perf_counter() - t, 1)}
        print(f"{name}: {len(texts)} sequences, {passes[name]['seconds']} s", flush=True)
        return out

    given = timed("given", [chat(r["prompt"]) for r in rows], replies)
    neutral = timed("neutral", [NEUTRAL] * len(rows), replies)
    contrast = timed("distractor", [chat(r["distractor"]) for r in rows], replies)
    table = {f"{r['task']}/{r['language']}": None for r in rows}
    table = {key: lcb_distractors(*key.split("/")) for key in table}
    several = [
        timed(f"lcb_{k}", [chat(table[f"{r['task']}/{r['language']}"][k]) for r in rows], replies)
        for k in range(K_DISTRACTORS)
    ]
    rev = timed("reverse", [chat(r["reply"]) for r in rows], [r["prompt"] for r in rows])
    distinct = sorted({r["prompt"] for r in rows})
    alone = dict(zip(distinct, timed("prompt_alone", [NEUTRAL] * len(distinct), distinct)))
    for i, (r, g, a, c) in enumerate(zip(rows, given, neutral, contrast)):
        n = len(tok(r["reply"], add_special_tokens=False)["input_ids"])
        r.update(nll_given=g, nll_neutral=a, nll_distractor=c, tokens=n, echo=echo_share(r["prompt"], r["reply"]))
        r["neutral_mean"], r["neutral_sum"] = a - g, (a - g) * n
        r["contrast_mean"], r["contrast_sum"] = c - g, (c - g) * n
        r["nll_lcb"] = [s[i] for s in several]
        r["rev_given"], r["rev_alone"] = rev[i], alone[r["prompt"]]
        r["prompt_tokens"] = len(tok(r["prompt"], add_special_tokens=False)["input_ids"])
    words = salad(rows)
    sg = timed("salad_given", [chat(x["prompt"]) for x in words], [x["reply"] for x in words])
    sa = timed("salad_neutral", [NEUTRAL] * len(words), [x["reply"] for x in words])
    for x, g, a in zip(words, sg, sa):
        n = len(tok(x["reply"], add_special_tokens=False)["input_ids"])
        x.update(nll_given=g, nll_neutral=a, tokens=n, neutral_sum=(a - g) * n)
    print(f"model load and scoring {time.perf_counter() - started:.1f} s")
    return {"distractors": table, "passes": passes, "salad": words}


def features(r: dict) -> dict[str, float]:
    """The study's features of one scored reply (nats): the PMI against the empty turn and the row's distractor
    (sums over the reply's tokens), against the mean of all five distractors (`several_sum`), the true prompt's
    log-share of the reply's likelihood among the six prompts (`retrieval`, <= 0), the reverse PMI (the prompt's
    mean NLL alone minus given the reply), the reply's mean NLL given the prompt, and log of its length in tokens."""
    n, g = r["tokens"], r["nll_given"]
    others = [*r["nll_lcb"], r["nll_distractor"]]
    logp = [-g * n] + [-x * n for x in others]
    top = max(logp)
    return {
        "neutral_sum": r["neutral_sum"],
        "contrast_sum": r["contrast_sum"],
        "several_sum": (sum(others) / len(others) - g) * n,
        "retrieval": logp[0] - (top + math.log(sum(math.exp(x - top) for x in logp))),
        "reverse": r["rev_alone"] - r["rev_given"],
        "nll": g,
        "log_tokens": math.log(n),
    }


def fit_logistic(x, y, l2: float = L2, iters: int = 100):
    """L2-penalised logistic regression (Newton's method) on standardised columns, the intercept unpenalised:
    (mean, scale, weights, intercept)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    a = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    penalty = np.eye(a.shape[1]) * l2
    penalty[-1, -1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(a @ w)))
        step = np.linalg.solve(a.T @ (a * (p * (1 - p))[:, None]) + penalty, a.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return mean, scale, w[:-1], w[-1]


def predict(model, x) -> np.ndarray:
    mean, scale, w, b = model
    return 1.0 / (1.0 + np.exp(-(((np.asarray(x, float) - mean) / scale) @ w + b)))


def combined(rows: list[dict], names: tuple[str, ...], fit_on: list[dict]) -> list[bool]:
    """Verdicts of the logistic model on `names`, fitted on `fit_on`: p >= 0.5 and not an echo."""
    model = fit_logistic([[features(r)[n] for n in names] for r in fit_on], [r["label"] == "answer" for r in fit_on])
    p = predict(model, [[features(r)[n] for n in names] for r in rows])
    return [bool(q >= 0.5) and r["echo"] < ECHO_SHARE for q, r in zip(p, rows)]


def agree(rows: list[dict], said: list[bool]) -> float:
    return 100 * sum(s == (r["label"] == "answer") for s, r in zip(said, rows)) / len(rows) if rows else float("nan")


def prompt_cv(rows: list[dict], names: tuple[str, ...]) -> float:
    """Leave-one-prompt-out agreement inside `rows` (the first half): the choice among STUDY's sets."""
    keys = sorted({(r["language"], r["prompt"]) for r in rows})
    said, seen = [], []
    for key in keys:
        test = [r for r in rows if (r["language"], r["prompt"]) == key]
        said += combined(test, names, [r for r in rows if (r["language"], r["prompt"]) != key])
        seen += test
    return agree(seen, said)


def study(a: list[dict], b: list[dict], rows: list[dict]) -> tuple[list[dict], tuple[str, ...]]:
    """One line per candidate set: leave-one-prompt-out agreement in the first half, then fitted on the whole
    first half: agreement there, on the held-out half, overall, and held out without the wrong answers."""
    lines = []
    for names in STUDY:
        said_b = combined(b, names, a)
        right = [(s, r) for s, r in zip(said_b, b) if r["class"] != "wrong"]
        lines.append(
            {
                "features": list(names),
                "cv_first": prompt_cv(a, names),
                "first": agree(a, combined(a, names, a)),
                "held_out": agree(b, said_b),
                "overall": agree(rows, combined(rows, names, a)),
                "held_out_not_wrong": agree([r for _, r in right], [s for s, _ in right]),
            }
        )
    best = max(lines, key=lambda x: (round(x["cv_first"], 6), -len(x["features"])))
    return lines, tuple(best["features"])


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


def per_language(a: list[dict], b: list[dict], score: str) -> float:
    """Held-out agreement with a threshold per language, each chosen on that language's first-half prompt (11
    replies): per-language calibration."""
    said, seen = [], []
    for lang in sorted({r["language"] for r in a}):
        t = pick_threshold([r for r in a if r["language"] == lang], score)
        held = [r for r in b if r["language"] == lang]
        said += verdicts(held, t, score)
        seen += held
    return agree(seen, said)


def per_group(rows: list[dict], said: list[bool], key: str) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s, r in zip(said, rows):
        out[r[key]][0] += s == (r["label"] == "answer")
        out[r[key]][1] += 1
    return {g: (v[0], v[1]) for g, v in sorted(out.items())}


def ranking_of(rows: list[dict], value: list[float]) -> dict[str, float]:
    """% of same-prompt (answer, non-answer) pairs where the answer's `value` is higher, per non-answer class."""
    keyed = [dict(r, _v=v) for r, v in zip(rows, value)]
    return {c: w for c, _, w in ranking(keyed, "_v")}


def report(rows: list[dict], out: Path | None, results: Path | None = None, extra: dict | None = None) -> None:
    dev = dev_half(rows)
    a, b = [r for r in rows if r["id"] in dev], [r for r in rows if r["id"] not in dev]
    print(
        f"{len(rows)} replies, {len({r['language'] for r in rows})} languages, "
        f"{sum(r['label'] == 'answer' for r in rows)} answers"
    )
    print("\n| PMI variant | threshold (first half) | first half % | held-out half % | overall % |")
    print("|---|---:|---:|---:|---:|")
    picks = {}
    for score_name in SCORES:
        t = pick_threshold(a, score_name)
        picks[score_name] = (accuracy(a, t, score_name), t)
        print(
            f"| {score_name} | {t:.3f} | {100 * accuracy(a, t, score_name):.1f} | "
            f"{100 * accuracy(b, t, score_name):.1f} | {100 * accuracy(rows, t, score_name):.1f} |"
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
    study_lines, chosen = [], ()
    if all("nll_lcb" in r for r in rows):
        study_lines, chosen = study(a, b, rows)
        print(
            "\n| features (logistic, fitted on the first half) | first half, leave-one-prompt-out % | first half % "
            "| held-out half % | overall % | held out, without wrong answers % |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for x in study_lines:
            print(
                f"| {' + '.join(x['features'])} | {x['cv_first']:.1f} | {x['first']:.1f} | {x['held_out']:.1f} | "
                f"{x['overall']:.1f} | {x['held_out_not_wrong']:.1f} |"
            )
        print(f"\nchosen by leave-one-prompt-out agreement in the first half: {' + '.join(chosen)}")
    print(
        f"a {score} threshold per language (chosen on its first-half prompt): "
        f"{per_language(a, b, score):.1f} % held out"
    )
    if out:
        text = (
            json.dumps(
                {"score": score, "threshold": t, "rows": rows, "tables": tables, **(extra or {})},
                ensure_ascii=False,
                indent=1,
            )
            + "\n"
        )
        if out.suffix == ".gz":
            with gzip.open(out, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            out.write_text(text, encoding="utf-8")
    if results:
        write_results(results, rows, a, b, score, t, study_lines, chosen, extra or {})


def salad(rows: list[dict]) -> list[dict]:
    """Word salad: each long honest reply of a space-separated language (en de es fr ru) with its words shuffled
    (seed 0). Not in the labelled set; what a reward that pays length or surprise would pay."""
    import random

    rng = random.Random(0)
    out = []
    for r in rows:
        if r["class"] == "honest" and r["language"] in ("en", "de", "es", "fr", "ru"):
            words = r["reply"].split()
            rng.shuffle(words)
            out.append({"id": r["id"] + "-salad", "prompt": r["prompt"], "reply": " ".join(words)})
    return out


def salad_verdicts(items: list[dict], a: list[dict], score: str, t: float) -> dict[str, int]:
    """How many salad replies the PMI judge and the study's length-and-NLL model call answers."""
    names = ("neutral_sum", "nll", "log_tokens")
    model = fit_logistic([[features(r)[n] for n in names] for r in a], [r["label"] == "answer" for r in a])
    x = [[s["neutral_sum"], s["nll_given"], math.log(s["tokens"])] for s in items]
    p = predict(model, x) if x else []
    return {
        "n": len(items),
        "pmi_judge": sum(s[score] >= t for s in items),
        "length_nll_model": int(sum(q >= 0.5 for q in p)),
    }


def write_results(path, rows, a, b, score, t, study_lines, chosen, extra) -> None:
    """docs/results/relevance_judge.json: the numbers of docs/rl.md's judge paragraph and tables, as fill records."""
    from datetime import date

    from mlft.reports.results import SCHEMA

    said_b, said = verdicts(b, t, score), verdicts(rows, t, score)
    held, every = per_group(b, said_b, "class"), per_group(rows, said, "class")
    langs_held, langs = per_group(b, said_b, "language"), per_group(rows, said, "language")
    ranks = {c: w for c, _, w in ranking(rows, score)}
    not_wrong_b = [(s, r) for s, r in zip(said_b, b) if r["class"] != "wrong"]
    not_wrong = [(s, r) for s, r in zip(said, rows) if r["class"] != "wrong"]
    majority = 100 * max(sum(r["label"] == "answer" for r in b), sum(r["label"] != "answer" for r in b)) / len(b)
    passes = extra.get("passes", {})
    per_seq = [v["seconds"] / v["sequences"] for v in passes.values() if v["sequences"] >= 100]
    sal = salad_verdicts(extra.get("salad", []), a, score, t)
    best = next(x for x in study_lines if tuple(x["features"]) == chosen)
    top = max(study_lines, key=lambda x: x["held_out"])
    values = [
        agree(b, said_b),
        agree(rows, said),
        majority,
        agree([r for _, r in not_wrong_b], [s for s, _ in not_wrong_b]),
        agree([r for _, r in not_wrong], [s for s, _ in not_wrong]),
        best["held_out"],
        best["overall"],
        top["held_out"],
        min(per_seq),
        max(per_seq),
        2 * min(per_seq),
        2 * max(per_seq),
        sal["n"],
        sal["length_nll_model"],
        sal["pmi_judge"],
        per_language(a, b, score),
    ]
    p1 = (
        "\n**The judge, measured** (`python measurements/relevance_judge.py`: 220 hand-labelled replies in 10 "
        "languages, mlft/resources/labelled.jsonl; the variant and its threshold chosen on one half, reported "
        "on the other). **The goal of >= 90 % is not met**: {0:.1f} % agreement on the held-out half ({1:.1f} % "
        'overall), where always saying "not an answer" gets {2:.1f} %; without the confidently wrong answers, '
        "which no relevance score can tell from right ones (the verifiable prompts' correctness check is what "
        "catches them), {3:.1f} % held out ({4:.1f} % overall). Features beyond one PMI (the contrast against five "
        "distractor prompts, the true prompt's share among them, the reverse direction, the reply's NLL and length) "
        "combined by a logistic regression fitted on the first half did not reach it either: the set chosen inside "
        "the first half gets {5:.1f} % held out ({6:.1f} % overall), the best of all sets read on the held-out half "
        "(not a held-out figure) {7:.1f} %. Per-language calibration (a threshold per language, chosen on its "
        "first-half prompt's 11 replies) overfits: {15:.1f} % held out. "
        "What those models add is the reply's length and its surprise, an "
        "artefact of how the set was written and a reward's weak spot: {12:d} word salads (an honest reply's words "
        "shuffled) are called answers {13:d} times by the length-and-NLL model, {14:d} by the PMI judge. So the "
        "answer term keeps the PMI judge. Its cost in the reward: two passes of the embedded model per rollout, "
        "{8:.2f}-{9:.2f} s per sequence on 2 cores shared with 5 other jobs, so {10:.1f}-{11:.1f} s per reply.\n"
    )
    classes = sorted(every)
    t1 = "\n| class | label | agreement (all) | agreement (held-out half) | answer ranked above it (same prompt) |\n"
    t1 += "|---|---|---:|---:|---:|\n"
    v1: list = []
    label = {r["class"]: r["label"] for r in rows}
    for c in classes:
        i = len(v1)
        rank = f"{{{i + 4}:.0f}} %" if c in ranks else "-"
        t1 += f"| {c} | {label[c]} | {{{i}:d}}/{{{i + 1}:d}} | {{{i + 2}:d}}/{{{i + 3}:d}} | {rank} |\n"
        v1 += [*every[c], *held.get(c, (0, 0))] + ([ranks[c]] if c in ranks else [])
    t2 = "\n| language | agreement (all) | agreement (held-out half) |\n|---|---:|---:|\n"
    v2: list = []
    for g in sorted(langs):
        i = len(v2)
        t2 += f"| {g} | {{{i}:d}}/{{{i + 1}:d}} | {{{i + 2}:d}}/{{{i + 3}:d}} |\n"
        v2 += [*langs[g], *langs_held[g]]
    t3 = (
        "\n| features (logistic, fitted on the first half) | first half, leave-one-prompt-out | held-out half | "
        "overall | held out, without wrong answers |\n|---|---:|---:|---:|---:|\n"
    )
    v3: list = []
    for x in study_lines:
        i = len(v3)
        mark = " (chosen)" if tuple(x["features"]) == chosen else ""
        t3 += (
            f"| {' + '.join(x['features'])}{mark} | {{{i}:.1f}} % | {{{i + 1}:.1f}} % | {{{i + 2}:.1f}} % | "
            f"{{{i + 3}:.1f}} % |\n"
        )
        v3 += [x["cv_first"], x["held_out"], x["overall"], x["held_out_not_wrong"]]
    record = {
        "name": "relevance_judge",
        "schema": SCHEMA,
        "provenance": (
            f"python measurements/relevance_judge.py, {date.today().isoformat()}: scores of the embedded "
            "SmolLM2-135M-Instruct on a CPU shared with 5 other jobs, cached in "
            "measurements/relevance_judge_scores.json.gz (re-read with --from)"
        ),
        "judge": {"variant": score, "threshold": t, "chosen_study_features": list(chosen), "passes": passes},
        "section": {
            "p1": {"template": p1, "values": [round(v, 4) if isinstance(v, float) else v for v in values]},
            "t1": {"template": t1, "values": [round(v, 4) if isinstance(v, float) else v for v in v1]},
            "t2": {"template": t2, "values": v2},
            "t3": {"template": t3, "values": [round(v, 4) for v in v3]},
        },
    }
    Path(path).write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def read_scores(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="write the per-reply scores and the tables as JSON (.gz: compressed)")
    ap.add_argument("--from", dest="saved", type=Path, help="re-read the scores a run wrote with --out (no model)")
    ap.add_argument("--results", type=Path, help="write the results file the docs render (docs/results/...)")
    args = ap.parse_args()
    if args.saved:
        saved = read_scores(args.saved)
        print(f"scores read from {args.saved}")
        extra = {k: saved[k] for k in ("distractors", "passes", "salad") if k in saved}
        report(saved["rows"], args.out, args.results, extra)
        return
    rows = [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines() if x.strip()]
    extra = score(rows)
    report(rows, args.out, args.results, extra)


if __name__ == "__main__":
    main()

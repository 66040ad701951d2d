"""Does `mlft compare`'s default paired test keep its level on reruns that none of the calibration code saw?

The calibration (`measurements/calibration.py`, tests/data/calibration_lcb_demo.json.gz) drew its replies with
mlft's own keyed sampler at decoding seed 0. This draws held-out passes of the same model (the embedded
SmolLM2-135M-Instruct) on the same 290 lcb_demo prompts, one reply per prompt per pass (K = 1), from two
generators:

- A: mlft's keyed generator (`run_suite`) at a decoding seed the calibration never used (`--seed-a`, default
  901; `samples: P`, so pass j is reply j of every prompt, each drawn with its own key). Only the decoding seed
  changes: the suite's top-level `seed` picks the prompts and stays 0, so both generators see the same prompts.
- B: plain `transformers` `model.generate(do_sample=True)` with the suite's decoding (temperature, top-p, no
  top-k, no repetition penalty, max_new_tokens), the chat template applied exactly as mlft's backends apply it
  (`encode_request`), the model as mlft loads it (`mlft.generation.models.load`), left padding, batches of
  similar length, the global torch stream seeded per (pass, batch) so a resumed pass draws what an uninterrupted
  one would. Replies are cut at the end-of-turn token as mlft cuts them (`cut_reply`) and scored with the scorer
  `run_suite` uses (`score_completions` + `outcomes_from`), so A's and B's outcomes are the same kind of record.
  `warper_check` compares, on real next-token logits, the token set and probabilities transformers' own warpers
  keep with mlft's `NucleusWarper`: B is a draw of the same per-token distribution by a different random stream.

Every pair of passes (within A, within B, across A and B) is a same-model comparison: per task, the default
`paired_test` (permutation, LPR, language-averaged) and the per-language Holm family (any language rejected).
Reported per task and per pairing: the rejection rate at 5 % with its Wilson interval (the pairs share passes, so
the tests are dependent: the interval is a guide, the disjoint pairs' count is beside it) and the smallest p
(first at `--resamples` permutations, then every p below 0.01 recomputed at `--fine` so that p >= 0.001 is
resolvable). The goal: a rate in [2 %, 8 %] and no p below 0.001.

    nice python measurements/heldout.py --time                 # one pass of each generator, timed
    nice python measurements/heldout.py --passes 6             # generate (resumable), then analyse
    python measurements/heldout.py --no-generate --data tests/data/heldout_lcb_demo.json.gz \\
        --results docs/results/heldout.json     # the test's data and the docs' results file

Writes OUT/heldout.json (and OUT/a, OUT/b: completions and outcomes).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from mlft.constants import TASKS
from mlft.stats import (
    Outcome,
    load_compact,
    load_outcomes,
    paired_test,
    paired_tests_by_language,
    pass_values,
    save_compact,
    save_outcomes,
    wilson,
)
from mlft.stats.aggregate import _FEATURES, _NFEAT, _aggregate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/, beside measurements/ (not in the package)
SUITE = "lcb_demo"
ALPHA = 0.05
GOAL = {"rate_low": 0.02, "rate_high": 0.08, "min_p": 0.001}


# --- generator A: mlft's keyed sampler -------------------------------------------------------------------------


def a_folder(out: Path, seeds: list[int], seed: int) -> Path:
    """Where A's passes at decoding seed `seed` live: OUT/a for the first seed, OUT/a<seed> for later blocks."""
    return out / "a" if seed == seeds[0] else out / f"a{seed}"


def generate_a(out: Path, passes: int, seed: int, folder: Path | None = None) -> list[list[Outcome]]:
    """`passes` replies per prompt from `run_suite` (resumable) at decoding seed `seed`; pass j = reply j."""
    from mlft.evals.runner import run_suite
    from mlft.evals.suite import load_suite
    from mlft.generation.target import Target

    folder = folder or out / "a"
    path = folder / "default" / "outcomes.jsonl"
    if not path.is_file() or len({o.sample for o in load_outcomes(path)}) < passes:
        run_suite(load_suite(SUITE, settings={"samples": passes, "decoding": {"seed": seed}}), Target(), folder)
    outcomes = load_outcomes(path)
    return [[replace(o, sample=0) for o in outcomes if o.sample == j] for j in range(passes)]


# --- generator B: plain transformers generate ------------------------------------------------------------------


def _suite_run():
    from mlft.evals.lcb_options import runs, select_prompts
    from mlft.evals.suite import load_suite

    suite = load_suite(SUITE)
    (run,) = runs(suite.options, SUITE)
    return run, select_prompts(suite.options)


def hf_kwargs(decoding, tokenizer, model) -> dict:
    """`generate`'s sampling arguments for the suite's decoding, every warper named (the model's own
    generation_config, and transformers' default top_k=50, must not leak in)."""
    eos = model.generation_config.eos_token_id
    eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
    return {
        "do_sample": True,
        "temperature": decoding.temperature,
        "top_p": decoding.top_p,
        "top_k": decoding.top_k or 0,  # 0: off (None would let the generation config's default in)
        "min_p": None,
        "typical_p": 1.0,
        "repetition_penalty": 1.0,
        "no_repeat_ngram_size": 0,
        "num_beams": 1,
        "max_new_tokens": decoding.max_new_tokens,
        "eos_token_id": sorted({e for e in [*eos, tokenizer.eos_token_id] if e is not None}),
        "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    }


def _batch_seed(seed: int, j: int, b: int) -> int:
    return int.from_bytes(hashlib.sha256(f"heldout-b/{seed}/{j}/{b}".encode()).digest()[:4], "little")


def generate_b(
    out: Path, passes: int, seed: int, batch_size: int = 128, progress: bool = True, which: list[int] | None = None
) -> list[Path]:
    """Pass j's completions in OUT/b/pass{j}.jsonl (appended per batch: resumable); `which`: only these passes
    (several processes can share the passes: each pass's draws depend only on its seed, pass and batch)."""
    import torch
    from tqdm import tqdm

    from mlft.generation.backends import cut_reply, encode_request
    from mlft.generation.models import DEFAULT_MODEL, load
    from mlft.generation.prompting import build_input
    from mlft.generation.requests import Request

    run, prompts = _suite_run()
    folder = out / "b"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"pass{j}.jsonl" for j in range(passes)]
    done = [
        {json.loads(x)["id"] for x in p.read_text(encoding="utf-8").splitlines()} if p.is_file() else set()
        for p in paths
    ]
    if all(len(d) == len(prompts) for d in done):
        return paths
    model, tok = load(DEFAULT_MODEL)
    kw = hf_kwargs(run.decoding, tok, model)
    enc = [
        encode_request(
            tok, Request(p.id, language=p.language, **build_input(run.prompting, p.prompt, p.task, p.language))
        )
        for p in prompts
    ]
    order = sorted(range(len(prompts)), key=lambda i: len(enc[i]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    todo = sum(len(prompts) - len(d) for j, d in enumerate(done) if which is None or j in which)
    with tqdm(total=todo, desc="B: transformers generate", unit="prompt", disable=not progress) as bar:
        for j, path in enumerate(paths):
            if which is not None and j not in which:
                continue
            for b, rows in enumerate(batches):
                if all(prompts[i].id in done[j] for i in rows):
                    continue
                width = max(len(enc[i]) for i in rows)
                ids = torch.tensor([[kw["pad_token_id"]] * (width - len(enc[i])) + enc[i] for i in rows])
                mask = torch.tensor([[0] * (width - len(enc[i])) + [1] * len(enc[i]) for i in rows])
                torch.manual_seed(_batch_seed(seed, j, b))
                with torch.inference_mode():
                    gen = model.generate(input_ids=ids, attention_mask=mask, **kw)[:, width:].tolist()
                with open(path, "a", encoding="utf-8") as fh:
                    for i, g in zip(rows, gen):
                        reply, finish = cut_reply(g, kw["eos_token_id"], (), False)
                        p = prompts[i]
                        rec = {"id": p.id, "task": p.task, "source": p.source, "language": p.language}
                        rec |= {"completion": tok.decode(reply, skip_special_tokens=True), "finish": finish}
                        fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                bar.update(len(rows))
    return paths


def score_b(paths: list[Path]) -> list[list[Outcome]]:
    """Each pass's outcomes, scored as `run_suite` scores a variant (cached next to the completions)."""
    from mlft.benchmarks.lcb.scoring import outcomes_from, score_completions
    from mlft.completions import Completion

    result = []
    for path in paths:
        cached = path.with_suffix(".outcomes.jsonl")
        if not cached.is_file() or cached.stat().st_mtime < path.stat().st_mtime:
            records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
            comps = [
                Completion(r["id"], "default", r["task"], r["source"], r["language"], r["completion"], {"sample": 0})
                for r in records
            ]
            save_outcomes(cached, outcomes_from(comps, score_completions(comps).replies))
        result.append(load_outcomes(cached))
    return result


def warper_check(prompts_n: int = 32) -> dict:
    """B's per-token distribution against mlft's: on the next-token logits of `prompts_n` lcb_demo prompts (and
    of 16 steps into a greedy continuation of each), the tokens transformers' warpers (temperature, top-p, as
    `generate` builds them from `hf_kwargs`) keep and their renormalised probabilities, against mlft's
    NucleusWarper (the hf backend's token set; its sampler draws from it by Gumbel-max). Returns the number of
    positions checked, how many keep a different token set, and the largest probability difference."""
    import torch
    from transformers import GenerationConfig

    from mlft.generation.backends import encode_request
    from mlft.generation.models import DEFAULT_MODEL, load
    from mlft.generation.processors import NucleusWarper
    from mlft.generation.prompting import build_input
    from mlft.generation.requests import Request

    run, prompts = _suite_run()
    model, tok = load(DEFAULT_MODEL)
    kw = hf_kwargs(run.decoding, tok, model)
    config = GenerationConfig(**{k: v for k, v in kw.items() if k != "max_new_tokens"})
    warpers = model._get_logits_processor(
        generation_config=config,
        input_ids_seq_length=1,
        encoder_input_ids=None,
        prefix_allowed_tokens_fn=None,
        logits_processor=None,
    )
    names = [type(w).__name__ for w in warpers]
    d = run.decoding
    mine = NucleusWarper(d.temperature, d.top_p, d.top_k)
    positions = differ = 0
    worst = 0.0
    step = max(1, len(prompts) // prompts_n)
    with torch.inference_mode():
        for p in prompts[::step][:prompts_n]:
            ids = encode_request(
                tok, Request(p.id, language=p.language, **build_input(run.prompting, p.prompt, p.task, p.language))
            )
            ids = model.generate(
                torch.tensor([ids]),
                do_sample=False,
                max_new_tokens=16,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                pad_token_id=kw["pad_token_id"],
            )
            logits = model(ids).logits[0].float()
            for t in range(ids.shape[1] - 17, ids.shape[1]):
                row = logits[t : t + 1]
                theirs = warpers(ids[:, : t + 1], row.clone())
                ours = mine(ids[:, : t + 1], row.clone())
                keep_t, keep_o = torch.isfinite(theirs), torch.isfinite(ours)
                positions += 1
                differ += int(not torch.equal(keep_t, keep_o))
                pt, po = torch.softmax(theirs, -1), torch.softmax(ours, -1)
                worst = max(worst, float((pt - po).abs().max()))
    return {"warpers": names, "positions": positions, "different_sets": differ, "max_prob_diff": worst}


# --- analysis --------------------------------------------------------------------------------------------------


def canonical(passes: list[list[Outcome]]) -> list[list[Outcome]]:
    """Each pass's outcomes in one order (task, source, language, id): the permutation test draws its seeded swap
    patterns unit by unit, so the same data in another order gives another Monte Carlo p (B's replies come in
    batch order, the compact data in A's)."""
    return [sorted(p, key=lambda o: (o.task, o.source, o.language, o.id)) for p in passes]


def pairings(labels: list[str], blocks: dict[str, list[int]] | None = None) -> dict[str, list[tuple[int, int]]]:
    """Every pair of passes, by pairing: A-A, B-B, A-B (labels 'A0', 'B3'...); then, per named block of passes
    (`blocks`: A's passes at one decoding seed), the pairs within it (each pair also counts in its pairing)."""
    out: dict[str, list[tuple[int, int]]] = {"A-A": [], "B-B": [], "A-B": []}
    for i, j in itertools.combinations(range(len(labels)), 2):
        gi, gj = labels[i][0], labels[j][0]
        out["A-B" if gi != gj else f"{gi}-{gj}"].append((i, j))
    for name, members in (blocks or {}).items():
        out[name] = list(itertools.combinations(sorted(members), 2))
    return out


def rate(k: int, n: int) -> dict:
    lo, hi = wilson(k, n)
    return {"rejected": k, "tests": n, "rate": k / n if n else None, "low": float(lo), "high": float(hi)}


def goal_problems(ps: list[float], alpha: float = ALPHA) -> list[str]:
    """What keeps p-values of same-model comparisons from the goal (empty: met): the share rejected at `alpha`
    outside [2 %, 8 %], or a p below 0.001."""
    share = sum(p < alpha for p in ps) / len(ps)
    problems = []
    if not GOAL["rate_low"] <= share <= GOAL["rate_high"]:
        problems.append(f"{100 * share:.1f} % rejected at {alpha:g} (goal: 2-8 %)")
    if min(ps) < GOAL["min_p"]:
        problems.append(f"smallest p {min(ps):.5f} < 0.001")
    return problems


def pair_p(a: list[Outcome], b: list[Outcome], task: str, n: int, fine: int) -> float:
    """The default test's p (LPR, language-averaged); below 0.01 recomputed with `fine` permutations."""
    p = paired_test(a, b, "lpr", task=task, n=n, interval=False).p_value  # the test alone: no bootstrap interval
    if p < 0.01 and fine > n:
        p = paired_test(a, b, "lpr", task=task, n=fine, interval=False).p_value
    return p


def analyse(
    passes: list[list[Outcome]],
    labels: list[str],
    resamples: int = 10000,
    fine: int = 20000,
    family_n: int = 1000,
    blocks: dict[str, list[int]] | None = None,
    disjoint: list[tuple[int, int]] | None = None,
) -> dict:
    """Per task: every pair's p, the rejection rate and smallest p per pairing (and per block, `pairings`) and over
    all pairs, the per-language Holm family's rate (any language rejected), and the spread of LPR over the passes.
    `disjoint`: pairs that share no pass (independent tests), counted apart; default pass i against i + n/2."""
    passes = canonical(passes)
    tasks = [t for t in TASKS if any(o.task == t for o in passes[0])]
    groups = pairings(labels, blocks)
    result: dict = {"passes": labels, "pairs": {g: len(v) for g, v in groups.items()}, "tasks": {}}
    every_pair = sorted(set(itertools.chain(*groups.values())))
    for task in tasks:
        lpr = (100 * pass_values(passes, task)).tolist()
        ps, fam = {}, {}
        for i, j in every_pair:
            ps[(i, j)] = pair_p(passes[i], passes[j], task, resamples, fine)
            family = paired_tests_by_language(passes[i], passes[j], "lpr", task=task, n=family_n)
            fam[(i, j)] = min(r.p_adjusted for r in family.values())
        rows = {}
        for g, pairs in {**groups, "all": every_pair}.items():
            if not pairs:
                continue
            k = sum(ps[q] < ALPHA for q in pairs)
            rows[g] = {
                **rate(k, len(pairs)),
                "min_p": min(ps[q] for q in pairs),
                "holm_any": rate(sum(fam[q] < ALPHA for q in pairs), len(pairs)),
            }
        disjoint = disjoint or adjacent_halves(len(labels))
        result["tasks"][task] = {
            "lpr": {
                "passes": [round(v, 2) for v in lpr],
                "mean": float(np.mean(lpr)),
                "sd": float(np.std(lpr, ddof=1)),
            },
            "pairings": rows,
            "disjoint": {
                **rate(sum(ps[q] < ALPHA for q in disjoint if q in ps), len(disjoint)),
                "min_p": min(ps[q] for q in disjoint if q in ps),
            },
            "p": {f"{labels[i]}-{labels[j]}": round(p, 5) for (i, j), p in sorted(ps.items())},
            "goal_problems": goal_problems(list(ps.values())),
            "tail": tail(list(ps.values())),
        }
    every = [p for t in result["tasks"].values() for p in t["p"].values()]
    result["pooled"] = {
        **rate(sum(p < ALPHA for p in every), len(every)),
        "min_p": min(every),
        "goal_problems": goal_problems(every),
        "tail": tail(every),
    }
    return result


def null_draws(pool: list[list[Outcome]], passes: int, replicates: int, resamples: int = 2000, seed: int = 0) -> dict:
    """The test's level on these prompts, and how surprising the held-out count is, under a null that holds exactly:
    each replicate draws `passes` passes by giving every prompt `passes` of its pooled replies (the calibration's and
    the held-out's, drawn without replacement, so every pass is exchangeable with every other), then tests every pair
    as `analyse` does (LPR, language-averaged, `resamples` permutations). Per task: the rejection rate at 5 % over
    all replicates' pairs (the test's actual level with these prompts' ties and ceilings: below 5 % only by
    discreteness), and each replicate's count of rejected pairs (the pairs share passes: the count's spread is wide)."""
    pool = aligned(pool)
    rng = np.random.default_rng(seed)
    tasks = [t for t in TASKS if any(o.task == t for o in pool[0])]
    pairs = list(itertools.combinations(range(passes), 2))
    counts: dict[str, list[int]] = {t: [] for t in tasks}
    mins: dict[str, list[float]] = {t: [] for t in tasks}
    for r in range(replicates):
        drawn = _shuffled(pool, rng, passes)  # per prompt, `passes` of its pooled replies
        for task in tasks:
            ps = [
                paired_test(drawn[i], drawn[j], "lpr", task=task, n=resamples, seed=r, interval=False).p_value
                for i, j in pairs
            ]
            counts[task].append(sum(p < ALPHA for p in ps))
            mins[task].append(min(ps))
        print(f"null replicate {r + 1}/{replicates}: " + ", ".join(f"{t} {counts[t][-1]}" for t in tasks), flush=True)
    out = {"pool": len(pool), "passes": passes, "pairs": len(pairs), "replicates": replicates, "resamples": resamples}
    for task in tasks:
        c = np.array(counts[task])
        out[task] = {
            **rate(int(c.sum()), len(pairs) * replicates),
            "counts": c.tolist(),
            "count_quantiles": {str(q): float(np.quantile(c, q / 100)) for q in (5, 25, 50, 75, 95)},
            "min_p": mins[task],
        }
    return out


TAIL_LEVELS = (0.01, 0.001)


def tail(ps: list[float]) -> list[dict]:
    """The tail against an exact test's: per level, how many p fall below it, how many an exact test expects
    (tests x level) and the chance of at least that many among independent tests of exact level (binomial). The
    goal's "no p below 0.001" was written for about fifty comparisons (5 % of the time an exact test breaks it
    there); at thousands an exact test is expected to break it: the count is what can say "too sure"."""
    from scipy.stats import binom

    out = []
    for level in TAIL_LEVELS:
        k = sum(p < level for p in ps)
        out.append(
            {"level": level, "below": k, "expected": len(ps) * level, "chance": float(binom.sf(k - 1, len(ps), level))}
        )
    return out


def tail_text(rows: list[dict], tests: int, v) -> str:
    """The tail sentence of the page: the counts below each level against an exact test's expectation."""
    parts = [
        f"below {v(r['level'], 'g')} in {v(r['below'], 'd')} (an exact test: {v(r['expected'], '.1f')} expected, "
        f"at least as many {v(100 * r['chance'], '.0f')} % of the time)"
        for r in rows
    ]
    return (
        f"The tail, of the {v(tests, ',d')} tests: p " + " and ".join(parts) + ". The goal's smallest p was written "
        "for about fifty comparisons; over thousands, an exact test is expected to give a few p below 0.001, so "
        "the count, not the minimum, says whether the test is too sure."
    )


def binomial_band(tests: int, level: float = ALPHA) -> float:
    """The chance that `tests` independent tests of exact level `level` reject a share inside the goal's band (the
    band is narrow at 66 tests: 2 to 5 rejections)."""
    from math import comb

    lo, hi = GOAL["rate_low"] * tests, GOAL["rate_high"] * tests
    return sum(comb(tests, k) * level**k * (1 - level) ** (tests - k) for k in range(tests + 1) if lo <= k <= hi)


CALIBRATION = Path("tests/data/calibration_lcb_demo.json.gz")


def calibration_passes(data: Path = CALIBRATION) -> list[list[Outcome]]:
    """The calibration's keyed replies of the same model as passes (reply j of every prompt)."""
    flat, _ = load_compact(data)
    return [[replace(o, sample=0) for o in flat if o.sample == j] for j in sorted({o.sample for o in flat})]


def aligned(passes: list[list[Outcome]]) -> list[list[Outcome]]:
    """The passes in canonical order, checked to hold the same prompts (a pool whose replies are dealt per prompt)."""
    passes = canonical(passes)
    keys = [(o.task, o.source, o.language, o.id) for o in passes[0]]
    for j, p in enumerate(passes):
        if [(o.task, o.source, o.language, o.id) for o in p] != keys:
            raise ValueError(f"pooled pass {j}: not the same prompts as pass 0")
    return passes


def _shuffled(passes: list[list[Outcome]], rng: np.random.Generator, take: int | None = None) -> list[list[Outcome]]:
    """Each prompt's replies (`aligned` passes) dealt to the passes in a random order of their own (`take`: only
    that many passes, drawn per prompt without replacement): every prompt keeps its replies, any tie between prompts
    within a pass is broken."""
    order = np.argsort(rng.random((len(passes[0]), len(passes))), axis=1)[:, : take or len(passes)]
    return [[passes[order[i, j]][i] for i in range(len(passes[0]))] for j in range(order.shape[1])]


def coded(passes: list[list[Outcome]]) -> np.ndarray:
    """`aligned` passes as category codes (passes, prompts): the null draws below deal codes, not outcomes."""
    return np.array([[o.code for o in p] for p in passes], np.int64)


def shuffled_codes(codes: np.ndarray, rng: np.random.Generator, take: int | None = None) -> np.ndarray:
    """`_shuffled` on codes: the same draws of `rng`, the same deal (pass j, prompt i: pass order[i, j]'s reply)."""
    order = np.argsort(rng.random((codes.shape[1], codes.shape[0])), axis=1)[:, : take or codes.shape[0]]
    return codes[order, np.arange(codes.shape[1])[:, None]].T


def coded_values(codes: np.ndarray, strata: list[tuple[str, str, str]], task: str, metric: str = "lpr") -> np.ndarray:
    """`pass_values` of passes given as codes (passes, prompts), each prompt's (task, source, language) in `strata`:
    the same counts (whole numbers, exact in any order) and aggregation, without an outcome per reply and draw (the
    spread check's null deals thousands of passes)."""
    keys = sorted({s[1:] for s in strata if s[0] == task})
    x = np.zeros((codes.shape[0], len(keys), _NFEAT))
    for j, key in enumerate(keys):
        x[:, j, :] = _FEATURES[codes[:, [i for i, s in enumerate(strata) if s == (task, *key)]]].sum(1)
    return _aggregate(keys, x, metric)[("all", "all")][metric]


def spread(groups: dict[str, list[list[Outcome]]], heldout: str, draws: int = 1000, seed: int = 0) -> dict:
    """Do the passes' LPRs spread as independent prompts make them spread? Per task and group of passes
    (calibration, held out, each generator and block): the sd of LPR over its passes beside its prompt-independent
    null (each prompt's replies dealt to the group's passes at random, `draws` times: every prompt keeps its own
    rate, any dependence between prompts within a pass is gone; the permutation test assumes there is none), as the
    share of null draws that spread as little or less. Then the `heldout` group against the exact null of every
    group pooled (as many passes drawn per prompt without replacement from all): how often it spreads this little.
    (Before, the calibration's sd was taken as the truth in a chi-square: its own draw was left out.)"""
    rng = np.random.default_rng(seed)
    groups = {name: aligned(ps) for name, ps in groups.items() if len(ps) > 1}
    strata = {name: [(o.task, o.source, o.language) for o in ps[0]] for name, ps in groups.items()}  # aligned
    codes = {name: coded(ps) for name, ps in groups.items()}
    pool = np.concatenate([codes[name] for name in groups if name in ("calibration", heldout)])
    out: dict = {}
    for task in TASKS:
        rows = {}
        for name, ps in groups.items():
            sd = float(np.std(100 * pass_values(ps, task), ddof=1))
            null = np.array(
                [
                    np.std(100 * coded_values(shuffled_codes(codes[name], rng), strata[name], task), ddof=1)
                    for _ in range(draws)
                ]
            )
            rows[name] = {
                "passes": len(ps),
                "sd": sd,
                "independent_sd": float(np.median(null)),
                "as_tight": float(np.mean(null <= sd)),
            }
        k = len(groups[heldout])
        null = np.array(
            [
                np.std(100 * coded_values(shuffled_codes(pool, rng, k), strata[heldout], task), ddof=1)
                for _ in range(draws)
            ]
        )
        sd = rows[heldout]["sd"]
        out[task] = {
            "groups": rows,
            "pooled": {"passes": len(pool), "sd": float(np.median(null)), "as_tight": float(np.mean(null <= sd))},
        }
    out["draws"] = draws
    return out


def group_name(name: str, v) -> str:
    """A group's name on the page, its seed a value ("A, seed 903" -> "A, seed {i:d}")."""
    head, sep, seed = name.rpartition("seed ")
    return head + sep + v(int(seed), "d") if sep and seed.isdigit() else name


def seeds_text(meta: dict, v) -> str:
    """A's decoding seeds in words, each with its block's passes when there are several."""
    blocks = meta.get("a_blocks") or {}
    if len(blocks) < 2:
        return "a decoding seed the calibration never used"
    parts = "; ".join(f"{v(int(s), 'd')}: {v(n, 'd')} passes" for s, n in blocks.items())
    return f"decoding seeds the calibration never used ({parts}; a block per seed, each drawn on its own)"


def spread_lines(sp: dict, v) -> list[str]:
    """The spread table: per group of passes and task, LPR's sd beside the prompt-independent null's (`spread`)."""
    lines = [
        "",
        "| passes | n | monolingual LPR sd, pp (independent prompts) | as tight or tighter, % of "
        f"{v(sp['draws'], ',d')} draws | cross-lingual LPR sd, pp (independent prompts) | as tight or tighter, % |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    mono, cross = sp["monolingual"], sp["crosslingual"]
    for name, m in mono["groups"].items():
        c = cross["groups"][name]
        lines.append(
            f"| {group_name(name, v)} | {v(m['passes'], 'd')} | "
            f"{v(m['sd'], '.2f')} ({v(m['independent_sd'], '.2f')}) | "
            f"{v(100 * m['as_tight'], '.1f')} | {v(c['sd'], '.2f')} ({v(c['independent_sd'], '.2f')}) | "
            f"{v(100 * c['as_tight'], '.1f')} |"
        )
    pm, pc = mono["pooled"], cross["pooled"]
    lines += [
        f"| held out against all passes pooled (the exact null) | {v(mono['groups']['held out']['passes'], 'd')} of "
        f"{v(pm['passes'], 'd')} | ({v(pm['sd'], '.2f')}) | {v(100 * pm['as_tight'], '.1f')} | "
        f"({v(pc['sd'], '.2f')}) | {v(100 * pc['as_tight'], '.1f')} |",
        "",
    ]
    return lines


def page(result: dict) -> dict:
    """docs/measuring.md's held-out paragraph and table as a {template, values} record (`fill` view): every
    number a value, so the page renders from the results file."""
    from devtools.blocks import Fill

    v = Fill()
    meta, tasks = result["meta"], result["tasks"]
    labels = result["passes"]
    na, nb = sum(x[0] == "A" for x in labels), sum(x[0] == "B" for x in labels)
    pairs = result["pairs"]
    check = meta["warper_check"]
    pooled = result["pooled"]
    verdicts = []
    for task in tasks:
        problems = tasks[task]["goal_problems"]
        verdicts.append(f"{task}: " + ("met" if not problems else "not met (" + "; ".join(problems) + ")"))
    lines = [
        "",
        f"**Held out** (`measurements/heldout.py`, tests/test_heldout.py): {v(na, 'd')} passes of mlft's keyed "
        f"sampler at {seeds_text(meta, v)} and {v(nb, 'd')} passes of plain `transformers` "
        f"`generate(do_sample=True)` (the suite's temperature and top-p, no top-k, the same chat template, its own "
        f"torch seeds), one reply per prompt on the {v(meta['prompts'], 'd')} `lcb_demo` prompts: "
        f"{v(sum(pairs.values()), 'd')} same-model comparisons per task ({v(pairs['A-A'], 'd')} within A, "
        f"{v(pairs['B-B'], 'd')} within B, {v(pairs['A-B'], 'd')} across). On next-token logits of "
        f"{v(check['positions'], 'd')} positions, transformers' warpers and mlft's keep the same tokens in "
        f"{v(check['positions'] - check['different_sets'], 'd')} (largest probability difference "
        f"{v(check['max_prob_diff'], '.1g')}): B draws from the same distribution with another random stream. "
        "The default test (permutation, LPR, language-averaged; p below 0.01 recomputed with "
        f"{v(meta['fine'], ',d')} swaps) against the goal, 2-8 % rejected at the 5 % level and no p below 0.001:",
        "",
        "| task | pairs | rejected | rate, % [95 % Wilson] | smallest p | Holm family, any language |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for task, t in tasks.items():
        for g, r in t["pairings"].items():
            h = r["holm_any"]
            lines.append(
                f"| {task} | {group_name(g, v)} | {v(r['rejected'], 'd')}/{v(r['tests'], 'd')} | "
                f"{v(100 * r['rate'], '.1f')} "
                f"[{v(100 * r['low'], '.1f')}, {v(100 * r['high'], '.1f')}] | {v(r['min_p'], '.4f')} | "
                f"{v(h['rejected'], 'd')}/{v(h['tests'], 'd')} |"
            )
    n_all = tasks[next(iter(tasks))]["pairings"]["all"]["tests"]
    lines += [
        "",
        "Goal: " + "; ".join(verdicts).replace("{", "(").replace("}", ")") + f". Both tasks together: "
        f"{v(pooled['rejected'], 'd')}/{v(pooled['tests'], 'd')} rejected, {v(100 * pooled['rate'], '.1f')} % "
        f"[{v(100 * pooled['low'], '.1f')}, {v(100 * pooled['high'], '.1f')}], smallest p {v(pooled['min_p'], '.4f')}. "
        + tail_text(pooled["tail"], pooled["tests"], v)
        + " The pairs share passes, so the tests "
        "are dependent and the intervals only a guide; independent tests of exact level 5 % land inside "
        f"2-8 % at {v(n_all, 'd')} tests {v(100 * binomial_band(n_all), '.0f')} % of the time. The "
        f"{v(n_all, 'd')} tests are functions of {v(len(labels), 'd')} passes, so how much the passes spread "
        "decides the rate:",
        *spread_lines(result["spread"], v),
    ]
    null = result.get("null")
    if null:
        nm, nc = null["monolingual"], null["crosslingual"]
        # the held-out count beside the null's per-replicate counts: of the pairs of as many passes as a replicate
        # draws (all held-out passes when the null was drawn for them, else the block of that size)
        pairings = tasks["monolingual"]["pairings"]
        sized = [g for g in pairings if g == "all" or g.startswith("A, seed ")]
        group = next((g for g in sized if pairings[g]["tests"] == null["pairs"]), "all")
        seen = {t: tasks[t]["pairings"][group]["rejected"] for t in ("monolingual", "crosslingual")}
        at_most = {t: sum(c <= seen[t] for c in null[t]["counts"]) for t in seen}
        whose = (
            "the held-out one"
            if group == "all"
            else (
                f"the block {group_name(group, v)}'s ({v(seen['monolingual'], 'd')} and {v(seen['crosslingual'], 'd')})"
            )
        )
        lines += [
            "",
            f"**The test's own level on these prompts** (`null_draws`, {v(null['replicates'], 'd')} replicates): "
            f"{v(null['passes'], 'd')} passes drawn from the {v(null['pool'], 'd')} passes of replies pooled "
            "(calibration and held out; per prompt without replacement, so every pass is exchangeable with every "
            f"other and the null holds exactly), every pair tested ({v(null['resamples'], ',d')} swaps). It rejects "
            f"{v(100 * nm['rate'], '.1f')} % [{v(100 * nm['low'], '.1f')}, {v(100 * nm['high'], '.1f')}] "
            f"(monolingual) and {v(100 * nc['rate'], '.1f')} % [{v(100 * nc['low'], '.1f')}, "
            f"{v(100 * nc['high'], '.1f')}] (cross-lingual) of {v(nm['tests'], ',d')} tests: the level is close to "
            "5 %, a little under it where ties and ceilings leave few prompts that differ. Per replicate the count "
            f"of rejected pairs of {v(null['pairs'], 'd')} spreads wide (5th-95th percentile "
            f"{v(nm['count_quantiles']['5'], '.0f')}-{v(nm['count_quantiles']['95'], '.0f')} monolingual, "
            f"{v(nc['count_quantiles']['5'], '.0f')}-{v(nc['count_quantiles']['95'], '.0f')} cross-lingual), because "
            f"the pairs share passes; a count at or below {whose} came up in "
            f"{v(at_most['monolingual'], 'd')} and {v(at_most['crosslingual'], 'd')} of the "
            f"{v(null['replicates'], 'd')} replicates. So a held-out rate is mostly the draw of its passes; what "
            "the test's level is, the pooled null says.",
        ]
    lines.append("")
    return v.record("\n".join(lines))


# --- a fresh block, declared before it was drawn -----------------------------------------------------------------

FRESH_RULE = (
    "declared before any of its passes was drawn: pass 2i against pass 2i + 1 of one new block of A (no pass "
    "shared, and the tasks' prompts are disjoint, so the tests are independent); met iff their smallest p is at "
    "least 0.001. Every pair within the block is reported beside it, not judged."
)


def adjacent_halves(n: int) -> list[tuple[int, int]]:
    """The default disjoint pairs of n passes: pass i against pass i + n / 2."""
    return [(i, i + n // 2) for i in range(n // 2)]


def adjacent(n: int) -> list[tuple[int, int]]:
    """The declared independent pairs of a block of n passes: (0, 1), (2, 3), ..."""
    return [(2 * i, 2 * i + 1) for i in range(n // 2)]


def fresh(passes: list[list[Outcome]], resamples: int = 10000, fine: int = 20000) -> dict:
    """The fresh block's check (FRESH_RULE): `analyse` on the block with the adjacent pairs as its disjoint ones,
    then the independent comparisons of both tasks together: their count at 5 %, smallest p, tail and verdict."""
    labels = [f"A{j}" for j in range(len(passes))]
    pairs = [f"A{i}-A{j}" for i, j in adjacent(len(passes))]
    out = analyse(passes, labels, resamples, fine, disjoint=adjacent(len(passes)))
    ps = [t["p"][q] for t in out["tasks"].values() for q in pairs]
    out["independent"] = {
        "rule": FRESH_RULE,
        "pairs": pairs,
        **rate(sum(p < ALPHA for p in ps), len(ps)),
        "min_p": min(ps),
        "met": min(ps) >= GOAL["min_p"],
        "tail": tail(ps),
    }
    return out


def fresh_page(result: dict) -> dict:
    """docs/measuring.md's paragraph on the fresh block, every number a value (`fill` view)."""
    from devtools.blocks import Fill

    v = Fill()
    meta, ind, tasks = result["meta"], result["independent"], result["tasks"]
    n = len(result["passes"])
    per_task = "; ".join(
        f"{task} {v(t['disjoint']['rejected'], 'd')} of {v(t['disjoint']['tests'], 'd')}, smallest p "
        f"{v(t['disjoint']['min_p'], '.4f')}"
        for task, t in tasks.items()
    )
    every = "; ".join(
        f"{task} {v(t['pairings']['all']['rejected'], 'd')}/{v(t['pairings']['all']['tests'], ',d')} "
        f"({v(100 * t['pairings']['all']['rate'], '.1f')} % [{v(100 * t['pairings']['all']['low'], '.1f')}, "
        f"{v(100 * t['pairings']['all']['high'], '.1f')}]), smallest p {v(t['pairings']['all']['min_p'], '.4f')}"
        for task, t in tasks.items()
    )
    pooled = result["pooled"]
    earlier = result.get("earlier_disjoint") or {}
    joint = ""
    if earlier:  # the earlier held-out set's disjoint pairs with these: every independent comparison so far
        from scipy.stats import binom

        k = ind["rejected"] + sum(e["rejected"] for e in earlier.values())
        total = ind["tests"] + sum(e["tests"] for e in earlier.values())
        rate_all = result["all_pairs_rate"]
        joint = (
            f" With the earlier held-out set's disjoint pairs ({v(sum(e['tests'] for e in earlier.values()), 'd')} "
            f"comparisons, {v(sum(e['rejected'] for e in earlier.values()), 'd')} rejected), {v(k, 'd')} of "
            f"{v(total, 'd')} independent comparisons reject at 5 %: tests of exact level 5 % reject that few "
            f"{v(100 * binom.cdf(k, total, ALPHA), '.1f')} % of the time, tests at both sets' all-pairs rate "
            f"({v(100 * rate_all, '.1f')} %) {v(100 * binom.cdf(k, total, rate_all), '.0f')} % of the time. Here the "
            "test sits at or under its level: not too sure, if anything cautious."
        )
    sp = result.get("spread")
    if sp:  # a block whose passes spread little rejects few of its pairs
        m, c = (sp[t]["groups"]["fresh"] for t in ("monolingual", "crosslingual"))
        joint += (
            f" The block's passes spread as independent prompts make passes spread, or less: LPR sd "
            f"{v(m['sd'], '.2f')} pp monolingual ({v(m['independent_sd'], '.2f')} with every prompt's replies dealt "
            f"at random; as tight in {v(100 * m['as_tight'], '.0f')} % of {v(sp['draws'], ',d')} such draws) and "
            f"{v(c['sd'], '.2f')} cross-lingual ({v(c['independent_sd'], '.2f')}; {v(100 * c['as_tight'], '.0f')} "
            "%): a block that spreads this little rejects few of its pairs."
        )
    st = result.get("standardized")
    if st:  # the declared comparisons as standardized differences, against an exact null on these replies
        h, c, null = st["held_out"], st["with_calibration"], st.get("null")
        kc = c["tests"] - h["tests"]
        joint += (
            f" Read as standardized differences (z = T over the sd of T under the test's own swaps, "
            f"`PairedResult.null_sd`; a reading chosen after the count above was seen), the {v(h['tests'], 'd')} "
            f"say more than a count. Each test's own level, given its replies, is {v(100 * h['mean_level'], '.2f')} % "
            f"on average (never under {v(100 * h['min_level'], '.2f')} %): discreteness takes almost nothing, and an "
            f"exact test expects {v(h['expected'], '.1f')} rejections, none {v(100 * h['none'], '.1f')} % of the "
            f"time. Their mean z² is {v(h['mean_z2'], '.2f')}."
        )
        if null:
            joint += (
                f" Under a null that holds exactly on these replies (each prompt's replies dealt to its set's passes "
                f"at random, {v(null['draws'], ',d')} draws) the same comparisons give a mean z² of "
                f"{v(null['mean'], '.2f')} (90 % of draws in [{v(null['q05'], '.2f')}, {v(null['q95'], '.2f')}]), "
                f"and one as low as {v(h['mean_z2'], '.2f')} in {v(100 * null['as_low'], '.1f')} % of draws. "
                "So the count's surprise is neither discreteness nor the statistic: these pairs of passes lie "
                "closer together than exchangeable passes would. It is the same surprise as the count, measured "
                "more finely, not a second finding; its direction is a cautious test, not one too sure."
            )
        joint += (
            f" The calibration's own rerun pairs ({v(kc, 'd')} comparisons, seen by the calibration code) lie "
            f"farther apart: mean z² {v((c['mean_z2'] * c['tests'] - h['mean_z2'] * h['tests']) / kc, '.2f')}."
        )
    text = (
        f"\n**A fresh block, declared before it was drawn** (`heldout.py --fresh`, tests/test_heldout.py): "
        f"{v(n, 'd')} passes of mlft's keyed sampler at decoding seed {v(meta['seed_a'][0], 'd')}, which no earlier "
        f"run used, on the same {v(meta['prompts'], 'd')} prompts. The rule was "
        + ind["rule"].replace("0.001", v(GOAL["min_p"], "g"))
        + f" **Goal {'met' if ind['met'] else 'not met'}: the smallest p of the {v(ind['tests'], 'd')} independent "
        f"comparisons is {v(ind['min_p'], '.4f')}.** They reject {v(ind['rejected'], 'd')} at 5 % "
        f"({v(100 * ind['rate'], '.1f')} % [{v(100 * ind['low'], '.1f')}, {v(100 * ind['high'], '.1f')}]; an exact "
        f"test expects {v(ind['tests'] * ALPHA, '.1f')}): {per_task}. Every pair within the block (dependent: "
        f"the pairs share passes): {every}. " + tail_text(pooled["tail"], pooled["tests"], v) + joint + "\n"
    )
    return v.record(text)


Z_RULE = (
    "declared after the earlier blocks' declared comparisons were read as standardized differences (mean z^2 0.73 "
    "against 1.00 for exchangeable passes) and before this block was drawn: pass 2i against pass 2i + 1 of one new "
    "block of A; their mean z^2 against the exact null of this block's re-dealt replies (`standardized_null`, 200 "
    'draws). As low in under 5 % of the draws supports "passes lie closer than exchangeable ones" (a cautious '
    "test); otherwise the earlier reading is not reproduced. Rejections at 5 %, the smallest p and every pair "
    "within the block are reported beside it, not judged."
)


def z_check(passes: list[list[Outcome]], resamples: int = 10000, fine: int = 20000, draws: int = 200) -> dict:
    """The z check (Z_RULE) on one new block: `fresh`'s counts, then the declared pairs' standardized differences
    against their exact null."""
    out = fresh(passes, resamples, fine)
    block = {"block": (passes, adjacent(len(passes)))}
    st, null = standardized(block, resamples), standardized_null(block, draws)
    null["as_low"] = as_low(null, st["mean_z2"])
    out["z_check"] = {"rule": Z_RULE, **st, "null": null, "supported": null["as_low"] < 0.05}
    return out


LANG_RULE = (
    "declared before this block was drawn and before any per-language test of an earlier block was read (the "
    "task-level comparisons before it: 0 of 152 reject at 5 %; mean z^2 0.73, then 0.77 on a declared block, as low "
    "in 14 % of its null): pass 2i against pass 2i + 1 of one new block of A, one test per (task, language) row of "
    "LPR (the members of `mlft compare`'s per-language family, raw p; independent across languages and pairs; rows "
    "where no prompt differs left out and counted); their mean z^2 against the exact null of this block's re-dealt "
    'replies (200 draws). As low in under 5 % of the draws: "passes lie closer than exchangeable ones" holds at the '
    "language level; as high in under 5 %: the per-language tests are too sure; otherwise consistent with "
    "exchangeable passes. Rejections at 5 % against the count the tests' own levels expect, and the task-level "
    "comparisons, are reported beside it, not judged."
)


def lang_check(passes: list[list[Outcome]], resamples: int = 10000, fine: int = 20000, draws: int = 200) -> dict:
    """The per-language check (LANG_RULE) on one new block: `fresh`'s task-level counts and their standardized
    differences beside it, then the declared pairs' per-language standardized differences against their exact
    null, and their rejections against the count the tests' levels expect."""
    out = fresh(passes, resamples, fine)
    block = {"block": (passes, adjacent(len(passes)))}
    task_level = standardized(block, resamples)
    st = standardized(block, resamples, languages=True)
    null = standardized_null(block, draws, languages=True)
    null["as_low"] = as_low(null, st["mean_z2"])
    null["as_high"] = float(np.mean(np.array(null["means"]) >= st["mean_z2"]))
    from scipy.stats import poisson_binom  # the rejections of independent tests with these levels

    k = st["rejected"]
    verdict = "closer" if null["as_low"] < 0.05 else "too sure" if null["as_high"] < 0.05 else "consistent"
    out["lang_check"] = {
        "rule": LANG_RULE,
        **st,
        "null": null,
        "at_most": float(poisson_binom.cdf(k, st["levels"])),
        "at_least": float(poisson_binom.sf(k - 1, st["levels"])),
        "verdict": verdict,
    }
    out["task_level"] = task_level
    out["busiest"] = busiest(out)
    return out


def busiest(result: dict) -> dict:
    """The pass in most rejected pairs of the task whose all-pairs rate is highest: pairs that share a pass share
    its draw, so one pass far from the others lifts the all-pairs rate (its LPR beside the block's mean and sd)."""
    task, t = max(result["tasks"].items(), key=lambda kv: kv[1]["pairings"]["all"]["rate"])
    rejected = [pair.split("-") for pair, p in t["p"].items() if p < ALPHA]
    counts = {lab: sum(lab in pair for pair in rejected) for lab in result["passes"]}
    lab = max(counts, key=counts.get)
    lpr = t["lpr"]
    return {
        "task": task,
        "pass": lab,
        "in_rejected": counts[lab],
        "rejected": len(rejected),
        "lpr": lpr["passes"][result["passes"].index(lab)],
        "mean": lpr["mean"],
        "sd": lpr["sd"],
    }


BLOCK_FILES = ("heldout.json", "heldout_fresh.json", "heldout_z.json")


def every_block(result: dict, folder: Path = Path("docs/results")) -> dict:
    """Per task: every same-model pair of every held-out set so far and this block (the earlier results files
    that are there, then `result`) pooled, rejected at 5 % of tests (dependent: pairs share passes), and each
    block of A's own rate (the first set's per seed)."""
    records = [json.loads((folder / f).read_text(encoding="utf-8")) for f in BLOCK_FILES if (folder / f).is_file()]
    out = {}
    for task in TASKS:
        every = [r["tasks"][task]["pairings"] for r in [*records, result]]
        blocks = [[x for name, x in e.items() if name.startswith("A, seed")] or [e["all"]] for e in every]
        rejected, tests = sum(e["all"]["rejected"] for e in every), sum(e["all"]["tests"] for e in every)
        rates = [b["rejected"] / b["tests"] for bs in blocks for b in bs]
        sizes = [round((1 + (1 + 8 * b["tests"]) ** 0.5) / 2) for bs in blocks for b in bs]  # n(n - 1) / 2 pairs
        out[task] = {"rejected": rejected, "tests": tests, "rate": rejected / tests, "blocks": rates, "passes": sizes}
    return out


def with_z(result: dict, z_file: Path = Path("docs/results/heldout_z.json")) -> dict:
    """The per-language check's record with every task-level independent comparison before it (`with_fresh`'s
    pool) and its own pooled: rejected, tests, the count an exact test expects, and how often a binomial at their
    average level gives as few (read after the fact: the rule judges the block's per-language tests alone)."""
    result["all_pairs"] = every_block(result)
    if z_file.is_file():
        from scipy.stats import binom

        old = json.loads(z_file.read_text(encoding="utf-8"))["pooled_independent"]
        tests = old["tests"] + result["independent"]["tests"]
        rejected = old["rejected"] + result["independent"]["rejected"]
        expected = old["expected"] + result["task_level"]["expected"]
        result["pooled_independent"] = {
            "tests": tests,
            "rejected": rejected,
            "expected": expected,
            "as_few": float(binom.cdf(rejected, tests, expected / tests)),
        }
    return result


def with_fresh(result: dict, fresh_file: Path = Path("docs/results/heldout_fresh.json")) -> dict:
    """The z check's record with every independent comparison before it (the fresh block's and the earlier set's,
    `standardized`'s held_out) pooled with its own: how many reject, how many an exact test expects, and how often
    it rejects none (read after the fact: the rule judges the block alone)."""
    if fresh_file.is_file():
        old = json.loads(fresh_file.read_text(encoding="utf-8"))
        h, z = old["standardized"]["held_out"], result["z_check"]
        rejected = old["independent"]["rejected"] + sum(e["rejected"] for e in old["earlier_disjoint"].values())
        result["pooled_independent"] = {
            "tests": h["tests"] + z["tests"],
            "rejected": rejected + result["independent"]["rejected"],
            "expected": h["expected"] + z["expected"],
            "none": h["none"] * z["none"],
        }
    return result


def every_pair(v, result: dict) -> str:
    """ "monolingual 17/780 (2.2 %); ...": every pair within the block, per task, its rate at 5 % (`fill` view)."""
    return "; ".join(
        f"{task} {v(t['pairings']['all']['rejected'], 'd')}/{v(t['pairings']['all']['tests'], ',d')} "
        f"({v(100 * t['pairings']['all']['rate'], '.1f')} %)"
        for task, t in result["tasks"].items()
    )


def z_page(result: dict) -> dict:
    """docs/measuring.md's paragraph on the z check's block, every number a value (`fill` view)."""
    from devtools.blocks import Fill

    v = Fill()
    meta, z, ind = result["meta"], result["z_check"], result["independent"]
    null = z["null"]
    every = every_pair(v, result)
    text = (
        f"\n**The closer-passes reading, tested on a block declared after it** (`heldout.py --z-check`, "
        f"tests/test_heldout.py): {v(len(result['passes']), 'd')} passes at decoding seed "
        f"{v(meta['seed_a'][0], 'd')}, which no earlier run used. The rule was "
        + z["rule"]
        + f" **{'Supported' if z['supported'] else 'Not reproduced'}: the {v(z['tests'], 'd')} declared comparisons "
        f"give a mean z² of {v(z['mean_z2'], '.2f')}; the block's exact null gives {v(null['mean'], '.2f')} (90 % "
        f"of draws in [{v(null['q05'], '.2f')}, {v(null['q95'], '.2f')}]), as low in {v(100 * null['as_low'], '.1f')} "
        f"% of draws.** Beside it: the declared comparisons reject {v(ind['rejected'], 'd')} at 5 % (an exact test "
        f"expects {v(z['expected'], '.1f')}), smallest p {v(ind['min_p'], '.4f')}; every pair within the block: "
        f"{every}."
    )
    pool = result.get("pooled_independent")
    if pool:  # read after the fact, beside the rule
        text += (
            f" Read after the fact with every independent comparison before it: {v(pool['rejected'], 'd')} of "
            f"{v(pool['tests'], 'd')} reject at 5 %, where an exact test expects {v(pool['expected'], '.1f')} and "
            f"rejects none {v(100 * pool['none'], '.2f')} % of the time; the mean z² sits under its null in both "
            "declared sets. On these reruns the default test's level sits under its nominal 5 % (this block's "
            "all-pairs rates above say the same): it is cautious, and no block shows it too sure. Why real "
            "passes lie closer than re-dealt ones is not found: the sampler's keys give replies with no "
            "dependence between passes (common prefixes and identical replies are the same at every lag)."
        )
    return v.record(text + "\n")


VERDICTS = {
    "closer": "Passes lie closer than exchangeable ones at the language level",
    "too sure": "The per-language tests are too sure",
    "consistent": "Consistent with exchangeable passes",
}


def lang_page(result: dict) -> dict:
    """docs/measuring.md's paragraph on the per-language check's block, every number a value (`fill` view)."""
    from devtools.blocks import Fill

    v = Fill()
    meta, c, ind, t = result["meta"], result["lang_check"], result["independent"], result["task_level"]
    null = c["null"]
    every = every_pair(v, result)
    text = (
        f"\n**Per-language tests, on a block declared before it was drawn** (`heldout.py --fresh --lang-check`, "
        f"tests/test_heldout.py): {v(len(result['passes']), 'd')} passes at decoding seed {v(meta['seed_a'][0], 'd')},"
        " which no earlier run used. The rule was "
        + c["rule"]
        + f" **{VERDICTS[c['verdict']]}: the {v(c['tests'], 'd')} per-language comparisons (of "
        f"{v(c['tests'] + c['silent'], 'd')} rows; in {v(c['silent'], 'd')} no prompt differs) give a mean z² of "
        f"{v(c['mean_z2'], '.2f')}; the block's exact null gives {v(null['mean'], '.2f')} (90 % of draws in "
        f"[{v(null['q05'], '.2f')}, {v(null['q95'], '.2f')}]), as low in {v(100 * null['as_low'], '.1f')} % of "
        f"draws, as high in {v(100 * null['as_high'], '.1f')} %.** Beside it: they reject {v(c['rejected'], 'd')} "
        f"at 5 % (raw p), where their own levels expect {v(c['expected'], '.1f')} (each test's level is "
        f"{v(100 * c['mean_level'], '.1f')} % on average: ten prompts a row, few of them differing; as few "
        f"rejections {v(100 * c['at_most'], '.0f')} % of the time, as many {v(100 * c['at_least'], '.0f')} %). The "
        f"block's task-level declared comparisons: {v(ind['rejected'], 'd')} of {v(ind['tests'], 'd')} reject "
        f"(an exact test expects {v(t['expected'], '.1f')}), mean z² {v(t['mean_z2'], '.2f')}, smallest p "
        f"{v(ind['min_p'], '.4f')}; every pair within the block: {every}."
    )
    b, pool = result["busiest"], result.get("pooled_independent")
    text += (
        f" Pairs that share a pass share its draw: in the {b['task']} task pass {b['pass']} (LPR "
        f"{v(b['lpr'], '.1f')} % against the block's {v(b['mean'], '.1f')} ± {v(b['sd'], '.1f')}) is in "
        f"{v(b['in_rejected'], 'd')} of the {v(b['rejected'], 'd')} rejected pairs."
    )
    every = result.get("all_pairs")
    if every:  # read after the fact: the goal's rate over every held-out pair
        sizes = [n for e in every.values() for n in e["passes"]]
        rates = [r for e in every.values() for r in e["blocks"]]
        text += (
            " Every same-model pair of every held-out set so far, this block's included (pairs share passes, so "
            "the tests are dependent): "
            + "; ".join(
                f"{task} {v(e['rejected'], 'd')}/{v(e['tests'], ',d')} ({v(100 * e['rate'], '.1f')} %)"
                for task, e in every.items()
            )
            + f" reject at 5 %, inside the goal's 2-8 %; block by block (A's blocks of {v(min(sizes), 'd')} to "
            f"{v(max(sizes), 'd')} passes) the rate runs from {v(100 * min(rates), '.1f')} to "
            f"{v(100 * max(rates), '.1f')} %: one block does not pin it."
        )
    if pool:  # read after the fact, beside the rule
        text += (
            f" Read after the fact with every task-level independent comparison before it: "
            f"{v(pool['rejected'], 'd')} of {v(pool['tests'], 'd')} reject at 5 %, where an exact test expects "
            f"{v(pool['expected'], '.1f')} (a binomial at their average level gives as few "
            f"{v(100 * pool['as_few'], '.1f')} % of the time): pooled, the task-level count still sits under its "
            "level (the test cautious there, never too sure), but block to block it swings both ways (none in "
            "any block before, three here), and one level down, where the comparisons are many, the passes "
            "spread as exchangeable ones do."
        )
    return v.record(text + "\n")


def fresh_main(args: argparse.Namespace) -> None:
    """`--fresh`: generate (resumable) or read one block of A at `--seed-a` (its first seed), then its check."""
    seed = args.seed_a[0]
    folder = args.out / "a"
    passes = _available_a(folder) if args.no_generate else generate_a(args.out, args.passes, seed, folder)
    if len(passes) < 2 or len(passes) % 2:
        raise SystemExit(
            f"--fresh: {folder} holds {len(passes)} complete passes; the declared pairs need an even number"
        )
    started = time.perf_counter()
    meta = {"model": "smollm2-135m-instruct (embedded)", "suite": SUITE, "prompts": len(passes[0]), "seed_a": [seed]}
    meta.update({"seed_b": None, "resamples": args.resamples, "fine": args.fine, "goal": GOAL})
    from mlft.reports.results import SCHEMA

    check = "lang" if args.lang_check else "z" if args.z_check else None
    if check:  # a block judged by its own rule (LANG_RULE, Z_RULE): its own results file and page
        run, page, pool = {"lang": (lang_check, lang_page, with_z), "z": (z_check, z_page, with_fresh)}[check]
        flag = f"--{check}-check"
        result = {
            "name": f"heldout_{check}",
            "schema": SCHEMA,
            "provenance": f"measurements/heldout.py --fresh {flag}: one block of held-out passes declared before it "
            "was drawn, read as standardized differences; the outcomes are "
            f"tests/data/heldout_{check}_lcb_demo.json.gz (tests/test_heldout.py recomputes them).",
            "meta": meta,
        }
        result.update(run(passes, args.resamples, args.fine))
        result["page"] = page(pool(result))
        write_outputs(args, result, passes, f"heldout_{check}.json", started)
        return
    result = {
        "name": "heldout_fresh",
        "schema": SCHEMA,
        "provenance": "measurements/heldout.py --fresh: one block of held-out passes of the embedded model on "
        "lcb_demo, declared before it was drawn; the outcomes are tests/data/heldout_fresh_lcb_demo.json.gz "
        "(tests/test_heldout.py recomputes every declared p).",
        "meta": meta,
        **fresh(passes, args.resamples, args.fine),
    }
    write_outputs(args, with_earlier(result, passes), passes, "heldout_fresh.json", started)


EARLIER_DATA = Path("tests/data/heldout_lcb_demo.json.gz")


def standardized(
    sets: dict[str, tuple[list[list[Outcome]], list[tuple[int, int]]]], resamples: int = 10000, languages: bool = False
) -> dict:
    """The declared independent comparisons of each set (its passes, its pairs), read as standardized differences
    z = T / sd(T*) (`PairedResult.null_sd`) beside each test's own level (`PairedResult.level`). Under the null with
    independent prompts E[z^2] = 1, so the mean of z^2 over k independent comparisons (k mean ~ chi2 with k degrees
    of freedom) says whether the passes lie as far apart as the swap test assumes (< 1: closer, the test cautious;
    > 1: farther, too sure), with more power than the count at 5 %. The levels' sum is the count an exact test
    expects; the product of (1 - level) the chance that it rejects none. With `languages`, one test per (task,
    language) row of each pair (the per-language members of `mlft compare`'s Holm family, raw p: independent across
    languages and pairs); a row where no prompt differs has no null spread and is left out (counted in `silent`)."""
    from scipy.stats import chi2

    rows, z, levels, ps, silent = {}, [], [], [], 0
    for name, (passes, pairs) in sets.items():
        passes = canonical(passes)  # the swaps' draws follow the prompts' order: one order, one number
        for task in [t for t in TASKS if any(o.task == t for o in passes[0])]:
            langs = sorted({o.language for o in passes[0] if o.task == task}) if languages else [None]
            res = [
                paired_test(passes[i], passes[j], "lpr", task=task, language=lang, n=resamples, interval=False)
                for i, j in pairs
                for lang in langs
            ]
            silent += sum(not r.null_sd for r in res) if languages else 0
            res = [r for r in res if r.null_sd or not languages]
            zs = [r.diff / r.null_sd if r.null_sd else 0.0 for r in res]
            rows[f"{name}/{task}"] = {
                "tests": len(zs),
                "mean_z2": float(np.mean(np.square(zs))),
                "max_abs_z": max(map(abs, zs)),
            }
            z, levels, ps = z + zs, levels + [r.level for r in res], ps + [r.p_value for r in res]
    k, s = len(z), float(np.sum(np.square(z)))
    counts = {"rejected": int(sum(p <= ALPHA for p in ps)), "silent": silent, "levels": levels} if languages else {}
    return {
        **counts,
        "sets": rows,
        "tests": k,
        "mean_z2": s / k,
        "low": s / float(chi2.ppf(0.975, k)),
        "high": s / float(chi2.ppf(0.025, k)),
        "p_below": float(chi2.cdf(s, k)),
        "mean_level": float(np.mean(levels)),
        "min_level": float(np.min(levels)),
        "expected": float(np.sum(levels)),
        "none": float(np.prod(1 - np.array(levels))),
    }


def standardized_null(
    sets: dict[str, tuple[list[list[Outcome]], list[tuple[int, int]]]],
    draws: int = 200,
    resamples: int = 2000,
    languages: bool = False,
) -> dict:
    """The mean z^2 of `standardized` under a null that holds exactly on these replies: per draw, each set's passes
    re-dealt (every prompt's replies to its passes in a random order of their own, `_shuffled`: exchangeable passes,
    independent prompts), then the same pairs read again. Its mean is the reference for the observed mean z^2
    (`as_low`: the share of draws at or under it)."""
    rng = np.random.default_rng(0)
    means = []
    for r in range(draws):
        dealt = {name: (_shuffled(aligned(p), rng), pairs) for name, (p, pairs) in sets.items()}
        means.append(standardized(dealt, resamples, languages)["mean_z2"])
        if (r + 1) % 20 == 0:
            print(f"standardized null draw {r + 1}/{draws}: mean z^2 {np.mean(means):.3f}", flush=True)
    m = np.array(means)
    return {
        "draws": draws,
        "resamples": resamples,
        "mean": float(m.mean()),
        "q05": float(np.quantile(m, 0.05)),
        "q95": float(np.quantile(m, 0.95)),
        "means": means,
    }


def as_low(null: dict, observed: float) -> float:
    """The share of `standardized_null`'s draws whose mean z^2 is at or under the observed one."""
    return float(np.mean(np.array(null["means"]) <= observed))


def with_earlier(result: dict, passes: list | None = None, earlier: Path = Path("docs/results/heldout.json")) -> dict:
    """The fresh block's record with the earlier held-out set's independent (disjoint) pairs and both sets'
    all-pairs rate beside it (when that results file is there), how its passes spread (`spread`, given the
    passes), and its page."""
    if passes is not None:
        cal = calibration_passes()
        result["spread"] = spread({"calibration": cal, "fresh": passes}, "fresh")
        if EARLIER_DATA.is_file():  # every independent comparison's standardized difference (`standardized`)
            old, labels = read_data(EARLIER_DATA)
            held = {"fresh": (passes, adjacent(len(passes))), "earlier": (old, adjacent_halves(len(labels)))}
            kept = (result.get("standardized") or {}).get("null")  # 10 min: kept on a repage
            result["standardized"] = {
                "held_out": standardized(held),
                "with_calibration": standardized({**held, "calibration": (cal, adjacent_halves(len(cal)))}),
                "null": kept or standardized_null(held),
            }
            st = result["standardized"]
            st["null"]["as_low"] = as_low(st["null"], st["held_out"]["mean_z2"])
    if earlier.is_file():
        old = json.loads(earlier.read_text(encoding="utf-8"))
        result["earlier_disjoint"] = {t: x["disjoint"] for t, x in old["tasks"].items()}
        both = [old["pooled"], result["pooled"]]
        result["all_pairs_rate"] = sum(x["rejected"] for x in both) / sum(x["tests"] for x in both)
    result["page"] = fresh_page(result)
    return result


def write_outputs(args: argparse.Namespace, result: dict, passes: list, name: str, started: float) -> None:
    """The results file in OUT (and at --results), the passes as the test's data (--data), the page printed."""
    text = json.dumps(result, indent=1) + "\n"
    (args.out / name).write_text(text, encoding="utf-8")
    if args.results:
        args.results.write_text(text, encoding="utf-8")
    if args.data:
        meta = {k: result["meta"][k] for k in ("model", "suite", "seed_a", "seed_b")}
        write_data(passes, result["passes"], args.data, meta)
    print(result["page"]["template"].format(*result["page"]["values"]))
    print(f"({time.perf_counter() - started:.0f} s; {args.out / name})")


# --- compact data (the test's) ---------------------------------------------------------------------------------


def write_data(passes: list[list[Outcome]], labels: list[str], path: Path, meta: dict) -> None:
    """The passes as one outcome list with sample = pass index, in the compact format (`save_compact`)."""
    flat = [replace(o, sample=j) for j, p in enumerate(passes) for o in p]
    save_compact(path, flat, {**meta, "passes": labels})


def read_data(path: Path) -> tuple[list[list[Outcome]], list[str]]:
    flat, meta = load_compact(path)
    labels = meta["passes"]
    return canonical([[replace(o, sample=0) for o in flat if o.sample == j] for j in range(len(labels))]), labels


def available(out: Path, seeds: list[int]) -> tuple[dict[int, list[list[Outcome]]], list[list[Outcome]]]:
    """The passes already generated, without generating: A's per decoding seed (its block), and B's. Complete
    passes only."""
    a = {seed: _available_a(a_folder(out, seeds, seed)) for seed in seeds}
    n = len(_suite_run()[1])
    paths = sorted((out / "b").glob("pass*[0-9].jsonl"))
    b = score_b([p for p in paths if len(p.read_text(encoding="utf-8").splitlines()) == n])
    return a, b


def _available_a(folder: Path) -> list[list[Outcome]]:
    """One block of A's passes (its finished replies scored as `score_b` scores B's, the same scorer `run_suite`
    uses, when its run has not finished): complete passes only."""
    from mlft.io.jsonl import read_jsonl

    n = len(_suite_run()[1])
    done = folder / "default" / "outcomes.jsonl"
    if done.is_file():
        outcomes = load_outcomes(done)
        a = [[replace(o, sample=0) for o in outcomes if o.sample == j] for j in sorted({o.sample for o in outcomes})]
    else:
        records = [r for r in read_jsonl(folder / "default" / "completions.jsonl") if not r.get("error")]
        a = []
        for j in sorted({r.get("sample") or 0 for r in records}):
            path = folder / f"pass{j}.jsonl"
            rows = [r for r in records if (r.get("sample") or 0) == j]
            if len(rows) == n:
                path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
                a += score_b([path])
    return [p for p in a if len(p) == n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=6, help="passes of each generator (one reply per prompt each)")
    ap.add_argument(
        "--seed-a",
        type=int,
        nargs="+",
        default=[901],
        help="A's decoding seeds (the calibration used 0), a block of --passes passes each: OUT/a, then OUT/a<seed>",
    )
    ap.add_argument("--seed-b", type=int, default=902, help="B's torch seeds derive from it (per pass and batch)")
    ap.add_argument("--out", type=Path, default=Path("runs/heldout"))
    ap.add_argument(
        "--resamples",
        type=int,
        default=10000,
        help="permutations per test (paired_test's default; the test recomputes them)",
    )
    ap.add_argument("--fine", type=int, default=20000, help="permutations for the tests with p < 0.01")
    ap.add_argument(
        "--batch-size", type=int, default=128, help="B's rows per generate call (a pass's batches and seeds)"
    )
    ap.add_argument("--only", choices=["a", "b"], help="only generate this generator's passes")
    ap.add_argument(
        "--b-passes", type=int, nargs="+", help="with --only b: only these passes of B (one worker's share)"
    )
    ap.add_argument("--no-generate", action="store_true", help="analyse the complete passes already generated")
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="one new block of A at the first --seed-a in OUT/a, checked by the declared rule (FRESH_RULE)",
    )
    ap.add_argument(
        "--z-check",
        action="store_true",
        help="with --fresh: judge the block by Z_RULE (its declared pairs' mean z^2 against their exact null)",
    )
    ap.add_argument(
        "--lang-check",
        action="store_true",
        help="with --fresh: judge the block by LANG_RULE (its declared pairs' per-language tests against their null)",
    )
    ap.add_argument("--time", action="store_true", help="time one pass of each generator, then stop")
    ap.add_argument(
        "--null",
        type=int,
        default=0,
        help="replicates of `null_draws` (the test's level under an exact null, as many passes as held out, drawn "
        "from the calibration's and the held-out replies pooled; ~30 s each on a busy core)",
    )
    ap.add_argument("--null-from", type=Path, help="without --null: keep the null draws of this earlier results file")
    ap.add_argument("--data", type=Path, help="also write the held-out outcomes here (compact, gzip JSON)")
    ap.add_argument("--results", type=Path, help="also write the results file here (docs/results/heldout.json)")
    ap.add_argument(
        "--repage",
        type=Path,
        help="only re-derive the tail counts and the page of this results file from its recorded p-values, in place",
    )
    args = ap.parse_args()
    for flag in ("z_check", "lang_check"):
        if getattr(args, flag) and not args.fresh:
            ap.error(f"--{flag.replace('_', '-')} judges a fresh block: give it with --fresh (and --seed-a, --passes)")
    if args.repage and args.fresh:  # the fresh block's page again (its earlier set's counts re-read)
        passes = read_data(args.data)[0] if args.data and args.data.is_file() else None
        result = with_earlier(json.loads(args.repage.read_text(encoding="utf-8")), passes)
        args.repage.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(result["page"]["template"].format(*result["page"]["values"]))
        return
    if args.repage:
        result = json.loads(args.repage.read_text(encoding="utf-8"))
        for t in result["tasks"].values():
            t["tail"] = tail(list(t["p"].values()))
        result["pooled"]["tail"] = tail([p for t in result["tasks"].values() for p in t["p"].values()])
        result["page"] = page(result)
        args.repage.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(result["page"]["template"].format(*result["page"]["values"]))
        return
    if args.fresh:
        fresh_main(args)
        return
    if args.time:
        for name, gen in (("a", generate_a), ("b", generate_b)):
            started = time.perf_counter()
            gen(args.out / "timing", 1, args.seed_a[0] if name == "a" else args.seed_b)
            print(f"one pass of {name}: {time.perf_counter() - started:.0f} s")
        return
    if args.no_generate:
        by_seed, b = available(args.out, args.seed_a)
    else:
        by_seed = {
            seed: generate_a(args.out, args.passes, seed, a_folder(args.out, args.seed_a, seed))
            for seed in (args.seed_a if args.only != "b" else [])
        }
        if args.only != "a":
            paths = generate_b(args.out, args.passes, args.seed_b, args.batch_size, which=args.b_passes)
        if args.only:
            return
        b = score_b(paths)
    a, blocks = [], {}
    for seed, block in by_seed.items():  # A's passes in seed order; each block's indices among them
        blocks[seed] = list(range(len(a), len(a) + len(block)))
        a += block
    started = time.perf_counter()
    cached = args.out / "warper_check.json"  # the same model and decoding every time: checked once
    if not cached.is_file():
        cached.write_text(json.dumps(warper_check()) + "\n", encoding="utf-8")
    check = json.loads(cached.read_text(encoding="utf-8"))
    labels = [f"A{j}" for j in range(len(a))] + [f"B{j}" for j in range(len(b))]
    named = {f"A, seed {s}": m for s, m in blocks.items()} if len(blocks) > 1 else {}
    passes = a + b
    meta = {
        "model": "smollm2-135m-instruct (embedded)",
        "suite": SUITE,
        "prompts": len(passes[0]),
        "seed_a": args.seed_a,
        "a_blocks": {str(s): len(m) for s, m in blocks.items()},
        "seed_b": args.seed_b,
        "resamples": args.resamples,
        "fine": args.fine,
        "goal": GOAL,
        "warper_check": check,
    }
    from mlft.reports.results import SCHEMA

    result = {
        "name": "heldout",
        "schema": SCHEMA,
        "provenance": "measurements/heldout.py: held-out passes of the embedded model on lcb_demo (generator A: "
        "mlft's keyed sampler, generator B: plain transformers generate), every pair tested with the default "
        "paired test; the outcomes are tests/data/heldout_lcb_demo.json.gz (tests/test_heldout.py recomputes "
        "every p).",
        "meta": meta,
        **analyse(passes, labels, args.resamples, args.fine, blocks=named),
        "spread": spread(
            {
                "calibration": calibration_passes(),
                "held out": passes,
                **{f"A, seed {s}": [passes[i] for i in m] for s, m in blocks.items()},
                "B": b,
            },
            "held out",
        ),
    }
    if args.null:
        result["null"] = null_draws(calibration_passes() + passes, len(passes), args.null)
    elif args.null_from:  # an earlier run's null draws (their pool and pass count say what they were drawn for)
        result["null"] = json.loads(args.null_from.read_text(encoding="utf-8"))["null"]
    result["page"] = page(result)
    write_outputs(args, result, passes, "heldout.json", started)


if __name__ == "__main__":
    main()

"""The relevance judge: does a reply answer its prompt? Pointwise mutual information under a reference model.

    pmi(reply, prompt) = sum over reply tokens of  log p(token | prompt, reply so far)
                                                 - log p(token | baseline prompt, reply so far)

both under the same chat template; the baseline is an empty user turn (`neutral`) or another prompt of the same
form (`contrast`, a distractor: what any question makes likely, a refusal or a promise, cancels). What is left
is how much the prompt makes the reply more likely. It needs no download: the reference model is the embedded
SmolLM2-135M-Instruct (`mlft.generation.models.load(None)`), and the per-token NLL is the fluency proxy's
(mlft.benchmarks.lcb.fluency), so the two scores see the same tokens.

PMI alone pays an **echo** of the prompt the most (copying is what a prompt makes likeliest), so `judge` also
flags a reply whose units are mostly the prompt's own (`echo_share`: the share of the reply's word bigrams, or
character bigrams in zh/ja, found in the prompt); such a reply is not an answer whatever its PMI.

**Measured, and weak** (measurements/relevance_judge.py on the 220 hand-labelled replies of
mlft/resources/labelled.jsonl, 10 languages; variant and threshold chosen on one half; the numbers are in
docs/results/relevance_judge.json, rendered in docs/rl.md "Terms that read the prompt"): 75.5 % agreement on the
held-out half, where always saying "not an answer" gets 72.7 %, so not the >= 90 % judge the task axis asks for.
The echo check catches every verbatim echo; refusals, promises, proverbs, noun lists, Q:/A: turns and canned text
are judged "not an answer" 90-100 % of the time, but so are most honest answers: with a 135M model, a real
answer's PMI overlaps the non-answers', short answers most. A confidently wrong answer is as relevant as a right
one (correctness needs a reference: the verifiable prompts, mlft.benchmarks.answers).

Why the answer term still uses this judge: a study of better ones (the same script) found none that generalises.
Four more distractor prompts, the true prompt's share of the reply's likelihood among them, the reverse direction
and a threshold per language add nothing held out (per language: worse, it overfits); a logistic model adding the
reply's NLL and length gains about one point held out (76.4 %) and pays word salad (an honest reply's words
shuffled: 10 of 10 called answers, 1 of 10 by this judge), since length and surprise are what it learned. A
larger reference model (`judge_model`, where one can be run) is the way up; it was not measured.

**A threshold belongs to its model**: 25.24 nats is SmolLM2-135M-Instruct's (FITTED_ON); `fitted_threshold`
refuses it, or any bare number, for another `judge_model`, naming both, and takes a calibration file of `mlft judge
calibrate --judge pmi --model X` (mlft.generation.judge_calibration), which carries the model it was fitted on.
An LLM-as-judge through any backend is mlft.generation.llm_judge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlft.benchmarks.lcb.fluency import reply_nll
from mlft.data.text import units
from mlft.errors import ConfigError

NEUTRAL = [{"role": "user", "content": ""}]  # the "no prompt" context: the chat template around nothing
# chosen on the first half of mlft/resources/labelled.jsonl (measurements/relevance_judge.py): of the PMI
# summed over the reply's tokens or its per-token mean, against the neutral turn or a distractor prompt, the summed
# PMI against the neutral turn agreed best there (76.4 %), at this threshold (held-out half: 75.5 %)
DEFAULT_THRESHOLD = 25.24  # nats, summed over the reply's tokens
FITTED_ON = "smollm2-135m-instruct"  # the model DEFAULT_THRESHOLD (and any bare number) belongs to: the embedded one
BY_TOTAL = True
ECHO_SHARE = 0.6
BASELINES = ("neutral", "contrast")
DEFAULT_BASELINE = "neutral"


def judge_name(model: str | None) -> str:
    """The name a judge model is known by (null: the embedded model)."""
    return FITTED_ON if model in (None, "", FITTED_ON) else str(model)


def fitted_threshold(threshold, judge_model: str | None, where: str = "threshold") -> float:
    """The PMI threshold in nats for `judge_model`, refused (ConfigError naming both models) when it was fitted on
    another model -- before any model loads. `threshold`: a number (on the embedded model's scale: the default
    25.24 was fitted there, and no other model's PMI is on that scale), or the path of a calibration file written
    by `mlft build judge calibrate --judge pmi` ({"judge": "pmi", "model", "threshold", ...}), which carries its
    model."""
    model = judge_name(judge_model)
    if isinstance(threshold, bool):
        raise ConfigError(f"{where}: must be a number or a calibration file, got {threshold!r}")
    if isinstance(threshold, (int, float)):
        fitted, value = FITTED_ON, float(threshold)
    elif isinstance(threshold, str):
        path = Path(threshold)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            fitted, value = judge_name(data["model"]), float(data["threshold"])
            if data.get("judge") != "pmi":
                raise ValueError(f"judge {data.get('judge')!r}, not pmi")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{where}: {path}: not a PMI calibration file of `mlft build judge calibrate` "
                f"({type(exc).__name__}: {exc})"
            ) from None
    else:
        raise ConfigError(f"{where}: must be a number or a calibration file, got {threshold!r}")
    if fitted != model:
        raise ConfigError(
            f"{where}: {value:g} nats was fitted on {fitted}, but the judge model is {model}: a PMI threshold "
            f"belongs to the model it was fitted on; fit one for {model} (`mlft build judge calibrate --judge pmi "
            f"--model {model}`) and give its file as the threshold"
        )
    return value


@dataclass(frozen=True)
class Verdict:
    pmi: float | None  # nats per reply token; None for an empty reply
    echo: float  # share of the reply's bigrams found in the prompt
    answers: bool


def chat(prompt: str | list) -> list:
    return prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]


def pmi(
    model,
    tokenizer,
    prompts: Sequence[str | list],
    replies: Sequence[str],
    baselines: Sequence[str | list] | None = None,
    total: bool = BY_TOTAL,
    batch_size: int = 16,
) -> list[float | None]:
    """PMI of each reply with its prompt (chat messages or a user turn's text) against a baseline prompt: the
    neutral empty turn (`baselines` None) or a distractor per reply (another prompt of the same form: what any
    prompt makes likely, a refusal or a promise, then cancels). Summed over the reply's tokens (`total`) or their
    mean; None for an empty reply."""
    given = reply_nll(model, tokenizer, [chat(p) for p in prompts], replies, batch_size=batch_size, padding_side="left")
    base = [NEUTRAL] * len(replies) if baselines is None else [chat(b) for b in baselines]
    alone = reply_nll(model, tokenizer, base, replies, batch_size=batch_size, padding_side="left")
    out = []
    for reply, a, g in zip(replies, alone, given):
        if a is None or g is None:
            out.append(None)
            continue
        n = len(tokenizer(reply, add_special_tokens=False)["input_ids"]) if total else 1
        out.append((a - g) * n)
    return out


def rotated(prompts: Sequence[str | list]) -> list[str | list] | None:
    """A distractor per reply from the same batch: the next distinct prompt (in order of first appearance, wrapping
    around); None when the batch holds one prompt only (then the neutral baseline)."""
    keys = [str(p) for p in prompts]
    distinct = list(dict.fromkeys(keys))
    if len(distinct) < 2:
        return None
    first = {k: prompts[keys.index(k)] for k in distinct}
    return [first[distinct[(distinct.index(k) + 1) % len(distinct)]] for k in keys]


def _bigrams(text: str) -> list[tuple[str, str]]:
    toks = units(text)
    return list(zip(toks, toks[1:])) if len(toks) > 1 else [(t, "") for t in toks]


def echo_share(prompt: str | list, reply: str) -> float:
    """Share of the reply's unit bigrams (words; single characters for zh/ja, mlft.data.text.units) that occur in
    the prompt's text."""
    text = prompt if isinstance(prompt, str) else " ".join(m.get("content") or "" for m in prompt)
    mine = _bigrams(reply)
    if not mine:
        return 0.0
    theirs = set(_bigrams(text))
    return sum(b in theirs for b in mine) / len(mine)


def judge(
    model,
    tokenizer,
    prompts: Sequence[str | list],
    replies: Sequence[str],
    threshold: float = DEFAULT_THRESHOLD,
    echo: float = ECHO_SHARE,
    baseline: str = DEFAULT_BASELINE,
    batch_size: int = 16,
) -> list[Verdict]:
    """A verdict per reply: it answers when its PMI reaches `threshold` and it is not an echo of the prompt
    (echo share below `echo`); an empty reply never answers. `baseline`: neutral (the empty turn) or contrast (the
    next distinct prompt of the batch, `rotated`; neutral when the batch holds one prompt)."""
    scores = pmi(
        model, tokenizer, prompts, replies, rotated(prompts) if baseline == "contrast" else None, batch_size=batch_size
    )
    out = []
    for p, r, s in zip(prompts, replies, scores):
        e = echo_share(p, r or "")
        out.append(Verdict(s, e, s is not None and s >= threshold and e < echo))
    return out

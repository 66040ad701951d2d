"""Recipes over open prompts: a reward that lets a relevance judge decide whether a reply answers must name a judge
that separates answers from non-answers, or say that the recipe is a control.

The answer terms (`answered`, `answered_language`: mlft.training.answer_reward) check a row's `answer` where the
mix has one and ask the relevance judge elsewhere (`source: auto`; `source: judge` asks it on every row). On open
prompts (a mix source without an `answer` column) the judge is the whole answer signal. The PMI judge
(mlft.generation.relevance) does not separate answers from non-answers on the hand-labelled replies
(mlft/resources/labelled.jsonl: docs/results/relevance_judge.json, 75.5 % agreement held out where always
saying "not an answer" gets 72.7 %: it rejects 21 of 32 honest replies to open prompts and pays 26 of 36
non-answers at least 0.8 of the honest reply's reward), so GRPO over it trains on ties. `check_open_prompt_judge`
refuses such a recipe at `mlft train --check` (and before any training) unless

  - every judge it asks passes its separation check (`SEPARATION_CHECKS`: judge name -> a function of the term's
    options returning None when the judge separates, else why not; the PMI judge never does), or
  - the recipe is marked a control: `control: "why it is kept"` (printed by `mlft train --check` and when the run
    starts), e.g. the negative controls kept to compare against.
"""

from __future__ import annotations

from collections.abc import Callable

from mlft.data.sources import source_columns
from mlft.errors import ConfigError

ANSWER_TERMS = ("answered", "answered_language")  # the terms that ask the relevance judge (answer_reward)
PMI = "pmi"  # the relevance judge of mlft.generation.relevance (the default of the answer terms)
EVIDENCE = (
    "on the hand-labelled replies (mlft/resources/labelled.jsonl) it agrees with 75.5 % of the labels held "
    "out, where always saying 'not an answer' agrees with 72.7 % (docs/results/relevance_judge.json): it cannot "
    "separate answers from non-answers, so answers and non-answers tie and GRPO has nothing to learn from"
)


def _pmi(options: dict) -> str | None:
    return f"the PMI relevance judge does not separate answers from non-answers: {EVIDENCE}"


# judge name -> check of the term's options: None when the judge separates answers from non-answers, else why not
SEPARATION_CHECKS: dict[str, Callable[[dict], str | None]] = {PMI: _pmi}


def judge_of(options: dict) -> str:
    """The relevance judge an answer term asks (its `judge` option; the PMI judge when it names none)."""
    return str(options.get("judge") or PMI)


def open_sources(spec, mix) -> list[str]:
    """The mix sources whose rows an answer term hands to the relevance judge (`source: judge`: every source;
    `auto`: those without an `answer` column; `answer`: none)."""
    source = spec.options.get("source", "auto")
    if source == "answer":
        return []
    return [
        f"{s.name} ({s.type} {s.path})"
        for s in mix.sources
        if source == "judge" or "answer" not in source_columns(s, mix.kind)
    ]


def check_control(control, src: str) -> None:
    if control is not None and (not isinstance(control, str) or not control.strip()):
        raise ConfigError(f"{src}: control: say why the recipe is a control (a sentence), got {control!r}")


def check_open_prompt_judge(recipe, mix, src: str) -> None:
    """Refuse a GRPO recipe whose answer term asks a relevance judge that fails its separation check on open
    prompts, unless the recipe says it is a control (`control:`)."""
    check_control(recipe.control, src)
    if recipe.control:
        return
    for i, spec in enumerate(recipe.rewards):
        if spec.name not in ANSWER_TERMS:
            continue
        rows = open_sources(spec, mix)
        if not rows:
            continue
        name = judge_of(spec.options)
        check = SEPARATION_CHECKS.get(name)
        why = (
            check(dict(spec.options))
            if check
            else f"no separation check is registered for judge {name!r} (mlft.training.open_prompts.SEPARATION_CHECKS)"
        )
        if why is None:
            continue
        raise ConfigError(
            f"{src}: rewards[{i}]: {spec.name!r} pays answering by the {name!r} relevance judge on the open prompts of "
            f"{recipe.mix} ({'; '.join(rows)}: no `answer` column), and {why}. Train on verifiable prompts "
            "(source: answer, e.g. recipes/cpu/grpo_verifiable.yaml), name a judge that passes the separation check, "
            'or mark the recipe a control: control: "why it is kept"'
        )

"""Reward terms that read the prompt: does the reply answer it?

  answered           1.0 when the reply answers, else 0.0. Where the mix row has an `answer` (verifiable prompts,
                     mlft/data/arithmetic.py) the reply answers when every result it states equals it
                     (mlft.benchmarks.answers: its stated answer, read in its language); otherwise the
                     relevance judge decides (mlft.generation.relevance: PMI of the reply with its prompt under
                     the reference model, not an echo of the prompt).
  answered_language  gated_language x (floor + (1 - floor) x answered): the language gate (mlft.training.reward_terms,
                     its options `gate_floor`, `min_share`, `after_q`) times answering. A product, not a sum: a
                     reply in the right language that does not answer earns `floor` of an answering one (0 by
                     default), and no answer makes up for the wrong language.

`source` picks where the verdict comes from: `answer` (the mix's `answer` column on every row: a mix without one
is refused by `mlft train --check`, naming the recipe field and the mix file), `judge` (the relevance judge on
every row) or `auto` (the answer where the row has one, the judge elsewhere). The judge's reference model (the
embedded SmolLM2-135M-Instruct unless `judge_model` names another) loads once per process, on the first batch
that needs it; a row with an answer never loads it. `threshold` is a number on the embedded model's scale or a
calibration file that carries its model (`mlft build judge calibrate`); a threshold fitted on another model than
`judge_model` is refused when the recipe is checked, naming both (mlft.generation.relevance.fitted_threshold).
"""

from __future__ import annotations

from collections.abc import Sequence

from mlft.benchmarks.answers import is_correct
from mlft.errors import ConfigError
from mlft.generation.models import load
from mlft.generation.relevance import (
    BASELINES,
    DEFAULT_BASELINE,
    DEFAULT_THRESHOLD,
    ECHO_SHARE,
    fitted_threshold,
    judge,
)
from mlft.training.reward_terms import check_gated_language, gated_language

SOURCES = ("auto", "answer", "judge")
_JUDGES: dict = {}  # judge model reference -> (model, tokenizer), loaded once per process


def _judge_model(ref: str | None):
    if ref not in _JUDGES:
        _JUDGES[ref] = load(ref, dtype="float32", device="cpu")
    return _JUDGES[ref]


def _missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and value != value)


def answered(
    replies: Sequence[str],
    languages: Sequence[str],
    scorer,
    prompts: Sequence[str] | None = None,
    answer: Sequence | None = None,
    source: str = "auto",
    threshold: float | str = DEFAULT_THRESHOLD,
    echo: float = ECHO_SHARE,
    judge_model: str | None = None,
    baseline: str = DEFAULT_BASELINE,
) -> list[float]:
    """1.0 when the reply answers its prompt (the row's answer checked, else the relevance judge), else 0.0."""
    check_answered(source=source, threshold=threshold, echo=echo, judge_model=judge_model, baseline=baseline)
    answers = list(answer) if answer is not None else [None] * len(replies)
    if source == "answer" and any(_missing(a) for a in answers):
        raise ConfigError("answered: source 'answer' but a row of the mix has no `answer`")
    out: list[float | None] = [None] * len(replies)
    need_judge = []
    for i, (reply, ref) in enumerate(zip(replies, answers)):
        if source != "judge" and not _missing(ref):
            out[i] = float(is_correct(reply, ref, languages[i], None if prompts is None else prompts[i]))
        else:
            need_judge.append(i)
    if need_judge:
        if prompts is None:
            raise ConfigError("answered: the relevance judge needs the prompts (trl passes them to reward functions)")
        nats = fitted_threshold(threshold, judge_model)
        model, tok = _judge_model(judge_model)
        verdicts = judge(
            model, tok, [prompts[i] for i in need_judge], [replies[i] for i in need_judge], nats, echo, baseline
        )
        for i, v in zip(need_judge, verdicts):
            out[i] = float(v.answers)
    return out


def check_answered(
    source: str = "auto",
    threshold: float | str = DEFAULT_THRESHOLD,
    echo: float = ECHO_SHARE,
    judge_model=None,
    baseline: str = DEFAULT_BASELINE,
) -> None:
    if source not in SOURCES:
        raise ConfigError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if baseline not in BASELINES:
        raise ConfigError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    if isinstance(echo, bool) or not isinstance(echo, (int, float)):
        raise ConfigError(f"echo must be a number, got {echo!r}")
    if not 0.0 < echo <= 1.0:
        raise ConfigError(f"echo must be in (0, 1], got {echo!r}")
    if judge_model is not None and not isinstance(judge_model, str):
        raise ConfigError(f"judge_model must be a model reference (text) or null, got {judge_model!r}")
    if source != "answer":  # the judge runs: its threshold must be the judge model's (a file says whose)
        fitted_threshold(threshold, judge_model)


def answered_language(
    replies: Sequence[str],
    languages: Sequence[str],
    scorer,
    prompts: Sequence[str] | None = None,
    answer: Sequence | None = None,
    source: str = "auto",
    floor: float = 0.0,
    threshold: float | str = DEFAULT_THRESHOLD,
    echo: float = ECHO_SHARE,
    judge_model: str | None = None,
    baseline: str = DEFAULT_BASELINE,
    gate_floor: float = 0.5,
    min_share: float = 0.8,
    after_q: str = "judge",
) -> list[float]:
    """gated_language x (floor + (1 - floor) x answered); see the module docs."""
    check_answered_language(source, floor, threshold, echo, judge_model, baseline, gate_floor, min_share, after_q)
    gate = gated_language(replies, languages, scorer, floor=gate_floor, min_share=min_share, after_q=after_q)
    out = [0.0] * len(replies)
    open_rows = [i for i, g in enumerate(gate) if g > 0]  # a reply the gate pays 0 needs no verdict (nor the judge)
    if open_rows:
        answers = None if answer is None else list(answer)
        verdicts = answered(
            [replies[i] for i in open_rows],
            [languages[i] for i in open_rows],
            scorer,
            None if prompts is None else [prompts[i] for i in open_rows],
            None if answers is None else [answers[i] for i in open_rows],
            source,
            threshold,
            echo,
            judge_model,
            baseline,
        )
        for i, a in zip(open_rows, verdicts):
            out[i] = gate[i] * (floor + (1.0 - floor) * a)
    return out


def check_answered_language(
    source: str = "auto",
    floor: float = 0.0,
    threshold: float | str = DEFAULT_THRESHOLD,
    echo: float = ECHO_SHARE,
    judge_model=None,
    baseline: str = DEFAULT_BASELINE,
    gate_floor: float = 0.5,
    min_share: float = 0.8,
    after_q: str = "judge",
) -> None:
    check_answered(source=source, threshold=threshold, echo=echo, judge_model=judge_model, baseline=baseline)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 <= floor < 1.0:
        raise ConfigError(f"floor must be a number in [0, 1), got {floor!r}")
    check_gated_language(floor=gate_floor, min_share=min_share, after_q=after_q)


def required_columns(source: str = "auto", **_) -> tuple[str, ...]:
    """The mix columns a term with these options needs on every row (checked by `mlft train --check`)."""
    return ("answer",) if source == "answer" else ()


answered.check_options = check_answered
answered.required_columns = required_columns
answered_language.check_options = check_answered_language
answered_language.required_columns = required_columns

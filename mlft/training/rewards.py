"""Reward terms for online RL (`trainer: grpo`) as a recipe names them: the registry of terms, the recipe's reward
specs and their validation, and the trl reward functions built from them. The built-in terms and the scorer they share
are `mlft.training.reward_terms`' (what each pays is written there); what the reward paid, per step, is
`mlft.training.rollouts`'.

REWARDS is a `mlft.registry.Registry`; a term is a callable `(replies, languages, scorer, **options) -> list of
float | None`, one value per reply (None: the term does not apply; trl then leaves it out of the sum). Add one:

    from mlft.training.rewards import REWARDS
    REWARDS.add("brevity", "my_pkg.rewards:brevity")    # def brevity(replies, languages, scorer, limit=200): ...

or name it in a recipe as "module:function" (imported when the recipe is validated). Weights are the recipe's
(`rewards: [{name, weight, options}]`, trl's `reward_weights`); trl logs each term's mean and std every logging
step (`rewards/<name>/mean`) to the trackers, and `RewardCurveCallback` appends them to the run's
`rewards.jsonl`. `RolloutLog` writes, per optimizer step, the few highest- and lowest-reward rollouts with each
term's value, the weighted total and LCB's verdict to the run's `rollouts.jsonl` (the report page shows them).
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from pathlib import Path

from mlft.errors import ConfigError
from mlft.registry import Registry
from mlft.training.reward_terms import ReplyScorer, RewardSpec
from mlft.training.rollouts import RolloutLog, _prompt_text

REWARDS = Registry(
    "reward term",
    {
        **{
            name: f"mlft.training.reward_terms:{name}"
            for name in ("language", "words", "validity", "degeneracy", "gated_language")
        },
        **{name: f"mlft.training.answer_reward:{name}" for name in ("answered", "answered_language")},
    },
)


def resolve_term(name: str, where: str) -> Callable:
    """The term registered as `name`, or a 'module:function' imported (and registered under that name)."""
    if name not in REWARDS and ":" in name:
        module, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{where}: cannot import reward term {name!r} ({type(exc).__name__}: {exc})") from None
        REWARDS.add(name, fn)
    term = REWARDS.load(name, where)
    if not callable(term):
        raise ConfigError(f"{where}: reward term {name!r} is not callable")
    return term


def validate_rewards(specs: list[RewardSpec], where: str) -> list[RewardSpec]:
    """Names registered (or importable), weights finite and >= 0 (one > 0), options accepted by the term, no
    term twice -- before any model loads."""
    if not specs:
        raise ConfigError(
            f"{where}: at least one reward term is needed for trainer 'grpo' (registered: {', '.join(REWARDS)})"
        )
    seen = set()
    for i, spec in enumerate(specs):
        w = f"{where}[{i}]"
        term = resolve_term(spec.name, f"{w}.name")
        if spec.name in seen:
            raise ConfigError(f"{w}.name: reward term {spec.name!r} listed twice")
        seen.add(spec.name)
        if isinstance(spec.weight, bool) or not isinstance(spec.weight, (int, float)) or not math.isfinite(spec.weight):
            raise ConfigError(f"{w}.weight: must be a finite number, got {spec.weight!r}")
        if spec.weight < 0:
            raise ConfigError(
                f"{w}.weight: must be >= 0, got {spec.weight} (a penalty term returns negative values, e.g. degeneracy)"
            )
        params = inspect.signature(term).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            fixed = list(params)[:3]  # replies, languages, scorer
            unknown = [k for k in spec.options if k not in params or k in fixed]
            if unknown:
                valid = [k for k in params if k not in fixed]
                raise ConfigError(
                    f"{w}.options: {spec.name!r} takes no option {unknown[0]!r}; valid: {', '.join(valid) or 'none'}"
                )
        check = getattr(term, "check_options", None)
        if check is not None:
            try:
                check(**spec.options)
            except ConfigError as exc:
                raise ConfigError(f"{w}.options: {exc}") from None
    if not any(s.weight > 0 for s in specs):
        raise ConfigError(f"{where}: every weight is 0: nothing to learn from")
    return specs


def _reply_text(completion) -> str:
    """trl hands conversational completions as [{"role": "assistant", "content": ...}], plain ones as text."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if isinstance(m, dict))


TRL_ARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")  # not columns


class RewardFunction:
    """One term as a trl reward function: reads the completions' text and the mix's `language` column; named
    after the term (trl logs `rewards/<name>/mean`). The mix's other columns (`task`...), which trl passes as
    keyword arguments, reach a term that declares them as parameters (or takes **kwargs)."""

    def __init__(self, spec: RewardSpec, scorer: ReplyScorer, log: RolloutLog | None = None, index: int = 0):
        self.__name__ = spec.name
        self.log, self.index = log, index
        self.term = resolve_term(spec.name, "rewards")
        self.options = dict(spec.options)
        self.scorer = scorer
        params = inspect.signature(self.term).parameters
        self._any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        self._accepts = set(list(params)[3:])

    def __call__(self, prompts=None, completions=None, language=None, **kwargs) -> list[float | None]:
        if language is None:
            raise ConfigError("reward terms need a `language` column in the prompt mix")
        columns = {
            k: list(v) if isinstance(v, (list, tuple)) else v
            for k, v in kwargs.items()
            if k not in TRL_ARGS and k not in self.options and (self._any or k in self._accepts)
        }
        if "prompts" in self._accepts and prompts is not None:  # a term that reads the prompt (answer_reward)
            columns["prompts"] = [_prompt_text(p) for p in prompts]
        texts = [_reply_text(c) for c in completions]
        values = self.term(texts, list(language), self.scorer, **columns, **self.options)
        if self.log is not None:
            self.log.add(self.index, completions, prompts, texts, list(language), kwargs, values)
        return values


def reward_functions(
    specs: list[RewardSpec], scorer: ReplyScorer | None = None, run_dir: str | Path | None = None
) -> tuple[list[Callable], list[float]]:
    """trl reward functions (one per term, sharing one scorer) and their weights; with `run_dir`, they also write
    each step's highest- and lowest-reward rollouts to run_dir/rollouts.jsonl (`RolloutLog`)."""
    scorer = scorer or ReplyScorer()
    log = RolloutLog(run_dir, specs, scorer) if run_dir is not None else None
    return [RewardFunction(s, scorer, log, i) for i, s in enumerate(specs)], [float(s.weight) for s in specs]

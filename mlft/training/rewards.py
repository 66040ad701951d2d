"""Reward terms for online RL (`trainer: grpo`), computed by the benchmark's own scorer.

Every term scores a batch of replies with their requested languages by the code `mlft score` runs -- no
second implementation of a rule lives here:
  language    1.0 when every counted line (>= 5 tokens in the target's tokenisation) is labelled the requested
              language by the official fastText LID at the official threshold (`mlft.benchmarks.lcb.metrics.analyze_reply`,
              the per-reply verdict behind LPR); 0.0 when a line is not -- and 0.0 for a reply with NO counted
              line, which LCB leaves out of LPR's denominator (so the skip rule cannot be gamed by short or empty
              replies, `mlft.benchmarks.lcb.metrics.line_verdict`)
  words       non-Latin targets only (WPR's languages): 1.0 for a line-clean counted reply without an English
              word by the official word check (the verdict behind WPR), else 0.0; None (not applicable, no
              signal) for Latin-script targets
  validity    lexical validity in [0, 1]: the share of the reply's words that are words of the target language
              (`mlft.benchmarks.lcb.guard.lexical_validity`, the guard's column); 0 for a reply without a word; None for a
              language without a lexicon
  degeneracy  -1.0 for a reply the guard flags degenerate (`mlft.benchmarks.lcb.guard.is_degenerate`: empty, no words,
              loops), else 0.0: a penalty

REWARDS is a `mlft.registry.Registry`; a term is a callable `(replies, languages, scorer, **options) -> list of
float | None`, one value per reply (None: the term does not apply; trl then leaves it out of the sum). Add one:

    from mlft.training.rewards import REWARDS
    REWARDS.add("brevity", "my_pkg.rewards:brevity")    # def brevity(replies, languages, scorer, limit=200): ...

or name it in a recipe as "module:function" (imported when the recipe is validated). Weights are the recipe's
(`rewards: [{name, weight, options}]`, trl's `reward_weights`); trl logs each term's mean and std every logging
step (`rewards/<name>/mean`) to the trackers, and `RewardCurveCallback` appends them to the run's
`rewards.jsonl`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from mlft.benchmarks.lcb.guard import is_degenerate, lexical_validity
from mlft.benchmarks.lcb.metrics import ReplyResult, ScoreOptions, analyze_reply, line_verdict, word_verdict
from mlft.benchmarks.lcb.scoring import load_resources
from mlft.errors import ConfigError
from mlft.io.jsonl import append_jsonl, read_jsonl
from mlft.languages import NON_LATIN
from mlft.registry import Registry

REWARD_CURVES = "rewards.jsonl"


class ReplyScorer:
    """The official scorer's resources (fastText LID, English word list, options), loaded on first use, with the
    per-reply verdicts of the last batches cached (the language and words terms share one analysis per reply)."""

    def __init__(self, lid: str | None = None, words: str | Path | None = None,
                 options: ScoreOptions | None = None, cache_size: int = 4096):
        self._lid_spec, self._words_spec = lid, words
        self.options = options or ScoreOptions()
        self._resources = None
        self._cache: dict[tuple[str, str], ReplyResult] = {}
        self._cache_size = cache_size

    @property
    def resources(self):
        if self._resources is None:
            self._resources = load_resources(self._lid_spec, self._words_spec)
        return self._resources

    def verdicts(self, replies: Sequence[str], languages: Sequence[str]) -> list[ReplyResult]:
        """`analyze_reply` of every (reply, language): the same analysis `mlft score` makes."""
        lid, words = self.resources
        out = []
        for text, lang in zip(replies, languages, strict=True):
            key = (text, lang)
            r = self._cache.get(key)
            if r is None:
                if len(self._cache) >= self._cache_size:
                    self._cache.clear()
                r = self._cache[key] = analyze_reply(text, lang, lid, words, self.options)
            out.append(r)
        return out


# -- the built-in terms ------------------------------------------------------------------------------------
def language(replies: Sequence[str], languages: Sequence[str], scorer: ReplyScorer) -> list[float]:
    """1.0 when every counted line is in the requested language (official LPR verdict); 0.0 otherwise, and for a
    reply without a counted line."""
    return [1.0 if line_verdict(r) else 0.0 for r in scorer.verdicts(replies, languages)]


def words(replies: Sequence[str], languages: Sequence[str], scorer: ReplyScorer) -> list[float | None]:
    """Non-Latin targets: 1.0 for a counted, line-clean reply without an English word (official WPR verdict),
    else 0.0; None for Latin-script targets."""
    out: list[float | None] = [None] * len(replies)
    idx = [i for i, lang in enumerate(languages) if lang in NON_LATIN]
    results = scorer.verdicts([replies[i] for i in idx], [languages[i] for i in idx])
    for i, r in zip(idx, results):
        out[i] = 1.0 if word_verdict(r) else 0.0
    return out


def validity(replies: Sequence[str], languages: Sequence[str], scorer: ReplyScorer) -> list[float | None]:
    """Lexical validity of each reply in its requested language (the guard's measure), None without a lexicon."""
    return [lexical_validity(text, lang) for text, lang in zip(replies, languages, strict=True)]


def degeneracy(replies: Sequence[str], languages: Sequence[str], scorer: ReplyScorer) -> list[float]:
    """-1.0 for a degenerate reply (the guard's rule), else 0.0."""
    return [-1.0 if is_degenerate(text) else 0.0 for text in replies]


REWARDS = Registry("reward term", {name: f"mlft.training.rewards:{name}"
                                   for name in ("language", "words", "validity", "degeneracy")})


# -- recipe specs ------------------------------------------------------------------------------------------
@dataclass
class RewardSpec:
    name: str = field(metadata={
        "help": "A registered reward term (language, words, validity, degeneracy, or one added to "
                "mlft.training.rewards.REWARDS) or 'module:function'."})
    weight: float = field(default=1.0, metadata={
        "help": "Weight in the summed reward (>= 0; penalty terms return negative values)."})
    options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Keyword options passed to the term."})


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
        raise ConfigError(f"{where}: at least one reward term is needed for trainer 'grpo' "
                          f"(registered: {', '.join(REWARDS)})")
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
            raise ConfigError(f"{w}.weight: must be >= 0, got {spec.weight} (a penalty term returns negative values, "
                              "e.g. degeneracy)")
        params = inspect.signature(term).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            fixed = list(params)[:3]  # replies, languages, scorer
            unknown = [k for k in spec.options if k not in params or k in fixed]
            if unknown:
                valid = [k for k in params if k not in fixed]
                raise ConfigError(f"{w}.options: {spec.name!r} takes no option {unknown[0]!r}; valid: "
                                  f"{', '.join(valid) or 'none'}")
    if not any(s.weight > 0 for s in specs):
        raise ConfigError(f"{where}: every weight is 0: nothing to learn from")
    return specs


def _reply_text(completion) -> str:
    """trl hands conversational completions as [{"role": "assistant", "content": ...}], plain ones as text."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if isinstance(m, dict))


class RewardFunction:
    """One term as a trl reward function: reads the completions' text and the mix's `language` column; named
    after the term (trl logs `rewards/<name>/mean`)."""

    def __init__(self, spec: RewardSpec, scorer: ReplyScorer):
        self.__name__ = spec.name
        self.term = resolve_term(spec.name, "rewards")
        self.options = dict(spec.options)
        self.scorer = scorer

    def __call__(self, prompts=None, completions=None, language=None, **_) -> list[float | None]:
        if language is None:
            raise ConfigError("reward terms need a `language` column in the prompt mix")
        return self.term([_reply_text(c) for c in completions], list(language), self.scorer, **self.options)


def reward_functions(specs: list[RewardSpec], scorer: ReplyScorer | None = None) -> tuple[list[Callable], list[float]]:
    """trl reward functions (one per term, sharing one scorer) and their weights."""
    scorer = scorer or ReplyScorer()
    return [RewardFunction(s, scorer) for s in specs], [float(s.weight) for s in specs]


# -- the reward curve file ---------------------------------------------------------------------------------
def curve_row(step: int, logs: dict, weights: dict[str, float]) -> dict | None:
    """One row of rewards.jsonl from a trl log dict (None if it holds no reward)."""
    if "reward" not in logs:
        return None
    terms = {}
    for name, w in weights.items():
        mean, std = logs.get(f"rewards/{name}/mean"), logs.get(f"rewards/{name}/std")
        terms[name] = {"mean": mean, "std": std, "weight": w}
    keep = ("reward", "reward_std", "frac_reward_zero_std", "kl", "loss", "entropy", "learning_rate",
            "completions/mean_length", "completions/clipped_ratio", "step_time")
    return {"step": step, **{k: logs[k] for k in keep if k in logs}, "terms": terms}


def read_reward_curves(run_dir: str | Path) -> list[dict]:
    return read_jsonl(Path(run_dir) / REWARD_CURVES)


def reward_curve_callback(run_dir: Path, specs: list[RewardSpec]):
    """A TrainerCallback appending one rewards.jsonl row per logging step (each step once, also on resume)."""
    from transformers import TrainerCallback

    weights = {s.name: float(s.weight) for s in specs}

    class RewardCurveCallback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            row = curve_row(state.global_step, logs, weights)
            path = Path(run_dir) / REWARD_CURVES
            if row is None or any(r["step"] == row["step"] for r in read_jsonl(path)):
                return
            append_jsonl(path, [json.loads(json.dumps(row))])

    return RewardCurveCallback()

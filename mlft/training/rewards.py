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
  gated_language
              a stricter language reward that LCB's blind spots cannot buy: r = L * (floor + (1 - floor) * G).
              L = 1 when the official line verdict holds, the counted lines (>= 5 tokens) hold >= `min_share` of the
              reply's tokens (one counted line among short English ones does not pass), and nothing is judged away
              after "\nQ:" (`after_q: judge`: the whole reply is judged; `cut`: the tail is not judged but its
              tokens count among the reply's, so a long tail fails the share). G = 1 when the guard passes the
              whole reply: not degenerate and lexically valid (validity > VALID_SHARE, or no lexicon). A gate,
              not a sum: no term can make up for another.
The official verdict stays the *metric* (`mlft score`, LPR); only this reward is stricter.

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
from mlft.benchmarks.lcb.metrics import (
    WORD_CHECKS,
    ReplyResult,
    ScoreOptions,
    analyze_reply,
    line_verdict,
    normalize,
    word_verdict,
)
from mlft.benchmarks.lcb.scoring import load_resources
from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.constants import LID_THRESHOLD, MIN_TOKENS, VALID_SHARE
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


AFTER_Q = ("judge", "cut")


def _uncut(text: str) -> str:
    """The reply as a whole: the official normalisation cuts at the first "\nQ:"; here the marker is a line break."""
    return text.replace("\nQ:", "\n")


def _counted_share(text: str, lang: str, min_tokens: int) -> float:
    """Share of the reply's tokens (every line, `text` as given) in lines of >= min_tokens tokens."""
    sizes = [len(tokenize(line, lang)) for line in normalize(text).split("\n")]
    total = sum(sizes)
    return sum(n for n in sizes if n >= min_tokens) / total if total else 0.0


def gated_language(replies: Sequence[str], languages: Sequence[str], scorer: ReplyScorer, floor: float = 0.5,
                   min_share: float = 0.8, after_q: str = "judge") -> list[float]:
    """L * (floor + (1 - floor) * G): L the strict language verdict (official line verdict, counted lines >=
    min_share of the reply's tokens, nothing after "\nQ:" judged away), G the guard (not degenerate, valid)."""
    check_gated_language(floor=floor, min_share=min_share, after_q=after_q)
    whole = [_uncut(t) for t in replies]
    judged = whole if after_q == "judge" else list(replies)
    min_tokens = scorer.options.min_tokens
    out = []
    for text, full, seen, lang, r in zip(replies, whole, judged, languages, scorer.verdicts(judged, languages)):
        if not line_verdict(r):
            out.append(0.0)
            continue
        if after_q == "judge":
            share = _counted_share(full, lang, min_tokens)
        else:  # counted tokens of the cut reply over the tokens of the whole one
            sizes = [len(tokenize(x, lang)) for x in normalize(seen).split("\n")]
            total = sum(len(tokenize(x, lang)) for x in normalize(full).split("\n"))
            share = sum(n for n in sizes if n >= min_tokens) / total if total else 0.0
        if share < min_share:
            out.append(0.0)
            continue
        validity = lexical_validity(full, lang)
        guard = not is_degenerate(text) and (validity is None or validity > VALID_SHARE)
        out.append(floor + (1.0 - floor) * float(guard))
    return out


def check_gated_language(floor: float = 0.5, min_share: float = 0.8, after_q: str = "judge") -> None:
    for name, value in (("floor", floor), ("min_share", min_share)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"gated_language: {name} must be a number in [0, 1], got {value!r}")
    if after_q not in AFTER_Q:
        raise ConfigError(f"gated_language: after_q must be one of {', '.join(AFTER_Q)}, got {after_q!r}")


gated_language.check_options = check_gated_language  # validate_rewards calls it before any load

REWARDS = Registry("reward term", {name: f"mlft.training.rewards:{name}"
                                   for name in ("language", "words", "validity", "degeneracy", "gated_language")})


@dataclass
class ScorerOptions:
    """The reward terms' scorer (a `ReplyScorer`): the official one by default."""

    lid: str | None = field(default=None, metadata={
        "help": "LID model of the language verdicts: null = the official fastText lid.176 (as `mlft score`)."})
    words: str | None = field(default=None, metadata={
        "help": "English word list of the word check: null = the bundled official list."})
    word_check: str = field(default="dictionary", metadata={
        "help": "dictionary (official) | latin | latin+dictionary (mlft.benchmarks.lcb.metrics)."})
    label_aliases: dict[str, list[str]] = field(default_factory=dict, metadata={
        "help": "Extra LID labels accepted per language, e.g. {id: [ms]} (not official)."})
    min_tokens: int = field(default=MIN_TOKENS, metadata={"help": "Tokens a line needs to be counted (official 5)."})
    threshold: float = field(default=LID_THRESHOLD, metadata={
        "help": "LID score a label needs (official 0.3); below it the line is 'unknown'."})

    def validate(self, where: str) -> ScorerOptions:
        if self.word_check not in WORD_CHECKS:
            raise ConfigError(f"{where}.word_check: {self.word_check!r} is not one of {', '.join(WORD_CHECKS)}")
        if self.min_tokens < 1:
            raise ConfigError(f"{where}.min_tokens: must be >= 1, got {self.min_tokens}")
        if not 0.0 <= self.threshold < 1.0:
            raise ConfigError(f"{where}.threshold: must be in [0, 1), got {self.threshold}")
        return self

    def scorer(self) -> ReplyScorer:
        options = ScoreOptions(word_check=self.word_check,
                               label_aliases={k: set(v) for k, v in self.label_aliases.items()},
                               min_tokens=self.min_tokens, threshold=self.threshold)
        return ReplyScorer(self.lid, self.words, options)


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

    def __init__(self, spec: RewardSpec, scorer: ReplyScorer):
        self.__name__ = spec.name
        self.term = resolve_term(spec.name, "rewards")
        self.options = dict(spec.options)
        self.scorer = scorer
        params = inspect.signature(self.term).parameters
        self._any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        self._accepts = set(list(params)[3:])

    def __call__(self, prompts=None, completions=None, language=None, **kwargs) -> list[float | None]:
        if language is None:
            raise ConfigError("reward terms need a `language` column in the prompt mix")
        columns = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in kwargs.items()
                   if k not in TRL_ARGS and k not in self.options and (self._any or k in self._accepts)}
        return self.term([_reply_text(c) for c in completions], list(language), self.scorer, **columns,
                         **self.options)


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

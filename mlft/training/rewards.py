"""Reward terms for online RL (`trainer: grpo`), computed by the benchmark's own scorer.

Every term scores a batch of replies with their requested languages by the code `mlft score` runs -- no
second implementation of a rule lives here:
  language    1.0 when every counted line (>= 5 tokens in the target's tokenisation) is labelled the requested
              language by the official fastText LID at the official threshold
              (`mlft.benchmarks.lcb.metrics.analyze_reply`,
              the per-reply verdict behind LPR); 0.0 when a line is not -- and 0.0 for a reply with NO counted
              line, which LCB leaves out of LPR's denominator (so the skip rule cannot be gamed by short or empty
              replies, `mlft.benchmarks.lcb.metrics.line_verdict`)
  words       non-Latin targets only (WPR's languages): 1.0 for a line-clean counted reply without an English
              word by the official word check (the verdict behind WPR), else 0.0; None (not applicable, no
              signal) for Latin-script targets
  validity    lexical validity in [0, 1]: the share of the reply's words that are words of the target language
              (`mlft.benchmarks.lcb.guard.strict_lexical_validity`: the guard's measure of the visible text, and
              for a non-Latin target a word with a Latin letter is not a word of it); 0 for a reply without a word;
              None for a language without a lexicon
  degeneracy  -1.0 for a reply the reward's view of the guard flags degenerate
              (`mlft.benchmarks.lcb.guard.strict_degeneracy_reason`: the guard's rules on the text with invisible
              characters and look-alike letters folded, plus templates and loop tails), else 0.0: a penalty
  gated_language
              a stricter language reward that LCB's blind spots cannot buy: r = L * (floor + (1 - floor) * G).
              L (`strict_language`): the reply's own line verdict -- lines judged when they hold >= 5 words
              (`word_tokens`: punctuation of any script, symbols, digits and whitespace tokens are not words),
              code (`without_code`) neither judged nor counted, every judged line in the requested language and
              the judged text by a margin over the best other language, at most a fifth of the words English
              (non-Latin targets, case-insensitive), no invented "\nQ:" turn (`after_q: judge`; `cut`: the
              tail is not judged but its words count among the reply's) -- and the judged lines hold >=
              `min_share` of the reply's words (one judged line among short English ones does not pass). G = 1
              when the guard's reward view passes the whole reply: not degenerate (`strict_degeneracy_reason`)
              and lexically valid (`strict_lexical_validity` > `valid_share`, 0.8, or no lexicon). A gate, not a
              sum: no term can make up for another. None of these terms reads the prompt: a refusal, an echo or
              a wrong answer in fluent language is paid (docs/rl.md, "Reply classes x recipes").
The official verdict stays the *metric* (`mlft score`, LPR); only this reward is stricter.

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
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlft.benchmarks.lcb.guard import (
    bare_line,
    strict_degeneracy_reason,
    strict_lexical_validity,
    visible_text,
    word_tokens,
)
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
from mlft.constants import LID_THRESHOLD, MIN_TOKENS
from mlft.errors import ConfigError
from mlft.io.curve_file import REWARD_CURVES, ROLLOUTS
from mlft.io.jsonl import append_jsonl, read_jsonl, write_jsonl
from mlft.languages import NON_LATIN
from mlft.registry import Registry

ROLLOUTS_KEPT = 3  # rollouts kept per step at each end (highest and lowest total)
ROLLOUT_CHARS = 2000  # prompt and completion text kept per rollout (longer text is cut, marked "…")


class ReplyScorer:
    """The official scorer's resources (fastText LID, English word list, options), loaded on first use, with the
    per-reply verdicts of the last batches cached (the language and words terms share one analysis per reply)."""

    def __init__(
        self,
        lid: str | None = None,
        words: str | Path | None = None,
        options: ScoreOptions | None = None,
        cache_size: int = 4096,
    ):
        self._lid_spec, self._words_spec = lid, words
        self.options = options or ScoreOptions()
        self._resources = None
        self._cache: dict[tuple[str, str], ReplyResult] = {}
        self._top2: dict[str, tuple[str, float, float]] = {}
        self._cache_size = cache_size

    @property
    def resources(self):
        if self._resources is None:
            self._resources = load_resources(self._lid_spec, self._words_spec)
        return self._resources

    def top2(self, line: str) -> tuple[str, float, float]:
        """(label, score, best other label's score) of one line (no line break): fastText's two best labels; an
        LID without a ranking (py3langid, langdetect) gives 0.0 for the other. Cached."""
        got = self._top2.get(line)
        if got is None:
            lid = self.resources[0]
            model = getattr(lid, "model", None)
            if model is not None:
                labels, scores = model.predict(line, k=2)
                other = float(scores[1]) if len(scores) > 1 else 0.0
                got = (labels[0][len("__label__") :], float(scores[0]), other)
            else:
                label, score = lid.predict(line)
                got = (label, score, 0.0)
            if len(self._top2) >= self._cache_size:
                self._top2.clear()
            self._top2[line] = got
        return got

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
    """Lexical validity of each reply in its requested language (the guard's measure, read strictly:
    `strict_lexical_validity`), None without a lexicon."""
    return [strict_lexical_validity(text, lang) for text, lang in zip(replies, languages, strict=True)]


def degeneracy(replies: Sequence[str], languages: Sequence[str], scorer: ReplyScorer) -> list[float]:
    """-1.0 for a degenerate reply (the guard's rules, read strictly: `strict_degeneracy_reason`), else 0.0."""
    return [-1.0 if strict_degeneracy_reason(text) is not None else 0.0 for text in replies]


AFTER_Q = ("judge", "cut")
TURN = "\nQ:"  # the official scorer cuts the reply here: the model has started the user's next turn
MARGIN = 0.3  # a judged line's LID score must beat the best other language's by this much (close languages)
STRICT_VALID_SHARE = 0.8  # the gate's lexical validity bar (the guard's column uses VALID_SHARE = 0.5): ~45 %
# English in a Latin-script reply scores 0.47-0.75 (fr, de, es, tr probes), the honest probes >= 0.89
ENGLISH_SHARE = 0.2  # non-Latin targets: English words (case-insensitive) beyond this share of the words fail
CODE_SHARE = 0.5  # code (fenced blocks, inline spans) is left out of the judged text up to this share of the reply
_FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_CODE_CHAR = re.compile(r"[=(){}\[\];:<>#$\\/_*+|&%]")
_LATIN_RUN = re.compile("[A-Za-z]+")


def _uncut(text: str) -> str:
    """The reply as a whole: the official normalisation cuts at the first "\nQ:"; here the marker is a line break."""
    return text.replace(TURN, "\n")


def without_code(text: str) -> str:
    """The reply without its code: fenced blocks whose every line holds a code character (`=`, brackets, `:`...,
    so prose in a fence stays) and inline spans that are one token or hold a code character (`reverse`,
    `x[::-1]`), replaced by a line break / a space -- as long as they make at most CODE_SHARE of the reply's
    visible characters (more: the reply is judged as it is, so a fence cannot hide the reply's language)."""
    removed: list[str] = []

    def fence(m: re.Match) -> str:
        lines = [x for x in m.group(1).split("\n") if x.strip()]
        if lines and all(_CODE_CHAR.search(x) for x in lines):
            removed.append(m.group(0))
            return "\n"
        return m.group(0)

    def inline(m: re.Match) -> str:
        if len(m.group(1).split()) == 1 or _CODE_CHAR.search(m.group(1)):
            removed.append(m.group(0))
            return " "
        return m.group(0)

    out = _INLINE.sub(inline, _FENCE.sub(fence, text))

    def size(x: str) -> int:
        return len("".join(x.split()))

    return out if sum(map(size, removed)) <= CODE_SHARE * size(text) else text


def _counted_share(text: str, lang: str, min_tokens: int) -> float:
    """Share of the reply's words (`word_tokens`, every line, `text` as given) in lines of >= min_tokens words."""
    sizes = [len(word_tokens(line, lang)) for line in text.split("\n")]
    total = sum(sizes)
    return sum(n for n in sizes if n >= min_tokens) / total if total else 0.0


def english_share(text: str, words: frozenset[str]) -> float:
    """Share of the reply's words (whitespace pieces with a letter, punctuation as spaces) holding a Latin run that
    is in the official English word list, compared lowercased (`Password를`, `Reset`: the official check is
    case-sensitive against a lowercase list, so capitalised English passes it)."""
    pieces = [w for w in bare_line(text).split() if any(map(str.isalpha, w))]
    english = sum(any(r.lower() in words for r in _LATIN_RUN.findall(w)) for w in pieces)
    return english / len(pieces) if pieces else 0.0


def strict_language(text: str, lang: str, scorer: ReplyScorer, margin: float = MARGIN, after_q: str = "judge") -> bool:
    """The reward's line verdict (L of `gated_language`), LCB's rule with its blind spots closed:
    - `after_q: judge`: a reply with "\nQ:" fails (the model invented the user's next turn; the text after it
      answers a question nobody asked, so judging its language pays dialogue the prompt did not ask for, and
      cutting it would leave the invention free); `cut`: the text after it is not judged, its words count;
    - code (`without_code`) is neither judged nor counted;
    - a line is judged when it holds >= min_tokens words (`word_tokens`: punctuation, symbols, digits and
      whitespace tokens are not words); at least one line is judged, and the judged lines hold >= the share
      `gated_language` asks (checked there);
    - every judged line, as LCB's LID reads it (the official normalisation of the visible line), is labelled the
      requested language (or an alias) above the threshold, and the judged text as a whole is labelled it by
      `margin` over the best other language: lines mixing a close language (pt/gl-es, ru/uk, id/ms) score
      0.05-0.25 apart, the honest replies of the probes >= 0.51 (tests/data/reward_probes.yaml; per line, short
      honest lines of GPT-4 Turbo fell under 0.3, so the margin is taken over the whole judged text);
    - non-Latin targets: at most ENGLISH_SHARE of the words are English (`english_share`, case-insensitive): the
      probes' capitalised English is 0.25-0.33 of the words, `Password를` replies 0.33-0.88; 2.3 % of GPT-4
      Turbo's LCB-clean non-Latin replies (product names, JSON keys) are above 0.2, 8.9 % above 0.05."""
    if after_q == "judge" and TURN in text:
        return False
    seen = without_code(text.split(TURN)[0] if after_q == "cut" else text)
    lines = [x for x in seen.split("\n") if len(word_tokens(x, lang)) >= scorer.options.min_tokens]
    if not lines:
        return False
    accepted = {lang} | set(scorer.options.label_aliases.get(lang, ()))
    judged = [normalize(visible_text(x)) for x in lines]  # what LCB's LID reads, without invisible characters
    for line in judged:
        label, score, _ = scorer.top2(line)
        if label not in accepted or score <= scorer.options.threshold:
            return False
    label, score, second = scorer.top2(" ".join(judged))  # the margin: over the judged text as a whole
    if label not in accepted or score - second < margin:
        return False
    return lang not in NON_LATIN or english_share(seen, scorer.resources[1]) <= ENGLISH_SHARE


def gated_language(
    replies: Sequence[str],
    languages: Sequence[str],
    scorer: ReplyScorer,
    floor: float = 0.5,
    min_share: float = 0.8,
    after_q: str = "judge",
    margin: float = MARGIN,
    valid_share: float = STRICT_VALID_SHARE,
) -> list[float]:
    """L * (floor + (1 - floor) * G): L the strict language verdict (`strict_language`; its judged lines hold >=
    min_share of the reply's words outside code), G the guard's reward view (not degenerate by
    `strict_degeneracy_reason`, lexical validity `strict_lexical_validity` of the text outside code >
    valid_share, or no lexicon)."""
    check_gated_language(floor=floor, min_share=min_share, after_q=after_q, margin=margin, valid_share=valid_share)
    min_tokens = scorer.options.min_tokens
    out = []
    for text, lang in zip(replies, languages, strict=True):
        if not strict_language(text, lang, scorer, margin, after_q):
            out.append(0.0)
            continue
        whole = without_code(_uncut(text))
        if after_q == "judge":
            share = _counted_share(whole, lang, min_tokens)
        else:  # judged words of the cut reply over the words of the whole one
            sizes = [len(word_tokens(x, lang)) for x in without_code(text.split(TURN)[0]).split("\n")]
            total = sum(len(word_tokens(x, lang)) for x in whole.split("\n"))
            share = sum(n for n in sizes if n >= min_tokens) / total if total else 0.0
        if share < min_share:
            out.append(0.0)
            continue
        validity = strict_lexical_validity(whole, lang)
        guard = strict_degeneracy_reason(text) is None and (validity is None or validity > valid_share)
        out.append(floor + (1.0 - floor) * float(guard))
    return out


def check_gated_language(
    floor: float = 0.5,
    min_share: float = 0.8,
    after_q: str = "judge",
    margin: float = MARGIN,
    valid_share: float = STRICT_VALID_SHARE,
) -> None:
    for name, value in (("floor", floor), ("min_share", min_share), ("margin", margin), ("valid_share", valid_share)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"gated_language: {name} must be a number in [0, 1], got {value!r}")
    if after_q not in AFTER_Q:
        raise ConfigError(f"gated_language: after_q must be one of {', '.join(AFTER_Q)}, got {after_q!r}")


gated_language.check_options = check_gated_language  # validate_rewards calls it before any load

REWARDS = Registry(
    "reward term",
    {
        **{
            name: f"mlft.training.rewards:{name}"
            for name in ("language", "words", "validity", "degeneracy", "gated_language")
        },
        **{name: f"mlft.training.answer_reward:{name}" for name in ("answered", "answered_language")},
    },
)


@dataclass
class ScorerOptions:
    """The reward terms' scorer (a `ReplyScorer`): the official one by default."""

    lid: str | None = field(
        default=None,
        metadata={
            "help": "LID model of the language verdicts: null = the official fastText lid.176 (as `mlft score`)."
        },
    )
    words: str | None = field(
        default=None, metadata={"help": "English word list of the word check: null = the bundled official list."}
    )
    word_check: str = field(
        default="dictionary",
        metadata={"help": "dictionary (official) | latin | latin+dictionary (mlft.benchmarks.lcb.metrics)."},
    )
    label_aliases: dict[str, list[str]] = field(
        default_factory=dict,
        metadata={"help": "Extra LID labels accepted per language, e.g. {id: [ms]} (not official)."},
    )
    min_tokens: int = field(default=MIN_TOKENS, metadata={"help": "Tokens a line needs to be counted (official 5)."})
    threshold: float = field(
        default=LID_THRESHOLD,
        metadata={"help": "LID score a label needs (official 0.3); below it the line is 'unknown'."},
    )

    def validate(self, where: str) -> ScorerOptions:
        if self.word_check not in WORD_CHECKS:
            raise ConfigError(f"{where}.word_check: {self.word_check!r} is not one of {', '.join(WORD_CHECKS)}")
        if self.min_tokens < 1:
            raise ConfigError(f"{where}.min_tokens: must be >= 1, got {self.min_tokens}")
        if not 0.0 <= self.threshold < 1.0:
            raise ConfigError(f"{where}.threshold: must be in [0, 1), got {self.threshold}")
        return self

    def scorer(self) -> ReplyScorer:
        options = ScoreOptions(
            word_check=self.word_check,
            label_aliases={k: set(v) for k, v in self.label_aliases.items()},
            min_tokens=self.min_tokens,
            threshold=self.threshold,
        )
        return ReplyScorer(self.lid, self.words, options)


# -- recipe specs ------------------------------------------------------------------------------------------
@dataclass
class RewardSpec:
    name: str = field(
        metadata={
            "help": "A registered reward term (language, words, validity, degeneracy, or one added to "
            "mlft.training.rewards.REWARDS) or 'module:function'."
        }
    )
    weight: float = field(
        default=1.0, metadata={"help": "Weight in the summed reward (>= 0; penalty terms return negative values)."}
    )
    options: dict[str, Any] = field(default_factory=dict, metadata={"help": "Keyword options passed to the term."})


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


# -- what the reward paid: rollouts per step ------------------------------------------------------------------
def _prompt_text(prompt) -> str:
    """The prompt as text: a string, or the last user turn of a conversation."""
    if isinstance(prompt, str):
        return prompt
    turns = [m.get("content") or "" for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(turns[-1]) if turns else ""


def _cut(text: str, limit: int = ROLLOUT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def lcb_verdict(r: ReplyResult, language: str) -> str:
    """LCB's verdict on one reply (the official analysis): 'not counted' (no line of >= 5 tokens), 'line' (a
    counted line in another language), 'word' (an English word in a non-Latin reply), or 'pass'."""
    if not r.counted:
        return "not counted"
    if r.line_error:
        return "line"
    return "word" if r.word_error and language in NON_LATIN else "pass"


def weighted_total(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """trl's summed reward of one rollout: the weighted sum of the terms that apply (None when none applies)."""
    used = [(v, w) for v, w in zip(values, weights) if v is not None and not math.isnan(v)]
    return sum(v * w for v, w in used) if used else None


def pick_rollouts(rows: list[dict], keep: int = ROLLOUTS_KEPT) -> list[dict]:
    """The `keep` rollouts of highest total ("top") and the `keep` of lowest ("bottom"), disjoint (fewer than
    2 x keep rollouts: all of them, split); rollouts without a total (no term applies) are left out."""
    scored = sorted((r for r in rows if r["total"] is not None), key=lambda r: -r["total"])
    top = scored[:keep]
    bottom = scored[keep:][::-1][:keep]
    return [{**r, "rank": "top"} for r in top] + [{**r, "rank": "bottom"} for r in bottom]


class RolloutLog:
    """Collects each term's values of one generation batch (trl calls every reward function with the same
    `completions` list) and, once all terms have reported, appends the batch's `keep` highest- and lowest-total
    rollouts to run_dir/rollouts.jsonl: {step, rank, prompt_id, language, task, prompt, completion, terms:
    {name: value}, total, group: {n, mean, std} (the prompt's replies in the batch), verdict}.

    `step` is the optimizer step the rollouts train (trl's global step + 1). Written by the first process only
    (on several processes: its share of the batch). Resumable: writing step s first drops any rows of steps >= s
    left by a run that stopped after them (a resumed run generates them again), so every step is in the file once."""

    def __init__(self, run_dir: str | Path, specs: list[RewardSpec], scorer: ReplyScorer, keep: int = ROLLOUTS_KEPT):
        self.path = Path(run_dir) / ROLLOUTS
        self.names = [s.name for s in specs]
        self.weights = [float(s.weight) for s in specs]
        self.scorer, self.keep = scorer, keep
        self._batch: object | None = None
        self._values: dict[int, list] = {}

    def add(
        self,
        index: int,
        completions,
        prompts,
        texts: list[str],
        languages: list[str],
        columns: dict,
        values: Sequence[float | None],
    ) -> None:
        if self._batch is not completions:
            self._batch, self._values = completions, {}
        self._values[index] = list(values)
        if len(self._values) < len(self.names):
            return
        self._batch, values_by_term = None, self._values
        state = columns.get("trainer_state")
        if state is None or not getattr(state, "is_world_process_zero", True):
            return
        self.write(int(state.global_step) + 1, prompts, texts, languages, columns, values_by_term)

    def write(
        self, step: int, prompts, texts: list[str], languages: list[str], columns: dict, values_by_term: dict[int, list]
    ) -> list[dict]:
        n = len(texts)
        ids = columns.get("id") or [None] * n
        tasks = columns.get("task") or [None] * n
        prompt_texts = [_prompt_text(p) for p in (prompts or [None] * n)]
        rows = []
        for k in range(n):
            terms = [values_by_term[i][k] for i in range(len(self.names))]
            terms = [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in terms]
            rows.append(
                {
                    "step": step,
                    "prompt_id": None if ids[k] is None else str(ids[k]),
                    "language": languages[k],
                    "task": tasks[k],
                    "prompt": prompt_texts[k],
                    "completion": texts[k],
                    "terms": dict(zip(self.names, terms)),
                    "total": weighted_total(terms, self.weights),
                    "_k": k,
                }
            )
        groups: dict[tuple, list[float]] = {}
        for r in rows:
            if r["total"] is not None:
                groups.setdefault((r["prompt_id"], r["prompt"]), []).append(r["total"])
        picked = pick_rollouts(rows, self.keep)
        verdicts = self.scorer.verdicts([r["completion"] for r in picked], [r["language"] for r in picked])
        out = []
        for r, v in zip(picked, verdicts):
            g = groups[(r["prompt_id"], r["prompt"])]
            mean = sum(g) / len(g)
            std = math.sqrt(sum((x - mean) ** 2 for x in g) / (len(g) - 1)) if len(g) > 1 else 0.0
            r = {key: val for key, val in r.items() if key != "_k"}
            out.append(
                {
                    **r,
                    "prompt": _cut(r["prompt"]),
                    "completion": _cut(r["completion"]),
                    "group": {"n": len(g), "mean": mean, "std": std},
                    "verdict": lcb_verdict(v, r["language"]),
                }
            )
        previous = read_jsonl(self.path)
        if any(int(p.get("step", 0)) >= step for p in previous):
            write_jsonl(self.path, [p for p in previous if int(p.get("step", 0)) < step])
        append_jsonl(self.path, out)
        return out


def read_rollouts(run_dir: str | Path) -> list[dict]:
    """The rows of a run's rollouts.jsonl ([] when the run has none)."""
    return read_jsonl(Path(run_dir) / ROLLOUTS)


# -- the reward curve file ---------------------------------------------------------------------------------
def curve_row(step: int, logs: dict, weights: dict[str, float]) -> dict | None:
    """One row of rewards.jsonl from a trl log dict (None if it holds no reward)."""
    if "reward" not in logs:
        return None
    terms = {}
    for name, w in weights.items():
        mean, std = logs.get(f"rewards/{name}/mean"), logs.get(f"rewards/{name}/std")
        terms[name] = {"mean": mean, "std": std, "weight": w}
    keep = (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "kl",
        "loss",
        "entropy",
        "learning_rate",
        "completions/mean_length",
        "completions/clipped_ratio",
        "step_time",
    )
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

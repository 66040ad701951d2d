"""The built-in reward terms for online RL (`trainer: grpo`), computed by the benchmark's own scorer, and that scorer
(`ReplyScorer`, configured by a recipe's `scorer:` as `ScorerOptions`).

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
              (`mlft.benchmarks.lcb.reward_view.strict_lexical_validity`: the guard's measure of the visible text, and
              for a non-Latin target a word with a Latin letter is not a word of it); 0 for a reply without a word;
              None for a language without a lexicon
  degeneracy  -1.0 for a reply the reward's view of the guard flags degenerate
              (`mlft.benchmarks.lcb.reward_view.strict_degeneracy_reason`: the guard's rules on the text with invisible
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

The registry of terms (`REWARDS`), the recipe's reward specs and the trl reward functions are
`mlft.training.rewards`'; what the reward paid (rollouts, the reward curve file) is `mlft.training.rollouts`'.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlft.benchmarks.lcb.metrics import (
    WORD_CHECKS,
    ReplyResult,
    ScoreOptions,
    analyze_reply,
    line_verdict,
    normalize,
    word_verdict,
)
from mlft.benchmarks.lcb.reward_view import (
    bare_line,
    line_words,
    strict_degeneracy_reason,
    strict_lexical_validity,
    visible_text,
    word_tokens,
)
from mlft.benchmarks.lcb.scoring import load_resources
from mlft.constants import LID_THRESHOLD, MIN_TOKENS
from mlft.errors import ConfigError
from mlft.languages import NON_LATIN


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
CODE_SHARE = 0.5  # code (fenced blocks, inline spans) is left out of the judged text up to this share of the reply's
# tokens (code tokens with a letter against the prose's words, `word_tokens`: characters made a three-line block 57 %
# of a compact Korean reply)
_FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_CODE_CHAR = re.compile(r"[=(){}\[\];:<>#$\\/_*+|&%]")
_LATIN_RUN = re.compile("[A-Za-z]+")
_CODE_TOKEN = re.compile(r"\w*[^\W\d]\w*")  # an identifier or word of code (a token with a letter)
# a run of Latin words (`machine learning`, `mental-math`): one piece of a zh / ja / ko reply, however many words
_LATIN_WORDS = re.compile(r"[A-Za-z]+(?:[\s\-'’]+[A-Za-z]+)*")
COMPACT = ("zh", "ja", "ko")  # targets whose words are not whitespace pieces: English counted by script runs


def _uncut(text: str) -> str:
    """The reply as a whole: the official normalisation cuts at the first "\nQ:"; here the marker is a line break."""
    return text.replace(TURN, "\n")


def without_code(text: str, lang: str | None = None) -> str:
    """The reply without its code: fenced blocks whose every line holds a code character (`=`, brackets, `:`...,
    so prose in a fence stays) and inline spans that are one token or hold a code character (`reverse`,
    `x[::-1]`), replaced by a line break / a space -- as long as they make at most CODE_SHARE of the reply's
    tokens: the code's tokens with a letter (identifiers, keywords) against the words of the rest (`word_tokens`
    in `lang`: jieba / MeCab / whitespace words, so a compact script is not outweighed by a few lines of code; more:
    the reply is judged as it is, so a fence cannot hide the reply's language)."""
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
    code = sum(
        len(_CODE_TOKEN.findall(x.strip("`").partition("\n")[2] if x.lstrip().startswith("```") else x))
        for x in removed
    )
    prose = sum(len(word_tokens(line, lang or "en")) for line in out.split("\n"))
    return out if code <= CODE_SHARE * (code + prose) else text


def english_share(text: str, words: frozenset[str], lang: str | None = None) -> float:
    """Share of the reply's words (whitespace pieces with a letter, punctuation as spaces) holding a Latin run that
    is in the official English word list, compared lowercased (`Password를`, `Reset`: the official check is
    case-sensitive against a lowercase list, so capitalised English passes it). zh / ja / ko (`COMPACT`): counted
    by script runs: a run of Latin words (`machine learning`) is one piece, the rest of the text counts its words
    (`word_tokens`: jieba, MeCab, whitespace), so one English term in a Chinese reply is one piece among the
    reply's words, not 2 of its 9 whitespace pieces."""
    if lang in COMPACT:
        runs = _LATIN_WORDS.findall(text)
        rest = _LATIN_WORDS.sub(" ", text)
        english = sum(any(r.lower() in words for r in _LATIN_RUN.findall(run)) for run in runs)
        total = len(runs) + sum(len(word_tokens(line, lang)) for line in rest.split("\n"))
        return english / total if total else 0.0
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
    seen = without_code(text.split(TURN)[0] if after_q == "cut" else text, lang)
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
    return lang not in NON_LATIN or english_share(seen, scorer.resources[1], lang) <= ENGLISH_SHARE


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
        whole = without_code(_uncut(text), lang)
        # the share of the reply's words in judged lines; `cut`: judged words of the cut reply over the whole one's
        sizes = line_words(whole if after_q == "judge" else without_code(text.split(TURN)[0], lang), lang)
        total = sum(sizes) if after_q == "judge" else sum(line_words(whole, lang))
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

"""The language prior: steer Latin-script targets (de es fr id it pt tr vi) away from English words, only when
needed. A script gate cannot tell French from English; word frequencies can.

Every word-initial vocabulary token (a space, then letters: ` the`, ` les`, ` und`) gets a language profile
p(L | word) over the Latin-script LCB languages from the `wordfreq` lists (Zipf frequencies of the word in each
language, normalised; an independent source: not the fastText model that scores LCB). For a row with target L,
a word is *foreign* when p(L | word) < `foreign_below` while another language claims it with p >= 0.5, and
*target-like* when p(L | word) >= `target_above`. At a step whose top-1 token starts a foreign word and a
target-like word is within the top `top_k`, the row's foreign words are masked for that step; other steps, and
continuations of a word already begun, are left untouched. The table is built once per tokenizer and cached on
disk (MLFT cache folder).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register
from mlft.generation.interventions.vocab import vocab_index
from mlft.paths import cache_dir

LATIN = ("en", "de", "es", "fr", "id", "it", "pt", "tr", "vi")


@dataclass
class LanguagePriorOptions:
    top_k: int = field(default=10, metadata={"help": "how far down a target-language word may be"})
    foreign_below: float = field(default=0.05, metadata={"help": "p(target | word) below this: a foreign word"})
    target_above: float = field(default=0.3, metadata={"help": "p(target | word) from this: a target-language word"})
    languages: list[str] = field(
        default_factory=lambda: [x for x in LATIN if x != "en"],
        metadata={"help": "target languages the prior acts for (Latin-script LCB languages)"},
    )


def _table_path(tokenizer) -> object:
    texts = vocab_index(tokenizer).texts
    digest = hashlib.sha256("\x00".join(t or "" for t in texts).encode()).hexdigest()[:16]
    return cache_dir() / "vocab" / f"wordfreq-{digest}.json"


def language_table(tokenizer) -> dict[int, list[float]]:
    """{token id: [p(L | word) for L in LATIN]} for word-initial Latin word tokens (cached on disk)."""
    path = _table_path(tokenizer)
    if path.is_file():
        return {int(k): v for k, v in json.loads(path.read_text()).items()}
    try:
        import wordfreq
    except ImportError:
        raise ConfigError("the language_prior intervention needs `wordfreq` (pip install wordfreq)") from None
    table = {}
    for i, text in enumerate(vocab_index(tokenizer).texts):
        if not text or not text.startswith(" "):
            continue
        word = text.strip().lower()
        if len(word) < 2 or not word.isalpha() or any("\u0250" <= c for c in word):
            continue
        freqs = [wordfreq.word_frequency(word, lang) for lang in LATIN]
        total = sum(freqs)
        if total > 0:
            table[i] = [round(f / total, 4) for f in freqs]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table))
    tmp.replace(path)
    return table


class PriorProcessor:
    """Per step, device-side (no host read): the rows whose top-1 token starts a foreign word while a target word
    is near get their foreign words masked (`active` rows only; a batch without one gets no processor)."""

    reads_input_ids = False  # the logits alone (vLLM: no reply tensor built per step)

    def __init__(self, foreign, target, active, top_k: int):
        self.foreign, self.target, self.active, self.top_k = foreign, target, active, top_k
        self.fired = None

    def __call__(self, input_ids, scores):
        import torch

        if self.foreign.device != scores.device:  # built elsewhere: moved once
            self.foreign, self.target, self.active = (
                t.to(scores.device) for t in (self.foreign, self.target, self.active)
            )
        if self.fired is None:
            self.fired = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
        v = self.foreign.shape[-1]
        top = scores[:, :v].topk(self.top_k, dim=-1).indices
        top1_foreign = self.foreign.gather(-1, top[:, :1]).squeeze(-1)
        alternative = self.target.gather(-1, top).any(-1)
        apply = self.active & top1_foreign & alternative
        self.fired += apply
        masked = scores[:, :v].masked_fill(apply[:, None] & self.foreign, float("-inf"))
        return masked if v == scores.shape[-1] else torch.cat([masked, scores[:, v:]], dim=-1)

    def stats(self, row: int) -> dict:
        return {} if self.fired is None else {"language_prior_steps": int(self.fired[row])}


@register
class LanguagePrior(Intervention):
    name = "language_prior"
    Options = LanguagePriorOptions
    applies_via = frozenset({"processors"})

    def step_bytes_per_row(self, vocab: int) -> int:
        """fp32 scores, the prior's fp32 log-probabilities and a mask (tests/test_step_bytes.py measures 9)."""
        return 12 * vocab

    description = "for Latin-script targets, mask clearly foreign (e.g. English) words when a target word is near"

    def validate(self, where: str) -> None:
        o = self.options
        if o.top_k < 1 or not 0 < o.foreign_below < o.target_above <= 1:
            raise ConfigError(f"{where}: top_k >= 1 and 0 < foreign_below < target_above <= 1 required")
        for i, lang in enumerate(o.languages):
            if lang not in LATIN:
                raise ConfigError(
                    f"{where}.languages[{i}]: {lang!r} is not a Latin-script LCB language "
                    f"({', '.join(LATIN)}); the script gate covers the others"
                )

    def _masks(self, tokenizer, lang: str):
        import torch

        key = (id(tokenizer), lang, self.options.foreign_below, self.options.target_above)
        if key not in _MASKS:
            table = language_table(tokenizer)
            j = LATIN.index(lang)
            foreign = torch.zeros(len(tokenizer), dtype=torch.bool)
            target = torch.zeros(len(tokenizer), dtype=torch.bool)
            for i, probs in table.items():
                other = max(p for k, p in enumerate(probs) if k != j)
                foreign[i] = probs[j] < self.options.foreign_below and other >= 0.5
                target[i] = probs[j] >= self.options.target_above
            _MASKS[key] = (foreign, target)
        return _MASKS[key]

    def logits_processors(self, tokenizer, languages, model=None):
        import torch

        n = len(tokenizer)
        rows_f, rows_t, active = [], [], []
        for lang in languages:
            if lang in self.options.languages:
                f, t = self._masks(tokenizer, lang)
                rows_f.append(f)
                rows_t.append(t)
                active.append(True)
            else:
                rows_f.append(torch.zeros(n, dtype=torch.bool))
                rows_t.append(torch.zeros(n, dtype=torch.bool))
                active.append(False)
        if not any(active):  # no row the prior acts for: nothing to run per step (known on the host)
            return [NoPrior(len(languages))]
        device = None if model is None else next(model.parameters()).device  # built there once per batch
        return [
            PriorProcessor(
                *(
                    t.to(device) if device is not None else t
                    for t in (torch.stack(rows_f), torch.stack(rows_t), torch.tensor(active))
                ),
                self.options.top_k,
            )
        ]


class NoPrior:
    """A batch without a row the prior acts for: scores untouched, zero steps recorded."""

    reads_input_ids = False  # the logits alone (vLLM: no reply tensor built per step)

    def __init__(self, rows: int):
        self.rows = rows

    def __call__(self, input_ids, scores):
        return scores

    def stats(self, row: int) -> dict:
        return {"language_prior_steps": 0}


_MASKS: dict = {}

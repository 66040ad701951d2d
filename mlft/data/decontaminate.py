"""Hold out the LCB test prompts: drop training rows whose prompt matches one.

Two checks on the user turns of each row, after normalisation (NFKC, case-folded, punctuation dropped):
  exact   the whole turn equals an LCB prompt;
  ngram   the turn shares a run of `n` units with an LCB prompt (units: words; single characters for
          Chinese/Japanese ideographs and kana), which catches near-copies and prompts embedded in longer text.
Rows are inspected lazily (in each cell's seeded order, until the cell is full), so the report counts the
rows actually looked at; LCB prompts shorter than `n` units are caught by the exact check only.

Phrasing overlap: user turns containing one of LCB's eight cross-lingual request templates filled with an
English language name ("respond in Korean", and the bare "in Korean") are counted per source, language and
template (mlft.data.phrasings); `decontaminate.phrasings: drop` also drops them. mlft's cross-lingual
training rows never contain one, so their count is 0; natural data (UltraChat...) may.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mlft.benchmarks.lcb.data import load_prompts
from mlft.data.mix_config import DecontaminationConfig
from mlft.data.normalize import prompt_turns
from mlft.data.phrasings import LCB_TEMPLATES, PhrasingIndex
from mlft.data.text import units
from mlft.errors import ConfigError, MlftError

MAX_EXAMPLES = 20


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


class LcbIndex:
    """Normalised LCB prompts and their n-grams, each mapped to one LCB prompt id (for the report)."""

    def __init__(self, prompts, n: int, drop_phrasings: bool = False):
        self.n = n
        self.size = len(prompts)
        self.phrasings = PhrasingIndex()
        self.drop_phrasings = drop_phrasings
        self.exact: dict[str, str] = {}
        self.grams: dict[tuple[str, ...], str] = {}
        for p in prompts:
            toks = units(p.prompt)
            if toks:
                self.exact.setdefault(" ".join(toks), p.id)
            for g in ngrams(toks, n):
                self.grams.setdefault(g, p.id)

    def match(self, example: dict) -> tuple[str, str] | None:
        """("exact" | "ngram", LCB prompt id) for the first matching user turn, else None."""
        for turn in prompt_turns(example):
            toks = units(turn)
            hit = self.exact.get(" ".join(toks))
            if hit:
                return "exact", hit
            for g in ngrams(toks, self.n):
                if g in self.grams:
                    return "ngram", self.grams[g]
        return None

    def phrasing(self, example: dict) -> str | None:
        """The LCB request template in a user turn of `example`, else None."""
        return self.phrasings.match(example)


def build_index(cfg: DecontaminationConfig, where: str) -> LcbIndex | None:
    """The index of the configured LCB prompts, or None when decontamination is off."""
    if not cfg.enabled:
        return None
    try:
        prompts = load_prompts(cfg.tasks, path=cfg.lcb_path)
    except MlftError as exc:
        raise type(exc)(f"{where}.decontaminate.lcb_path: {exc}") from None
    if not prompts:
        raise ConfigError(f"{where}.decontaminate: no LCB prompts found for tasks {cfg.tasks}")
    return LcbIndex(prompts, cfg.ngram, drop_phrasings=cfg.phrasings == "drop")


@dataclass
class DecontaminationReport:
    """What was inspected and dropped, per source and language, with a few examples."""

    enabled: bool
    ngram: int
    lcb_prompts: int = 0
    phrasing_action: str = "report"
    inspected: Counter = field(default_factory=Counter)  # (source, language) -> rows looked at
    dropped: Counter = field(default_factory=Counter)  # (source, language, reason) -> rows dropped
    phrasing: Counter = field(default_factory=Counter)  # (source, language) -> rows with an LCB template
    templates: Counter = field(default_factory=Counter)  # LCB template -> rows
    phrasing_kept: int = 0  # rows with an LCB template that stayed in the mix
    examples: list[dict] = field(default_factory=list)
    phrasing_examples: list[dict] = field(default_factory=list)

    def record(
        self, source: str, language: str, row_id: str, hit: tuple[str, str] | None, template: str | None = None
    ) -> bool:
        """Count one inspected row; True when it is dropped."""
        self.inspected[(source, language)] += 1
        if template:
            self.phrasing[(source, language)] += 1
            self.templates[template] += 1
            if len(self.phrasing_examples) < MAX_EXAMPLES:
                self.phrasing_examples.append({"id": row_id, "template": template})
        if hit:
            self.dropped[(source, language, hit[0])] += 1
            if len(self.examples) < MAX_EXAMPLES:
                self.examples.append({"id": row_id, "reason": hit[0], "lcb_id": hit[1]})
            return True
        if template and self.phrasing_action == "drop":
            self.dropped[(source, language, "phrasing")] += 1
            return True
        self.phrasing_kept += bool(template)
        return False

    def total_dropped(self, reason: str | None = None) -> int:
        return sum(n for (_, _, r), n in self.dropped.items() if reason in (None, r))

    def to_dict(self) -> dict:
        by_source: dict = {}
        for (src, lang), n in sorted(self.inspected.items()):
            by_source.setdefault(src, {})[lang] = {
                "inspected": n,
                "exact": 0,
                "ngram": 0,
                "phrasing": self.phrasing[(src, lang)],
            }
        for (src, lang, reason), n in self.dropped.items():
            if reason != "phrasing":
                by_source[src][lang][reason] = n
        return {
            "enabled": self.enabled,
            "ngram": self.ngram,
            "lcb_prompts": self.lcb_prompts,
            "inspected": sum(self.inspected.values()),
            "dropped": {
                "exact": self.total_dropped("exact"),
                "ngram": self.total_dropped("ngram"),
                "phrasing": self.total_dropped("phrasing"),
                "total": self.total_dropped(),
            },
            "phrasing_overlap": {
                "action": self.phrasing_action,
                "rows": sum(self.phrasing.values()),
                "kept": self.phrasing_kept,
                "by_template": {t: self.templates[t] for t in LCB_TEMPLATES},
                "examples": self.phrasing_examples,
            },
            "by_source": by_source,
            "examples": self.examples,
        }

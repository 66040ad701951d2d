"""Small built-in interventions.

ban_tokens   never generate the tokens of the given strings (e.g. a word the model overuses): a logits
             processor, the simplest path through the interventions machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register


@dataclass
class BanTokensOptions:
    strings: list[str] = field(
        default_factory=list,
        metadata={
            "help": "strings whose tokens are banned (each string's first token, with and without a leading space)"
        },
    )
    token_ids: list[int] = field(default_factory=list, metadata={"help": "token ids banned as well"})


class BanTokensProcessor:
    """The banned ids as one tensor on the logits' device (moved once, not a list indexed per step)."""

    reads_input_ids = False  # the logits alone (vLLM: no reply tensor built per step)

    def __init__(self, ids, device=None):
        import torch

        self.ids = torch.as_tensor(list(ids), dtype=torch.long, device=device)

    def __call__(self, input_ids, scores):
        if not len(self.ids):
            return scores
        if self.ids.device != scores.device:
            self.ids = self.ids.to(scores.device)
        return scores.index_fill_(-1, self.ids, float("-inf"))


@register
class BanTokens(Intervention):
    name = "ban_tokens"
    Options = BanTokensOptions
    applies_via = frozenset({"processors"})
    description = "never generate the given tokens"

    def validate(self, where: str) -> None:
        if not self.options.strings and not self.options.token_ids:
            raise ConfigError(f"{where}: ban_tokens needs `strings` or `token_ids`")
        if any(not s for s in self.options.strings):
            raise ConfigError(f"{where}.strings: empty string")

    def token_ids(self, tokenizer) -> list[int]:
        ids = set(self.options.token_ids)
        for s in self.options.strings:
            for variant in (s, " " + s):
                enc = tokenizer(variant, add_special_tokens=False)["input_ids"]
                if enc:
                    ids.add(enc[0])
        specials = set(tokenizer.all_special_ids)
        return sorted(i for i in ids if i not in specials and 0 <= i < len(tokenizer))

    def logits_processors(self, tokenizer, languages, model=None):
        device = None if model is None else next(model.parameters()).device
        return [BanTokensProcessor(self.token_ids(tokenizer), device)]

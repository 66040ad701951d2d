"""Language-contrastive decoding (Sennrich et al., EACL 2024): at every step, score tokens by
    log p(y | x) - weight * log p(y | x')
where x' is the same prompt pointing to the wrong language: the target language's English name replaced by the
contrast language's (`Reply in Japanese.` -> `Reply in English.`), or, when the prompt does not name the target
language, the prompt with `Answer in <contrast language>.` appended. Tokens the wrong-language prompt makes
likely lose; it works for any script, Latin included.

As in contrastive decoding (Li et al., 2023), only tokens with p(y | x) >= `plausibility` x the row's top
probability stay eligible, so a token unlikely under both prompts is not promoted by the subtraction.

The contrast language is `language` (default English: the language confused replies fall into) or `source` (the
language a language-ID model finds in the prompt; English when that is the target). Rows whose target is the
contrast language are left alone. The contrastive rows are batched with the main rows: the hf backend runs one
forward pass of 2x the rows per step (need `rows`), and every contrastive row is fed the token its main row
drew, so it needs a backend that runs the model (hf); the openai backend refuses it up front.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register
from mlft.generation.interventions.steer import prompt_text
from mlft.langid import check_lid_spec, identifier
from mlft.languages import LANGUAGES

# names of languages outside LCB's 15 that a user prompt file may target
OTHER_NAMES = {
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "da": "Danish",
    "el": "Greek",
    "fa": "Persian",
    "fi": "Finnish",
    "he": "Hebrew",
    "hr": "Croatian",
    "hu": "Hungarian",
    "nl": "Dutch",
    "no": "Norwegian",
    "pl": "Polish",
    "ro": "Romanian",
    "sk": "Slovak",
    "sl": "Slovenian",
    "sr": "Serbian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "th": "Thai",
    "uk": "Ukrainian",
    "ur": "Urdu",
}


def name_of(code: str) -> str:
    return LANGUAGES.get(code) or OTHER_NAMES.get(code) or code


@dataclass
class ContrastiveOptions:
    weight: float = field(
        default=0.5,
        metadata={"help": "lambda: how much of the contrastive log-probability is subtracted (0 = no change)"},
    )
    language: str = field(
        default="en",
        metadata={
            "help": "the wrong language the contrastive prompt asks for: a language code, or `source` (the prompt's "
            "language by language-ID; English when that is the target)"
        },
    )
    template: str = field(
        default="{prompt}\n\nAnswer in {language}.",
        metadata={
            "help": "contrastive prompt when the prompt does not name the target language ({prompt}, {language})"
        },
    )
    plausibility: float = field(
        default=0.1,
        metadata={"help": "keep only tokens with p >= this x the top probability under the real prompt (0 = all)"},
    )
    lid: str = field(default="py3langid", metadata={"help": "language-ID model for language: source"})


class ContrastiveProcessor:
    """Combines the main rows' scores with the contrastive rows' (set in `other` by the backend before each
    step): scores - weight_i * log_softmax(other), among the plausible tokens, for rows with weight_i > 0."""

    def __init__(self, weights, plausibility: float):
        import torch

        self.weights, self.plausibility = weights, plausibility
        self.log_plausibility = float(torch.log(torch.tensor(plausibility))) if plausibility > 0 else None
        self.other = None

    def __call__(self, input_ids, scores):
        import torch

        if self.other is None:
            raise RuntimeError("contrastive: the backend did not hand over the contrastive rows' scores")
        if self.weights.device != scores.device:  # built elsewhere: moved once
            self.weights = self.weights.to(scores.device)
        w = self.weights
        other = torch.log_softmax(self.other.float(), dim=-1)
        main = scores.float()
        combined = main - w[:, None] * other[:, : main.shape[-1]]
        if self.log_plausibility is not None:
            logp = torch.log_softmax(main, dim=-1)
            keep = logp >= logp.max(-1, keepdim=True).values + self.log_plausibility
            combined = combined.masked_fill(~keep, float("-inf"))
        self.other = None
        return torch.where((w > 0)[:, None], combined.to(scores.dtype), scores)  # rows with weight 0: untouched


class PairedRows:
    """The logits processor the hf backend runs over 2n rows (n main, then their n contrastive rows): the
    contrastive rows' scores go to `contrastive.other`, the chain runs on the main rows only, and both halves
    get the chain's result, so each contrastive row is fed the token its main row drew."""

    def __init__(self, chain, n: int, contrastive: ContrastiveProcessor):
        self.chain, self.n, self.contrastive = chain, n, contrastive

    def __call__(self, input_ids, scores):
        import torch

        n = self.n
        self.contrastive.other = scores[n:]
        out = scores[:n]
        for proc in self.chain:
            out = proc(input_ids[:n], out)
        return torch.cat([out, out])


@register
class Contrastive(Intervention):
    name = "contrastive"
    Options = ContrastiveOptions
    applies_via = frozenset({"processors", "rows"})

    def step_bytes_per_row(self, vocab: int) -> int:
        """Per model row (main and contrast rows): log-softmaxes of both halves, the plausibility mask and the
        combined scores (tests/test_step_bytes.py measures 13)."""
        return 16 * vocab

    description = "language-contrastive decoding: subtract lambda x the log-probs under a wrong-language prompt"

    def validate(self, where: str) -> None:
        o = self.options
        if o.weight < 0 or not 0 <= o.plausibility < 1:
            raise ConfigError(f"{where}: weight >= 0 and plausibility in [0, 1) required")
        if "{prompt}" not in o.template:
            raise ConfigError(f"{where}.template: must contain {{prompt}}")
        if o.language != "source" and not re.fullmatch(r"[a-z]{2,3}", o.language):
            raise ConfigError(f"{where}.language: a language code or `source`, got {o.language!r}")
        if o.language == "source":
            check_lid_spec(o.lid, f"{where}.lid")

    def contrast_language(self, request) -> str | None:
        """The row's contrast language, or None when the row is left alone."""
        lang = self.options.language
        if lang == "source":
            text = " ".join(prompt_text(request).split())
            lang = identifier(self.options.lid).predict(text)[0] if text else "en"
            if lang == request.language:
                lang = "en"
        return None if request.language is None or lang == request.language else lang

    def contrast_text(self, text: str, target: str | None, contrast: str) -> str:
        if target is not None:
            name = name_of(target)
            pattern = re.compile(rf"\b{re.escape(name)}\b")
            if name != target and pattern.search(text):
                return pattern.sub(name_of(contrast), text)
        return self.options.template.format(prompt=text, language=name_of(contrast))

    def contrast_requests(self, requests):
        """(the contrastive request of every row (the row itself when left alone), per-row weights)."""
        import torch

        out, weights = [], []
        for r in requests:
            lang = self.contrast_language(r)
            if lang is None or self.options.weight == 0:
                out.append(r)
                weights.append(0.0)
                continue
            if r.messages is not None:
                msgs = [dict(m) for m in r.messages]
                last = max(i for i, m in enumerate(msgs) if m.get("role") == "user")
                msgs[last]["content"] = self.contrast_text(msgs[last]["content"], r.language, lang)
                out.append(dataclasses.replace(r, id=r.id + "#contrast", messages=msgs))
            else:
                out.append(
                    dataclasses.replace(r, id=r.id + "#contrast", text=self.contrast_text(r.text, r.language, lang))
                )
            weights.append(float(self.options.weight))
        return out, torch.tensor(weights)

    def logits_processors(self, tokenizer, languages, model=None):
        # the hf backend builds the processor itself (paired_processor): it needs the rows
        return []

    def paired_processor(self, weights):
        return ContrastiveProcessor(weights, self.options.plausibility)

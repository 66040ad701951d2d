"""The script gate: keep each reply in the scripts of its target language (a Language-Confusion-Gate-style
decoding intervention, without the trained gate network).

Per row, the target language (the request's `language`) gives the allowed scripts (mlft.generation.interventions
.vocab: e.g. ko -> Hangul, ja -> kana + han, ru -> Cyrillic, fr -> Latin); a token is disallowed if it holds a
letter of another script. Specials (EOS), digits, punctuation, whitespace and unplaceable byte fragments are
always allowed, so a row always keeps a continuation. Modes:
  hard    disallowed tokens are never generated;
  soft    their logits are lowered by `penalty`;
  needed  (LCG-style) a row is gated at a step only when its top-1 token is disallowed and an allowed token is
          within its top `top_k`; otherwise the model's distribution is left untouched.
`calibrate` (0..1) applies the LCG paper's embedding-norm calibration to the `needed` test: logits are divided
by ||e_i||^calibrate (times the mean norm), since output embeddings of high-resource languages have larger norms
and so win ties they should not. Latin targets are only kept free of other scripts: a script cannot tell English
from French (see `language_prior`). Each completion records how often the gate intervened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register
from mlft.generation.interventions.vocab import language_scripts, vocab_index


@dataclass
class ScriptGateOptions:
    mode: Literal["hard", "soft", "needed"] = field(
        default="needed",
        metadata={
            "help": "hard: never generate disallowed tokens; soft: lower their logits by `penalty`; needed: gate a "
            "step "
            "only when the top-1 token is disallowed and an allowed one is in the top `top_k`"
        },
    )
    top_k: int = field(default=5, metadata={"help": "needed: how far down an allowed token may be"})
    penalty: float = field(default=5.0, metadata={"help": "soft: logit penalty of disallowed tokens"})
    calibrate: float = field(
        default=0.0,
        metadata={"help": "needed: embedding-norm calibration strength (0 = off, 1 = logits divided by ||e_i||)"},
    )
    languages: list[str] | None = field(
        default=None,
        metadata={"help": "gate only rows with these target languages (default: every language with known scripts)"},
    )


class GateProcessor:
    """The gate over a batch's logits: its masks move to the logits' device and are padded to their width once
    (the first step); every step is device-side (no host read), the `needed` test included."""

    reads_input_ids = False  # the logits alone (vLLM: no reply tensor built per step)

    def __init__(self, masks, options: ScriptGateOptions, norm_scale=None):
        self.allowed = masks  # [rows, vocab] bool (all True for ungated rows)
        self.o = options
        self.norm_scale = norm_scale  # [vocab] or None
        self.fired = None
        self.steps = 0
        self._ready = None  # (device, width) the tables are prepared for

    def _prepare(self, scores) -> None:
        import torch

        key = (scores.device, scores.shape[-1])
        if self._ready == key:
            return
        allowed = self.allowed[:, : scores.shape[-1]].to(scores.device)
        if allowed.shape[-1] < scores.shape[-1]:  # the model's logits may be padded beyond the tokenizer
            pad = torch.ones(
                allowed.shape[0], scores.shape[-1] - allowed.shape[-1], dtype=torch.bool, device=scores.device
            )
            allowed = torch.cat([allowed, pad], dim=-1)
        self.allowed, self.disallowed = allowed, ~allowed
        self.gated_rows = self.disallowed.any(-1)  # hard / soft: a row is gated at every step or never
        if self.norm_scale is not None:
            self.norm_scale = self.norm_scale[: scores.shape[-1]].to(scores.device)
        self._ready = key

    def __call__(self, input_ids, scores):
        import torch

        self._prepare(scores)
        if self.fired is None:
            self.fired = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
        self.steps += 1
        if self.o.mode == "hard":
            return scores.masked_fill(self.disallowed, float("-inf"))
        if self.o.mode == "soft":
            return scores - self.o.penalty * self.disallowed.to(scores.dtype)
        allowed = self.allowed
        judged = scores if self.norm_scale is None else scores * self.norm_scale
        top = judged.topk(min(self.o.top_k, judged.shape[-1]), dim=-1).indices
        top1_bad = ~allowed.gather(-1, top[:, :1]).squeeze(-1)
        alternative = allowed.gather(-1, top).any(-1)
        apply = top1_bad & alternative
        self.fired += apply
        return scores.masked_fill(apply[:, None] & self.disallowed, float("-inf"))

    def stats(self, row: int) -> dict:
        if self.o.mode != "needed" or self.fired is None:
            return {}
        return {"script_gate_steps": int(self.fired[row])}


_MASKS: dict = {}


def _mask(tokenizer, scripts):
    import torch

    key = (id(tokenizer), scripts)
    if key not in _MASKS:
        _MASKS[key] = torch.tensor(vocab_index(tokenizer).allowed(scripts), dtype=torch.bool)
    return _MASKS[key]


@register
class ScriptGate(Intervention):
    name = "script_gate"
    Options = ScriptGateOptions
    applies_via = frozenset({"processors"})

    def step_bytes_per_row(self, vocab: int) -> int:
        """Its [rows, vocab] script mask (bool), the fp32 scores and the masked copy (needed mode: its candidates'
        fp32 probabilities too): tests/test_step_bytes.py measures 4 (hard), 8 (soft), 9 (needed)."""
        return (1 + 4 + 4 + (3 if self.options.mode == "needed" else 0)) * vocab

    description = "keep replies in the scripts of the target language (hard / soft / only when needed)"

    def validate(self, where: str) -> None:
        o = self.options
        if o.top_k < 1 or o.penalty <= 0 or not 0 <= o.calibrate <= 1:
            raise ConfigError(f"{where}: top_k >= 1, penalty > 0 and calibrate in [0, 1] required")
        for i, lang in enumerate(o.languages or []):
            if language_scripts(lang) is None:
                raise ConfigError(f"{where}.languages[{i}]: no known script for {lang!r}")

    def logits_processors(self, tokenizer, languages, model=None):
        import torch

        rows = []
        for lang in languages:
            scripts = language_scripts(lang)
            if scripts is None or (self.options.languages is not None and lang not in self.options.languages):
                rows.append(torch.ones(len(tokenizer), dtype=torch.bool))
            else:
                rows.append(_mask(tokenizer, scripts))
        scale = None
        if self.options.calibrate and model is not None:
            norms = model.get_output_embeddings().weight.detach().float().norm(dim=-1)
            scale = (norms.mean() / norms.clamp_min(1e-6)) ** self.options.calibrate
        device = None if model is None else next(model.parameters()).device  # built there once per batch
        masks = torch.stack(rows).to(device) if device is not None else torch.stack(rows)
        return [GateProcessor(masks, self.options, None if scale is None else scale.to(masks.device))]

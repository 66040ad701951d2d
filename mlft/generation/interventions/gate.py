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

`scope` limits the gate to a part of a reasoning model's reply: `answer` (outside the trace), `trace` (inside
`<think>…</think>`, or the `trace_markers` given) or `all` (the default: every step, as before). The markers are
followed on the device as tokens are generated (`TraceScope`: no host read per step): whether a row is inside a
trace is read from the prompt at the first step (a chat template that opens the trace for the model) and updated
when a step's last tokens spell a marker, as the tokenizer encodes it alone (one token in reasoning models'
vocabularies). The markers' own tokens are always allowed, so a gated trace can close. On vLLM a processor sees the
reply without its prompt: a trace opened by the prompt is not seen there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mlft.benchmarks.lcb.traces import parse_markers
from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register
from mlft.generation.interventions.vocab import language_scripts, vocab_index

SCOPES = ("all", "answer", "trace")


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
    scope: Literal["all", "answer", "trace"] = field(
        default="all",
        metadata={
            "help": "which part of a reasoning model's reply is gated: all (every step), answer (outside the trace) "
            "or trace (inside it), the trace being between `trace_markers`, followed as tokens are generated"
        },
    )
    trace_markers: str = field(
        default="<think>,</think>",
        metadata={"help": "'OPEN,CLOSE': the reasoning trace's markers that `scope` follows"},
    )


class TraceScope:
    """Which rows of a batch are inside a reasoning trace, followed on the device: at the first call from the whole
    sequence (the prompt: the last open marker after the last close one), then from each step's last tokens (a
    marker just generated). `active(input_ids)` -> [rows] bool: the rows the gate acts on at this step."""

    def __init__(self, open_ids: list[int], close_ids: list[int], scope: str):
        import torch

        self.open, self.close = torch.tensor(open_ids), torch.tensor(close_ids)
        self.scope = scope
        self.inside = None

    @staticmethod
    def _last(ids, marker):
        """[rows] the start of the last occurrence of `marker` in each row, -1 where none."""
        import torch

        if ids.shape[1] < marker.numel():
            return torch.full((ids.shape[0],), -1, dtype=torch.long, device=ids.device)
        hit = (ids.unfold(1, marker.numel(), 1) == marker).all(-1)
        pos = torch.arange(hit.shape[1], device=ids.device)
        return torch.where(hit, pos, -1).amax(-1)

    @staticmethod
    def _ends(ids, marker):
        """[rows] whether a row's last tokens are `marker`."""
        import torch

        if ids.shape[1] < marker.numel():
            return torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        return (ids[:, -marker.numel() :] == marker).all(-1)

    def active(self, input_ids):
        import torch

        if self.inside is None:
            self.open, self.close = self.open.to(input_ids.device), self.close.to(input_ids.device)
            self.inside = self._last(input_ids, self.open) > self._last(input_ids, self.close)
        else:
            opened, closed = self._ends(input_ids, self.open), self._ends(input_ids, self.close)
            self.inside = torch.where(opened, True, torch.where(closed, False, self.inside))
        return self.inside if self.scope == "trace" else ~self.inside


class GateProcessor:
    """The gate over a batch's logits: its masks move to the logits' device and are padded to their width once
    (the first step); every step is device-side (no host read), the `needed` test included."""

    reads_input_ids = False  # the logits alone (vLLM: no reply tensor built per step), unless scoped to a part

    def __init__(self, masks, options: ScriptGateOptions, norm_scale=None, scope: TraceScope | None = None):
        self.allowed = masks  # [rows, vocab] bool (all True for ungated rows)
        self.o = options
        self.scope = scope  # None: every step (scope all)
        if scope is not None:
            self.reads_input_ids = True
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
        disallowed = self.disallowed
        active = None if self.scope is None else self.scope.active(input_ids)
        if active is not None and self.o.mode != "needed":
            disallowed = disallowed & active[:, None]
        if self.o.mode == "hard":
            return scores.masked_fill(disallowed, float("-inf"))
        if self.o.mode == "soft":
            return scores - self.o.penalty * disallowed.to(scores.dtype)
        allowed = self.allowed
        judged = scores if self.norm_scale is None else scores * self.norm_scale
        top = judged.topk(min(self.o.top_k, judged.shape[-1]), dim=-1).indices
        top1_bad = ~allowed.gather(-1, top[:, :1]).squeeze(-1)
        alternative = allowed.gather(-1, top).any(-1)
        apply = top1_bad & alternative
        if active is not None:
            apply = apply & active
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
        if o.scope not in SCOPES:  # from_dict checks it for files; a hand-built option too
            raise ConfigError(f"{where}.scope: expected one of {', '.join(SCOPES)}, got {o.scope!r}")
        if o.scope != "all" and parse_markers(o.trace_markers, f"{where}.trace_markers") is None:
            raise ConfigError(f"{where}.trace_markers: scope {o.scope!r} needs the trace's markers, got none")

    def trace_scope(self, tokenizer) -> TraceScope | None:
        if self.options.scope == "all":
            return None
        markers = parse_markers(self.options.trace_markers, "script_gate.trace_markers")
        ids = [tokenizer.encode(m, add_special_tokens=False) for m in (markers.open, markers.close)]
        return TraceScope(ids[0], ids[1], self.options.scope)

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
        masks = torch.stack(rows)
        scope = self.trace_scope(tokenizer)
        if scope is not None:  # the markers' own tokens stay allowed: a gated trace can close
            masks[:, torch.cat([scope.open, scope.close])] = True
        device = None if model is None else next(model.parameters()).device  # built there once per batch
        masks = masks.to(device) if device is not None else masks
        return [GateProcessor(masks, self.options, None if scale is None else scale.to(masks.device), scope)]

"""The learned Language Confusion Gate at decoding (Zhang et al., ICLR 2026): a small MLP on the model's last hidden
state predicts which token families the next token may come from; families are masked only when needed.

The gate comes from `mlft build gate` (`learned_gate_training.py` beside this file: self-distilled on the frozen
model's own hidden states; families cj, hangul, devanagari, arabic, cyrillic, latin, other, fragment, symbol).
At each step, per row (as the paper's code, lcg_plugin/merge_apply_top_k_p.py):

  allowed   the families with gate probability >= `threshold`, and always the most likely one; with `keep_last`
            also the family of the reply's last letter token (so a reply may go on in the language it is in);
            before the reply's first letter token nothing is gated
  masked    the families not allowed, among cj / hangul / devanagari / arabic / cyrillic / latin (symbol,
            fragment and the low-resource catch-all `other` are never masked)
  needed    the step is gated only if a masked family is among the candidates (`needed: candidates`: the tokens
            the sampler may draw, i.e. the nucleus of the logits at `temperature` / `top_p` / `top_k`, which should
            be the decoding's own — the defaults are LCB's paper sampling, T=0.3, p=0.75; `top1`: the most likely
            token, for greedy decoding) and a family the gate allows is within the top `alternative_k` tokens or
            the candidates; then every token of the masked families gets -inf, otherwise the logits are untouched.

The gate reads no target language: it is the same for every row. A request's reply prefix (line resampling
continues a reply) counts as reply for `keep_last`. `threshold: 0` allows every family (the gate
never masks: the base model's completions exactly). Each completion records `learned_gate_steps` (steps gated)
and `learned_gate_top1` (of those, steps whose most likely token was masked, i.e. the greedy choice changed).
The hidden state comes from a forward pre-hook on the output embeddings, so only a backend running the model in
Python (hf) can apply it; vLLM and served models refuse it up front.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register
from mlft.generation.interventions.learned_gate_training import (
    FAMILIES,
    MASKABLE,
    candidate_families,
    load_gate,
    logsumexp,
)
from mlft.generation.sync_count import host_checks


@dataclass
class LearnedGateOptions:
    gate: str = field(default="", metadata={"help": "gate file trained by `mlft build gate` (.safetensors)"})
    threshold: float = field(
        default=0.5,
        metadata={
            "help": "a family is allowed when its gate probability is >= threshold (the most likely family always "
            "is); 0 = every family allowed (the gate never masks)"
        },
    )
    needed: Literal["candidates", "top1"] = field(
        default="candidates",
        metadata={
            "help": "when a step is gated: candidates = a masked family is among the tokens the sampler may draw "
            "(temperature / top_p / top_k; the paper); top1 = the most likely token is (greedy decoding)"
        },
    )
    temperature: float = field(
        default=0.3,
        metadata={
            "help": "candidates: the sampler's temperature (set it to the decoding's; default: LCB's paper sampling)"
        },
    )
    top_p: float = field(
        default=0.75,
        metadata={
            "help": "candidates: the sampler's nucleus cut (set it to the decoding's; default: LCB's paper sampling)"
        },
    )
    top_k: int | None = field(
        default=None, metadata={"help": "candidates: the sampler's top-k (null = off, as the default decoding)"}
    )
    alternative_k: int = field(
        default=5,
        metadata={
            "help": "gate only if an allowed family is within the top alternative_k tokens or the candidates (paper: 5)"
        },
    )
    keep_last: bool = field(
        default=True,
        metadata={
            "help": "also allow the family of the reply's last letter token, and gate nothing before the first (paper)"
        },
    )


class _Capture:
    """The last position's last hidden state of the latest forward pass ([rows, hidden]), and per row how many
    tokens at the end of the prompt already belong to the reply (a request's `prefix`, e.g. line resampling)."""

    value = None
    prefix_tokens: list[int] | None = None


def _on(t, device):
    """`t` on `device` (no call at all when it is there already: nothing per step)."""
    return t if t.device == device else t.to(device)


class LearnedGateProcessor:
    """Per step on the logits' device: the gate's prediction, the reply's last letter family (tracked
    incrementally, one new token a step), the `needed` test and the mask; no host read on an accelerator (on a
    CPU, where a read costs nothing, it skips the work no row needs)."""

    def __init__(self, gate, options: LearnedGateOptions, capture: _Capture):
        import torch

        self.gate, self.o, self.capture = gate, options, capture
        self.maskable = torch.tensor([f in MASKABLE for f in FAMILIES])
        self.no_letter = torch.tensor([f in ("symbol", "fragment") for f in FAMILIES])
        self.families = None  # [vocab] sized to the scores, on their device
        self.prompt_width = None
        self.fired = None
        self.top1 = None
        self._seen = None  # columns of input_ids scanned for letters so far
        self._row_start = None  # [rows] first column of each row's reply (its prefix included)
        self._has_letter = None  # [rows] bool: the reply holds a letter token
        self._last = None  # [rows] family of the reply's last letter token

    def _tables(self, width: int, device):
        import torch

        if self.families is None or len(self.families) != width or self.families.device != device:
            fam = self.gate.families[:width]
            if len(fam) < width:  # logits padded beyond the tokenizer: symbol (never masked)
                fam = torch.cat([fam, torch.full((width - len(fam),), FAMILIES.index("symbol"), dtype=fam.dtype)])
            self.families = fam.to(device)
            self.maskable, self.no_letter = self.maskable.to(device), self.no_letter.to(device)

    def _scan(self, input_ids) -> None:
        """Update, from the columns not seen yet, which rows' replies hold a letter and the last one's family."""
        import torch

        rows, width = input_ids.shape
        device = input_ids.device
        if self._seen is None:
            own = self.capture.prefix_tokens or [0] * rows  # reply tokens already in the prompt
            starts = [self.prompt_width - n for n in own[:rows]] + [self.prompt_width] * (rows - len(own))
            self._seen = min(starts)
            self._row_start = torch.tensor(starts, device=device)
            self._has_letter = torch.zeros(rows, dtype=torch.bool, device=device)
            self._last = torch.zeros(rows, dtype=torch.long, device=device)
        if self.families is None or self.families.device != device:
            self._tables(len(self.gate.families), device)
        if width <= self._seen:
            return
        cols = torch.arange(self._seen, width, device=device)
        gen = input_ids[:, self._seen :]
        fam = self.families[gen.clamp_max(len(self.families) - 1)]
        letter = ~self.no_letter[fam] & (cols[None, :] >= self._row_start[:, None])
        any_new = letter.any(-1)
        pos = letter.shape[1] - 1 - letter.flip(-1).to(torch.uint8).argmax(-1)  # the last letter token
        self._last = torch.where(any_new, fam.gather(1, pos[:, None]).squeeze(1), self._last)
        self._has_letter = self._has_letter | any_new
        self._seen = width

    def allowed(self, probs, input_ids):
        """([rows, families] allowed, [rows, families] the gate's own prediction, [rows] may gate)."""
        import torch

        pred = (probs >= self.o.threshold) | torch.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).bool()
        if not self.o.keep_last:
            return pred.clone(), pred, torch.ones(len(pred), dtype=torch.bool, device=pred.device)
        self._scan(input_ids)
        may_gate, last = (_on(t, pred.device) for t in (self._has_letter, self._last))
        last = torch.nn.functional.one_hot(last, pred.shape[-1]).bool()
        return pred | (last & may_gate[:, None]), pred, may_gate

    def __call__(self, input_ids, scores):
        import torch

        if self.capture.value is None:
            raise RuntimeError("learned_gate: no hidden state captured (the hooks context was not entered)")
        rows, width = scores.shape
        if self.prompt_width is None:  # the first call sees the prompt (and its padding) only
            self.prompt_width = input_ids.shape[1]
        self._tables(width, scores.device)
        if self.fired is None:
            self.fired = torch.zeros(rows, dtype=torch.long, device=scores.device)
            self.top1 = torch.zeros(rows, dtype=torch.long, device=scores.device)
        probs = _on(self.gate.predict(self.capture.value[:rows]), scores.device)  # the gate runs there
        allowed, pred, may_gate = self.allowed(probs, input_ids)
        to_mask = ~allowed & self.maskable
        open_rows = may_gate & to_mask.any(-1)
        host = host_checks(scores)  # a CPU: skip the work no row needs (before the reply's first letter...)
        if host and not bool(open_rows.any()):
            return scores
        logits = scores.detach().float()
        top = logits.argmax(-1)
        cand = torch.nn.functional.one_hot(self.families[top], len(FAMILIES)).bool()
        if self.o.needed == "candidates" and self.o.top_k != 1:  # the nucleus; when the top token alone
            scaled = logits / self.o.temperature
            first = (scaled.gather(1, top[:, None]) - logsumexp(scaled)).exp()
            wide = open_rows & (first.squeeze(1) < self.o.top_p)  # fills it, that is all
            if not host:
                nucleus = candidate_families(scaled, self.families, self.o.top_k or width, self.o.top_p)
                cand = torch.where(wide[:, None], nucleus, cand)
            elif bool(wide.any()):
                cand[wide] = candidate_families(scaled[wide], self.families, self.o.top_k or width, self.o.top_p)
        need = open_rows & (cand & to_mask).any(-1)
        if host and not bool(need.any()):
            return scores
        near = candidate_families(logits, self.families, self.o.alternative_k, 1.0) | cand  # an allowed family
        apply = need & (near & pred).any(-1)  # near the top
        self.fired += apply
        self.top1 += apply & to_mask.gather(1, self.families[top][:, None]).squeeze(1)
        vocab_mask = to_mask.index_select(1, self.families)  # [rows, vocab]: the masked families' tokens
        return scores.masked_fill(apply[:, None] & vocab_mask, float("-inf"))

    def stats(self, row: int) -> dict:
        if self.fired is None or row >= len(self.fired):
            return {"learned_gate_steps": 0, "learned_gate_top1": 0}
        return {"learned_gate_steps": int(self.fired[row]), "learned_gate_top1": int(self.top1[row])}


class _HiddenHook:
    def __init__(self, model, capture: _Capture):
        self.head, self.capture, self.handle = model.get_output_embeddings(), capture, None

    def __enter__(self):
        def hook(module, args):
            self.capture.value = args[0][:, -1, :].detach()

        self.handle = self.head.register_forward_pre_hook(hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()
        self.capture.value = None
        return False


@register
class LearnedGate(Intervention):
    name = "learned_gate"
    Options = LearnedGateOptions
    applies_via = frozenset({"processors", "hooks"})
    prefix_safe = True  # it only reads the last hidden state
    description = "learned Language Confusion Gate: mask wrong token families only when needed (Zhang et al. 2026)"

    def step_bytes_per_row(self, vocab: int) -> int:
        """The candidate families' one-hot (int64 over 9 families, then bool), the fp32 logits, scaled and exp,
        the nucleus's sort over the vocabulary (fp32 values, int64 index): tests/test_step_bytes.py measures 106."""
        return 112 * vocab

    def __init__(self, options):
        super().__init__(options)
        self._capture = _Capture()

    def validate(self, where: str) -> None:
        o = self.options
        if not o.gate:
            raise ConfigError(f"{where}.gate: give the gate file trained by `mlft build gate`")
        if not 0 <= o.threshold <= 1:
            raise ConfigError(f"{where}.threshold: must be in [0, 1], got {o.threshold}")
        if (o.top_k is not None and o.top_k < 1) or o.alternative_k < 1 or not 0 < o.top_p <= 1 or o.temperature <= 0:
            raise ConfigError(
                f"{where}: top_k >= 1 (or null), alternative_k >= 1, top_p in (0, 1] and temperature > 0 required"
            )
        load_gate(o.gate, where=f"{where}.gate")

    def logits_processors(self, tokenizer, languages, model=None):
        if model is None:
            raise ConfigError("learned_gate needs the model's hidden states: use a backend that runs the model (hf)")
        gate = load_gate(self.options.gate)
        hidden = getattr(model.config, "hidden_size", None)
        if hidden is not None and hidden != gate.hidden_size:
            raise ConfigError(
                f"learned_gate: {self.options.gate} was trained on a model with hidden size "
                f"{gate.hidden_size} ({gate.model}), not this one ({hidden})"
            )
        if len(gate.families) < len(tokenizer):
            raise ConfigError(
                f"learned_gate: {self.options.gate} covers {len(gate.families)} tokens, this "
                f"tokenizer has {len(tokenizer)} ({gate.model}): train a gate for this model"
            )
        self._tokenizer = tokenizer
        device = next(model.parameters()).device
        if next(gate.net.parameters()).device != device:  # the gate runs where the hidden states are
            gate.net.to(device)
        return [LearnedGateProcessor(gate, self.options, self._capture)]

    def hooks_batch(self, model, requests, attention_mask=None):
        tok = getattr(self, "_tokenizer", None)
        self._capture.prefix_tokens = [
            len(tok(r.prefix, add_special_tokens=False)["input_ids"]) if r.prefix and tok is not None else 0
            for r in requests
        ]
        return _HiddenHook(model, self._capture)

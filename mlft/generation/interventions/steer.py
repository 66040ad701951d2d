"""Activation steering with language vectors (ReCoVeR- and ITLC-style): at chosen decoder layers, add to the
residual stream the direction from the reply's *source* language to its *target* language.

Vectors come from `mlft build steer` (`steer_vectors.py` beside this file): per language, the mean residual
state of parallel text at each layer (method `mean`, as ReCoVeR: the language's mean minus the mean over languages) or
its LDA-discriminant part at one layer (method `lda`, as ITLC: class means in LDA space mapped back to the
residual space). They are saved as safetensors with a provenance JSON beside (sources, checksums, model).

Per row, the shift at layer l is  alpha * r_l * d_l / ||d_l||  with d_l = v_target - v_source and r_l the mean
residual norm of that layer on the build text: `alpha` is the shift's size as a fraction of a typical residual
state, comparable across layers and models. The source language is inferred per row by a language-ID model on
the prompt's last user message (for a cross-lingual LCB prompt, the language its instruction is written in),
not by the scorer's fastText model by default. Rows whose source is their target are left alone (`same_language:
skip`) or get + v_target (`add`, ITLC's monolingual mode). Rows whose target has no vector are left alone.

`position: generated` shifts only the states of generated tokens (the prompt's KV cache is the model's own, so
the backend's shared-prefix cache still applies); `all` also shifts the prompt's (non-padding) positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mlft.errors import ConfigError
from mlft.generation.interventions import Intervention, register
from mlft.generation.interventions.steer_vectors import decoder_layers, load_vectors
from mlft.langid import check_lid_spec, identifier
from mlft.provenance import read_sidecar


@dataclass
class SteerOptions:
    vectors: str = field(default="", metadata={"help": "language vectors built by `mlft build steer` (.safetensors)"})
    alpha: float = field(
        default=0.1,
        metadata={"help": "size of the shift as a fraction of the layer's mean residual norm (0 = no change)"},
    )
    layers: list[int] | None = field(
        default=None, metadata={"help": "decoder layers to steer (0-based; default: every layer the vector file holds)"}
    )
    position: Literal["generated", "all"] = field(
        default="generated",
        metadata={"help": "generated: shift the generated tokens' states only; all: the prompt's too"},
    )
    source: str = field(
        default="py3langid",
        metadata={
            "help": "how a row's source language is found: a language-ID model run on the prompt (py3langid, "
            "langdetect, or a fastText spec) or a fixed language code (e.g. en)"
        },
    )
    same_language: Literal["skip", "add"] = field(
        default="skip",
        metadata={
            "help": "rows whose source language is the target: skip (no shift) or add (+ v_target, ITLC monolingual)"
        },
    )
    languages: list[str] | None = field(
        default=None,
        metadata={"help": "steer only rows with these target languages (default: every language with a vector)"},
    )


def prompt_text(request) -> str:
    """The text a row's source language is judged on: the last user message (or the raw prompt)."""
    if request.messages is not None:
        users = [m.get("content", "") for m in request.messages if m.get("role") == "user"]
        return users[-1] if users else ""
    return request.text or ""


class SteerHooks:
    """Forward hooks adding per-row shifts to the outputs of some decoder layers. `shifts[layer]` is [rows, d];
    the first call of each layer is the prompt (prefill): shifted only with `prompt_mask` ([rows, width] of
    0/1 for the prompt positions, padding 0) when given. Later calls (one token each) are always shifted."""

    def __init__(self, layers, shifts: dict, prompt_mask=None):
        self.layers, self.shifts, self.prompt_mask = layers, shifts, prompt_mask
        self.calls = dict.fromkeys(shifts, 0)
        self.handles = []

    def _hook(self, index):
        def hook(module, args, output):
            hidden = output[0] if isinstance(output, tuple) else output
            shift = self.shifts[index]
            if shift.device != hidden.device or shift.dtype != hidden.dtype:  # once per batch, not per step
                shift = self.shifts[index] = shift.to(device=hidden.device, dtype=hidden.dtype)
            if hidden.shape[0] != shift.shape[0]:  # beams: rows repeated
                shift = shift.repeat_interleave(hidden.shape[0] // shift.shape[0], dim=0)
            first = self.calls[index] == 0
            self.calls[index] += 1
            if first:
                if self.prompt_mask is None:
                    return output
                mask = self.prompt_mask[:, -hidden.shape[1] :].to(hidden.dtype).to(hidden.device)
                if mask.shape[0] != hidden.shape[0]:
                    mask = mask.repeat_interleave(hidden.shape[0] // mask.shape[0], dim=0)
                hidden = hidden + shift[:, None, :] * mask[:, :, None]
            else:
                hidden = hidden + shift[:, None, :]
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

        return hook

    def __enter__(self):
        for i in self.shifts:
            self.handles.append(self.layers[i].register_forward_hook(self._hook(i)))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.handles = []
        return False


_SOURCES: dict = {}


@register
class Steer(Intervention):
    name = "steer"
    Options = SteerOptions
    applies_via = frozenset({"hooks"})
    description = "add the source->target language direction to the residual stream at chosen layers"

    def validate(self, where: str) -> None:
        o = self.options
        if not o.vectors:
            raise ConfigError(f"{where}.vectors: give the vector file built by `mlft build steer`")
        if o.alpha < 0:
            raise ConfigError(f"{where}.alpha: must be >= 0, got {o.alpha}")
        if o.layers is not None and (not o.layers or any(i < 0 for i in o.layers)):
            raise ConfigError(f"{where}.layers: a non-empty list of layer indices >= 0, got {o.layers}")
        vec = load_vectors(o.vectors, where=f"{where}.vectors")
        missing = sorted(set(o.layers or []) - set(vec.layers))
        if missing:
            raise ConfigError(f"{where}.layers: {missing} not in {o.vectors} (it holds layers {vec.layers})")
        if len(o.source) > 3 or o.source in ("ftz", "bin"):
            check_lid_spec(o.source, f"{where}.source")
        elif o.source not in vec.languages:
            raise ConfigError(f"{where}.source: no vector for {o.source!r} (the file has {', '.join(vec.languages)})")

    @property
    def prefix_safe(self) -> bool:
        """Whether the prompt's states are untouched (the backend may reuse a shared-prefix KV cache)."""
        return self.options.position == "generated"

    def vectors(self):
        return load_vectors(self.options.vectors)

    def source_language(self, request, known) -> str | None:
        o = self.options
        if len(o.source) <= 3 and o.source not in ("ftz", "bin"):
            return o.source
        if o.source not in _SOURCES:
            _SOURCES[o.source] = identifier(o.source)
        text = " ".join(prompt_text(request).split())
        label, _ = _SOURCES[o.source].predict(text) if text else (None, 0.0)
        return label

    def row_shifts(self, requests, hidden_size: int):
        """{layer: [rows, d] tensor} and, per row, the (source, target) pair steered (None when left alone)."""
        import torch

        o = self.options
        vec = self.vectors()
        layers = o.layers if o.layers is not None else vec.layers
        pairs = []
        for r in requests:
            tgt = r.language
            if tgt not in vec.languages or (o.languages is not None and tgt not in o.languages):
                pairs.append(None)
                continue
            src = self.source_language(r, vec.languages)
            if src == tgt and o.same_language == "skip":
                pairs.append(None)
            else:
                pairs.append((src if src in vec.languages and src != tgt else None, tgt))
        shifts = {}
        for layer in layers:
            j = vec.layers.index(layer)
            rows = []
            for pair in pairs:
                if pair is None:
                    rows.append(torch.zeros(hidden_size))
                    continue
                src, tgt = pair
                d = vec.vectors[vec.languages.index(tgt), j].clone()
                if src is not None:
                    d = d - vec.vectors[vec.languages.index(src), j]
                n = d.norm()
                rows.append(d * (o.alpha * float(vec.norms[j]) / float(n)) if n > 0 else torch.zeros(hidden_size))
            shifts[layer] = torch.stack(rows)
        return shifts, pairs

    def hooks_batch(self, model, requests, attention_mask=None):
        layers = decoder_layers(model)
        vec = self.vectors()
        if vec.hidden_size != model.config.hidden_size or max(vec.layers) >= len(layers):
            raise ConfigError(
                f"steer: {self.options.vectors} was built for a model with hidden size "
                f"{vec.hidden_size} and >= {max(vec.layers) + 1} layers ({vec.model}), not this one "
                f"({model.config.hidden_size}, {len(layers)} layers)"
            )
        shifts, _ = self.row_shifts(requests, vec.hidden_size)
        param = next(model.parameters())  # on the model's device and dtype once per batch
        shifts = {k: v.to(device=param.device, dtype=param.dtype) for k, v in shifts.items()}
        mask = attention_mask if self.options.position == "all" else None
        return SteerHooks(layers, shifts, mask)


def read_provenance(path: str | Path) -> dict:
    return read_sidecar(path)

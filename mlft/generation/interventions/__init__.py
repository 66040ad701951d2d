"""Inference-time interventions: named, validated, recorded changes to how a model generates.

A suite (or a suite variant, or a training-callback pass) lists them:

    interventions:
      - {name: ban_tokens, strings: ["Sure"]}
      - {name: quantize, scheme: w8}

Each is a subclass of `Intervention` registered by name, with an `Options` dataclass (validated before any
model loads) and any of four hooks — `applies_via` says which, so a backend that cannot apply one refuses it up
front (`backends.check_interventions`):

  "processors"  logits_processors(tokenizer, languages, model) -> [callable(input_ids, scores) -> scores]
                built per batch; `languages[i]` is row i's target language (e.g. a script gate); a processor
                may have `stats(row) -> dict` (e.g. how often it intervened), kept in the completion record
  "hooks"       hooks(model, languages) -> context manager entered around generation (forward hooks); a hook
                needing more than the target languages overrides hooks_batch(model, requests, attention_mask)
                instead (e.g. `steer` infers each row's source language from its prompt); `prefix_safe` says
                whether the prompt's states stay untouched (the hf backend then keeps its shared-prefix cache)
  "rows"        extra model rows batched with the main rows: contrast_requests(requests) -> (requests, weights)
                and paired_processor(weights) (e.g. `contrastive`): only a backend running the model itself
  "transform"   transform(model, tokenizer, model_ref) -> (model, tokenizer): a changed model (quantization);
                with `from_saved_weights`, model may be None and the weights are read from model_ref
  "strategy"    wrap(generate, backend) -> generate: loop-level control (e.g. line-by-line resampling); the
                only kind a remote (openai) backend can apply

`describe()` (name + options) goes into every completion record and into the resume guard, so a run never
resumes from completions made under a different intervention.

To add one: a module here with `@register class MyIntervention(Intervention)` and one line in `REGISTRY`
below ("my_name": "mlft.generation.interventions.mine:MyIntervention"; the module is imported on first use).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mlft.config import from_dict
from mlft.errors import ConfigError
from mlft.registry import Registry

HOOK_KINDS = ("processors", "hooks", "transform", "strategy", "rows")


@dataclass
class NoOptions:
    pass


class Intervention:
    name: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    applies_via: ClassVar[frozenset[str]] = frozenset()
    description: ClassVar[str] = ""
    from_saved_weights: ClassVar[bool] = False  # a transform that loads the weights from model_ref itself

    def __init__(self, options):
        self.options = options

    def validate(self, where: str) -> None:
        """Semantic checks of the options (no model loads); raise ConfigError naming `where`."""

    def describe(self) -> dict:
        return {"name": self.name, **dataclasses.asdict(self.options)}

    # -- hooks (override the ones listed in `applies_via`) ------------------------------------------------
    def logits_processors(self, tokenizer, languages: Sequence[str | None], model=None) -> list[Callable]:
        return []

    def hooks(self, model, languages: Sequence[str | None]):
        return contextlib.nullcontext()

    def hooks_batch(self, model, requests: Sequence, attention_mask=None):
        """The hooks context for one batch (default: `hooks` with the rows' target languages)."""
        return self.hooks(model, [r.language for r in requests])

    prefix_safe: ClassVar[bool] = False  # a "hooks" intervention that leaves the prompt's states alone

    def step_bytes_per_row(self, vocab: int) -> int:
        """Vocabulary-sized bytes one decode step of this intervention holds per row (the batch budget counts
        them): by default a logits processor's fp32 copy of the scores and one boolean mask."""
        return 5 * vocab if "processors" in self.applies_via else 0

    def transform(self, model, tokenizer, model_ref: str | None):
        return model, tokenizer

    def wrap(self, generate: Callable[..., Iterator], backend) -> Callable[..., Iterator]:
        return generate

    def __repr__(self):
        return f"{type(self).__name__}({self.describe()})"


# name -> "module:Class" of the built-ins (imported on first use; each module's `@register` resolves its entry)
REGISTRY = Registry(
    "intervention",
    {
        "ban_tokens": "mlft.generation.interventions.builtin:BanTokens",
        "script_gate": "mlft.generation.interventions.gate:ScriptGate",
        "language_prior": "mlft.generation.interventions.prior:LanguagePrior",
        "quantize": "mlft.generation.interventions.quantize:Quantize",
        "line_resample": "mlft.generation.interventions.resample:LineResample",
        "steer": "mlft.generation.interventions.steer:Steer",
        "contrastive": "mlft.generation.interventions.contrastive:Contrastive",
        "learned_gate": "mlft.generation.interventions.learned_gate:LearnedGate",
    },
)


def register(cls: type[Intervention]) -> type[Intervention]:
    """Class decorator: add an Intervention subclass under its `name` (lazily: `REGISTRY.add(name, "mod:Cls")`)."""
    if not cls.name or (cls.name in REGISTRY and REGISTRY.spec(cls.name) != f"{cls.__module__}:{cls.__qualname__}"):
        raise ValueError(f"intervention {cls.__name__}: name {cls.name!r} is empty or taken")
    unknown = set(cls.applies_via) - set(HOOK_KINDS)
    if unknown:
        raise ValueError(f"intervention {cls.name}: unknown hook kinds {unknown}")
    return REGISTRY.register(cls)


def build_interventions(specs: Sequence[dict | Any] | None, where: str) -> list[Intervention]:
    """Validate `[{name: ..., <options>}]` into Intervention objects (ConfigError naming `where[i]`)."""
    out = []
    for i, spec in enumerate(specs or []):
        w = f"{where}[{i}]"
        if isinstance(spec, Intervention):
            out.append(spec)
            continue
        if not isinstance(spec, dict) or "name" not in spec:
            raise ConfigError(
                f"{w}: expected a mapping with a `name` (one of {', '.join(sorted(REGISTRY))}), got {spec!r}"
            )
        cls = REGISTRY.load(spec["name"], f"{w}.name")
        opts = from_dict(cls.Options, {k: v for k, v in spec.items() if k != "name"}, w)
        iv = cls(opts)
        iv.validate(w)
        out.append(iv)
    names = [iv.name for iv in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: each intervention may appear once, got {names}")
    return out


def describe_all(interventions: Sequence[Intervention]) -> list[dict]:
    return [iv.describe() for iv in interventions]


def split(interventions: Sequence[Intervention]) -> tuple[list[Intervention], list[Intervention]]:
    """(model transforms, everything else): transforms build a separate model, the rest act per generation."""
    transforms = [iv for iv in interventions if "transform" in iv.applies_via]
    return transforms, [iv for iv in interventions if "transform" not in iv.applies_via]

"""What is evaluated: one `Target` -- the backend, its typed options, the model reference and, in training, the
live model (+ tokenizer) -- built once at each edge (the command line, the training callback, the demo) and passed
down, instead of five loose values through every signature.

    target = Target("hf", {"dtype": "float32"}, model_ref="smollm2-135m-instruct")   # the backend loads the weights
    target = Target(model_ref="runs/x/checkpoints/checkpoint-5", model=model, tokenizer=tok)  # training's live model
    view = target.for_pass(interventions)      # where one pass's model comes from (None: nothing it can run on)
    with view.open() as models:                 # the backends it makes, the weights, the reference model
        backend = models.backend(batch_size=16)
    target.describe()                           # what a run's results.json records; Target.from_description reloads

The decisions about where a model comes from live here and nowhere else:
- `for_pass`: a pass whose interventions read the saved weights themselves (quantize) runs on a backend that can
  apply them, from `model_ref`, never the live model; a live model generates in place when the backend takes one;
  otherwise the backend loads `model_ref` (a checkpoint, a hub reference) or names a served model.
- `Models.backend`: within a run, a model transform (quantize) either reads the saved weights itself (no full model
  is loaded first) or transforms the already loaded model; a backend that holds weights reuses the loaded model.
- `Models.fluency_model`: the fluency proxy's reference model (the unmodified evaluated model, or a fixed one).

Generation is a floor below evals/ and training/: a Target knows nothing of suites or passes; a pass is given as its
intervention specs ({name, <options>}).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlft.config import from_dict
from mlft.errors import ConfigError
from mlft.generation.backends import (
    DEFAULT_BACKEND,
    able,
    backend_class,
    capabilities,
    check_backend,
    create_backend,
    options_from_args,
)
from mlft.generation.interventions import REGISTRY as INTERVENTIONS
from mlft.generation.interventions import split
from mlft.generation.models import DEFAULT_MODEL, eval_mode, load, resolve

SECRET = "<set>"  # what describe() writes for a key-like option that is set (never the key itself)
UNNAMED = "model"  # describe()'s name of a target that names no model (the backend's default one is loaded)


@dataclass(frozen=True)
class Target:
    """What is evaluated. `options` is the backend's own Options dataclass (a mapping is validated into it here,
    once: unknown keys and wrong types are a ConfigError); `model`/`tokenizer` are a live in-process model (the
    training callback's), never compared or described: a Target equals another when it evaluates the same named
    model the same way."""

    backend: str = DEFAULT_BACKEND
    options: Any = None
    model_ref: str | None = None
    model: Any = field(default=None, repr=False, compare=False)
    tokenizer: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        check_backend(self.backend)
        cls = backend_class(self.backend).Options
        if not isinstance(self.options, cls):
            opts = from_dict(cls, dict(self.options or {}), f"{self.backend} backend options")
            object.__setattr__(self, "options", opts)

    # -- built at the edges ---------------------------------------------------------------------------------
    @classmethod
    def from_args(cls, args) -> Target:
        """The command line's target (`--backend`, `--model`, the generated backend flags): a backend that loads
        weights gets the default model when `--model` is not given; a served backend names none."""
        check_backend(args.backend, "--backend")
        loads = capabilities(args.backend).weights or capabilities(args.backend).saved_weights
        model_ref = args.model or (DEFAULT_MODEL if loads else None)
        return cls(args.backend, options_from_args(args.backend, args), model_ref=model_ref)

    @classmethod
    def from_description(cls, description: dict) -> Target:
        """The target a run's files describe (`describe()`): secrets written as "<set>" are left to their
        defaults (e.g. the environment variable that holds a key)."""
        opts = {k: v for k, v in (description.get("backend_options") or {}).items() if v != SECRET}
        name = description.get("model")
        return cls(description["backend"], opts, model_ref=None if name == UNNAMED else name)

    def with_options(self, changes: dict) -> Target:
        """The same target with some options changed (validated like the rest: typed, never a loose mapping)."""
        if not changes:
            return self
        now = {f.name: getattr(self.options, f.name) for f in dataclasses.fields(self.options)}
        return dataclasses.replace(self, options={**now, **changes})

    def with_model(self, model_ref: str | None, model=None, tokenizer=None) -> Target:
        """The same backend and options on another model (a training step's checkpoint, its live model)."""
        return dataclasses.replace(self, model_ref=model_ref, model=model, tokenizer=tokenizer)

    # -- what it is -----------------------------------------------------------------------------------------
    @property
    def capabilities(self):
        """What the backend can do (mlft.generation.backends.Capabilities)."""
        return capabilities(self.backend)

    @property
    def live(self) -> bool:
        """It generates with the live in-process model (there is one and the backend takes one)."""
        return self.model is not None and self.capabilities.live_model

    @property
    def loads_model(self) -> bool:
        """The backend loads a model reference itself; a served backend names a served model instead."""
        return self.capabilities.weights or self.capabilities.saved_weights

    @property
    def name(self) -> str:
        """The evaluated model's name: its reference, else the live model's own path."""
        path = getattr(getattr(self.model, "config", None), "_name_or_path", None)
        return str(self.model_ref or path or UNNAMED)

    def describe(self) -> dict:
        """What a run's results.json records of its target (a key-like option set: "<set>")."""
        opts = dataclasses.asdict(self.options)
        safe = {k: (SECRET if "key" in k and k != "api_key_env" and v else v) for k, v in opts.items()}
        return {"backend": self.backend, "backend_options": safe, "model": self.name}

    def check(self) -> None:
        """Every check that needs no weights: a model reference the backend would load is one mlft knows."""
        if self.loads_model and self.model is None:
            resolve(self.model_ref)

    # -- where a pass's model comes from (the one place that decides) --------------------------------------
    def for_pass(self, interventions: Sequence[dict] = ()) -> Target | None:
        """The target one evaluation pass runs on, given the pass's intervention specs; None when it has
        nothing to run on (a pass that needs saved weights, or a backend without a live model, and no
        `model_ref`).

        - interventions that read the saved weights themselves (quantize): `model_ref`'s weights, on this
          backend when it can apply their hooks, else on the first registered backend that can and loads saved
          weights (with its default options); never the live model
        - a live model and a backend that takes one: the live model, in place
        - otherwise: the backend loads `model_ref` (or names the served model)."""
        specs = list(interventions)
        if reads_saved_weights(specs):
            if self.model_ref is None:
                return None
            need = set().union(*(INTERVENTIONS.load(s["name"]).applies_via for s in specs))
            if need <= self.capabilities.hooks:
                return Target(self.backend, self.options, model_ref=self.model_ref)
            for b in able(lambda c: need <= c.hooks and (c.weights or c.saved_weights)):
                return Target(b, model_ref=self.model_ref)  # its default options
            raise ConfigError(f"no registered backend can apply the intervention hooks {sorted(need)}")
        if self.live:
            return self
        if self.model_ref is None:
            return None
        return self.with_model(self.model_ref) if self.model is not None else self

    def models(self) -> Models:
        """The backends, weights and reference model of one run, built on first use (the caller closes them;
        `open` does)."""
        return Models(self)

    @contextlib.contextmanager
    def open(self) -> Iterator[Models]:
        """The backends, weights and reference model of one run (built on first use, closed at the end); a live
        model generates in eval mode (KV cache on, train mode restored after)."""
        models = self.models()
        try:
            if self.live:
                with eval_mode(self.model):
                    yield models
            else:
                yield models
        finally:
            models.close()


def reads_saved_weights(interventions: Sequence[dict]) -> bool:
    """Whether an intervention (spec {name, <options>}) reads the saved weights itself (e.g. quantize)."""
    return any(INTERVENTIONS.load(s["name"]).from_saved_weights for s in interventions)


class Models:
    """The backends of one run over a Target: one per (batch size, token stats, model transforms), built on first
    use; the weights are loaded once and shared between them where the backend holds weights."""

    def __init__(self, target: Target):
        self.target = target
        self._backends: dict = {}

    def backend(self, batch_size: int = 16, token_stats: bool = False, interventions: Sequence = ()):
        """The generation backend; when `interventions` hold model transforms (e.g. quantize), a backend over the
        transformed model (built once per distinct set of transforms)."""
        t = self.target
        transforms, _ = split(interventions)
        base_key = (batch_size, token_stats, ())
        if transforms:
            key = (batch_size, token_stats, tuple(repr(iv.describe()) for iv in transforms))
            if key not in self._backends:
                if (
                    t.model is None
                    and base_key not in self._backends
                    and all(iv.from_saved_weights for iv in transforms)
                    and t.model_ref is not None
                ):
                    # e.g. quantize: loads the saved weights itself; no need to load the full model first
                    model, tok = None, None
                    for iv in transforms:
                        model, tok = iv.transform(model, tok, t.model_ref)
                    self._backends[key] = self._create(model, tok, batch_size, token_stats)
                else:
                    self._backends[key] = self.backend(batch_size, token_stats).transformed(transforms)
            return self._backends[key]
        if base_key not in self._backends:
            model, tokenizer = t.model, t.tokenizer
            loaded = self._loaded()
            if model is None and loaded is not None and t.capabilities.weights:  # reuse a loaded model
                model, tokenizer = loaded.model, loaded.tokenizer
            self._backends[base_key] = self._create(model, tokenizer, batch_size, token_stats)
        return self._backends[base_key]

    def _create(self, model, tokenizer, batch_size: int, token_stats: bool):
        t = self.target
        return create_backend(
            t.backend,
            t.options,
            model_ref=t.model_ref,
            model=model,
            tokenizer=tokenizer,
            batch_size=batch_size,
            token_stats=token_stats,
        )

    def _loaded(self):
        """A backend over the untransformed model, when one is built."""
        return next((b for k, b in self._backends.items() if not k[2]), None)

    def local_model(self):
        """(model, tokenizer) of a local model (a backend that holds weights): the live one, or loaded once."""
        if not self.target.capabilities.weights:
            raise ConfigError(f"this evaluation needs the model's weights; the {self.target.backend} backend has none")
        return self.backend().model, self.backend().tokenizer

    def fluency_model(self, spec: str | None):
        """The reference model of the fluency proxy: None when off, the evaluated model without interventions
        ("unmodified", a backend that holds weights only), or a fixed model reference (loaded once per process)."""
        if spec is None:
            return None, None
        if spec == "unmodified":
            if not self.target.capabilities.weights:
                return None, None
            base = self._loaded()
            if base is None:
                base = self.backend()
            return base.model, base.tokenizer
        return reference_model(spec, self.target)

    def close(self) -> None:
        for b in self._backends.values():
            b.close()
        self._backends.clear()


_REFERENCE: dict = {}


def reference_model(ref: str, target: Target):
    """A fixed reference model (e.g. a training run's base model), cached: one at a time per process; placed like
    the evaluated backend (device, dtype) when its options place it."""
    opts = target.options if target.capabilities.placement_options else None
    key = (ref, getattr(opts, "dtype", "auto"), getattr(opts, "device", None))
    if key not in _REFERENCE:
        _REFERENCE.clear()
        _REFERENCE[key] = load(ref, dtype=key[1], device=key[2])
    return _REFERENCE[key]

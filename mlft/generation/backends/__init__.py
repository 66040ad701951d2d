"""Generation backends: one protocol, a registry by name, and an options dataclass per backend.

    cls = backend_class("openai")                        # the class; cls.Options is its options dataclass
    backend = create_backend("hf", {"dtype": "float32"}, model_ref="smollm2-135m-instruct", batch_size=16)
    for result in backend.generate(requests, decoding, interventions):   # yielded as each request finishes
        ...

A backend receives `Request`s and yields `Result`s (mlft.generation.requests: they import nothing else of
mlft, so what builds requests needs no backend). Backends raise BackendError only for problems the user must fix
before anything can work (bad key, unreachable or vanished server); everything else ends as a per-request error.

The CLI flags of `mlft generate` / `mlft eval` are generated from each backend's `Options` dataclass
(`add_backend_flags`), so a new backend option is one field with a `help` text.

To add a backend: a module with a class that has `name`, `Options` (a dataclass), `capabilities` (a
`Capabilities`: what it can do -- the rest of mlft asks these, never a backend's name), a classmethod
`create(options, *, model_ref, model, tokenizer, batch_size, token_stats)`, and the `Backend` methods below;
then one line in `REGISTRY` (or, from another package: `REGISTRY.add("name", "package.module:Class")`).
Optional: `refusal` (a hint when an intervention needs a hook it lacks), `unsupported(iv)`, and
`lm_eval_model(options, *, model_ref, api, batch_size, tokenizer)` (a native lm-eval model; without it an
`lm_eval` suite runs its generation tasks through the backend's `generate`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mlft.config import add_dataclass_flags, flag_name, flag_values, from_dict
from mlft.errors import ConfigError, ModelError
from mlft.generation.requests import Request, Result
from mlft.registry import Registry

HOOKS = ("processors", "hooks", "transform", "strategy", "rows")  # intervention hooks (Intervention.applies_via)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do. Recipes, passes, the training callback, evaluate-run, the runner and the eval kinds
    ask these (`capabilities(name)`), never a backend's name; eval kinds name the flags they need (`CAPABILITIES`)."""

    weights: bool = field(
        default=False,
        metadata={
            "help": "holds a local torch model and its tokenizer as `.model` / `.tokenizer` (weight-level evals, "
            "lm-eval's HFLM, the fluency reference)"
        },
    )
    chat: bool = field(default=False, metadata={"help": "takes chat messages"})
    logprobs: bool = field(default=False, metadata={"help": "can return per-token log-probabilities"})
    live_model: bool = field(
        default=False,
        metadata={
            "help": "generates with a live in-process model object (`create(model=..., tokenizer=...)`): the training "
            "callback evaluates the model it trains in place"
        },
    )
    data_parallel: bool = field(
        default=False,
        metadata={
            "help": "the ranks of a training job can share its live-model generation (mlft.generation.data_parallel)"
        },
    )
    saved_weights: bool = field(
        default=False,
        metadata={
            "help": "loads a model reference or a saved checkpoint itself (a served backend names a served model "
            "instead): sharded weights are evaluated from the saved checkpoint in a separate process"
        },
    )
    placement_options: bool = field(
        default=False,
        metadata={
            "help": "its Options place it (device, dtype): a separate-process evaluation gets the training rank's "
            "device and dtype"
        },
    )
    own_devices: bool = field(
        default=False,
        metadata={
            "help": "places itself on devices through the environment (vLLM: CUDA_VISIBLE_DEVICES and a GPU memory "
            "share capped to what the training process leaves free)"
        },
    )
    hooks: frozenset = field(
        default=frozenset(), metadata={"help": f"the intervention hooks it can apply (any of {', '.join(HOOKS)})"}
    )

    def __post_init__(self):
        object.__setattr__(self, "hooks", frozenset(self.hooks))
        unknown = self.hooks - set(HOOKS)
        if unknown:
            raise TypeError(f"Capabilities: unknown hooks {sorted(unknown)}; valid: {', '.join(HOOKS)}")

    def flags(self) -> frozenset[str]:
        """The names of the flags that are set."""
        return frozenset(f for f in CAPABILITIES if getattr(self, f))


# The one list of capability names (an eval kind's `needs` names some of them)
CAPABILITIES = tuple(f.name for f in dataclasses.fields(Capabilities) if f.name != "hooks")


def _check_backend_class(name: str, cls) -> None:
    for attr in ("Options", "capabilities", "create"):
        if not hasattr(cls, attr):
            raise TypeError(f"backend {name!r} ({cls!r}) has no {attr!r} (see mlft/generation/backends/__init__.py)")
    if not isinstance(cls.capabilities, Capabilities):
        raise TypeError(
            f"backend {name!r}: `capabilities` must be a mlft.generation.backends.Capabilities, got "
            f"{cls.capabilities!r}"
        )


# name -> "module:Class" (imported on first use: the hf backend pulls in torch)
REGISTRY = Registry(
    "backend",
    {
        "hf": "mlft.generation.backends.hf:HFBackend",
        "openai": "mlft.generation.backends.openai:OpenAIBackend",
        "vllm": "mlft.generation.backends.vllm:VLLMBackend",
    },
    check=_check_backend_class,
)
BACKENDS = tuple(REGISTRY)  # the built-in names (REGISTRY holds any added later)
DEFAULT_BACKEND = "hf"  # what --backend / evaluation.backend default to


def encode_request(tokenizer, req: Request, no_template: str = "use prompting mode 'qa' or 'raw'") -> list[int]:
    """The prompt token ids of `req` as the model's tokenizer builds them (chat template + generation prompt, or
    the raw text with special tokens), followed by the reply so far (`prefix`). Backends that run the model
    (hf, vllm) share it, so they see identical inputs."""
    if req.messages is not None:
        if not getattr(tokenizer, "chat_template", None):
            raise ModelError(f"this model's tokenizer has no chat template: {no_template}")
        text = tokenizer.apply_chat_template(req.messages, add_generation_prompt=True, tokenize=False)
        return tokenizer(text + req.prefix, add_special_tokens=False)["input_ids"]
    ids = tokenizer(req.text, add_special_tokens=True)["input_ids"]
    return ids + tokenizer(req.prefix, add_special_tokens=False)["input_ids"] if req.prefix else ids


def cut_reply(ids: list[int], eos_ids, newline_ids, stop_at_newline: bool) -> tuple[list[int], str]:
    """(the reply's token ids, finish reason) of generated `ids`: up to and including the first end-of-sequence token
    ("stop"), else up to and including the first newline token when the request stops there ("newline"), else all
    ("length"). Shared by the backends that decode token ids themselves (hf, vllm)."""
    n = next((k + 1 for k, t in enumerate(ids) if t in eos_ids), None)
    if n is not None:
        return ids[:n], "stop"
    if stop_at_newline:
        nl = next((k + 1 for k, t in enumerate(ids) if t in newline_ids), None)
        if nl is not None:
            return ids[:nl], "newline"
    return ids, "length"


@runtime_checkable
class Backend(Protocol):
    name: str
    batch_size: int  # requests the runner hands over per call (hf: one seeded batch)
    # class attributes (see the module docstring): Options, capabilities; classmethod create(...)
    # optional: start_pass(replies | None), told by the runner how many replies the coming pass generates (hf:
    # decode a short pass eagerly), then None after it

    def prompt_length(self, request: Request) -> int:
        """A cheap length used to order requests (similar lengths batch together)."""

    def check(self, decoding, interventions: Sequence = ()) -> None:
        """Raise ConfigError before any generation if this backend cannot honour the settings."""

    def generate(self, requests: list[Request], decoding, interventions: Sequence = ()) -> Iterator[Result]:
        """One Result per request, yielded as each finishes (any order)."""

    def close(self) -> None:
        """Free connections / memory."""


def check_backend(name: str, where: str = "backend") -> str:
    return REGISTRY.check(name, where)


def backend_class(name: str, where: str = "backend") -> type:
    return REGISTRY.load(name, where)


def capabilities(name: str, where: str = "backend") -> Capabilities:
    """What backend `name` can do."""
    return backend_class(name, where).capabilities


def provides(name: str) -> frozenset[str]:
    """The capability flags backend `name` has (e.g. "weights", "chat", "logprobs")."""
    return capabilities(name).flags()


def able(test: Callable[[Capabilities], bool]) -> list[str]:
    """The registered backends whose capabilities pass `test`, in registry order."""
    return [b for b in REGISTRY if test(capabilities(b))]


def option_names(name: str) -> frozenset[str]:
    """The fields of backend `name`'s Options."""
    return frozenset(f.name for f in dataclasses.fields(backend_class(name).Options))


def backend_options(name: str, options: dict | Any | None, where: str = "backend options"):
    """The backend's Options instance from a dict (validated: unknown keys get a 'did you mean')."""
    cls = backend_class(name)
    if isinstance(options, cls.Options):
        return options
    return from_dict(cls.Options, dict(options or {}), where)


def create_backend(
    name: str,
    options: dict | Any | None = None,
    *,
    model_ref: str | None = None,
    model=None,
    tokenizer=None,
    batch_size: int = 16,
    token_stats: bool = False,
):
    """Build a backend (the cheap checks first; e.g. the openai backend asks the server before returning)."""
    cls = backend_class(name)
    opts = backend_options(name, options, f"{name} backend options")
    return cls.create(
        opts, model_ref=model_ref, model=model, tokenizer=tokenizer, batch_size=batch_size, token_stats=token_stats
    )


def check_interventions(name: str, interventions: Sequence, where: str) -> None:
    """Refuse, before any generation, interventions this backend cannot apply."""
    cls = backend_class(name)
    for iv in interventions:
        missing = sorted(set(iv.applies_via) - cls.capabilities.hooks)
        if missing:
            ok = [b for b in REGISTRY if set(iv.applies_via) <= capabilities(b).hooks and not _refuses(b, iv)]
            hint = getattr(cls, "refusal", f"use a backend that can ({', '.join(ok)})")
            raise ConfigError(
                f"{where}: intervention {iv.name!r} needs {', '.join(missing)} (model internals), "
                f"which the {name} backend cannot apply: {hint}, or drop the intervention"
            )
        problem = cls.unsupported(iv) if hasattr(cls, "unsupported") else None
        if problem:
            raise ConfigError(f"{where}: intervention {iv.name!r} on the {name} backend: {problem}")


def _refuses(name: str, iv) -> bool:
    """Whether backend `name` refuses `iv` although it has its hooks (`unsupported`: e.g. the openai backend runs
    only the script gate of the logits processors, on a server with mlft's plugin)."""
    cls = backend_class(name)
    return bool(cls.unsupported(iv)) if hasattr(cls, "unsupported") else False


# --- CLI flags generated from the options dataclasses (config.py's generator) -----------------------------


def add_backend_flags(parser) -> None:
    """One flag per field of every backend's Options (shared when two backends have a field of that name)."""
    owners: dict[str, list[str]] = {}
    for name in REGISTRY:
        for f in dataclasses.fields(backend_class(name).Options):
            owners.setdefault(f.name, []).append(name)
    prefix = {f: f"{', '.join(names)}: " for f, names in owners.items()}
    group = parser.add_argument_group("backend options (generated from each backend's options)")
    done: set[str] = set()
    for name in REGISTRY:
        cls = backend_class(name).Options
        add_dataclass_flags(group, cls, "backend__", exclude=done, help_prefix=prefix)
        done |= {f.name for f in dataclasses.fields(cls)}


def options_from_args(name: str, args) -> dict:
    """The options the user set on the command line for backend `name`; a flag of another backend is refused."""
    own = option_names(name)
    out = {}
    for fname, value in flag_values(args, "backend__").items():
        if fname not in own:
            owners = [b for b in REGISTRY if fname in option_names(b)]
            raise ConfigError(
                f"{flag_name(fname)} is an option of the {'/'.join(owners)} backend, not {name} (--backend {name})"
            )
        out[fname] = value
    return out

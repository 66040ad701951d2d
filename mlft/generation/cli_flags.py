"""Command-line flags of the generation settings, shared by `mlft generate`, `mlft eval` and `mlft evaluate-run`
(one generator: mlft.config.add_dataclass_flags over the `Decoding` / `Prompting` dataclasses and each backend's
`Options`). The parsed values come back typed (`generation_settings`, `options_from_args`): dicts of field values,
never key=value text."""

from __future__ import annotations

import yaml

from mlft.config import add_dataclass_flags, flag_values
from mlft.errors import ConfigError
from mlft.generation.backends import DEFAULT_BACKEND, REGISTRY, add_backend_flags
from mlft.generation.decoding import Decoding
from mlft.generation.prompting import Prompting

DECODING_FLAGS = {"seed": "--decoding-seed"}  # field -> flag where the name would clash
PROMPTING_FLAGS = {"mode": "--prompting"}


def add_model_args(p) -> None:
    """Model and backend options shared by `mlft generate`, `mlft eval` and `mlft evaluate-run`."""
    p.add_argument(
        "--model",
        default=None,
        help="embedded name (default smollm2-135m-instruct), a local folder or "
        "a hub id; with a served backend (openai): the served model name",
    )
    p.add_argument(
        "--backend", default=DEFAULT_BACKEND, help=f"one of {', '.join(REGISTRY)} (default {DEFAULT_BACKEND})"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_backend_flags(p)


def add_generation_flags(p) -> None:
    """Decoding and prompting flags, generated from the `Decoding` / `Prompting` dataclasses (unset flags keep the
    suite's or the dataclass's value)."""
    add_dataclass_flags(
        p.add_argument_group("decoding (mlft/generation/decoding.py; paper defaults)"),
        Decoding,
        "decoding__",
        rename=DECODING_FLAGS,
    )
    add_dataclass_flags(
        p.add_argument_group("prompting (mlft/generation/prompting.py)"),
        Prompting,
        "prompting__",
        rename=PROMPTING_FLAGS,
    )


def generation_settings(args) -> dict:
    """{"decoding": {...}, "prompting": {...}}: the decoding / prompting flags the user set."""
    return {k: v for k in ("decoding", "prompting") if (v := flag_values(args, f"{k}__"))}


def parse_interventions(values: list[str] | None) -> list[dict]:
    """`--intervention '{name: ban_tokens, strings: [Sure]}'` (YAML) or a bare name."""
    out = []
    for v in values or []:
        try:
            spec = yaml.safe_load(v)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--intervention {v!r}: not YAML ({exc})") from None
        out.append({"name": spec} if isinstance(spec, str) else spec)
    return out

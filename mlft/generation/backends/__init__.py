"""Generation backends behind one interface: `backend.generate(requests, decoding) -> results` (same order).

A Request carries chat `messages` or a raw `text` prompt. A Result carries the completion or an `error`
(the runner records it and retries it on resume). Backends raise BackendError only for problems the user
must fix before anything can work (bad key, unreachable server).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlft.config import did_you_mean
from mlft.errors import ConfigError

BACKENDS = ("hf", "openai")


@dataclass
class Request:
    id: str
    messages: list[dict] | None = None
    text: str | None = None

    def __post_init__(self):
        if (self.messages is None) == (self.text is None):
            raise ValueError(f"request {self.id}: give exactly one of messages or text")


@dataclass
class Result:
    id: str
    completion: str = ""
    finish_reason: str | None = None  # "stop" (EOS) | "length" | None on error
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    error: str | None = None
    extra: dict = field(default_factory=dict)  # e.g. token_stats for confusion-point analysis


def check_backend(name: str, where: str = "backend") -> str:
    if name not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {name!r}{did_you_mean(name, BACKENDS)}; "
                          f"valid: {', '.join(BACKENDS)}")
    return name

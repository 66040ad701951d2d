"""What a backend receives and returns: a `Request`, a `Result`, and the keys of a request's random draws.

This module imports nothing else of mlft, so everything that builds requests or reads results (the runner,
data-parallel generation, the eval kinds, a strategy intervention such as `line_resample`) can import it without
importing the backends, and the backends import it without importing what uses them: it is what ended the
backends <-> interventions import loop.

A Request carries chat `messages` or a raw `text` prompt, plus the language the reply should be in (the
interventions use it). A Result carries the completion or an `error` (the runner records it, and retries it on
resume). Randomness belongs to the request: a reply's draws are keyed by the decoding seed, the request id
(`draw_id`: prompt and sample index) and the reply so far, never by batching (`draw_key`, `request_seed`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass
class Request:
    id: str
    messages: list[dict] | None = None
    text: str | None = None
    language: str | None = None  # the language the reply should be in (for interventions)
    prefix: str = ""  # reply text so far: generation continues it (line-by-line strategies)
    stop_at_newline: bool = False  # stop after the first generated newline (the completion keeps it)

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


def draw_id(prompt_id: str, sample: int) -> str:
    """The request id of reply `sample` of a prompt (several replies per prompt): the prompt's own id for the
    first, so a run with one reply per prompt draws what the first reply of a run with several draws."""
    return prompt_id if sample == 0 else f"{prompt_id}#{sample}"


def draw_key(seed: int, request_id: str, prefix: str = "") -> tuple[int, int]:
    """The two 32-bit words that key one request's random draws: they depend on the decoding seed, the request
    id (`draw_id`: prompt and sample index) and the reply so far (a continued reply draws afresh), never on the
    batch, the ranks or the order. The hf sampler hashes them per step and token
    (`mlft.generation.processors.keyed_gumbel`); vLLM and openai get `request_seed`."""
    text = f"{seed}/{request_id}" + (f"/{hashlib.sha256(prefix.encode()).hexdigest()}" if prefix else "")
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little")


def request_seed(seed: int, request_id: str, prefix: str = "") -> int:
    """One request's sampling seed for a backend that seeds requests (vLLM, an OpenAI-compatible server): the
    first word of its `draw_key` (31 bits: servers take a signed 32-bit seed)."""
    return draw_key(seed, request_id, prefix)[0] & 0x7FFFFFFF

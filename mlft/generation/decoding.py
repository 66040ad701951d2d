"""Decoding settings as the LCB paper defines them (defaults = the paper's: 100 new tokens, T=0.3, top-p=0.75).

`top_p` is real nucleus sampling: keep the smallest set of tokens whose cumulative probability is >= p
(transformers' TopPLogitsWarper). The community generation script passes `min_p=0.75` instead; that is a
different filter and is not what the paper reports. `temperature=0` means greedy (or beam search when
`num_beams > 1`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from mlft.errors import ConfigError


@dataclass(frozen=True)
class Decoding:
    max_new_tokens: int = field(default=100, metadata={"help": "tokens to generate at most (paper: 100)"})
    temperature: float = field(default=0.3, metadata={"help": "sampling temperature; 0 = greedy (paper: 0.3)"})
    top_p: float = field(
        default=0.75,
        metadata={"help": "nucleus: smallest token set with cumulative prob >= p (paper: 0.75); 1.0 = off"},
    )
    top_k: int | None = field(default=None, metadata={"help": "keep only the k most likely tokens; null = off"})
    num_beams: int = field(default=1, metadata={"help": "beam size; > 1 = beam search (with T=0: no sampling)"})
    seed: int | None = field(
        default=0,
        metadata={
            "help": "sampling seed: every reply's draws are keyed by it, the request id and the sample index (hf: "
            "noise computed per request on the device; vllm / openai: a seed per request), so batching, ranks and "
            "order change nothing; null = unseeded (the openai backend then sends no seed: some vLLM servers "
            "crash on seeded requests with chunked prefill)"
        },
    )

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise ConfigError(f"decoding.max_new_tokens: must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ConfigError(f"decoding.temperature: must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"decoding.top_p: must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 1:
            raise ConfigError(f"decoding.top_k: must be >= 1 or null, got {self.top_k}")
        if self.num_beams < 1:
            raise ConfigError(f"decoding.num_beams: must be >= 1, got {self.num_beams}")

    @property
    def sampling(self) -> bool:
        return self.temperature > 0

    def to_dict(self) -> dict:
        return asdict(self)

    def hf_kwargs(self) -> dict:
        """Arguments for transformers' `generate`, every one explicit so the model's own generation_config
        (which may set top_k=50, a temperature...) never leaks in. Temperature, top-k and top-p are left
        neutral here: the hf backend applies them itself (NucleusWarper for beam sampling; NucleusSampler, which
        draws the token itself, otherwise: then `generate` runs greedy over the one finite score)."""
        sample_in_generate = self.sampling and self.num_beams > 1
        kw = {"max_new_tokens": self.max_new_tokens, "num_beams": self.num_beams, "do_sample": sample_in_generate}
        if sample_in_generate:
            kw.update(temperature=1.0, top_p=1.0, top_k=0)
        if self.num_beams > 1:
            kw.update(early_stopping=True, num_return_sequences=1)
        return kw

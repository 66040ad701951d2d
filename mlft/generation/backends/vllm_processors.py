"""mlft's logits-processor interventions inside vLLM (imported by the engine by name; needs vLLM).

vLLM (v1) takes logits processors as classes fixed when the engine starts; `AdapterLogitsProcessor` turns a
per-request function into one. The vllm backend starts an engine with `MlftLogitsProcessors` for a pass with
logits-processor interventions (only then: a registered processor costs every request) and sends, per request,
`SamplingParams.extra_args["mlft_processors"] = {"interventions": [specs], "language": ..., "id": ..., "stats":
...}`: the interventions are rebuilt here from their specs (validated by the same registry) and their
processors run on the request's logits, on vLLM's device, as a one-row batch, in the order listed, after vLLM
recorded the raw log-probabilities (the fluency proxy stays the model's own); see vllm_steps.py. Processors that
report stats (`stats(row)`, e.g. the gate's intervention count) leave a reader in `STATS[id]`, which the backend
calls when the engine runs in the backend's process (VLLM_ENABLE_V1_MULTIPROCESSING=0).

`ScriptGateLogitsProcessor` is the script gate for `vllm serve` (`--logits-processors` with
served_gate.PLUGIN): each request configures it through its extra arguments (`vllm_xargs`: `mlft_language`,
`mlft_gate_mode`, ...; served_gate.py), checked by `validate_params` before the request reaches the engine (a
malformed one is an HTTP 400; the engine serves on), and run by the same per-request function as the backend's.
Not declared as a `vllm.logits_processors` entry point on purpose: vLLM loads every installed entry point into
every engine, and vLLM 0.32's GPU default runner (Model Runner V2) refuses V1-interface processors at load, so an
installed mlft would break every vLLM engine in its environment (mlft's own vllm backend and trl's rollouts
included). On a GPU with vLLM 0.32, serve with VLLM_USE_V2_MODEL_RUNNER=0.
"""

from __future__ import annotations

from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from mlft.errors import ConfigError
from mlft.generation.backends.served_gate import gate_spec
from mlft.generation.backends.vllm_steps import KEY, STATS, request_processor

__all__ = ["KEY", "STATS", "MlftLogitsProcessors", "ScriptGateLogitsProcessor"]


class _Processors(AdapterLogitsProcessor):
    """The model's (transformers) tokenizer, which mlft's processors build their tables from."""

    def __init__(self, vllm_config, device, is_pin_memory):
        super().__init__(vllm_config, device, is_pin_memory)
        from transformers import AutoTokenizer

        mc = vllm_config.model_config
        self.tokenizer = AutoTokenizer.from_pretrained(mc.tokenizer, trust_remote_code=mc.trust_remote_code)
        self._built: dict[str, list] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # a gate changes the greedy choice


class MlftLogitsProcessors(_Processors):
    """The vllm backend's: any of mlft's logits-processor interventions, from the spec the backend sends."""

    def new_req_logits_processor(self, params):
        return request_processor((params.extra_args or {}).get(KEY), self.tokenizer, self._built)


class ScriptGateLogitsProcessor(_Processors):
    """The script gate in `vllm serve`, configured per request by its `mlft_*` extra arguments (served_gate.py);
    a request that names no language gets no processor."""

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        """Run by vLLM's front end for every request before it is queued: a ValueError becomes an HTTP 400."""
        try:
            gate_spec(sampling_params.extra_args)
        except ConfigError as exc:
            raise ValueError(f"mlft script gate: {exc}") from None

    def new_req_logits_processor(self, params):
        return request_processor(gate_spec(params.extra_args), self.tokenizer, self._built)

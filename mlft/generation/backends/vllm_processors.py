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
"""

from __future__ import annotations

from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from mlft.generation.backends.vllm_steps import KEY, STATS, request_processor

__all__ = ["KEY", "STATS", "MlftLogitsProcessors"]


class MlftLogitsProcessors(AdapterLogitsProcessor):
    def __init__(self, vllm_config, device, is_pin_memory):
        super().__init__(vllm_config, device, is_pin_memory)
        from transformers import AutoTokenizer

        mc = vllm_config.model_config
        self.tokenizer = AutoTokenizer.from_pretrained(mc.tokenizer, trust_remote_code=mc.trust_remote_code)
        self._built: dict[str, list] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # a gate changes the greedy choice

    def new_req_logits_processor(self, params):
        return request_processor((params.extra_args or {}).get(KEY), self.tokenizer, self._built)

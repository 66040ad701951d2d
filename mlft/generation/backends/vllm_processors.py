"""mlft's logits-processor interventions inside vLLM (imported by the engine by name; needs vLLM).

vLLM (v1) takes logits processors as classes fixed when the engine starts; `AdapterLogitsProcessor` turns a
per-request function into one. The vllm backend starts every engine with `MlftLogitsProcessors` and sends, per
request, `SamplingParams.extra_args["mlft_processors"] = {"interventions": [specs], "language": ..., "id": ...}`:
the interventions are rebuilt here from their specs (validated by the same registry) and their processors run on
the request's logits as a one-row batch, in the order listed, after vLLM recorded the raw log-probabilities (the
fluency proxy stays the model's own). Processors that report stats (`stats(row)`, e.g. the gate's intervention
count) leave them in `STATS[id]`, which the backend reads when the engine runs in the backend's process (VLLM_ENABLE_V1_MULTIPROCESSING=0).
"""

from __future__ import annotations

import json

import torch
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from mlft.generation.interventions import build_interventions

KEY = "mlft_processors"
STATS: dict[str, dict] = {}  # request id -> processor stats (in-process engines)


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
        spec = (params.extra_args or {}).get(KEY)
        if not spec:
            return None

        key = json.dumps(spec["interventions"], sort_keys=True)
        if key not in self._built:
            self._built[key] = build_interventions(spec["interventions"], "vllm logits processors")
        procs = [p for iv in self._built[key] for p in iv.logits_processors(self.tokenizer, [spec.get("language")])]
        rid = spec.get("id")

        def apply(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
            scores = logits.unsqueeze(0).float().cpu()  # mlft's processors keep their masks on the CPU
            ids = torch.tensor([output_ids], dtype=torch.long)
            for p in procs:
                scores = p(ids, scores)
            if rid is not None:
                stats = {}
                for p in procs:
                    if hasattr(p, "stats"):
                        stats.update(p.stats(0))
                if stats:
                    STATS[rid] = stats
            return scores[0].to(device=logits.device, dtype=logits.dtype)

        return apply

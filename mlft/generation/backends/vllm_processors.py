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

One class, both engine interfaces. vLLM's GPU default runner from 0.32 (Model Runner V2) loads custom processors
through its own interface (vllm-project/vllm#56497: `vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor`,
built as `cls(vllm_config, req_states)`, told of each request by `add_request(slot, params)` with the request's
persistent slot, and run once per step as `apply(logits, ctx)` over the whole batch with a `LogitsContext`); the V1
runner (vLLM's CPU build, or VLLM_USE_V2_MODEL_RUNNER=0) loads `vllm.v1.sample.logits_processor.LogitsProcessor`
subclasses, built as `cls(vllm_config, device, is_pin_memory)`. Where the installed vLLM has the V2 interface,
`ScriptGateLogitsProcessor` and `MlftLogitsProcessors` subclass both: each loader's `issubclass` check passes, and
the constructor's and `apply`'s arguments say which engine is calling (`_SlotProcessors`). Both sides run the
same per-request function (`request_processor`) on the same reply tokens, so `vllm serve --logits-processors
mlft.generation.backends.vllm_processors:ScriptGateLogitsProcessor` needs no environment variable on either runner.
On V2 the reply tokens of a gated row are read from the runner's token buffer (`req_states.all_token_ids`, from the
request's prompt length to the row's position), one device-to-host copy per gated row and step; a step with no
gated row reads nothing.

Not declared as a `vllm.logits_processors` entry point on purpose: vLLM loads every installed entry point into
every engine (mlft's own vllm backend and trl's rollouts included): a registered processor costs every request of
every engine in the environment.
"""

from __future__ import annotations

from collections.abc import Callable

from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from mlft.errors import ConfigError
from mlft.generation.backends.served_gate import gate_spec
from mlft.generation.backends.vllm_steps import KEY, STATS, request_processor

try:  # Model Runner V2's interface for custom processors (vLLM with vllm-project/vllm#56497)
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2LogitsProcessor
except ImportError:  # an older vLLM: the V1 interface only
    V2LogitsProcessor = None

__all__ = ["KEY", "STATS", "V2_INTERFACE", "MlftLogitsProcessors", "ScriptGateLogitsProcessor"]
V2_INTERFACE = V2LogitsProcessor is not None


def _tokenizer(vllm_config):
    """The model's (transformers) tokenizer, which mlft's processors build their tables from."""
    from transformers import AutoTokenizer

    mc = vllm_config.model_config
    return AutoTokenizer.from_pretrained(mc.tokenizer, trust_remote_code=mc.trust_remote_code)


class _SlotProcessors:
    """Model Runner V2's side: one per-request function per persistent request slot (set by `add_request`, which
    vLLM calls for every request entering the batch: a recycled slot's function is replaced or dropped there)."""

    def _init_v2(self, vllm_config, req_states) -> None:
        self.req_states = req_states
        self.tokenizer = _tokenizer(vllm_config)
        self._built: dict[str, list] = {}
        self._slots: dict[int, Callable] = {}

    def add_request(self, req_idx: int, sampling_params) -> bool:
        fn = self.new_req_logits_processor(sampling_params)
        if fn is None:
            self._slots.pop(req_idx, None)
            return False
        self._slots[req_idx] = fn
        return True

    def apply_v2(self, logits, ctx):
        """Each gated row's logits through its request's function, with the tokens the request has so far (its
        committed reply tokens, plus, under speculative decoding, the draft tokens fed before this row)."""
        gated = [int(s) for s in ctx.idx_mapping_np if int(s) in self._slots]  # host: no sync for ungated steps
        if not gated:
            return logits
        slots = ctx.expanded_idx_mapping.tolist()
        local = ctx.expanded_local_pos.tolist()
        pos = ctx.pos.tolist()
        fed = ctx.input_ids.tolist()
        prompt_len = self.req_states.prompt_len.np
        tokens = self.req_states.all_token_ids.gpu
        committed: dict[int, list[int]] = {}
        for row, slot in enumerate(slots):
            fn = self._slots.get(slot)
            if fn is None:
                continue
            k = local[row]
            if slot not in committed:  # committed tokens: up to the position fed at the request's first row
                committed[slot] = tokens[slot, int(prompt_len[slot]) : pos[row] - k + 1].tolist()
            drafts = [fed[j] for j in range(len(slots)) if slots[j] == slot and 1 <= local[j] <= k]
            logits[row] = fn(committed[slot] + drafts, logits[row])
        return logits


class _Processors(AdapterLogitsProcessor, _SlotProcessors, *([V2LogitsProcessor] if V2_INTERFACE else [])):
    """Either engine's processor, by how it is built: (vllm_config, device, is_pin_memory) by the V1 runner,
    (vllm_config, req_states) by Model Runner V2."""

    def __init__(self, vllm_config, *args, **kwargs):
        if len(args) + len(kwargs) == 1:  # Model Runner V2: (vllm_config, req_states)
            self._v2 = True
            self._init_v2(vllm_config, kwargs.get("req_states", args[0] if args else None))
            return
        self._v2 = False
        AdapterLogitsProcessor.__init__(self, vllm_config, *args, **kwargs)
        self.tokenizer = _tokenizer(vllm_config)
        self._built: dict[str, list] = {}

    def apply(self, logits, ctx=None):
        if ctx is None:  # the V1 runner: apply(logits), the rows set by update_state
            return AdapterLogitsProcessor.apply(self, logits)
        return self.apply_v2(logits, ctx)

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

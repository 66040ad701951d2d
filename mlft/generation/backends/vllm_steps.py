"""mlft's logits processors over one vLLM request's logits, step by step, on the logits' device (no vLLM import:
`vllm_processors.py` wraps this into vLLM's processor class; the tests run it on plain tensors).

Per step the request's logits row (a tensor on vLLM's device) goes through the interventions' processors as a
one-row batch and comes back in its dtype: no host read, no copy between devices. The processors move their
tables (script masks, banned ids) to the logits' device once, at the request's first step. A processor that
reads the reply so far (`reads_input_ids`, True unless it says otherwise: mlft's own do not) gets it as a tensor
on that device, built from vLLM's host list each step (a host-to-device copy); the others get an empty one.
Processor statistics (`stats(row)`, e.g. how often the gate intervened) are read on the host once per request,
when the backend reads its result (`STATS[id]()`), and only where the backend asked for them (`"stats": true`
in the request's spec: the engine runs in the backend's process, which pops every entry).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mlft.generation.interventions import build_interventions

KEY = "mlft_processors"
STATS: dict[str, Callable[[], dict]] = {}  # request id -> its processors' stats, read on the host when called


def _stats(procs: list) -> dict:
    out: dict = {}
    for p in procs:
        out.update(p.stats(0))
    return out


def request_processor(spec: dict | None, tokenizer, built: dict) -> Callable | None:
    """The per-step function `apply(output_ids, logits) -> logits` of one request whose `extra_args[KEY]` is
    `spec` ({"interventions": [specs], "language": ..., "id": ..., "stats": bool}), or None without one.
    `built`: interventions already built, by their specs (shared by the requests of one engine)."""
    import torch

    if not spec:
        return None
    key = json.dumps(spec["interventions"], sort_keys=True)
    if key not in built:
        built[key] = build_interventions(spec["interventions"], "vllm logits processors")
    procs = [p for iv in built[key] for p in iv.logits_processors(tokenizer, [spec.get("language")])]
    reads_ids = any(getattr(p, "reads_input_ids", True) for p in procs)
    reporting = [p for p in procs if hasattr(p, "stats")]
    if spec.get("id") is not None and spec.get("stats") and reporting:
        STATS[spec["id"]] = lambda: _stats(reporting)
    no_ids: list = []  # the empty reply tensor on the logits' device, made at the first step

    def apply(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        scores = logits.unsqueeze(0).float()  # fp32 as mlft's processors expect; a view when it already is
        if reads_ids:
            ids = torch.tensor([output_ids], dtype=torch.long, device=logits.device)
        else:
            if not no_ids:
                no_ids.append(torch.empty((1, 0), dtype=torch.long, device=logits.device))
            ids = no_ids[0]
        for p in procs:
            scores = p(ids, scores)
        return scores[0].to(dtype=logits.dtype)

    return apply

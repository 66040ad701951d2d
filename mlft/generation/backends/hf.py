"""The transformers backend: batched generation with left padding, batches of similar prompt length (capped in
padded tokens), chat template or raw text, EOS stop, seeded sampling, greedy and beam search, and every kind
of intervention (logits processors per batch, forward hooks around generation, model transforms).

Processors run in this order: the step log (it must see the model's own logits: each token's log-probability,
the fluency proxy, and with `token_stats` entropy and nucleus size), the interventions' processors (in the order
listed), then the decoding's sampler (temperature, top-k, top-p; it draws the token itself, see
mlft.generation.processors) or, for greedy decoding, the greedy picker. Each row's draws are keyed by its
request (`draw_key`: decoding seed, request id, sample index, reply so far) and made on the device: a reply does
not depend on batch size, batch composition, memory budget, ranks, resume or order. (Beam sampling, drawn by
transformers, seeds each batch from the decoding seed and its first request.)

Batches (mlft.generation.batching): requests sorted by prompt length, cut at `batch_size` rows, at
`max_batch_tokens` padded prompt tokens in the prefill forward, or where the batch's KV cache at
max_new_tokens (rows x (width + max_new_tokens) x the model's KV bytes per token) would pass the memory budget
(on CUDA a share of the free device memory, measured when a generate call starts; `memory_budget_gib`),
whichever comes first: as few generate calls as memory allows (a call costs about as much per step at 2 rows
as at 200).

The static cache (decode: static / compiled) is allocated here at the planned length, never transformers' own
(which keeps the longest length any earlier call used). Compiled decoding pads a batch to its shape bucket
(mlft.generation.batching: rows to a power of two, cache length up by at most a quarter; padding rows copy the
last request and stop after one token) and reuses one cache while the bucket stays the same (a sorted pass visits
the buckets in order), so a pass compiles and records CUDA graphs a few times, not once per batch. `decode: auto`
decodes a short pass eagerly (fewer decode steps than `compile_min_steps`: the runner tells the backend the pass's
size, `start_pass`), where compiling would cost more than it saves. Before torch 2.10 compiled decoding runs
eagerly, said once (`static_address_guarded`). The caches and the decode modes live in
`mlft.generation.backends.hf_cache`; this module holds the options, the batch plan and the generation loop.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from mlft.errors import ConfigError, ModelError
from mlft.generation.backends import Capabilities, cut_reply, encode_request
from mlft.generation.backends.hf_cache import KVCaches, _cache_kwarg, _flash_attention
from mlft.generation.batching import (
    BatchBudget,
    decode_step_bytes,
    kv_bytes_per_token,
    memory_budget,
    plan_batches,
    row_bucket,
)
from mlft.generation.interventions.contrastive import PairedRows
from mlft.generation.interventions.vocab import vocab_index
from mlft.generation.models import load
from mlft.generation.processors import GreedyPicker, NewlineStop, NucleusSampler, NucleusWarper, StepLog
from mlft.generation.requests import Request, Result, draw_key


@dataclass
class HFOptions:
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = field(
        default="auto", metadata={"help": "weights dtype when loading the model"}
    )
    device: str | None = field(
        default=None,
        metadata={
            "help": "torch device (cpu, cuda, cuda:1...); default: this process's GPU (cuda:LOCAL_RANK) when CUDA is "
            "available, else cpu"
        },
    )
    chat_template: str | None = field(
        default=None,
        metadata={
            "help": "a .jinja chat template for a tokenizer without one (a base model; `mlft evaluate-run` passes the "
            "training run's template); the model's own template wins"
        },
    )
    max_batch_tokens: int = field(
        default=32768,
        metadata={"help": "cap on padded prompt tokens (rows x longest prompt) of one batch's prefill forward"},
    )
    memory_budget_gib: float | None = field(
        default=None,
        metadata={
            "help": "GiB of KV cache one batch may hold at max_new_tokens (null: on CUDA 0.8 x the device's free "
            "memory when a generate call starts, on CPU 4 GiB)"
        },
    )
    prefix_cache: bool = field(
        default=True,
        metadata={
            "help": "compute the prompts' shared prefix (e.g. the chat template's system prompt) once and reuse its "
            "KV cache in every batch"
        },
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "run the model repository's own code"})
    decode: Literal["auto", "eager", "static", "compiled"] = field(
        default="auto",
        metadata={
            "help": "how the decode loop runs: eager (a growing KV cache, one kernel per op: the CPU's best), static "
            "(a "
            "preallocated KV cache, eager), compiled (static cache + torch.compile of the decode step: "
            "transformers' static-cache path, few kernels per token; batches padded to shape buckets, one reused cache "
            "per bucket: a few compiles and CUDA-graph recordings per pass); auto = compiled on a GPU unless an "
            "intervention hooks the forward pass (steer, learned_gate: they would recompile every step), the "
            "model uses flash-attention (its unpadding breaks the graph) or the pass is short (compile_min_steps); "
            "else eager. Before torch 2.10 compiled runs eagerly, said once (its mark_static_address recompiles "
            "per cache)"
        },
    )
    compile_min_steps: int = field(
        default=1024,
        metadata={
            "help": "decode: auto compiles only for a pass of at least this many decode steps (at least its replies / "
            "batch_size batches x max_new_tokens, as the runner tells the backend before the pass): compiling "
            "and recording CUDA graphs is paid per pass and shape bucket, a compiled step saves launch overhead "
            "that does not grow with its rows, so a shorter pass decodes eagerly (an estimate: docs/gpu.md); "
            "0: always compile"
        },
    )


def batch_seed(seed: int, first_id: str) -> int:
    """Seed of a batch: depends only on the decoding seed and the batch's first request."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{first_id}".encode()).digest()[:4], "little")


def _vocab_size(config) -> int:
    """The logits' width: the (text) config's vocab_size, 0 when unknown."""
    if config is None:
        return 0
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(getattr(text, "vocab_size", 0) or 0)


class HFBackend(KVCaches):
    name = "hf"
    Options = HFOptions
    capabilities = Capabilities(
        weights=True,
        chat=True,
        logprobs=True,
        live_model=True,
        data_parallel=True,
        saved_weights=True,
        placement_options=True,
        hooks={"processors", "hooks", "transform", "strategy", "rows"},
    )

    def __init__(
        self,
        model,
        tokenizer,
        batch_size: int = 16,
        token_stats: bool = False,
        max_batch_tokens: int = 32768,
        model_ref: str | None = None,
        prefix_cache: bool = True,
        decode: str = "auto",
        memory_budget_gib: float | None = None,
        compile_min_steps: int = 1024,
        pass_replies: int | None = None,
    ):
        if batch_size < 1:
            raise ConfigError(f"batch_size: must be >= 1, got {batch_size}")
        if compile_min_steps < 0:
            raise ConfigError(f"compile_min_steps: must be >= 0, got {compile_min_steps}")
        self.compile_min_steps = compile_min_steps
        self.pass_replies = pass_replies  # replies of the pass under way (start_pass), None: not told
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.token_stats, self.max_batch_tokens, self.model_ref = token_stats, max_batch_tokens, model_ref
        self.prefix_cache, self.decode = prefix_cache, decode
        self.memory_budget_gib = memory_budget_gib
        self.live = False  # True when generating with a caller's (training) model: data-parallel ranks hold a copy
        self._prefix: tuple[tuple[int, ...], object] | None = None  # (prefix ids, its KV cache)
        self._pool: tuple[tuple[int, int], object] | None = None  # compiled decoding: ((rows, length), its cache)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        self.eos_ids = sorted({e for e in [*eos, tokenizer.eos_token_id] if e is not None})

    @classmethod
    def create(
        cls, options: HFOptions, *, model_ref=None, model=None, tokenizer=None, batch_size=16, token_stats=False
    ) -> HFBackend:
        if model is None:
            model, tokenizer = load(
                model_ref,
                dtype=options.dtype,
                device=options.device,
                trust_remote_code=options.trust_remote_code,
                chat_template=options.chat_template,
            )
            live = False
        elif tokenizer is None:
            raise ConfigError("hf backend: a live model needs its tokenizer")
        else:
            live = True
        backend = cls(
            model,
            tokenizer,
            batch_size,
            token_stats,
            options.max_batch_tokens,
            model_ref,
            options.prefix_cache,
            options.decode,
            options.memory_budget_gib,
            options.compile_min_steps,
        )
        backend.live = live
        return backend

    @property
    def placement(self) -> dict:
        """Where and in what precision it generates (recorded in completions; a resume must match): a quantized
        model's weight format (`mlft_weights_dtype`, set by the quantize intervention: int8, nf4, int8-dynamic)."""
        param = next(self.model.parameters(), None)
        if param is None:
            return {"device": None, "dtype": None}
        dtype = getattr(self.model, "mlft_weights_dtype", None) or str(param.dtype).removeprefix("torch.")
        return {"device": param.device.type, "dtype": dtype}

    def spec(self) -> dict:
        """The constructor settings (a data-parallel rank builds the same backend over its copy of the model)."""
        return {
            "batch_size": self.batch_size,
            "token_stats": self.token_stats,
            "max_batch_tokens": self.max_batch_tokens,
            "model_ref": self.model_ref,
            "prefix_cache": self.prefix_cache,
            "decode": self.decode,
            "memory_budget_gib": self.memory_budget_gib,
            "compile_min_steps": self.compile_min_steps,
            "pass_replies": self.pass_replies,
        }

    def transformed(self, transforms: Sequence) -> HFBackend:
        """A backend over the model changed by `transforms` (e.g. quantized), same settings."""
        model, tok = self.model, self.tokenizer
        for iv in transforms:
            model, tok = iv.transform(model, tok, self.model_ref)
        return type(self)(
            model,
            tok,
            self.batch_size,
            self.token_stats,
            self.max_batch_tokens,
            self.model_ref,
            self.prefix_cache,
            self.decode,
            self.memory_budget_gib,
            self.compile_min_steps,
            self.pass_replies,
        )

    def encode(self, req: Request) -> list[int]:
        return encode_request(self.tokenizer, req)

    def prompt_length(self, req: Request) -> int:
        return len(self.encode(req))

    def check(self, decoding, interventions: Sequence = ()) -> None:
        if self.token_stats and decoding.num_beams > 1:
            raise ConfigError("token statistics (confusion analysis) need num_beams=1")
        if any("transform" in iv.applies_via for iv in interventions):
            raise ConfigError(
                "hf backend: model transforms are applied by building a transformed backend "
                "(HFBackend.transformed), not per generate call"
            )
        if self.decode == "compiled" and _flash_attention(self.model):
            raise ConfigError(
                f"hf backend: decode: compiled with {_flash_attention(self.model)} (its unpadding "
                "breaks the compiled graph in every layer): use decode: auto, eager or static"
            )

    def start_pass(self, replies: int | None) -> None:
        """The number of replies the coming pass generates (the runner tells it before its first generate call,
        None after the pass): `decode: auto` compiles only a pass long enough to pay for it (compile_min_steps).
        Each generate call sees one chunk of the pass; without this, auto compiles on CUDA whatever the size."""
        self.pass_replies = replies

    def pass_steps(self, decoding) -> int | None:
        """Decode steps the pass under way runs at least (its replies in batches of batch_size, max_new_tokens
        each; a step costs about the same at 2 rows as at 200), None when not told."""
        if self.pass_replies is None:
            return None
        return -(-self.pass_replies // self.batch_size) * decoding.max_new_tokens

    def close(self) -> None:
        self._pool = self._prefix = None  # the compiled path's reused cache: its memory goes back

    def generate(self, requests: list[Request], decoding, interventions: Sequence = ()) -> Iterator[Result]:
        self.check(decoding, interventions)
        encoded = [self.encode(r) for r in requests]
        for idx in self._batches(encoded, decoding, interventions):
            yield from self._generate_batch(
                [requests[i] for i in idx], [encoded[i] for i in idx], decoding, interventions
            )

    def plan(self, requests: list[Request], decoding=None, interventions: Sequence = ()) -> list[list[Request]]:
        """The batches `generate(requests, decoding, interventions)` generates, in order (each one, generated
        alone, is generated the same: data-parallel evaluation hands them to different ranks)."""
        encoded = [self.encode(r) for r in requests]
        return [[requests[i] for i in idx] for idx in self._batches(encoded, decoding, interventions)]

    def budget(self, decoding=None, interventions: Sequence = ()) -> BatchBudget:
        """What one batch may hold (`mlft.generation.batching`): batch_size rows, max_batch_tokens prefill tokens,
        and the KV cache of its rows at `decoding.max_new_tokens` within the memory budget (measured now); with
        compiled decoding, at the shape bucket the batch is padded to."""
        param = next(self.model.parameters(), None)
        return self._budget_on(param.device if param is not None else None, decoding, interventions)

    def _budget_on(self, device, decoding=None, interventions: Sequence = ()) -> BatchBudget:
        param = next(self.model.parameters(), None)
        config = getattr(self.model, "config", None)
        kv = kv_bytes_per_token(config, param.element_size()) if param is not None and config is not None else 0
        rows = (decoding.num_beams if decoding is not None else 1) * (
            2 if any("rows" in iv.applies_via for iv in interventions) else 1
        )  # contrast rows: one per request
        compiled = (
            decoding is not None
            and device is not None
            and self.decode_mode(device, decoding, interventions) == "compiled"
        )
        memory = None
        if kv:  # the reused cache of the compiled path is freed or reused by the next batch: it counts as free
            memory = memory_budget(device, self.memory_budget_gib) + (self._held_bytes() if compiled else 0)
        vocab = _vocab_size(config)
        step = decode_step_bytes(vocab, decoding, self.token_stats) + sum(
            iv.step_bytes_per_row(vocab) for iv in interventions if "strategy" not in iv.applies_via
        )
        return BatchBudget(
            self.batch_size,
            self.max_batch_tokens,
            decoding.max_new_tokens if decoding is not None else 0,
            kv,
            memory,
            rows,
            compiled,
            step if kv and decoding is not None else 0,
        )

    def _batches(self, encoded: list[list[int]], decoding=None, interventions: Sequence = ()) -> list[list[int]]:
        """Indices sorted by prompt length, cut where the next one would not fit `budget`."""
        return plan_batches([len(e) for e in encoded], self.budget(decoding, interventions))

    def _generate_batch(self, requests: list[Request], encoded: list[list[int]], decoding, interventions):
        import contextlib

        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        device = next(self.model.parameters()).device
        real = len(requests)
        mode = self.decode_mode(device, decoding, interventions)
        if mode == "compiled":  # padded to the rows bucket with copies of the last request (stopped at once)
            pad = row_bucket(real, self.batch_size) - real
            requests, encoded = requests + requests[-1:] * pad, encoded + encoded[-1:] * pad
        n = len(requests)
        paired = [iv for iv in interventions if "rows" in iv.applies_via]
        rows, row_enc, weights = list(requests), list(encoded), None
        if paired:  # contrastive rows: n more rows in the same batch, fed the main rows' tokens
            extra, weights = paired[0].contrast_requests(requests)
            rows += extra
            row_enc += [self.encode(r) for r in extra]
        width = max(len(e) for e in row_enc)
        prefix = self._shared_prefix(row_enc, decoding, interventions)
        p = len(prefix)  # rows: shared prefix, padding, each row's own tokens (positions follow the mask)
        input_ids = torch.tensor([e[:p] + [self.pad_id] * (width - len(e)) + e[p:] for e in row_enc], device=device)
        mask = torch.tensor([[1] * p + [0] * (width - len(e)) + [1] * (len(e) - p) for e in row_enc], device=device)
        languages = [r.language for r in requests]
        beams = decoding.num_beams > 1
        log = None if beams else StepLog(decoding, self.token_stats)
        processors = [log] if log else []
        contrastive = None
        for iv in interventions:
            if "rows" in iv.applies_via:
                contrastive = iv.paired_processor(weights)
                processors.append(contrastive)
            processors += iv.logits_processors(self.tokenizer, languages, self.model)
        sampler = None
        if decoding.sampling and not beams:  # each row's draws keyed by its request (no seed: a fresh stream)
            keys = (
                None
                if decoding.seed is None
                else torch.tensor(
                    [draw_key(decoding.seed, r.id, r.prefix) for r in requests], dtype=torch.long, device=device
                )
            )
            sampler = NucleusSampler(decoding.temperature, decoding.top_p, decoding.top_k, log=log, keys=keys)
            processors.append(sampler)
        elif decoding.sampling:  # beam sampling: transformers draws (the global stream, seeded per batch below)
            processors.append(NucleusWarper(decoding.temperature, decoding.top_p, decoding.top_k))
        elif log is not None:
            processors.append(GreedyPicker(log))
        chain = processors
        if contrastive is not None:
            if beams:
                raise ConfigError("contrastive decoding needs num_beams=1 (a beam is not paired with its contrast)")
            chain = [PairedRows(processors, n, contrastive)]
        started = time.perf_counter()
        devices = [device] if device.type == "cuda" else []
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.random.fork_rng(devices=devices))
            stack.enter_context(torch.inference_mode())
            static = self._cache_length(mode, width + decoding.max_new_tokens)  # None: eager's growing cache
            cache = self._prefix_kv(prefix, len(rows), static, mode == "compiled") if p else None  # before the hooks
            if p and cache is None:  # the model returned no cache (e.g. checkpointing on): the whole prompt
                input_ids, mask = self._unprefixed(row_enc, width, device)
            if static is not None and cache is None:  # sized here, as planned (never transformers' inherited one)
                cache = self._static_cache(len(rows), static, mode == "compiled")
            extra = {_cache_kwarg(self.model): cache} if cache is not None else {}
            if static is not None:
                extra.update(self._static_kwargs(mode, False))
            for iv in interventions:
                stack.enter_context(iv.hooks_batch(self.model, rows, mask))
            if decoding.seed is not None:
                torch.manual_seed(batch_seed(decoding.seed, requests[0].id))
            if any(r.stop_at_newline for r in requests) or n > real:  # padding rows: stopped after one token
                extra["stopping_criteria"] = StoppingCriteriaList(
                    [
                        NewlineStop(
                            self._newline_ids(),
                            [r.stop_at_newline for r in rows],
                            device=device,
                            done=[i % n >= real for i in range(len(rows))],
                        )
                    ]
                )
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_ids,
                logits_processor=LogitsProcessorList(chain),
                **decoding.hf_kwargs(),
                **extra,
            )
            out = out[:n]
            if log is not None:
                log.to_host()  # the per-step records, stacked and copied once
            if sampler is not None and sampler.invalid is not None and bool(sampler.invalid.any()):  # once a batch
                bad = [r.id for r, b in zip(requests[:real], sampler.invalid.tolist()) if b]
                raise ModelError(
                    f"the model's logits held no finite candidate (NaN or all -inf) while sampling "
                    f"request(s) {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}: check the "
                    "weights' dtype (fp16 overflow) and the interventions' masks"
                )
        seconds = (time.perf_counter() - started) / real
        generated = out[:real, width:].tolist()
        for row, (req, enc, ids) in enumerate(zip(requests[:real], encoded, generated)):
            ids, finish = cut_reply(
                ids, self.eos_ids, self._newline_ids() if req.stop_at_newline else (), req.stop_at_newline
            )
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            res = Result(req.id, text, finish, len(enc), len(ids), seconds)
            if log is not None:
                scored = len(ids) - (1 if finish == "stop" else 0)  # the end-of-turn token is not the reply
                if scored > 0 and text.strip():
                    res.extra["nll"] = round(-float(sum(log.logprob[k][row] for k in range(scored))) / scored, 5)
                if self.token_stats:
                    res.extra["token_stats"] = self._stats(ids, log, row)
            stats = {}
            for proc in processors:
                if hasattr(proc, "stats"):
                    stats.update(proc.stats(row))
            if stats:
                res.extra["intervention_stats"] = stats
            yield res

    def _newline_ids(self) -> frozenset[int]:
        """Token ids whose text holds a newline (byte-level vocabularies have many)."""
        if getattr(self, "_nl", None) is None:
            self._nl = frozenset(i for i, t in enumerate(vocab_index(self.tokenizer).texts) if t and "\n" in t)
        return self._nl

    def _stats(self, ids: list[int], recorder, row: int) -> dict:
        pieces, prev = [], ""  # a token ending inside a multi-byte character gets "", the next one the char
        for k in range(len(ids)):
            text = self.tokenizer.decode(ids[: k + 1], skip_special_tokens=True).rstrip("\ufffd")
            pieces.append(text[len(prev) :] if text.startswith(prev) else text)
            prev = text
        return {
            "pieces": pieces,
            "entropy": [round(float(recorder.entropy[k][row]), 5) for k in range(len(ids))],
            "nucleus": [int(recorder.nucleus[k][row]) for k in range(len(ids))],
        }

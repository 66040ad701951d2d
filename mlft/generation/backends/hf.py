"""The transformers backend: batched generation with left padding, batches of similar prompt length,
chat template (optional system prompt) or raw text, EOS stop, seeded sampling, greedy and beam search.
Sampling uses NucleusWarper (real top-p) in place of transformers' warpers: the same token sets, but it
does not sort the 49k-token vocabulary of every row at every step (20% of CPU time at batch 16).

With `token_stats=True` it also records, per generated token, the Shannon entropy (nats) of the model's
next-token distribution (temperature 1) and the nucleus size: how many tokens the sampling distribution
(the decoding's temperature, top-k, top-p) keeps at that step. Used by the confusion-point analysis.
"""

from __future__ import annotations

import hashlib
import time

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from mlft.errors import ConfigError, ModelError
from mlft.generation.backends import Request, Result
from mlft.generation.decoding import Decoding


def nucleus_size(logits: torch.Tensor, temperature: float, top_p: float, top_k: int | None) -> torch.Tensor:
    """Per row: size of the smallest set of most likely tokens whose probability sums to >= top_p."""
    probs = torch.softmax(logits.float() / (temperature if temperature > 0 else 1.0), dim=-1)
    sorted_probs = probs.sort(dim=-1, descending=True).values
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the tokens ranked above each one
    size = (before < top_p).sum(dim=-1)
    return size.clamp(max=top_k) if top_k else size


def entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(dim=-1)


class NucleusWarper(LogitsProcessor):
    """Temperature, then top-k, then top-p (the smallest set of tokens with cumulative probability >= p), as
    transformers' warpers do, but looking only at the `probe` most likely tokens when the nucleus lies
    within them (almost always at LCB settings) instead of sorting the whole vocabulary at every step."""

    def __init__(self, temperature: float, top_p: float, top_k: int | None = None, probe: int = 64):
        self.temperature, self.top_p, self.top_k, self.probe = temperature, top_p, top_k, probe

    def __call__(self, input_ids, scores):
        scores = scores.float() / self.temperature
        vocab = scores.shape[-1]
        k = min(self.top_k or vocab, vocab)
        if k < vocab:
            scores = scores.masked_fill(scores < scores.topk(k).values[..., -1:], float("-inf"))
        if self.top_p >= 1.0:
            return scores
        log_norm = torch.logsumexp(scores, dim=-1, keepdim=True)
        probe = min(self.probe, k)
        while True:
            values, index = scores.topk(probe)
            probs = torch.exp(values - log_norm)
            if probe == k or bool((probs.sum(-1) >= self.top_p).all()):
                break
            probe = k  # some row's nucleus is wider than the probe: look at all candidates
        size = ((probs.cumsum(-1) - probs) < self.top_p).sum(-1, keepdim=True)
        keep_sorted = torch.arange(probe, device=scores.device) < size
        keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, index, keep_sorted)
        return scores.masked_fill(~keep, float("-inf"))


class _TokenStatsRecorder(LogitsProcessor):
    """Sees the logits before transformers' temperature/top-k/top-p warpers (custom processors run first)."""

    def __init__(self, decoding: Decoding):
        self.decoding = decoding
        self.entropy: list[torch.Tensor] = []
        self.nucleus: list[torch.Tensor] = []

    def __call__(self, input_ids, scores):
        d = self.decoding
        self.entropy.append(entropy(scores).cpu())
        self.nucleus.append(nucleus_size(scores, d.temperature, d.top_p if d.sampling else 1.0, d.top_k).cpu())
        return scores


def batch_seed(seed: int, first_id: str) -> int:
    """Seed of a batch: depends only on the decoding seed and the batch's first request (so a resumed run
    re-draws exactly what the uninterrupted run would have drawn)."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{first_id}".encode()).digest()[:4], "little")


class HFBackend:
    name = "hf"

    def __init__(self, model, tokenizer, batch_size: int = 16, token_stats: bool = False,
                 max_batch_tokens: int = 8192):
        if batch_size < 1:
            raise ConfigError(f"batch_size: must be >= 1, got {batch_size}")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.token_stats, self.max_batch_tokens = token_stats, max_batch_tokens
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        self.eos_ids = sorted({e for e in [*eos, tokenizer.eos_token_id] if e is not None})

    def encode(self, req: Request) -> list[int]:
        tok = self.tokenizer
        if req.messages is not None:
            if not getattr(tok, "chat_template", None):
                raise ModelError("this model's tokenizer has no chat template: use prompting mode 'qa' or 'raw'")
            text = tok.apply_chat_template(req.messages, add_generation_prompt=True, tokenize=False)
            return tok(text, add_special_tokens=False)["input_ids"]
        return tok(req.text, add_special_tokens=True)["input_ids"]

    def prompt_length(self, req: Request) -> int:
        return len(self.encode(req))

    def check(self, decoding: Decoding) -> None:
        if self.token_stats and decoding.num_beams > 1:
            raise ConfigError("token statistics (confusion analysis) need num_beams=1")

    def generate(self, requests: list[Request], decoding: Decoding) -> list[Result]:
        self.check(decoding)
        encoded = [self.encode(r) for r in requests]
        results: list[Result | None] = [None] * len(requests)
        for idx in self._batches(encoded):
            for i, res in zip(idx, self._generate_batch([requests[i] for i in idx], [encoded[i] for i in idx],
                                                        decoding)):
                results[i] = res
        return results

    def _batches(self, encoded: list[list[int]]) -> list[list[int]]:
        """Indices sorted by prompt length, cut at batch_size rows or max_batch_tokens padded prompt tokens
        (so a few 4k-token prompts do not pad a whole batch to 4k)."""
        batches: list[list[int]] = []
        for i in sorted(range(len(encoded)), key=lambda i: len(encoded[i])):
            cur = batches[-1] if batches else None
            if cur is None or len(cur) >= self.batch_size or (len(cur) + 1) * len(encoded[i]) > self.max_batch_tokens:
                batches.append([i])
            else:
                cur.append(i)
        return batches

    def _generate_batch(self, requests: list[Request], encoded: list[list[int]], decoding: Decoding):
        device = next(self.model.parameters()).device
        width = max(len(e) for e in encoded)
        input_ids = torch.tensor([[self.pad_id] * (width - len(e)) + e for e in encoded], device=device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=device)
        recorder = _TokenStatsRecorder(decoding) if self.token_stats else None
        processors = [recorder] if recorder else []  # the recorder sees the model's own logits
        if decoding.sampling:
            processors.append(NucleusWarper(decoding.temperature, decoding.top_p, decoding.top_k))
        started = time.perf_counter()
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(batch_seed(decoding.seed, requests[0].id))
            out = self.model.generate(
                input_ids=input_ids, attention_mask=mask, pad_token_id=self.pad_id, eos_token_id=self.eos_ids,
                logits_processor=LogitsProcessorList(processors), **decoding.hf_kwargs())
        seconds = (time.perf_counter() - started) / len(requests)
        generated = out[:, width:].tolist()
        results = []
        for row, (req, enc, ids) in enumerate(zip(requests, encoded, generated)):
            n = next((k + 1 for k, t in enumerate(ids) if t in self.eos_ids), None)
            finish = "stop" if n is not None else "length"
            ids = ids[:n] if n is not None else ids
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            res = Result(req.id, text, finish, len(enc), len(ids), seconds)
            if recorder is not None:
                res.extra["token_stats"] = self._stats(ids, recorder, row)
            results.append(res)
        return results

    def _stats(self, ids: list[int], recorder: _TokenStatsRecorder, row: int) -> dict:
        pieces, prev = [], ""  # a token ending inside a multi-byte character gets "", the next one the char
        for k in range(len(ids)):
            text = self.tokenizer.decode(ids[:k + 1], skip_special_tokens=True).rstrip("\ufffd")
            pieces.append(text[len(prev):] if text.startswith(prev) else text)
            prev = text
        return {"pieces": pieces,
                "entropy": [round(float(recorder.entropy[k][row]), 5) for k in range(len(ids))],
                "nucleus": [int(recorder.nucleus[k][row]) for k in range(len(ids))]}

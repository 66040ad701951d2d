"""Logits processors of the hf backend: exact nucleus sampling without a full sort, and per-token records.

NucleusWarper applies temperature, top-k and top-p as transformers' warpers do (the same token sets), but it
does not sort the 49k-token vocabulary of every row at every step (20 % of CPU time at batch 16).

NucleusSampler goes one step further: it draws the next token itself, among the nucleus candidates only, and
returns scores where that token alone is finite, so `generate` runs greedy (argmax) instead of
`torch.multinomial` over the whole vocabulary (an exponential draw per vocabulary entry per row per step: 36 ms
a step for 29 rows here). The distribution is the same: temperature, then top-k, then top-p, renormalised. It
draws by Gumbel-max with noise keyed by each row's request (`keyed_gumbel`): no generator state, no
`torch.multinomial` (which syncs inside the op and turns a NaN row into a device assert).

StepLog sees the model's own logits (it runs first) and records, per generated token, its log-probability
under them (the fluency proxy of a reply: the mean negative log-likelihood of its tokens under the model before
any logits processor) and, with `token_stats`, the Shannon entropy (nats, temperature 1) and the nucleus size
(how many tokens the decoding's temperature / top-k / top-p keep). The last processor (the sampler, or
GreedyPicker for greedy decoding) tells it which token was chosen.

On a GPU, nothing here reads a tensor on the host inside the decode loop (a read drains the GPU's queue at every
token): records stay on the device and are stacked and copied once per batch (`StepLog.to_host`), tensors are
built on the logits' device once per batch. Only on a CPU, where a host read costs nothing, do the samplers keep
their data-dependent shortcut (`host_checks`): look at the 64 most likely tokens and sort the whole vocabulary
only when a row's nucleus is wider. Elsewhere they take the top-k / sort once, without asking.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from mlft.generation.sync_count import host_checks


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
    """Temperature, then top-k, then top-p (the smallest set of tokens with cumulative probability >= p),
    looking only at the `probe` most likely tokens when the nucleus lies within them (almost always at LCB
    settings) instead of sorting the whole vocabulary at every step."""

    def __init__(self, temperature: float, top_p: float, top_k: int | None = None, probe: int = 64):
        self.temperature, self.top_p, self.top_k, self.probe = temperature, top_p, top_k, probe

    def _scaled(self, scores):
        """Temperature, then top-k (the k-th largest value kept, as transformers' TopKLogitsWarper)."""
        scores = scores.float() / self.temperature
        vocab = scores.shape[-1]
        k = min(self.top_k or vocab, vocab)
        if k < vocab:
            scores = scores.masked_fill(scores < scores.topk(k).values[..., -1:], float("-inf"))
        return scores, k

    def _nucleus(self, scores, k: int):
        """(values, index, keep): the `probe` (or k) most likely tokens, sorted, and which are in the nucleus."""
        log_norm = torch.logsumexp(scores, dim=-1, keepdim=True)
        probe = min(self.probe, k) if host_checks(scores) else k  # elsewhere: no host read, one top-k
        while True:
            values, index = scores.topk(probe)
            probs = torch.exp(values - log_norm)
            if probe == k or bool((probs.sum(-1) >= self.top_p).all()):
                break
            probe = k  # some row's nucleus is wider than the probe: look at all candidates
        size = ((probs.cumsum(-1) - probs) < self.top_p).sum(-1, keepdim=True)
        return values, index, torch.arange(probe, device=scores.device) < size

    def __call__(self, input_ids, scores):
        scores, k = self._scaled(scores)
        if self.top_p >= 1.0:
            return scores
        _, index, keep_sorted = self._nucleus(scores, k)
        keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, index, keep_sorted)
        return scores.masked_fill(~keep, float("-inf"))


class StepLog(LogitsProcessor):
    """Records per step: the raw log-probability of the chosen token (always), entropy and nucleus size (with
    `token_stats`). Runs first; the picker at the end of the chain calls `chosen(tokens)`."""

    def __init__(self, decoding, token_stats: bool = False):
        self.decoding, self.token_stats = decoding, token_stats
        self.logprob: list = []  # per step a [rows] tensor on the device; after to_host(): [steps, rows] on the CPU
        self.entropy: list = []
        self.nucleus: list = []
        self._raw = None

    def __call__(self, input_ids, scores):
        d = self.decoding
        self._raw = torch.log_softmax(scores.float(), dim=-1)
        if self.token_stats:
            self.entropy.append(entropy(scores))
            self.nucleus.append(nucleus_size(scores, d.temperature, d.top_p if d.sampling else 1.0, d.top_k))
        return scores

    def chosen(self, tokens: torch.Tensor) -> None:
        self.logprob.append(self._raw.gather(-1, tokens.view(-1, 1)).squeeze(-1))
        self._raw = None

    def to_host(self) -> StepLog:
        """Stack the per-step records and copy them to the host once (after generation): [steps, rows] CPU
        tensors, indexed [step][row] as the lists were (the same float32 values, so the same sums)."""
        for name in ("logprob", "entropy", "nucleus"):
            steps = getattr(self, name)
            if isinstance(steps, list) and steps:
                setattr(self, name, torch.stack(steps).cpu())
        return self


_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for int64 tensors holding 32-bit values: in 16-bit halves, so no product passes 2**48
    (no int64 overflow on any device)."""
    return ((x & 0xFFFF) * c + ((((x >> 16) * c) & 0xFFFF) << 16)) & _M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (Wellons' lowbias32): a bijection of 32-bit values whose outputs look independent."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _mix32_int(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def keyed_gumbel(keys: torch.Tensor, step: int, tokens: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) noise per (row, token) at decode `step`, a pure function of the row's key, the step and the
    token id (counter-based: computed on the tokens' device, no generator state, no host read). `keys`: [rows, 2]
    int64 (32-bit words), `tokens`: [rows, m] int64 token ids. Uniforms have 24 bits (float32's mantissa):
    the noise is exact Gumbel noise up to 2**-24 in probability."""
    s = _mix32_int((step * 0x9E3779B9 + 0x7F4A7C15) & _M32)  # a host integer: no tensor, no sync
    row = mix32(keys[:, :1] ^ s)
    h = mix32(mix32(row ^ (tokens & _M32)) ^ keys[:, 1:])
    u = ((h >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))  # in (0, 1), never 0 or 1
    return -torch.log(-torch.log(u))


class NucleusSampler(NucleusWarper):
    """Sample the next token among the nucleus (temperature, top-k, top-p) and return scores where only it is
    finite: `generate` then picks it greedily.

    The draw is Gumbel-max over the nucleus: argmax of (scaled logit + Gumbel noise) among the nucleus tokens is
    an exact draw from the renormalised nucleus distribution. With `keys` ([rows, 2],
    `mlft.generation.requests.draw_key` per row) the
    noise of a row is keyed by its request and the step (`keyed_gumbel`): a reply depends only on (model, prompt,
    decoding, seed, request id), not on batch size, batch composition, memory budget, ranks, resume or order,
    and the same key gives common random numbers across checkpoints. Without keys, the noise comes from
    `generator` (exponential draws). No `torch.multinomial` (its sync inside the op and its device assert on a
    NaN row): a row with no finite candidate (NaN or all -inf logits) is marked in `invalid` (on the device;
    the backend reads it once per batch and raises)."""

    def __init__(
        self,
        temperature: float,
        top_p: float,
        top_k: int | None = None,
        probe: int = 64,
        log: StepLog | None = None,
        generator: torch.Generator | None = None,
        keys: torch.Tensor | None = None,
    ):
        super().__init__(temperature, top_p, top_k, probe)
        self.log = log
        self.generator = generator  # its own random stream (no keys): draws do not depend on what else ran
        self.keys = keys
        self.step = 0
        self.invalid: torch.Tensor | None = None  # [rows] bool on the device: a row had no finite candidate

    def _noise(self, index: torch.Tensor) -> torch.Tensor:
        if self.keys is not None:
            if self.keys.device != index.device:
                self.keys = self.keys.to(index.device)
            return keyed_gumbel(self.keys, self.step, index)
        expo = torch.empty(index.shape, device=index.device).exponential_(generator=self.generator)
        return -torch.log(expo)

    def __call__(self, input_ids, scores):
        if host_checks(scores):  # CPU: the probe, and a full sort only when a row's nucleus is wider
            warped = super().__call__(input_ids, scores)
            k = min(self.probe, warped.shape[-1])
            values, index = warped.topk(k)
            if not bool(torch.isinf(values[:, -1]).all()):  # a row's nucleus is wider than the probe
                values, index = warped.sort(dim=-1, descending=True)
        else:  # no host read: one top-k (a sort without top_k), the draw among its nucleus
            values, k = self._scaled(scores)
            index = None  # top_p 1: the draw over the whole (top-k masked) vocabulary, no sort
            if self.top_p < 1.0:
                values, index, keep = self._nucleus(values, k)
                values = values.masked_fill(~keep, float("-inf"))
        if index is None:
            index = torch.arange(values.shape[-1], device=values.device).expand_as(values)
        # Gumbel-max: the noise is keyed by token id, so the draw does not depend on how candidates are ordered
        pick = (values + self._noise(index)).nan_to_num(nan=float("-inf")).argmax(dim=-1, keepdim=True)
        bad = ~torch.isfinite(values.amax(dim=-1))  # NaN or no finite candidate: recorded, raised per batch
        self.invalid = bad if self.invalid is None else self.invalid | bad
        self.step += 1
        tokens = index.gather(-1, pick).squeeze(-1)
        if self.log is not None:
            self.log.chosen(tokens)
        out = torch.full_like(scores, float("-inf"), dtype=torch.float32)
        return out.scatter_(-1, tokens.view(-1, 1), 0.0)


class GreedyPicker(LogitsProcessor):
    """Greedy decoding: tell the step log which token `generate` will pick (the argmax), scores unchanged."""

    def __init__(self, log: StepLog):
        self.log = log

    def __call__(self, input_ids, scores):
        self.log.chosen(scores.argmax(dim=-1))
        return scores


class NewlineStop:
    """Stopping criterion: a row is done once it generated a token holding a newline (rows with `active` False
    are never stopped by it), and rows flagged `done` (padding rows) after their first token. Returns one flag
    per row, as transformers' criteria do.

    A boolean lookup table over the token ids (built once per batch): one gather per step, no host read
    (`torch.isin` against thousands of newline ids takes its sort / unique path: a sync per step on a GPU). Ids
    past the table (a model vocabulary wider than the tokenizer's) land on its last entry, always False."""

    def __init__(self, newline_ids, active: list[bool], device=None, done: list[bool] | None = None):
        ids = sorted(newline_ids)
        table = torch.zeros((ids[-1] + 2) if ids else 1, dtype=torch.bool)
        table[torch.tensor(ids, dtype=torch.long)] = True
        self.table = table.to(device)
        self.active = torch.tensor(active, dtype=torch.bool, device=device)
        self.done = torch.tensor(done if done is not None else [False] * len(active), dtype=torch.bool, device=device)

    def __call__(self, input_ids, scores, **kwargs):
        last = input_ids[:, -1]
        if self.table.device != last.device:  # built elsewhere: moved once, not per step
            self.table, self.active, self.done = (t.to(last.device) for t in (self.table, self.active, self.done))
        hit = self.table.index_select(0, last.clamp(max=self.table.shape[0] - 1))
        return (hit & self.active) | self.done

"""Contrastive Knowledge Assessment (CKA) with a causal LM.

For each fact: P(first token of " " + true | stem) against the mean over counterfactuals of
P(first token of " " + false_k | stem_k); known iff strictly greater (ties are not known). The stem is fed raw
(no chat template, nothing appended); the next-token distribution comes from ONE forward pass per unique stem,
batched with right padding so every stem's last position sees exactly its own tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mlft.benchmarks.polyglot.data import Fact
from mlft.errors import DataError


@dataclass(frozen=True)
class FactScore:
    fact: Fact
    p_true: float
    p_false: tuple[float, ...]

    @property
    def p_false_mean(self) -> float:
        return sum(self.p_false) / len(self.p_false)

    @property
    def known(self) -> bool:
        return self.p_true > self.p_false_mean


def first_token_id(tokenizer, word: str) -> int:
    """Id of the first real token of " " + word: skips special tokens (BOS) and a lone word-start marker
    ("▁" in SentencePiece, "Ġ" in byte-level BPE) that some tokenizers emit before the word itself."""
    ids = tokenizer(" " + word, add_special_tokens=True)["input_ids"]
    special = set(tokenizer.all_special_ids)
    ids = [i for i in ids if i not in special]
    while len(ids) > 1 and not tokenizer.decode([ids[0]]).strip():
        ids = ids[1:]
    if not ids:
        raise DataError(f"answer {word!r} tokenizes to no real token")
    return ids[0]


def _batches(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def next_token_probs(
    model,
    tokenizer,
    stems: list[str],
    token_ids: dict[str, set[int]],
    batch_size: int = 16,
    progress: bool = True,
    desc: str = "CKA",
) -> dict[tuple[str, int], float]:
    """P(token | stem) for each stem and each of its `token_ids[stem]`; one forward pass per unique stem."""
    import torch
    from tqdm.auto import tqdm

    unique = sorted(set(stems), key=lambda s: len(s))
    probs: dict[tuple[str, int], float] = {}
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    bar = tqdm(total=len(unique), desc=desc, unit="stem", disable=not progress, leave=False)
    with torch.inference_mode():
        for batch in _batches(unique, batch_size):
            encoded = [tokenizer(s, add_special_tokens=True)["input_ids"] for s in batch]
            width = max(len(e) for e in encoded)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, ids in enumerate(encoded):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                mask[row, : len(ids)] = 1
            last = torch.tensor([len(e) - 1 for e in encoded])
            logits = _last_logits(model, input_ids.to(device), mask.to(device), last.to(device))
            dist = torch.softmax(logits.float(), dim=-1)
            for row, stem in enumerate(batch):
                for tid in token_ids[stem]:
                    probs[stem, tid] = float(dist[row, tid])
            bar.update(len(batch))
    bar.close()
    return probs


def _last_logits(model, input_ids, mask, last):
    """Logits at each row's last real position: [batch, vocab] (only those positions are projected when the
    model accepts a per-row `logits_to_keep`)."""
    try:
        out = model(input_ids=input_ids, attention_mask=mask, logits_to_keep=last[:, None])
        logits = out.logits
        if logits.dim() == 3 and logits.shape[1] == 1:
            return logits[:, 0]
    except TypeError:
        pass
    logits = model(input_ids=input_ids, attention_mask=mask).logits
    return logits[range(len(last)), last]


def score_facts(
    model, tokenizer, facts: list[Fact], batch_size: int = 16, progress: bool = True, desc: str = "CKA"
) -> list[FactScore]:
    first: dict[str, int] = {}

    def tok(word: str) -> int:
        if word not in first:
            first[word] = first_token_id(tokenizer, word)
        return first[word]

    wanted: dict[str, set[int]] = {}
    for f in facts:
        wanted.setdefault(f.true_stem, set()).add(tok(f.true))
        for stem, word in zip(f.false_stems, f.false):
            wanted.setdefault(stem, set()).add(tok(word))
    probs = next_token_probs(model, tokenizer, list(wanted), wanted, batch_size, progress, desc)
    return [
        FactScore(f, probs[f.true_stem, tok(f.true)], tuple(probs[s, tok(w)] for s, w in zip(f.false_stems, f.false)))
        for f in facts
    ]

"""The learned Language Confusion Gate (Zhang et al., ICLR 2026): token families, self-distillation on the frozen
model's own hidden states, the gate network, its file with provenance.

    families = token_families(tokenizer, vocab_size)          # [vocab] family index of every token
    rows, sources = seed_rows(), [...]                        # chat rows (never LCB test prompts)
    data = distill(model, tokenizer, rows, families)          # last hidden state + label per position
    gate = train_gate(data, families, model="smollm2-135m-instruct")
    save_gate(gate, "gates/smollm2.safetensors", provenance={...})
    gate = load_gate("gates/smollm2.safetensors")             # bit-identical tensors

Families (a token's letters' scripts, mlft.generation.interventions.vocab; a token holding letters of two
families takes the first in this order): the paper's CJ, Latin, symbol and low-resource ("other"), with the
scripts its lowres variant splits out (Hangul, Cyrillic, Arabic) and Devanagari (LCB's Hindi), plus `fragment`
(a byte piece that cannot be placed: the rest of a character begun by the previous token) — so every token of
the embedded SmolLM2-135M vocabulary has exactly one family:

    cj          han or kana                 hangul, devanagari, arabic, cyrillic, latin
    other       greek, hebrew, thai, ...    (the paper's "low-resource" catch-all: never masked)
    fragment    continuation bytes          (never masked)
    symbol      digits, punctuation, whitespace, special tokens (EOS, chat markers; never masked)

Self-distillation (as the paper's code, train/confusion_gate.py): each row (a chat prompt and reply, teacher-
forced through the frozen model) gives, at every position, the last hidden state (the lm_head's input) and a
multi-hot label: the families among the model's own next-token candidates — the top-k (20) tokens cut at
cumulative probability top-p (0.95) — of the *norm-adjusted* logits z_i / ||e_i|| (output embeddings of
high-resource languages have larger norms and would otherwise crowd the candidates). The label never looks at
the row's target language: the gate learns what the model itself would consider. The gate is the paper's
2-layer MLP (hidden -> hidden, ReLU, hidden -> families; no biases), trained with binary cross-entropy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from mlft.data.crosslingual import crosslingual_prompt
from mlft.data.seed import heldout_items, training_items
from mlft.errors import ConfigError, DataError
from mlft.generation.interventions.steer_vectors import parallel_texts
from mlft.generation.interventions.vocab import vocab_index
from mlft.generation.sync_count import host_checks
from mlft.provenance import read_tensor_file, save_tensor_file

FAMILIES = ("cj", "hangul", "devanagari", "arabic", "cyrillic", "latin", "other", "fragment", "symbol")
MASKABLE = frozenset({"cj", "hangul", "devanagari", "arabic", "cyrillic", "latin"})
_SCRIPT_FAMILY = {
    "han": "cj",
    "kana": "cj",
    "hangul": "hangul",
    "devanagari": "devanagari",
    "arabic": "arabic",
    "cyrillic": "cyrillic",
    "latin": "latin",
    "greek": "other",
    "hebrew": "other",
    "thai": "other",
    "other": "other",
}


def family_of(scripts: frozenset[str]) -> str:
    """The family of a token with these scripts (vocab.VocabIndex.scripts)."""
    if "special" in scripts or not scripts:
        return "symbol"
    fams = {_SCRIPT_FAMILY.get(s, "other") for s in scripts if s != "fragment"}
    if not fams:
        return "fragment"
    return next(f for f in FAMILIES if f in fams)


def token_families(tokenizer, vocab_size: int | None = None):
    """[vocab_size] int64 tensor: the family index of every token (ids beyond the tokenizer: symbol)."""
    import torch

    index = vocab_index(tokenizer)
    fam = [FAMILIES.index(family_of(s)) for s in index.scripts]
    size = vocab_size or len(fam)
    fam = fam[:size] + [FAMILIES.index("symbol")] * (size - len(fam))
    return torch.tensor(fam, dtype=torch.int64)


def family_shares(families) -> dict[str, float]:
    """Share of the vocabulary (%) in each family."""
    import torch

    counts = torch.bincount(families, minlength=len(FAMILIES)).tolist()
    return {f: round(100.0 * c / len(families), 3) for f, c in zip(FAMILIES, counts)}


def logsumexp(x):
    """torch.logsumexp over the last dim, with terms below e^-80 of the largest raised to it: they add < 1e-30
    relative, and exp() of such numbers makes float32 denormals, on which a CPU is 10x slower."""
    top = x.max(-1, keepdim=True).values
    return top + (x - top).clamp_min(-80.0).exp().sum(-1, keepdim=True).log()


def candidate_families(logits, families, top_k: int, top_p: float):
    """[rows, families] bool: the families among each row's candidates (top-k tokens, cut at cumulative
    probability top-p; the first token always kept)."""
    import torch

    logits = logits.float()
    limit = min(top_k, logits.shape[-1])
    lse = logsumexp(logits)
    fam_table = families if families.device == logits.device else families.to(logits.device)

    def families_in(rows, k):
        top, idx = logits[rows].topk(k, dim=-1)
        probs = (top - lse[rows]).exp()
        keep = (probs.cumsum(-1) - probs) < top_p
        keep[:, 0] = True
        hot = torch.nn.functional.one_hot(fam_table[idx], len(FAMILIES)).bool() & keep[..., None]
        return hot.any(1), keep[:, -1]

    if not host_checks(logits):  # an accelerator: all candidates at once, no host read
        return families_in(slice(None), limit)[0]
    # a nucleus is usually a few tokens: look at the top 64 first, the rest only for rows whose cut lies beyond
    out, more = families_in(slice(None), min(limit, 64))
    if limit > 64 and bool(more.any()):
        rows = more.nonzero().flatten()
        out[rows] = families_in(rows, limit)[0]
    return out


# --- training rows ------------------------------------------------------------------------------------------


def seed_rows(heldout: bool = False, languages: list[str] | None = None, items: int | None = None) -> list[dict]:
    """Chat rows from mlft's seed data: per item and language, the monolingual pair (instruction and reply in X)
    and, for X != en, the cross-lingual one (the English instruction + a request for X -> the reply in X, with
    mlft's training phrasings, never LCB's). `heldout`: the held-out items instead of the training ones; `items`:
    the first N items only."""
    rows = []
    for it in (heldout_items() if heldout else training_items())[:items]:
        for lang, pair in it["langs"].items():
            if languages and lang not in languages:
                continue
            rows.append(
                {
                    "id": f"{it['key']}:{lang}",
                    "language": lang,
                    "messages": [
                        {"role": "user", "content": pair["instruction"]},
                        {"role": "assistant", "content": pair["response"]},
                    ],
                }
            )
            if lang != "en":
                prompt = crosslingual_prompt(it["langs"]["en"]["instruction"], lang, it["key"], "en")
                rows.append(
                    {
                        "id": f"{it['key']}:en>{lang}",
                        "language": lang,
                        "messages": [
                            {"role": "user", "content": prompt},
                            {"role": "assistant", "content": pair["response"]},
                        ],
                    }
                )
    return rows


def text_rows(source: str, per_language: int | None = None, polyglot_dir=None) -> tuple[list[dict], list[dict]]:
    """Raw-text rows (no chat template) from `polyglot` or a file of `id, text, language` rows."""
    texts, records = parallel_texts(source, per_language, None, polyglot_dir)
    rows = [
        {"id": f"{source}:{lang}:{i}", "language": lang, "text": t}
        for lang, ts in texts.items()
        for i, t in enumerate(ts)
    ]
    return rows, records


def encode_row(tokenizer, row: dict, max_tokens: int) -> list[int]:
    if "messages" in row:
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError("gate train: the model's tokenizer has no chat template (use text rows)")
        text = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(row["text"], add_special_tokens=True)["input_ids"]
    return ids[:max_tokens]


# --- self-distillation ------------------------------------------------------------------------------------------


@dataclass
class Distilled:
    states: object  # [positions, hidden] float32: the lm_head's input
    labels: object  # [positions, families] bool: families among the norm-adjusted candidates
    rows: object  # [positions] int64: the row each position came from
    seconds: float = 0.0


class LastHidden:
    """Forward pre-hook on the output embeddings (lm_head): keeps its input, the model's last hidden state (after
    the final norm), as `.value` [rows, positions, hidden]."""

    def __init__(self, model):
        self.head = model.get_output_embeddings()
        self.value = None
        self.handle = None

    def __enter__(self):
        def hook(module, args):
            self.value = args[0]

        self.handle = self.head.register_forward_pre_hook(hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()
        self.handle = None
        return False


def distill(
    model,
    tokenizer,
    rows: list[dict],
    families,
    top_k: int = 20,
    top_p: float = 0.95,
    norm_adjust: bool = True,
    batch_size: int = 8,
    max_tokens: int = 256,
    progress: bool = True,
) -> Distilled:
    """Teacher-force every row through the frozen model; per real (non-padding) position keep the last hidden
    state and the label (families among the top-k/top-p candidates of the norm-adjusted logits)."""
    import torch
    from tqdm.auto import tqdm

    if not rows:
        raise DataError("gate train: no training rows")
    started = time.perf_counter()
    device = next(model.parameters()).device
    head = model.get_output_embeddings().weight.detach()
    norms = head.float().norm(dim=-1).clamp_min(1e-6).to(device)
    fam = families.to(device)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    encoded = [encode_row(tokenizer, r, max_tokens) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: len(encoded[i]))
    states, labels, owners = [], [], []
    with (
        torch.inference_mode(),
        LastHidden(model) as last,
        tqdm(total=len(rows), desc="gate: distil", unit="row", disable=not progress) as bar,
    ):
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = [encoded[i] for i in idx]
            width = max(map(len, enc))
            ids = torch.tensor([e + [pad] * (width - len(e)) for e in enc], device=device)
            mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in enc], device=device)
            out = model(input_ids=ids, attention_mask=mask, use_cache=False)
            real = mask.bool()
            logits = out.logits[real].float()[:, : len(norms)]
            if norm_adjust:
                logits = logits / norms
            labels.append(candidate_families(logits, fam, top_k, top_p).cpu())
            states.append(last.value[real].float().cpu())
            owners.append(torch.tensor([i for i, e in zip(idx, enc) for _ in e], dtype=torch.int64))
            bar.update(len(idx))
    return Distilled(torch.cat(states), torch.cat(labels), torch.cat(owners), time.perf_counter() - started)


# --- the gate ----------------------------------------------------------------------------------------------------


def gate_net(hidden: int, n_families: int = len(FAMILIES)):
    """The paper's gate: Linear(hidden, hidden) -> ReLU -> Linear(hidden, families), no biases."""
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden, bias=False), torch.nn.ReLU(), torch.nn.Linear(hidden, n_families, bias=False)
    )


@dataclass
class Gate:
    net: object  # torch.nn.Sequential (gate_net)
    families: object  # [vocab] int64: family index per token
    model: str = ""
    top_k: int = 20
    top_p: float = 0.95
    norm_adjust: bool = True
    history: list = field(default_factory=list)  # per epoch: train loss

    @property
    def hidden_size(self) -> int:
        return int(self.net[0].weight.shape[1])

    def predict(self, states):
        """[rows, families] probabilities (float32)."""
        import torch

        with torch.no_grad():
            device = self.net[0].weight.device
            return torch.sigmoid(self.net((states if states.device == device else states.to(device)).float()))


def train_gate(
    data: Distilled,
    families,
    *,
    model: str = "",
    top_k: int = 20,
    top_p: float = 0.95,
    norm_adjust: bool = True,
    epochs: int = 4,
    lr: float = 1e-3,
    batch_size: int = 256,
    weight_decay: float = 0.01,
    seed: int = 0,
    progress: bool = True,
) -> Gate:
    """Fit the gate on distilled (state, label) pairs with binary cross-entropy (AdamW; deterministic for a seed)."""
    import torch
    from tqdm.auto import tqdm

    if epochs < 1 or lr <= 0 or batch_size < 1:
        raise ConfigError(
            f"gate train: epochs >= 1, lr > 0 and batch size >= 1 required (got {epochs}, {lr}, {batch_size})"
        )
    n, hidden = data.states.shape
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = gate_net(hidden)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    y = data.labels.float()
    history = []
    steps = epochs * ((n + batch_size - 1) // batch_size)
    with tqdm(total=steps, desc="gate: train", unit="step", disable=not progress) as bar:
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for start in range(0, n, batch_size):
                b = perm[start : start + batch_size]
                loss = loss_fn(net(data.states[b]), y[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(b)
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss.detach()):.4f}", refresh=False)
            history.append(round(total / n, 6))
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return Gate(net, families, model, top_k, top_p, norm_adjust, history)


def evaluate_gate(gate: Gate, data: Distilled, threshold: float = 0.5) -> dict:
    """On distilled pairs: the share of positions whose predicted family set equals the label set, and per family
    the label rate, precision and recall of `allowed` (p >= threshold, or the most likely family)."""
    import torch

    probs = gate.predict(data.states)
    pred = probs >= threshold
    pred[torch.arange(len(pred)), probs.argmax(-1)] = True
    y = data.labels
    out = {"positions": len(y), "exact": round(100.0 * float((pred == y).all(-1).float().mean()), 2), "families": {}}
    for j, f in enumerate(FAMILIES):
        tp = int((pred[:, j] & y[:, j]).sum())
        out["families"][f] = {
            "label_rate": round(100.0 * float(y[:, j].float().mean()), 2),
            "precision": round(100.0 * tp / max(int(pred[:, j].sum()), 1), 2),
            "recall": round(100.0 * tp / max(int(y[:, j].sum()), 1), 2),
        }
    return out


# --- files -------------------------------------------------------------------------------------------------------


def save_gate(gate: Gate, path: str | Path, provenance: dict | None = None) -> Path:
    """The gate as safetensors (`pre`, `head`, `families`; metadata: family names, model, candidate settings)
    and `<file>.provenance.json` beside it."""
    save_tensor_file(
        path,
        {
            "pre": gate.net[0].weight.detach().contiguous(),
            "head": gate.net[2].weight.detach().contiguous(),
            "families": gate.families.contiguous(),
        },
        {
            "family_names": ",".join(FAMILIES),
            "model": gate.model,
            "top_k": str(gate.top_k),
            "top_p": str(gate.top_p),
            "norm_adjust": str(gate.norm_adjust),
        },
        {
            **(provenance or {}),
            "model": gate.model,
            "hidden_size": gate.hidden_size,
            "families": list(FAMILIES),
            "maskable": sorted(MASKABLE),
            "family_shares": family_shares(gate.families),
            "top_k": gate.top_k,
            "top_p": gate.top_p,
            "norm_adjust": gate.norm_adjust,
            "train_loss": gate.history,
        },
    )
    load_gate.cache_clear()
    return path


@lru_cache(maxsize=8)
def load_gate(path: str | Path, where: str = "gate") -> Gate:
    import torch

    tensors, meta = read_tensor_file(
        path, where, {"pre", "head", "families"}, "gate file", "train one with `mlft build gate`", "family_names"
    )
    if tuple(meta["family_names"].split(",")) != FAMILIES:
        raise ConfigError(
            f"{where}: {path} has families {meta['family_names']}, this mlft {','.join(FAMILIES)}: retrain it"
        )
    hidden = tensors["pre"].shape[1]
    net = gate_net(hidden, tensors["head"].shape[0])
    with torch.no_grad():
        net[0].weight.copy_(tensors["pre"])
        net[2].weight.copy_(tensors["head"])
    net.eval()
    for param in net.parameters():
        param.requires_grad_(False)
    return Gate(
        net,
        tensors["families"],
        meta.get("model", "?"),
        int(meta.get("top_k", 20)),
        float(meta.get("top_p", 0.95)),
        meta.get("norm_adjust", "True") == "True",
    )

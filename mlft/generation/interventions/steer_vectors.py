"""Language vectors for the `steer` intervention: built from parallel text, saved with provenance, reloaded.

    texts = parallel_texts("seed")                       # or "polyglot", or a file of `id, text, language` rows
    vec = build_vectors(model, tokenizer, texts, method="mean")
    save_vectors(vec, "vectors/smollm2-mean.safetensors", provenance={...})
    vec = load_vectors("vectors/smollm2-mean.safetensors")   # bit-identical tensors

Text sources (never LCB test prompts):
  seed       mlft's seed data (15 LCB languages): instruction and response of every *training* item (the
             held-out items stay out: they are the dev split the layer and alpha are chosen on)
  polyglot   the Polyglot-or-Not parquet files (20 European languages): `stem + true` of the first N facts
  a file     JSONL or CSV with `id, text, language` per row

Each text is run through the frozen model once; every decoder layer's output (the residual stream) is
mean-pooled over the text's tokens except the first: that position is the attention sink, whose states are
10-100x larger than the rest (SmolLM2-135M, layer 15: 20,969 vs a median 167); pooled in, it dominated both
the language differences and the residual norm the shift is sized by (measured: r_15 733 instead of ~170),
and steering at alpha = 0.1 over all layers turned every reply into `ititit`. Methods:
  mean  per layer, v_L = mean over L's texts - the unweighted mean over languages (ReCoVeR)
  lda   at one layer (default the middle one), standardised states -> LDA over languages; each language's
        mean in LDA space is mapped back (pseudo-inverse of the scalings, times the scale) to the residual
        space (ITLC; without ITLC's extra pruning of LDA dimensions by a linear probe)
`norms[l]` is the mean L2 norm of layer l's token states on the build text: the steer intervention sizes its
shift relative to it. The file: tensors `vectors` [languages, layers, hidden], `layers`, `norms`; metadata
`languages`, `method`, `model`. Provenance (`<file>.provenance.json`): sources with sha256, rows per language,
model, method, options, versions, the vector file's own sha256.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mlft.data.seed import SEED_DIR, training_items
from mlft.errors import ConfigError, DataError
from mlft.io.download import file_digest
from mlft.io.jsonl import iter_objects
from mlft.languages import check_scorable
from mlft.paths import shared_dir
from mlft.provenance import read_tensor_file, save_tensor_file

METHODS = ("mean", "lda")
# Texts a language needs before its mean state is a vector and not one sentence's noise (the shipped builds use
# 8-10 per language; LDA needs several per class too). Checked before any model loads.
MIN_TEXTS_PER_LANGUAGE = 5


@dataclass
class LanguageVectors:
    languages: list[str]
    layers: list[int]
    vectors: object  # torch.Tensor [languages, layers, hidden]
    norms: object  # torch.Tensor [layers]
    method: str
    model: str

    @property
    def hidden_size(self) -> int:
        return int(self.vectors.shape[-1])


def decoder_layers(model):
    """The model's list of decoder layers (Llama/Qwen/Mistral-style `model.model.layers`, PEFT-wrapped too)."""
    base = model
    for attr in ("get_base_model",):
        if hasattr(base, attr) and callable(getattr(base, attr)):
            base = base.get_base_model()
    for path in (("model", "layers"), ("transformer", "h"), ("gpt_neox", "layers")):
        obj = base
        for p in path:
            obj = getattr(obj, p, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    raise ConfigError(f"steer: cannot find the decoder layers of {type(model).__name__}")


def _sha256(path: Path) -> str:
    return file_digest(Path(path))


# --- text sources -------------------------------------------------------------------------------------------


def seed_records(note: str = "training items; held-out items excluded") -> list[dict]:
    """Provenance of the seed files a build read (path and sha256)."""
    return [
        {"source": f"seed ({note})", "path": str(p), "sha256": _sha256(p)}
        for p in (SEED_DIR / "parallel.jsonl", SEED_DIR / "heldout.txt")
    ]


def parallel_texts(
    source: str,
    per_language: int | None = None,
    languages: list[str] | None = None,
    polyglot_dir: str | Path | None = None,
) -> tuple[dict[str, list[str]], list[dict]]:
    """({language: [texts]}, [source records with path and sha256]) from `seed`, `polyglot` or a file."""
    if source == "seed":
        texts: dict[str, list[str]] = {}
        for it in training_items():
            for lang, pair in it["langs"].items():
                texts.setdefault(lang, []).extend([pair["instruction"], pair["response"]])
        records = seed_records()
    elif source == "polyglot":
        folder = Path(polyglot_dir) if polyglot_dir else _polyglot_dir()
        texts, records = {}, []
        import pyarrow.parquet as pq

        for path in sorted(folder.glob("*.parquet")):
            lang = path.stem
            if languages and lang not in languages:
                continue
            table = pq.read_table(path, columns=["dataset_id", "stem", "true"]).to_pylist()
            table.sort(key=lambda r: r["dataset_id"])
            texts[lang] = [f"{r['stem']} {r['true']}".strip() for r in table[: per_language or 200]]
            records.append({"source": "polyglot", "path": str(path), "sha256": _sha256(path)})
        if not texts:
            raise DataError(f"{folder}: no polyglot parquet files (<language>.parquet)")
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"--from: {source!r} is not `seed`, `polyglot` or a file of `id, text, language` rows")
        texts = _read_text_file(path)
        records = [{"source": "file", "path": str(path.resolve()), "sha256": _sha256(path)}]
    if languages:
        for code in languages:
            check_scorable(code, "--languages")
        unknown = sorted(set(languages) - set(texts))
        if unknown:
            raise ConfigError(
                f"--languages: no text in {', '.join(unknown)} in {source} (it has {', '.join(sorted(texts))})"
            )
        texts = {k: v for k, v in texts.items() if k in languages}
    if per_language:
        texts = {k: v[:per_language] for k, v in texts.items()}
    if len(texts) < 2:
        raise DataError(f"{source}: language vectors need text in at least two languages, got {sorted(texts)}")
    return dict(sorted(texts.items())), records


def _polyglot_dir() -> Path:
    base = shared_dir()
    if base is None or not (base / "polyglot").is_dir():
        raise ConfigError("polyglot: no shared polyglot folder found; give --polyglot-dir")
    return base / "polyglot"


def _read_text_file(path: Path) -> dict[str, list[str]]:
    rows: list[tuple[int, dict]] = []
    if path.suffix.lower() in (".jsonl", ".json"):
        rows = list(iter_objects(path))  # (line number, object)
    else:
        try:
            with open(path, newline="", encoding="utf-8") as f:
                rows = [(n + 2, r) for n, r in enumerate(csv.DictReader(f))]
        except UnicodeDecodeError:
            raise DataError(f"{path}: not UTF-8 text") from None
    texts: dict[str, list[str]] = {}
    seen: set[str] = set()
    for n, r in rows:
        for key in ("id", "text", "language"):
            if not isinstance(r.get(key), str) or not r[key].strip():
                raise DataError(f"{path}: row {n}: missing or empty `{key}` (rows need id, text, language)")
        if r["id"] in seen:
            raise DataError(f"{path}: row {n}: duplicate id {r['id']!r}")
        seen.add(r["id"])
        code = check_scorable(r["language"].strip(), f"{path}: row {n}: `language`")
        texts.setdefault(code, []).append(r["text"])
    return texts


def check_vector_texts(texts: dict[str, list[str]], source: str, minimum: int = MIN_TEXTS_PER_LANGUAGE) -> None:
    """A DataError naming every language with fewer than `minimum` texts (and the minimum): a vector from one
    sentence per language is that sentence's noise, not a language direction. Call before loading a model."""
    few = {k: len(v) for k, v in texts.items() if len(v) < minimum}
    if few:
        counts = ", ".join(f"{k}: {n}" for k, n in sorted(few.items()))
        raise DataError(
            f"{source}: too few texts for a language vector ({counts}); every language needs at least "
            f"{minimum} texts (add rows, drop the language with --languages, or raise --per-language)"
        )


# --- building -----------------------------------------------------------------------------------------------


def pooled_states(model, tokenizer, texts: list[str], batch_size: int = 16, max_tokens: int = 128):
    """([texts, layers, hidden] mean-pooled decoder-layer outputs, [layers] mean token-state norm)."""
    import torch

    layers = decoder_layers(model)
    device = next(model.parameters()).device
    pooled, norm_sum, token_count = [], torch.zeros(len(layers), dtype=torch.float64), 0
    captured: dict[int, torch.Tensor] = {}
    handles = [
        layer.register_forward_hook(
            lambda mod, args, out, i=i: captured.__setitem__(i, out[0] if isinstance(out, tuple) else out)
        )
        for i, layer in enumerate(layers)
    ]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    try:
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                enc = [
                    tokenizer(t, add_special_tokens=False)["input_ids"][:max_tokens] or [pad]
                    for t in texts[start : start + batch_size]
                ]
                width = max(map(len, enc))
                ids = torch.tensor([e + [pad] * (width - len(e)) for e in enc], device=device)
                mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in enc], device=device)
                model(input_ids=ids, attention_mask=mask, use_cache=False)
                if width > 1:  # the first token is the attention sink: norms 10-100x the rest, left out
                    mask = mask.clone()
                    mask[torch.tensor([len(e) > 1 for e in enc], device=device), 0] = 0
                m = mask[:, :, None].float()
                states = torch.stack([captured[i].float() for i in range(len(layers))], dim=1)  # [b, L, T, d]
                pooled.append(((states * m[:, None]).sum(2) / m[:, None].sum(2)).cpu())
                norm_sum += (states.norm(dim=-1) * mask[:, None, :].float()).sum((0, 2)).double().cpu()
                token_count += int(mask.sum())
    finally:
        for h in handles:
            h.remove()
    return torch.cat(pooled), (norm_sum / token_count).float()


def build_vectors(
    model,
    tokenizer,
    texts: dict[str, list[str]],
    method: str = "mean",
    layers: list[int] | None = None,
    model_name: str = "",
    batch_size: int = 16,
) -> LanguageVectors:
    import numpy as np
    import torch

    if method not in METHODS:
        raise ConfigError(f"--method: {method!r} is not one of {', '.join(METHODS)}")
    n_layers = len(decoder_layers(model))
    if layers is None:
        layers = list(range(n_layers)) if method == "mean" else [n_layers // 2]
    bad = [i for i in layers if not 0 <= i < n_layers]
    if bad:
        raise ConfigError(f"--layers: {bad} outside 0..{n_layers - 1}")
    languages = sorted(texts)
    states, labels = [], []
    all_norms = None
    for k, lang in enumerate(languages):
        s, norms = pooled_states(model, tokenizer, texts[lang], batch_size)
        states.append(s)
        labels += [k] * len(s)
        all_norms = norms * len(s) if all_norms is None else all_norms + norms * len(s)
    X = torch.cat(states)  # [n, L, d]
    norms = (all_norms / len(X))[layers]
    y = np.array(labels)
    out = torch.zeros(len(languages), len(layers), X.shape[-1])
    for j, layer in enumerate(layers):
        x = X[:, layer].double()
        if method == "mean":
            means = torch.stack([x[torch.from_numpy(y == k)].mean(0) for k in range(len(languages))])
            out[:, j] = (means - means.mean(0)).float()
        else:
            out[:, j] = torch.from_numpy(_lda_vectors(x.numpy(), y, len(languages))).float()
    return LanguageVectors(languages, list(layers), out.contiguous(), norms.contiguous(), method, model_name)


def _lda_vectors(x, y, n_classes: int):
    import numpy as np
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1.0
    z = (x - mu) / sd
    k = min(n_classes - 1, x.shape[1])
    lda = LinearDiscriminantAnalysis(n_components=k, solver="svd").fit(z, y)
    proj = lda.transform(z)  # [n, k]
    class_means = np.stack([proj[y == c].mean(0) for c in range(n_classes)])
    back = class_means @ np.linalg.pinv(lda.scalings_[:, :k])  # standardised residual space
    return (back - back.mean(0)) * sd


# --- files --------------------------------------------------------------------------------------------------


def save_vectors(vec: LanguageVectors, path: str | Path, provenance: dict | None = None) -> Path:
    import torch

    layers = torch.tensor(vec.layers, dtype=torch.int64)
    save_tensor_file(
        path,
        {"vectors": vec.vectors.contiguous(), "layers": layers, "norms": vec.norms.contiguous()},
        {"languages": ",".join(vec.languages), "method": vec.method, "model": vec.model},
        {
            **(provenance or {}),
            "method": vec.method,
            "model": vec.model,
            "languages": vec.languages,
            "layers": vec.layers,
            "hidden_size": vec.hidden_size,
        },
    )
    load_vectors.cache_clear()
    return path


@lru_cache(maxsize=8)
def load_vectors(path: str | Path, where: str = "vectors") -> LanguageVectors:
    tensors, meta = read_tensor_file(
        path, where, {"vectors", "layers", "norms"}, "vector file", "build it with `mlft build steer`", "languages"
    )
    return LanguageVectors(
        meta["languages"].split(","),
        tensors["layers"].tolist(),
        tensors["vectors"],
        tensors["norms"],
        meta.get("method", "?"),
        meta.get("model", "?"),
    )

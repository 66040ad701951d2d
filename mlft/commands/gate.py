"""`mlft build gate` (was `mlft gate train`): the learned Language Confusion Gate for the `learned_gate`
intervention, self-distilled on the frozen model's own hidden states, saved with provenance."""

from __future__ import annotations

import argparse
from pathlib import Path

from mlft.commands.group import spelled
from mlft.errors import ConfigError

HELP = "train the learned language confusion gate (learned_gate intervention)"
DESCRIPTION = (
    "The Language Confusion Gate (Zhang et al., ICLR 2026): a 2-layer MLP on the model's last hidden state that "
    "predicts which token families may come next. Teacher-force chat rows (mlft's seed data: monolingual and "
    "cross-lingual pairs of the training items; never LCB test prompts) through the frozen model, label each "
    "position with the token families among its norm-adjusted top-k/top-p candidates, fit the gate, report it on "
    "the held-out seed items, and save it (safetensors) with a provenance JSON beside it."
)


def add_parser(sub, name: str = "gate", **kw):
    """`mlft build gate`: fit a gate on the model's own hidden states (self-distillation)."""
    p = sub.add_parser(name, **kw, help=HELP, description=DESCRIPTION)
    _flags(p)
    p.set_defaults(func=run)
    return p


def add_renamed(sub, renamed: dict[str, tuple[str, str]]):
    """The old spelling `mlft gate train` (its one action), hidden; the same flags, `renamed["train"]`'s notice
    and its new spelling's namespace."""
    p = sub.add_parser("gate")
    s = p.add_subparsers(dest=argparse.SUPPRESS, metavar="ACTION", required=True)
    new, notice = renamed["train"]
    t = s.add_parser("train", help=HELP, description=DESCRIPTION, renamed=notice)
    _flags(t)
    spelled(t, new)
    p.set_defaults(func=run)
    return p


def _flags(t) -> None:
    t.add_argument("--out", required=True, help="gate file to write (.safetensors; e.g. gates/smollm2.safetensors)")
    t.add_argument(
        "--from",
        dest="sources",
        default="seed",
        help="comma-separated: seed (chat rows of the seed training items), polyglot, or a JSONL/CSV "
        "file of `id, text, language` rows (raw text, no chat template)",
    )
    t.add_argument("--model", default=None, help="model (default: the embedded SmolLM2-135M-Instruct)")
    t.add_argument("--languages", default=None, help="seed: comma-separated language codes (default: all 15)")
    t.add_argument(
        "--per-language",
        type=int,
        default=None,
        help="seed: the first N training items (each gives a monolingual and a cross-lingual row per "
        "language); polyglot / file: texts per language at most",
    )
    t.add_argument("--dev-items", type=int, default=8, help="held-out seed items the gate is reported on")
    t.add_argument("--polyglot-dir", default=None, help="folder of the polyglot parquet files")
    t.add_argument("--top-k", type=int, default=20, help="candidates per position for the labels (paper: 20)")
    t.add_argument(
        "--top-p", type=float, default=0.95, help="cumulative-probability cut of the candidates (paper: 0.95)"
    )
    t.add_argument(
        "--no-norm-adjust",
        action="store_true",
        help="label from the raw logits instead of logits / ||output embedding|| (the paper adjusts)",
    )
    t.add_argument("--epochs", type=int, default=4)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--batch-size", type=int, default=256, help="positions per optimizer step")
    t.add_argument("--forward-batch", type=int, default=8, help="rows per forward pass of the frozen model")
    t.add_argument("--max-tokens", type=int, default=256, help="tokens per row at most")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--no-progress", action="store_true", help="no progress bars")


def _check(args) -> list[str]:
    if not str(args.out).endswith(".safetensors"):
        raise ConfigError(f"--out: a .safetensors file, got {args.out!r}")
    if args.top_k < 1 or not 0 < args.top_p <= 1:
        raise ConfigError(f"--top-k >= 1 and --top-p in (0, 1] required (got {args.top_k}, {args.top_p})")
    if (
        args.epochs < 1
        or args.lr <= 0
        or args.batch_size < 1
        or args.forward_batch < 1
        or args.max_tokens < 2
        or args.dev_items < 1
        or (args.per_language is not None and args.per_language < 1)
    ):
        raise ConfigError(
            "--epochs, --batch-size, --forward-batch, --dev-items, --per-language >= 1, --lr > 0 and "
            "--max-tokens >= 2 required"
        )
    sources = [x.strip() for x in args.sources.split(",") if x.strip()]
    if not sources:
        raise ConfigError("--from: give seed, polyglot or a file")
    for src in sources:
        if src not in ("seed", "polyglot") and not Path(src).is_file():
            raise ConfigError(f"--from: {src!r} is not `seed`, `polyglot` or a file of `id, text, language` rows")
    return sources


def run(args) -> int:
    import time

    from mlft.data.seed import ALL
    from mlft.generation.interventions.learned_gate_training import (
        FAMILIES,
        distill,
        evaluate_gate,
        family_shares,
        save_gate,
        seed_rows,
        text_rows,
        token_families,
        train_gate,
    )
    from mlft.generation.interventions.steer_vectors import seed_records
    from mlft.generation.models import load, resolve
    from mlft.provenance import model_provenance

    sources = _check(args)
    languages = [x.strip() for x in args.languages.split(",")] if args.languages else None
    unknown = sorted(set(languages or []) - set(ALL))
    if unknown:
        raise ConfigError(f"--languages: {', '.join(unknown)} not in the seed data ({', '.join(ALL)})")
    rows, records = [], []
    for src in sources:
        if src == "seed":
            rows += seed_rows(languages=languages, items=args.per_language)
            records += seed_records()
        else:
            more, recs = text_rows(src, args.per_language, args.polyglot_dir)
            rows += more
            records += recs
    heldout = seed_rows(heldout=True, languages=languages, items=args.dev_items)
    ref = resolve(args.model)
    started = time.time()
    model, tok = load(ref, dtype="float32")
    vocab = model.get_output_embeddings().weight.shape[0]
    families = token_families(tok, vocab)
    shares = family_shares(families)
    print("families (% of the vocabulary): " + ", ".join(f"{f} {shares[f]}" for f in FAMILIES))
    kw = {
        "top_k": args.top_k,
        "top_p": args.top_p,
        "norm_adjust": not args.no_norm_adjust,
        "batch_size": args.forward_batch,
        "max_tokens": args.max_tokens,
        "progress": not args.no_progress,
    }
    data = distill(model, tok, rows, families, **kw)
    dev = distill(model, tok, heldout, families, **kw)
    t0 = time.time()
    gate = train_gate(
        data,
        families,
        model=ref.name,
        top_k=args.top_k,
        top_p=args.top_p,
        norm_adjust=not args.no_norm_adjust,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=not args.no_progress,
    )
    train_s = time.time() - t0
    metrics = evaluate_gate(gate, dev)
    rows_per_language: dict[str, int] = {}
    for r in rows:
        rows_per_language[r["language"]] = rows_per_language.get(r["language"], 0) + 1
    label_rates = {f: round(100.0 * float(data.labels[:, j].float().mean()), 2) for j, f in enumerate(FAMILIES)}
    path = save_gate(
        gate,
        args.out,
        provenance={
            "sources": records,
            "rows": len(rows),
            "rows_per_language": rows_per_language,
            "positions": len(data.labels),
            "label_rates": label_rates,
            "heldout": {"rows": len(heldout), **metrics},
            "model_ref": model_provenance(ref),
            "options": {
                k: getattr(args, k)
                for k in (
                    "top_k",
                    "top_p",
                    "no_norm_adjust",
                    "epochs",
                    "lr",
                    "batch_size",
                    "forward_batch",
                    "max_tokens",
                    "seed",
                    "languages",
                    "per_language",
                    "dev_items",
                )
            },
            "seconds": {
                "distill": round(data.seconds + dev.seconds, 1),
                "train": round(train_s, 1),
                "total": round(time.time() - started, 1),
            },
        },
    )
    print(
        f"trained on {len(data.labels)} positions of {len(rows)} rows (distil {data.seconds:.0f} s, train "
        f"{train_s:.0f} s); held-out seed items: label set exact on {metrics['exact']} % of "
        f"{metrics['positions']} positions"
    )
    print(f"wrote {path} and {path}.provenance.json")
    return 0

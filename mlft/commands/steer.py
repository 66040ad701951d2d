"""`mlft build steer` (was `mlft steer build`): language vectors for the `steer` intervention, from parallel text,
with provenance."""

from __future__ import annotations

import argparse

from mlft.commands.group import spelled
from mlft.errors import ConfigError

HELP = "build language vectors for the steer intervention"
DESCRIPTION = (
    "Language steering vectors (ReCoVeR `mean` per layer, ITLC `lda` at one layer): run the frozen model over "
    "parallel text (never LCB test prompts) and save one vector per language and layer (safetensors) with a "
    "provenance JSON beside it."
)


def add_parser(sub, name: str = "steer", **kw):
    """`mlft build steer`: the flags on the command itself (added when it is used: --per-language names steering's
    minimum)."""
    p = sub.add_parser(name, **kw, help=HELP, description=DESCRIPTION, later=_flags)
    p.set_defaults(func=run)
    return p


def add_renamed(sub, renamed: dict[str, tuple[str, str]]):
    """The old spelling `mlft steer build` (its one action), hidden; the same flags (added when it is used),
    `renamed["build"]`'s notice and its new spelling's namespace."""
    new, notice = renamed["build"]

    def action(p) -> None:
        s = p.add_subparsers(dest=argparse.SUPPRESS, metavar="ACTION", required=True)
        b = s.add_parser("build", help=HELP, description=DESCRIPTION, renamed=notice)
        _flags(b)
        spelled(b, new)

    p = sub.add_parser("steer", later=action)
    p.set_defaults(func=run)
    return p


def _flags(b) -> None:
    """The flags (--per-language names steering's minimum), defined when the command is used."""
    from mlft.generation.interventions.steer_vectors import MIN_TEXTS_PER_LANGUAGE

    b.add_argument("--out", required=True, help="vector file to write (.safetensors)")
    b.add_argument(
        "--from",
        dest="source",
        default="seed",
        help="seed (mlft's seed data, held-out items excluded), polyglot, or a JSONL/CSV file of "
        "`id, text, language` rows",
    )
    b.add_argument("--model", default=None, help="model (default: the embedded SmolLM2-135M-Instruct)")
    b.add_argument("--method", choices=("mean", "lda"), default="mean")
    b.add_argument(
        "--layers", default=None, help="comma-separated 0-based layers (default: all for mean, the middle one for lda)"
    )
    b.add_argument("--languages", default=None, help="comma-separated language codes (default: all in the source)")
    b.add_argument(
        "--per-language", type=int, default=None, help=f"texts per language at most (at least {MIN_TEXTS_PER_LANGUAGE})"
    )
    b.add_argument("--polyglot-dir", default=None, help="folder of the polyglot parquet files")
    b.add_argument("--batch-size", type=int, default=16)


def run(args) -> int:
    import time

    from mlft.generation.interventions.steer_vectors import (
        MIN_TEXTS_PER_LANGUAGE,
        build_vectors,
        check_vector_texts,
        parallel_texts,
        save_vectors,
    )
    from mlft.generation.models import load, resolve
    from mlft.provenance import model_provenance

    try:
        layers = [int(x) for x in args.layers.split(",")] if args.layers else None
    except ValueError:
        raise ConfigError(f"--layers: comma-separated integers, got {args.layers!r}") from None
    if args.per_language is not None and args.per_language < MIN_TEXTS_PER_LANGUAGE:
        raise ConfigError(
            f"--per-language {args.per_language}: a language vector needs at least "
            f"{MIN_TEXTS_PER_LANGUAGE} texts per language"
        )
    languages = [x.strip() for x in args.languages.split(",")] if args.languages else None
    texts, sources = parallel_texts(args.source, args.per_language, languages, args.polyglot_dir)
    check_vector_texts(texts, args.source)  # before the model loads
    ref = resolve(args.model)
    started = time.time()
    model, tok = load(ref, dtype="float32")
    vec = build_vectors(model, tok, texts, args.method, layers, ref.name, args.batch_size)
    path = save_vectors(
        vec,
        args.out,
        provenance={
            "sources": sources,
            "rows": {k: len(v) for k, v in texts.items()},
            "model_ref": model_provenance(ref),
            "options": {"method": args.method, "layers": layers, "per_language": args.per_language},
            "seconds": round(time.time() - started, 1),
        },
    )
    print(
        f"wrote {path} ({len(vec.languages)} languages x {len(vec.layers)} layers, {vec.method}) "
        f"and {path}.provenance.json"
    )
    return 0

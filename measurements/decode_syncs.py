"""Host syncs and aten ops per decode step: plain `model.generate` vs mlft's hf backend, bare and with each
registered intervention, on a tiny random Llama with SmolLM2's tokenizer (49k vocabulary). Runs on a CPU: a
sync here (item, bool, .cpu(), a tensor from host data, a list or mask index...) is a stall of the GPU's queue
there, and each aten op is one kernel launch in eager mode (mlft.generation.sync_count).

    python measurements/decode_syncs.py [--layers 2] [--rows 16] [--json out.json]

Columns: syncs per step (total, then by kind), aten ops per step, and mlft's ops over plain generate's with the
same decoding (greedy rows over plain greedy, sampled rows over plain sampling at T=0.3, top-p=0.75).
`quantize` is a model transform (the quantized model's own forward: no mlft code per step) and is not run.
`line_resample` is a loop-level strategy: its per-step part is the backend's newline stop, measured here; per
line it reads each finished line on the host (it must: the verifier is a host language-ID model).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlft.generation import sync_count  # noqa: E402
from mlft.generation.sync_count import per_step  # noqa: E402
from tests.device_helpers import VARIANTS, intervention_specs, mlft_runner, plain_runner, requests, tiny_model  # noqa: E402

SKIP = {"quantize": "model transform (no mlft code per step)"}


def main(argv=None):
    import torch

    from mlft.generation.decoding import Decoding
    from mlft.generation.interventions import build_interventions

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--short", type=int, default=3)
    ap.add_argument("--long", type=int, default=7)
    ap.add_argument("--only", nargs="*", help="only these rows (names as printed)")
    ap.add_argument(
        "--cpu-path",
        action="store_true",
        help="the CPU's own path (samplers may read the host there); default: the GPU's sync-free path",
    )
    ap.add_argument("--decode", default="eager", choices=["eager", "static"], help="the hf backend's decode option")
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sync_count.SYNC_FREE = not args.cpu_path
    model, tok = tiny_model(args.layers, args.hidden)
    reqs = requests(args.rows)
    paper, greedy = Decoding(temperature=0.3, top_p=0.75), Decoding(temperature=0.0)
    rows: list[tuple[str, str, object]] = [
        ("plain greedy", "greedy", plain_runner(model, tok, reqs, False)),
        ("plain sampling", "sampling", plain_runner(model, tok, reqs, True)),
        ("mlft greedy", "greedy", mlft_runner(model, tok, reqs, greedy, [], decode=args.decode)),
        ("mlft sampling", "sampling", mlft_runner(model, tok, reqs, paper, [], decode=args.decode)),
        (
            "mlft sampling +token_stats",
            "sampling",
            mlft_runner(model, tok, reqs, paper, [], token_stats=True, decode=args.decode),
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        specs = intervention_specs(model, tok, Path(tmp))
        for name, spec in specs.items():
            if name in SKIP:
                print(f"{name}: skipped, {SKIP[name]}")
                continue
            for variant in VARIANTS.get(name, [{}]):
                label = name + "".join(f" {k}={v}" for k, v in variant.items())
                ivs = build_interventions([{**spec, **variant}], "bench")
                rr = requests(args.rows, stop_at_newline=False)
                rows.append((label, "sampling", mlft_runner(model, tok, rr, paper, ivs, decode=args.decode)))
        results = {}
        for label, kind, run in rows:
            if args.only and label not in args.only and not label.startswith("plain"):
                continue
            results[label] = dict(per_step(run, model, args.short, args.long), kind=kind)
    base = {"greedy": results["plain greedy"]["ops"], "sampling": results["plain sampling"]["ops"]}
    base_sync = {"greedy": results["plain greedy"]["total"], "sampling": results["plain sampling"]["total"]}
    path = "CPU path (host shortcuts)" if args.cpu_path else "GPU path (sync-free)"
    print(
        f"\nper decode step, {args.layers}-layer {args.hidden}-wide Llama, vocab {len(tok)}, {args.rows} rows, "
        f"{path}, decode={args.decode}"
    )
    print(f"{'':34} {'syncs':>6} {'+mlft':>6} {'ops':>7} {'x plain':>8}  kinds")
    for label, r in results.items():
        kinds = ", ".join(f"{k} {v:g}" for k, v in r["syncs"].items())
        print(
            f"{label:34} {r['total']:6.2f} {r['total'] - base_sync[r['kind']]:+6.2f} {r['ops']:7.1f} "
            f"{r['ops'] / base[r['kind']]:8.3f}  {kinds}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "op_names"} for k, v in results.items()}, indent=1)
        )


if __name__ == "__main__":
    main()

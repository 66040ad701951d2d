"""The hf backend's replies on the vLLM tests' prompts, kept as data (tests/data/hf_reference_lcb_demo.json.gz).

tests/test_generation_vllm.py checks vLLM against the hf backend on the embedded model: greedy replies agree and their
NLLs match, and vLLM's LPR under the paper's sampling lies within hf's interval. The hf side of those checks is two
passes of the hf backend over the same prompts (a subset of lcb_demo); generating them in the vLLM phase of `make
test` cost about a minute and a half of both cores, beside the multi-process runs. They are generated here once,
with the project's own transformers (the vLLM venv pins an older one), and kept: records and score rows per pass.

The data cannot go stale unnoticed: tests/test_hf_reference.py drops a slice of each pass's records and lets today's
hf backend regenerate them (a resumed pass generates exactly what its file lacks, each reply keyed by its request),
then requires the same replies, NLLs and score rows. After a change that changes the hf backend's replies it fails
and names this script:

    python measurements/hf_reference.py          # both passes, then writes the data file (~2 min on 2 cores)
    python measurements/hf_reference.py --out runs/hf_reference   # keeps the passes' folders there
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from importlib.metadata import version
from pathlib import Path

import mlft

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "hf_reference_lcb_demo.json.gz"
MODEL = "smollm2-135m-instruct"
SUITE = "lcb_demo"
# 2 prompts per (task, language) of lcb_demo in 6 languages: 24 prompts
SUBSET = ["languages=[de,es,fr,ja,ru,zh]", "per_language=2", "batch_size=32"]
PASSES = {
    "greedy": [*SUBSET, "decoding.temperature=0", "decoding.max_new_tokens=24"],  # one reply per prompt
    "sampled": SUBSET,  # the paper's sampling, 32 new tokens, the suite's two replies per prompt
}
VOLATILE = ("seconds",)  # a record's field that differs between two identical passes (wall time)


def completions(folder: Path) -> Path:
    """Where a pass's records live in its output folder (the suite's one variant)."""
    return Path(folder) / "default" / "completions.jsonl"


def generate(name: str, out: Path, model=MODEL) -> mlft.EvalResult:
    """Run (or resume) pass `name` of the hf backend into `out`; a mlft.Target as `model` reuses a loaded model."""
    return mlft.evaluate(model, SUITE, out=out, overrides=PASSES[name], progress=False, report_page=False)


def _records(folder: Path) -> list[dict]:
    lines = completions(folder).read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in VOLATILE} for x in lines]


def collect(name: str, out: Path, model=MODEL) -> dict:
    """Pass `name` as the data file keeps it: its overrides, records (in file order) and score rows."""
    result = generate(name, out, model)
    return {"overrides": PASSES[name], "records": _records(out), "rows": result.rows}


def write(passes: dict, path: Path = DATA) -> None:
    data = {
        "about": "the hf backend's passes on the vLLM tests' prompts: measurements/hf_reference.py",
        "model": MODEL,
        "suite": SUITE,
        "provenance": {p: version(p) for p in ("mlft", "torch", "transformers")},
        "passes": passes,
    }
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=0)


def read(path: Path = DATA) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def place(records: list[dict], folder: Path) -> Path:
    """Write `records` where a pass into `folder` resumes from them: it generates only what they lack."""
    path = completions(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def differences(kept: dict, now: dict, nll_tol: float = 1e-4) -> list[str]:
    """What differs between a kept pass and one generated now (records by (id, sample), then score rows); empty when
    they are the same. NLLs and interval bounds are compared within `nll_tol` (the same tokens, float rounding)."""
    out = []
    key = lambda r: (r["id"], r.get("sample") or 0)  # noqa: E731
    a, b = {key(r): r for r in kept["records"]}, {key(r): r for r in now["records"]}
    if a.keys() != b.keys():
        out.append(f"records: {len(a.keys() - b.keys())} kept only, {len(b.keys() - a.keys())} new only")
    for k in sorted(a.keys() & b.keys()):
        for field in sorted(a[k].keys() | b[k].keys()):
            x, y = a[k].get(field), b[k].get(field)
            close = isinstance(x, float) and isinstance(y, float) and abs(x - y) <= nll_tol
            if x != y and not close:
                out.append(f"record {k}: {field}: kept {x!r}, now {y!r}")
    rkey = lambda r: (r.get("variant"), r["task"], r["language"], r["metric"])  # noqa: E731
    ra, rb = {rkey(r): r for r in kept["rows"]}, {rkey(r): r for r in now["rows"]}
    if ra.keys() != rb.keys():
        out.append(f"rows: {sorted(ra.keys() ^ rb.keys())} in one only")
    for k in sorted(ra.keys() & rb.keys(), key=str):
        for field in ("value", "low", "high", "n"):
            x, y = ra[k].get(field), rb[k].get(field)
            if x != y and not (x is not None and y is not None and abs(x - y) <= nll_tol):
                out.append(f"row {k}: {field}: kept {x!r}, now {y!r}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="keep the passes' folders here (default: a temporary folder)")
    ap.add_argument("--data", type=Path, default=DATA, help="the data file to write (default: %(default)s)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        passes = {name: collect(name, out / name) for name in PASSES}
    write(passes, args.data)
    for name, p in passes.items():
        print(f"{name}: {len(p['records'])} records, {len(p['rows'])} score rows")
    print(f"wrote {args.data}")


if __name__ == "__main__":
    main()

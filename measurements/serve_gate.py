"""The script gate inside `vllm serve`: LCB's cross-lingual LPR of the embedded model (SmolLM2-135M-Instruct)
through a local server with mlft's plugin, driven by mlft's openai backend with the gate off and on (each mode
asked for), each with its interval (mlft.stats.intervals: prompt population, bootstrap) and the guard's coverage
and degeneracy, and the paired difference on the same prompts and seeds with its p (mlft.stats.paired_test:
permutation p, bootstrap interval). The suite is lcb_demo's cross-lingual part (okapi, its decoding: T=0.3,
p=0.75, 32 new tokens, seeded per request) in the non-Latin languages, where a script says the language.

    .venv-vllm/bin/python measurements/serve_gate.py [--languages ar,hi,ja,ko,ru,zh] [--per-language 10]
        [--modes needed,hard] [--base-url URL --model NAME] [--out docs/results/serve_gate.json]

Without --base-url it starts `vllm serve` of the embedded model with the plugin (served_gate.serve_command) on a
free port, importing this checkout's mlft, and stops it at the end. Prints one line per pass and per difference;
writes them (and the settings, timings, versions) as JSON to --out.
"""

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlft.evals.runner import run_suite  # noqa: E402
from mlft.evals.suite import load_suite  # noqa: E402
from mlft.generation.backends.served_gate import local_server, serve_command  # noqa: E402
from mlft.generation.target import Target  # noqa: E402
from mlft.stats import intervals, load_outcomes, paired_test  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--languages", default="ar,hi,ja,ko,ru,zh")
ap.add_argument("--per-language", type=int, default=10, help="prompts per language (lcb_demo: 10)")
ap.add_argument("--samples", type=int, default=2, help="replies per prompt (lcb_demo: 2)")
ap.add_argument("--modes", default="needed,hard", help="the gate's modes to compare with no gate")
ap.add_argument("--base-url", default=None, help="a running server with the plugin (default: start one)")
ap.add_argument("--model", default="smol", help="the served model's name")
ap.add_argument("--concurrency", type=int, default=8)
ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "serve_gate.json"))
args = ap.parse_args()

TASK = "crosslingual"
overrides = [
    f"languages=[{args.languages}]",
    f"per_language={args.per_language}",
    f"samples={args.samples}",
    f"tasks=[{TASK}]",
    "sources=[okapi]",
]
passes = [("off", [])] + [
    (mode, [f"interventions=[{{name: script_gate, mode: {mode}}}]"]) for mode in args.modes.split(",")
]


def run_passes(url: str, work: Path) -> dict:
    options = {"base_url": url, "api_key": "EMPTY", "concurrency": args.concurrency, "timeout": 300}
    out = {}
    for name, extra in passes:
        started = time.perf_counter()
        suite = load_suite("lcb_demo", overrides + extra)
        run_suite(suite, Target("openai", options, model_ref=args.model), work / name)
        outcomes = load_outcomes(work / name / "default" / "outcomes.jsonl")
        out[name] = (outcomes, time.perf_counter() - started)
    return out


def table(result: dict) -> dict:
    """The docs' table of a results file: {template, values} (docs/generating.md renders it: `fill table`)."""
    lines = ["| gate | LPR [95 % interval] | paired vs off (p) | coverage | degeneracy |", "|---|---|---|---:|---:|"]
    values = []
    for name, row in result["passes"].items():
        d = result["paired_lpr_minus_off"].get(name)
        paired = "{:+.1f} pp [{:+.1f}, {:+.1f}] (p = {:.2g})" if d else "–"
        lines.append(f"| {name} | {{:.1f}} [{{:.1f}}, {{:.1f}}] | {paired} | {{:.1f}} % | {{:.1f}} % |")
        values += [100 * row["lpr"][k] for k in ("value", "low", "high")]
        values += [100 * d["diff"], 100 * d["low"], 100 * d["high"], d["p"]] if d else []
        values += [100 * row["coverage"]["value"], 100 * row["degeneracy"]["value"]]
    return {"template": "\n" + "\n".join(lines) + "\n", "values": values}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="serve_gate-"))
    server = {}
    if args.base_url:
        runs = run_passes(args.base_url, work)
    else:
        from mlft.generation.models import resolve

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = serve_command(resolve(None).path, port, name=args.model) + ["--dtype", "float32"]
        cmd += ["--max-model-len", "2048"]
        env = {"PYTHONPATH": os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH")] if p)}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        started = time.perf_counter()
        with local_server(cmd, port, work / "serve.log", env) as url:
            server["start_seconds"] = round(time.perf_counter() - started, 1)
            runs = run_passes(url, work)
        server["command"] = " ".join(["python", *cmd[1:]])
    rows, diffs = {}, {}
    for name, (outcomes, seconds) in runs.items():
        est = intervals(outcomes)[(TASK, "all", "all")]
        by_lang = {k[2]: round(v["lpr"].value, 4) for k, v in intervals(outcomes).items() if k[:2] == (TASK, "all")}
        rows[name] = {
            "replies": len(outcomes),
            "seconds": round(seconds, 1),
            **{m: {"value": e.value, "low": e.low, "high": e.high} for m, e in est.items()},
            "lpr_by_language": {k: v for k, v in sorted(by_lang.items()) if k != "all"},
        }
        lpr = est["lpr"]
        guard = ", ".join(f"{m} {est[m].value:.3f}" for m in ("coverage", "degeneracy") if m in est)
        print(f"gate {name:7s} LPR {lpr.value:.3f} [{lpr.low:.3f}, {lpr.high:.3f}]  ({guard}; {len(outcomes)} replies)")
    for name in list(runs)[1:]:
        d = paired_test(runs["off"][0], runs[name][0], "lpr", task=TASK)
        diffs[name] = {"diff": d.diff, "low": d.ci_low, "high": d.ci_high, "p": d.p_value, "pairs": d.n_pairs}
        ci = f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}]"
        print(f"{name} - off: {d.diff:+.3f} {ci}, p = {d.p_value:.4g} ({d.n_pairs} pairs)")
    import vllm

    result = {
        "schema": "mlft.results/1",
        "name": "serve_gate",
        "what": __doc__.split("\n")[0],
        "suite": "lcb_demo",
        "overrides": overrides,
        "passes": rows,
        "paired_lpr_minus_off": diffs,
        "server": server,
        "vllm": vllm.__version__,
        "cpus": os.cpu_count(),
    }
    result["table"] = table(result)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Scoring speed: mlft's end-to-end scorer, without and with the guard, vs a bare loop that only tokenises and
runs fastText.

Scores all released outputs (10 models, 65,816 replies, 152,418 counted lines). Prints wall times and their
ratios to the bare loop in one run (goals: `mlft score --no-guard` / bare <= 1.0, `mlft score` (guard
on) / bare <= 1.5). mlft forks one worker per core for large inputs (`--workers 1`: every number is one process).
Two figures for each: in-process (the scoring functions, inside this process, after its imports) and the command
as a user runs it (`python -m mlft score FILES...` in a fresh interpreter: its imports, the parser, loading
fastText / jieba / MeCab and the word lists, printing the tables), beside the start-up alone (`mlft --help`
against `python -c pass`).

The bare loop is the official script's per-reply work and nothing else, one process, as in every earlier round:
read the files, normalise each reply with the script's own code (`str.translate` of ASCII punctuation; mlft's
`normalize` gives the same text faster), split it into lines, tokenise each line in the expected language
(mlft's `tokenize`, cache cleared before each timing) and call fastText once per counted line (>= 5 tokens).
No LPR/WPR bookkeeping, no English word check, no aggregation, no guard, and Python's cycle collector on as in
any script (it costs the bare loop about 0.7 s of its 8 s; the scorer pauses it while it runs). The scorer's
timings include reading the files, the aggregation and, with the guard, loading the wordfreq lexicons and the
guard's intervals.
`--mlft-normalize` adds a second bare loop that normalises with mlft's `normalize` (the stricter baseline).
Usage: python measurements/score_speed.py [OUTPUTS_DIR] [--workers N] [--mlft-normalize]
"""

from __future__ import annotations

import argparse
import os
import string
import subprocess
import sys
import time
from pathlib import Path

from mlft.benchmarks.lcb.metrics import normalize
from mlft.benchmarks.lcb.scoring import score_completions, score_guard
from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.completions import read_completions
from mlft.langid import LanguageIdentifier
from mlft.paths import shared_dir

_SCRIPT_PUNCT = str.maketrans("", "", string.punctuation)
ROOT = Path(__file__).resolve().parents[1]  # `python -m mlft` from here runs this checkout's mlft


def script_normalize(text: str) -> str:
    """The official compute_metrics.py's text handling, verbatim."""
    text = text.split("\nQ:")[0].strip()
    text = text.translate(_SCRIPT_PUNCT)
    return text.replace("—", " ").replace("،", "")


def bare_loop(completions, lid, normalize=script_normalize) -> int:
    n = 0
    for c in completions:
        for line in normalize(c.completion).split("\n"):
            if len(tokenize(line, c.language)) >= 5:
                lid.predict(line)
                n += 1
    return n


def command(argv: list[str]) -> float:
    """Wall seconds of `python ARGV` in a fresh interpreter, as a user runs it (output thrown away)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"python {' '.join(argv)} failed:\n{proc.stderr.decode()[-2000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default=None)
    ap.add_argument("--workers", type=int, default=None, help="scorer processes (default: all cores)")
    ap.add_argument("--mlft-normalize", action="store_true", help="also time a bare loop with mlft's normalize")
    args = ap.parse_args()
    root = Path(args.root) if args.root else shared_dir() / "lcb" / "outputs"
    files = sorted(root.glob("*.csv"))
    workers = args.workers or len(os.sched_getaffinity(0))
    lid = LanguageIdentifier.from_spec("ftz")
    tokenize("预热", "zh"), tokenize("ウォームアップ", "ja")  # load jieba / MeCab outside every timing
    words = (shared_dir() / "lcb" / "words") if shared_dir() else None

    def timed(fn):
        tokenize.cache_clear()
        t0 = time.perf_counter()
        completions = [c for f in files for c in read_completions(f)]
        out = fn(completions)
        return time.perf_counter() - t0, completions, out

    bare, completions, n_lines = timed(lambda cs: bare_loop(cs, lid))
    strict = timed(lambda cs: bare_loop(cs, lid, normalize))[0] if args.mlft_normalize else None
    plain, _, _ = timed(lambda cs: score_completions(cs, lid=lid, words=words, workers=workers))
    guarded, _, _ = timed(
        lambda cs: score_guard(
            cs, score_completions(cs, lid=lid, words=words, workers=workers, guard=True).replies, workers=workers
        )
    )
    score = [
        "-m",
        "mlft",
        "score",
        *map(str, files),
        *(["--words", str(words)] if words else []),
        "--workers",
        str(workers),
    ]
    cmd_plain, cmd_guarded = command([*score, "--no-guard"]), command(score)
    python, helps = (
        min(command(["-c", "pass"]) for _ in range(3)),
        min(command(["-m", "mlft", "--help"]) for _ in range(3)),
    )
    print(f"files: {len(files)}  replies: {len(completions)}  lines identified: {n_lines}  scorer processes: {workers}")
    print(f"bare loop (read + tokenise + fastText, 1 process): {bare:7.2f} s")
    if strict is not None:
        print(
            f"bare loop with mlft's normalize:                   {strict:7.2f} s   (ratios to it: --no-guard "
            f"{plain / strict:.2f}, guard on {guarded / strict:.2f})"
        )
    for name, seconds in (
        ("mlft score --no-guard, in-process", plain),
        ("mlft score (guard on), in-process", guarded),
        ("python -m mlft score --no-guard FILES (command)", cmd_plain),
        ("python -m mlft score FILES (command, guard on)", cmd_guarded),
    ):
        print(f"{name + ':':<51}{seconds:7.2f} s   ratio to bare: {seconds / bare:.2f}")
    print(f"start-up: python -m mlft --help {helps:.2f} s, python -c pass {python:.2f} s (best of 3 each)")


if __name__ == "__main__":
    main()

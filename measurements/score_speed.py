"""Scoring speed: mlft's end-to-end scorer, without and with the guard, vs a bare loop that only tokenises and
runs fastText.

Scores all released outputs (10 models, ~66k replies). Prints wall times and their ratios to the bare loop in
one run (goals: `mlft score --no-guard` / bare <= 1.25, `mlft score` (guard on) / bare <= 1.5; mlft forks one
worker per core for large inputs, so on one core every number is one process).
Usage: python measurements/score_speed.py [OUTPUTS_DIR] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from mlft.benchmarks.lcb.metrics import normalize
from mlft.benchmarks.lcb.scoring import score_completions, score_guard
from mlft.benchmarks.lcb.tokenize import tokenize
from mlft.completions import read_completions
from mlft.langid import LanguageIdentifier
from mlft.paths import shared_dir


def bare_loop(completions, lid) -> int:
    n = 0
    for c in completions:
        for line in normalize(c.completion).split("\n"):
            if len(tokenize(line, c.language)) >= 5:
                lid.predict(line)
                n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", default=None)
    ap.add_argument("--workers", type=int, default=None, help="scorer processes (default: all cores)")
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
    plain, _, _ = timed(lambda cs: score_completions(cs, lid=lid, words=words, workers=workers))
    guarded, _, _ = timed(lambda cs: score_guard(cs, score_completions(cs, lid=lid, words=words, workers=workers,
                                                                       guard=True).replies))
    print(f"files: {len(files)}  replies: {len(completions)}  lines identified: {n_lines}  "
          f"scorer processes: {workers}")
    print(f"bare loop (read + tokenise + fastText, 1 process): {bare:7.2f} s")
    print(f"mlft score --no-guard:                             {plain:7.2f} s   ratio to bare: {plain / bare:.2f}")
    print(f"mlft score (guard on):                             {guarded:7.2f} s   ratio to bare: {guarded / bare:.2f}")


if __name__ == "__main__":
    main()

"""Scoring speed: mlft's end-to-end scorer vs a bare loop that only tokenises and runs fastText.

Scores all released outputs (10 models, ~66k replies). Prints wall times and their ratio
(goal: mlft / bare <= 1.25; mlft forks one worker per core for large inputs).
Usage: python benchmarks/score_speed.py [OUTPUTS_DIR]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mlft.benchmarks.lcb.metrics import normalize
from mlft.benchmarks.lcb.scoring import score_completions
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
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else shared_dir() / "lcb" / "outputs"
    files = sorted(root.glob("*.csv"))
    lid = LanguageIdentifier.from_spec("ftz")
    tokenize("预热", "zh"), tokenize("ウォームアップ", "ja")  # load jieba / MeCab outside both timings
    words = (shared_dir() / "lcb" / "words") if shared_dir() else None

    tokenize.cache_clear()
    t0 = time.perf_counter()
    completions = [c for f in files for c in read_completions(f)]
    n_lines = bare_loop(completions, lid)
    bare = time.perf_counter() - t0

    results = {}
    for workers in (1, len(os.sched_getaffinity(0))):
        tokenize.cache_clear()
        t0 = time.perf_counter()
        completions = [c for f in files for c in read_completions(f)]
        score_completions(completions, lid=lid, words=words, workers=workers)
        results[workers] = time.perf_counter() - t0

    print(f"files: {len(files)}  replies: {len(completions)}  lines identified: {n_lines}")
    print(f"bare loop (read + tokenise + fastText, 1 process): {bare:7.2f} s")
    for workers, t in results.items():
        print(f"mlft score, {workers} worker(s):                  {t:7.2f} s   ratio to bare: {t / bare:.2f}")


if __name__ == "__main__":
    main()

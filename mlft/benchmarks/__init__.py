"""The benchmarks, as peers: each holds its data (fetch, load), metrics and scoring, and loads no model
(LCB's fluency proxy, `lcb/fluency.py`, scores replies under a model it is handed).

- `lcb`: the Language Confusion Benchmark (LPR / WPR / LCPR, the guard, a second LID judge);
- `multisense`: multisense self-consistency (PAWS-X / XNLI);
- `polyglot`: Polyglot-or-Not fact recall.

The eval kinds that run a model on them live one floor up, in `mlft/evals/`.
"""

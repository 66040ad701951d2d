"""The benchmark's fixed facts, in one place (languages and scripts: mlft/languages.py).

TASKS          the two LCB tasks
METRICS        the headline LCB metrics, in report order
MIN_TOKENS     a line counts for LID only with at least this many tokens (official scorer)
LID_THRESHOLD  a fastText label is kept only with a score above this, else "unknown" (official scorer)
GUARD_METRICS  mlft's guard next to every LPR: coverage, degeneracy, lexical validity (mlft/benchmarks/lcb/guard.py)
VALID_SHARE    mlft's guard: a reply is lexically valid when more than this share of its words are known words
FEWSHOT_BASELINES  the paper's few-shot prompting baselines (Q/A template, 1-shot, 5-shot) as suite settings:
               the default passes of a recipe's `evaluation.fewshot: true`
"""

TASKS: tuple[str, ...] = ("monolingual", "crosslingual")
METRICS: tuple[str, ...] = ("lpr", "wpr", "lcpr")
MIN_TOKENS = 5
LID_THRESHOLD = 0.3
GUARD_METRICS: tuple[str, ...] = ("coverage", "degeneracy", "validity")
FEWSHOT_BASELINES: tuple[tuple[str, dict], ...] = (
    ("Q/A template", {"prompting": {"mode": "qa"}}),
    ("1-shot", {"prompting": {"mode": "qa", "shots": 1}}),
    ("5-shot", {"prompting": {"mode": "qa", "shots": 5}}),
)
VALID_SHARE = 0.5

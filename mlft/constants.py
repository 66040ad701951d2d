"""The benchmark's fixed facts, in one place (languages and scripts: mlft/languages.py).

TASKS          the two LCB tasks
METRICS        the headline LCB metrics, in report order
MIN_TOKENS     a line counts for LID only with at least this many tokens (official scorer)
LID_THRESHOLD  a fastText label is kept only with a score above this, else "unknown" (official scorer)
VALID_SHARE    mlft's guard: a reply is lexically valid when more than this share of its words are known words
"""

TASKS: tuple[str, ...] = ("monolingual", "crosslingual")
METRICS: tuple[str, ...] = ("lpr", "wpr", "lcpr")
MIN_TOKENS = 5
LID_THRESHOLD = 0.3
VALID_SHARE = 0.5

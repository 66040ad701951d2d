"""What a GRPO run's reward paid, written to its run directory: per optimizer step the few highest- and
lowest-reward rollouts with each term's value, the weighted total and LCB's verdict (`RolloutLog`, `rollouts.jsonl`;
the report page shows them), and the reward curve file (`rewards.jsonl`: trl's per-term means and stds at each
logging step, `reward_curve_callback`). Apart from the terms (`mlft.training.reward_terms`) and their registry
(`mlft.training.rewards`): these read what the terms paid, they compute nothing a reward depends on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mlft.benchmarks.lcb.metrics import ReplyResult
from mlft.io.curve_file import REWARD_CURVES, ROLLOUTS
from mlft.io.jsonl import append_jsonl, read_jsonl, write_jsonl
from mlft.languages import NON_LATIN

if TYPE_CHECKING:
    from mlft.training.reward_terms import ReplyScorer, RewardSpec

ROLLOUTS_KEPT = 3  # rollouts kept per step at each end (highest and lowest total)
ROLLOUT_CHARS = 2000  # prompt and completion text kept per rollout (longer text is cut, marked "…")


# -- what the reward paid: rollouts per step ------------------------------------------------------------------
def _prompt_text(prompt) -> str:
    """The prompt as text: a string, or the last user turn of a conversation."""
    if isinstance(prompt, str):
        return prompt
    turns = [m.get("content") or "" for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(turns[-1]) if turns else ""


def _cut(text: str, limit: int = ROLLOUT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def lcb_verdict(r: ReplyResult, language: str) -> str:
    """LCB's verdict on one reply (the official analysis): 'not counted' (no line of >= 5 tokens), 'line' (a
    counted line in another language), 'word' (an English word in a non-Latin reply), or 'pass'."""
    if not r.counted:
        return "not counted"
    if r.line_error:
        return "line"
    return "word" if r.word_error and language in NON_LATIN else "pass"


def weighted_total(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """trl's summed reward of one rollout: the weighted sum of the terms that apply (None when none applies)."""
    used = [(v, w) for v, w in zip(values, weights) if v is not None and not math.isnan(v)]
    return sum(v * w for v, w in used) if used else None


def pick_rollouts(rows: list[dict], keep: int = ROLLOUTS_KEPT) -> list[dict]:
    """The `keep` rollouts of highest total ("top") and the `keep` of lowest ("bottom"), disjoint (fewer than
    2 x keep rollouts: all of them, split); rollouts without a total (no term applies) are left out."""
    scored = sorted((r for r in rows if r["total"] is not None), key=lambda r: -r["total"])
    top = scored[:keep]
    bottom = scored[keep:][::-1][:keep]
    return [{**r, "rank": "top"} for r in top] + [{**r, "rank": "bottom"} for r in bottom]


class RolloutLog:
    """Collects each term's values of one generation batch (trl calls every reward function with the same
    `completions` list) and, once all terms have reported, appends the batch's `keep` highest- and lowest-total
    rollouts to run_dir/rollouts.jsonl: {step, rank, prompt_id, language, task, prompt, completion, terms:
    {name: value}, total, group: {n, mean, std} (the prompt's replies in the batch), verdict}.

    `step` is the optimizer step the rollouts train (trl's global step + 1). Written by the first process only
    (on several processes: its share of the batch). Resumable: writing step s first drops any rows of steps >= s
    left by a run that stopped after them (a resumed run generates them again), so every step is in the file once."""

    def __init__(self, run_dir: str | Path, specs: list[RewardSpec], scorer: ReplyScorer, keep: int = ROLLOUTS_KEPT):
        self.path = Path(run_dir) / ROLLOUTS
        self.names = [s.name for s in specs]
        self.weights = [float(s.weight) for s in specs]
        self.scorer, self.keep = scorer, keep
        self._batch: object | None = None
        self._values: dict[int, list] = {}

    def add(
        self,
        index: int,
        completions,
        prompts,
        texts: list[str],
        languages: list[str],
        columns: dict,
        values: Sequence[float | None],
    ) -> None:
        if self._batch is not completions:
            self._batch, self._values = completions, {}
        self._values[index] = list(values)
        if len(self._values) < len(self.names):
            return
        self._batch, values_by_term = None, self._values
        state = columns.get("trainer_state")
        if state is None or not getattr(state, "is_world_process_zero", True):
            return
        self.write(int(state.global_step) + 1, prompts, texts, languages, columns, values_by_term)

    def write(
        self, step: int, prompts, texts: list[str], languages: list[str], columns: dict, values_by_term: dict[int, list]
    ) -> list[dict]:
        n = len(texts)
        ids = columns.get("id") or [None] * n
        tasks = columns.get("task") or [None] * n
        prompt_texts = [_prompt_text(p) for p in (prompts or [None] * n)]
        rows = []
        for k in range(n):
            terms = [values_by_term[i][k] for i in range(len(self.names))]
            terms = [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in terms]
            rows.append(
                {
                    "step": step,
                    "prompt_id": None if ids[k] is None else str(ids[k]),
                    "language": languages[k],
                    "task": tasks[k],
                    "prompt": prompt_texts[k],
                    "completion": texts[k],
                    "terms": dict(zip(self.names, terms)),
                    "total": weighted_total(terms, self.weights),
                    "_k": k,
                }
            )
        groups: dict[tuple, list[float]] = {}
        for r in rows:
            if r["total"] is not None:
                groups.setdefault((r["prompt_id"], r["prompt"]), []).append(r["total"])
        picked = pick_rollouts(rows, self.keep)
        verdicts = self.scorer.verdicts([r["completion"] for r in picked], [r["language"] for r in picked])
        out = []
        for r, v in zip(picked, verdicts):
            g = groups[(r["prompt_id"], r["prompt"])]
            mean = sum(g) / len(g)
            std = math.sqrt(sum((x - mean) ** 2 for x in g) / (len(g) - 1)) if len(g) > 1 else 0.0
            r = {key: val for key, val in r.items() if key != "_k"}
            out.append(
                {
                    **r,
                    "prompt": _cut(r["prompt"]),
                    "completion": _cut(r["completion"]),
                    "group": {"n": len(g), "mean": mean, "std": std},
                    "verdict": lcb_verdict(v, r["language"]),
                }
            )
        previous = read_jsonl(self.path)
        if any(int(p.get("step", 0)) >= step for p in previous):
            write_jsonl(self.path, [p for p in previous if int(p.get("step", 0)) < step])
        append_jsonl(self.path, out)
        return out


def read_rollouts(run_dir: str | Path) -> list[dict]:
    """The rows of a run's rollouts.jsonl ([] when the run has none)."""
    return read_jsonl(Path(run_dir) / ROLLOUTS)


def most_paid(run_dir: str | Path, from_step: int = 1, seed: int = 0) -> list[dict]:
    """The "top" rollouts of a run's rollouts.jsonl at steps >= `from_step`, highest total first; ties (common with
    a gated 0/1 reward) in an order drawn with `seed`, so a reader's sample of the most-paid replies is fair."""
    import random

    top = [r for r in read_rollouts(run_dir) if r.get("rank") == "top" and r["step"] >= from_step]
    random.Random(seed).shuffle(top)
    return sorted(top, key=lambda r: -r["total"])  # stable: ties stay in the drawn order


# -- the reward curve file ---------------------------------------------------------------------------------
def curve_row(step: int, logs: dict, weights: dict[str, float]) -> dict | None:
    """One row of rewards.jsonl from a trl log dict (None if it holds no reward)."""
    if "reward" not in logs:
        return None
    terms = {}
    for name, w in weights.items():
        mean, std = logs.get(f"rewards/{name}/mean"), logs.get(f"rewards/{name}/std")
        terms[name] = {"mean": mean, "std": std, "weight": w}
    keep = (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "kl",
        "loss",
        "entropy",
        "learning_rate",
        "completions/mean_length",
        "completions/clipped_ratio",
        "step_time",
    )
    return {"step": step, **{k: logs[k] for k in keep if k in logs}, "terms": terms}


def read_reward_curves(run_dir: str | Path) -> list[dict]:
    return read_jsonl(Path(run_dir) / REWARD_CURVES)


def reward_curve_callback(run_dir: Path, specs: list[RewardSpec]):
    """A TrainerCallback appending one rewards.jsonl row per logging step (each step once, also on resume)."""
    from transformers import TrainerCallback

    weights = {s.name: float(s.weight) for s in specs}

    class RewardCurveCallback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            row = curve_row(state.global_step, logs, weights)
            path = Path(run_dir) / REWARD_CURVES
            if row is None or any(r["step"] == row["step"] for r in read_jsonl(path)):
                return
            append_jsonl(path, [json.loads(json.dumps(row))])

    return RewardCurveCallback()

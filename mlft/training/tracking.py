"""What the eval callback sends to experiment trackers (the trainer's `report_to`: TensorBoard, W&B, ...).

Scalars, one per curve row of a pass:
    lcb/<variant>/<task>/<metric>            the task average (lpr, wpr, lcpr, coverage, degeneracy, validity,
                                             unknown, skipped, nll)
    lcb/<variant>/<task>/<metric>/<lang>     per language
    lcb/<variant>/<task>/<metric>_low[/<lang>], ..._high[/<lang>]   the 95 % interval
    harness/<variant>/<task>/<metric>[_low|_high]   every metric of an `lm_eval` suite (capability passes)
and a small table of sample completions (prompt, language, reply, verdict): a markdown text summary for
TensorBoard (`lcb/<variant>/samples`), a `wandb.Table` for Weights & Biases.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from mlft.constants import GUARD_METRICS, METRICS
from mlft.io.metric_rows import MetricRow, rows_of

TRACKED = (*METRICS, *GUARD_METRICS, "unknown", "skipped", "nll")
SAMPLES = 8


def scalars(rows: list[MetricRow | dict]) -> dict[str, float]:
    out = {}
    for r in rows_of(rows):
        harness = r.harness is not None
        if (r.metric not in TRACKED and not harness) or r.value is None:
            continue
        lang = "" if r.language == "avg" else f"/{r.language}"
        base = f"{'harness' if harness else 'lcb'}/{r.variant}/{r.task}/{r.metric}"
        out[base + lang] = float(r.value)
        for side in ("low", "high"):
            if getattr(r, side) is not None:
                out[f"{base}_{side}{lang}"] = float(getattr(r, side))
    return out


def samples(run_dir: Path, rows: list[MetricRow | dict], n: int = SAMPLES, seed: int = 0) -> dict[str, list[dict]]:
    """{variant: [{prompt, language, reply, verdict}]}: a seeded mix of passing and failing replies."""
    out = {}
    rows = rows_of(rows)
    for variant in dict.fromkeys(r.variant for r in rows):
        rel = next((r.outcomes for r in rows if r.variant == variant and r.outcomes), None)
        if rel is None:
            continue
        folder = (run_dir / rel).parent
        try:
            outcomes = {o["id"]: o for o in map(json.loads, (folder / "outcomes.jsonl").read_text().splitlines())}
            records = [json.loads(x) for x in (folder / "completions.jsonl").read_text().splitlines() if x.strip()]
        except (OSError, json.JSONDecodeError):
            continue
        records = [r for r in records if not r.get("error") and r["id"] in outcomes]
        random.Random(f"{seed}/{variant}").shuffle(records)
        failed = [r for r in records if _verdict(outcomes[r["id"]]) != "pass"]
        chosen = (failed[: n // 2] + [r for r in records if _verdict(outcomes[r["id"]]) == "pass"])[:n]
        out[variant] = [
            {
                "prompt": r["prompt"][:160],
                "language": r["language"],
                "task": r["task"],
                "reply": r["completion"][:240],
                "verdict": _verdict(outcomes[r["id"]]),
            }
            for r in chosen
        ]
    return out


def _verdict(o: dict) -> str:
    if not o["counted"]:
        return "not counted (no 5-token line)"
    if o["line_error"]:
        return "wrong language"
    return "degenerate" if o.get("degenerate") else "pass"


def markdown(table: list[dict]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ⏎ ")  # noqa: E731
    lines = ["| task | language | prompt | reply | verdict |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['task']} | {r['language']} | {esc(r['prompt'])} | {esc(r['reply'])} | {r['verdict']} |" for r in table
    ]
    return "\n".join(lines)


DIRECT = ("TensorBoardCallback", "WandbCallback")


def log_scalars(trainer, logs: dict[str, float], step: int) -> None:
    """Write the scalars under their own tags: straight to TensorBoard and W&B (the trainer's own `log` would
    file them under `train/`), through `trainer.log` for any other tracker in report_to."""
    others = False
    for cb in trainer.callback_handler.callbacks:
        name = type(cb).__name__
        if name == "TensorBoardCallback" and getattr(cb, "tb_writer", None) is not None:
            for tag, value in logs.items():
                cb.tb_writer.add_scalar(tag, value, step)
            cb.tb_writer.flush()
        elif name == "WandbCallback" and getattr(cb, "_wandb", None) is not None and cb._wandb.run is not None:
            cb._wandb.log({**logs, "train/global_step": step})
        elif name.endswith("Callback") and type(cb).__module__.startswith("transformers.integrations"):
            others = True
    if others:
        trainer.log(logs)


def log_samples(trainer, run_dir: Path, rows: list[MetricRow | dict], step: int) -> None:
    """Send the sample tables to the trackers that take tables (TensorBoard text, W&B tables)."""
    tables = samples(run_dir, rows)
    if not tables:
        return
    for cb in trainer.callback_handler.callbacks:
        name = type(cb).__name__
        if name == "TensorBoardCallback" and getattr(cb, "tb_writer", None) is not None:
            for variant, table in tables.items():
                cb.tb_writer.add_text(f"lcb/{variant}/samples", markdown(table), step)
            cb.tb_writer.flush()
        elif name == "WandbCallback" and getattr(cb, "_wandb", None) is not None and cb._wandb.run is not None:
            wandb = cb._wandb
            for variant, table in tables.items():
                cols = ["task", "language", "prompt", "reply", "verdict"]
                wandb.log(
                    {f"lcb/{variant}/samples": wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in table])},
                    step=step,
                )

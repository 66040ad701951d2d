"""A built prompts mix as a prompt file: the mix's prompts (`id, prompt, language, task, source`, each id once) for a
base pass with K replies per prompt, which `mlft data mix filter` (mlft/training/spread.py) reads back."""

from __future__ import annotations

from pathlib import Path

from mlft.errors import DataError

PROMPT_FILE = "prompts.jsonl"


def mix_folder(path: str | Path) -> Path:
    """The folder holding a built mix's train.jsonl: `path` itself or its mix/ (a `mlft data mix --out` or run dir)."""
    path = Path(path)
    for folder in (path / "mix", path):
        if (folder / "train.jsonl").is_file():
            return folder
    raise DataError(
        f"{path}: no built mix (no train.jsonl in it or in its mix/); build one with `mlft data mix MIX.yaml --out DIR`"
    )


def prompt_rows(rows: list[dict]) -> list[dict] | None:
    """The mix's prompts as an LCB prompt file (`id, prompt, language, task, source`, and `answer` when the rows
    carry one (verifiable prompts); each id once), or None when a
    prompt is more than one user turn (a prompt file holds text)."""
    out, seen = [], set()
    for row in rows:
        prompt = row["prompt"]
        if isinstance(prompt, list):
            if len(prompt) != 1 or prompt[0].get("role") != "user":
                return None
            prompt = prompt[0].get("content") or ""
        if row["id"] in seen:
            continue
        seen.add(row["id"])
        out.append(
            {
                "id": row["id"],
                "prompt": prompt,
                "language": row["language"],
                "task": row.get("task") or "monolingual",
                "source": row.get("source") or "mix",
                **({"answer": row["answer"]} if row.get("answer") is not None else {}),
            }
        )
    return out

"""Helpers for the data-mix tests: write mix files and small local datasets."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

NON_ENGLISH = ["ar", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "ru", "tr", "vi", "zh"]


def write_mix(tmp_path: Path, data: dict, name: str = "mix.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def lcb_override(shared: Path) -> str:
    return f"decontaminate.lcb_path={shared / 'lcb' / 'test_sets.zip'}"

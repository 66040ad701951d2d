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


def matching_interval_rows(score_rows: list[dict], eval_rows: list[dict], values: bool = False) -> int:
    """Assert that `mlft score` rows (source "all") and `mlft eval` metric rows give the same LPR / WPR / LCPR
    intervals (and, with `values`, the same point values); returns how many were compared."""
    import pytest

    ev = {(r["task"], r["language"], r["metric"]): r for r in eval_rows}
    checked = 0
    for r in score_rows:
        if r["source"] != "all":
            continue
        for m in ("lpr", "wpr", "lcpr"):
            e = ev.get((r["task"], "avg" if r["language"] == "all" else r["language"], m))
            if e is None or r.get(f"{m}_ci_low") is None:
                continue
            assert (r[f"{m}_ci_low"], r[f"{m}_ci_high"]) == (e["low"], e["high"]), (r["task"], r["language"], m)
            if values:
                assert r[m] == pytest.approx(e["value"], abs=1e-12)
            checked += 1
    return checked


# what the Aya dataset's rows carry as language codes (ISO 639-3), for tests that answer hub loads locally
AYA_CODES = {
    "ar": "arb",
    "de": "deu",
    "es": "spa",
    "fr": "fra",
    "hi": "hin",
    "id": "ind",
    "it": "ita",
    "ja": "jpn",
    "ko": "kor",
    "pt": "por",
    "ru": "rus",
    "tr": "tur",
    "vi": "vie",
    "zh": "zho",
}

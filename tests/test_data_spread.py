"""`mlft mix filter`: a prompts mix keeps the prompts whose share of replies the reward passes, in a base pass with
K replies per prompt, is strictly between 0 and 1 (groups with spread: GRPO's advantage is not zero). Hand-made
prompts and replies, no model."""

from __future__ import annotations

import json

import pytest

from mlft.cli import main
from mlft.data.mix import build_mix, load_mix
from mlft.errors import DataError
from mlft.io.jsonl import read_jsonl, write_jsonl
from mlft.training.recipe import load_recipe
from mlft.training.reward_terms import ReplyScorer
from mlft.training.spread import FILTERED_MIX, PROMPT_FILE, filter_mix
from tests.training_helpers import REPO

FR = "Le ciel est bleu parce que la lumière du soleil est diffusée dans l'air."
DE = "Der Himmel ist blau, weil das Sonnenlicht in der Atmosphäre gestreut wird."
EN = "The sky is blue because sunlight is scattered by the air in the atmosphere."
PROMPTS = [  # id, prompt, language, task, the base pass's replies
    ("fr_right", "Why is the sky blue? Answer in French.", "fr", "crosslingual", [FR, FR, FR]),
    ("fr_some", "Explain rain. Answer in French.", "fr", "crosslingual", [FR, EN, FR]),
    ("fr_wrong", "Explain snow. Answer in French.", "fr", "crosslingual", [EN, EN, "Oui."]),
    ("de_some", "Warum ist der Himmel blau?", "de", "monolingual", [EN, DE, EN]),
    ("de_wrong", "Erkläre den Regen.", "de", "monolingual", [EN, EN, EN]),
    ("de_none", "Erkläre den Schnee.", "de", "monolingual", []),
]


@pytest.fixture(scope="module")
def scorer(shared):
    return ReplyScorer(words=shared / "lcb" / "words")


@pytest.fixture
def built(tmp_path):
    """A prompts mix built from a local prompt file (decontamination off: no LCB data), and a base pass with three
    replies per prompt, as `mlft eval` writes it (completions.jsonl in the variant folder)."""
    src = tmp_path / "prompts_src.jsonl"
    write_jsonl(src, [{"id": i, "prompt": p, "language": lang, "task": t} for i, p, lang, t, _ in PROMPTS])
    mix_file = tmp_path / "mix.yaml"
    mix_file.write_text(
        f"kind: prompts\ntotal: {len(PROMPTS)}\nseed: 3\ndecontaminate: {{enabled: false}}\n"
        f"sources:\n  - {{name: mine, type: local, path: {src.name}, format: prompt, "
        "language_column: language, share: 1.0}\n",
        encoding="utf-8",
    )
    build_mix(load_mix(mix_file), tmp_path / "rl_mix", progress=False)
    listed = read_jsonl(tmp_path / "rl_mix" / "mix" / PROMPT_FILE)  # the prompt file the base pass reads
    text_to_id = {r["prompt"]: r["id"] for r in listed}
    assert len(listed) == len(PROMPTS) and {r["language"] for r in listed} == {"fr", "de"}
    records = []
    for _, prompt, lang, task, replies in PROMPTS:
        records += [
            {
                "id": text_to_id[prompt],
                "sample": k,
                "task": task,
                "source": "mine",
                "language": lang,
                "model": "base",
                "completion": text,
            }
            for k, text in enumerate(replies)
        ]
    write_jsonl(tmp_path / "base_pass" / "default" / "completions.jsonl", records)
    return tmp_path, text_to_id


def test_keeps_prompts_answered_right_sometimes_and_writes_a_reloadable_mix(built, scorer):
    root, ids = built
    s = filter_mix(root / "rl_mix", root / "base_pass", root / "spread", scorer=scorer)
    kept = read_jsonl(root / "spread" / "mix" / "train.jsonl")
    assert {r["prompt"][0]["content"] for r in kept} == {
        "Explain rain. Answer in French.",
        "Warum ist der Himmel blau?",
    }
    assert s["prompts"] == {"total": 6, "kept": 2, "all_right": 1, "all_wrong": 2, "unscored": 1}
    assert s["by_language"] == {
        "de": {"kept": 1, "all_right": 0, "all_wrong": 1, "unscored": 1},
        "fr": {"kept": 1, "all_right": 1, "all_wrong": 1, "unscored": 0},
    }
    assert s["replies_per_prompt"] == {0: 1, 3: 5}
    per = json.loads((root / "spread" / "mix" / "filter.json").read_text())["per_prompt"]
    some = per[ids["Explain rain. Answer in French."]]
    assert (some["replies"], some["passed"], some["kept"], some["why"]) == (3, 2, True, "kept")
    assert per[ids["Explain snow. Answer in French."]]["why"] == "all_wrong"  # "Oui." is not counted: 0, not a skip
    stats = json.loads((root / "spread" / "mix" / "stats.json").read_text())
    assert stats["total"] == 2 and stats["filter"]["by_language"] == s["by_language"]
    # reloadable: the filtered mix file is a prompts mix of exactly the kept rows, and a recipe takes it
    mix = load_mix(root / "spread" / FILTERED_MIX)
    assert (mix.kind, mix.total, mix.seed, mix.decontaminate.enabled) == ("prompts", 2, 3, False)
    build_mix(mix, root / "again", progress=False)
    rebuilt = read_jsonl(root / "again" / "mix" / "train.jsonl")
    row = lambda r: (r["prompt"][0]["content"], r["language"], r["task"])  # noqa: E731
    assert sorted(map(row, rebuilt)) == sorted(map(row, kept))
    recipe = load_recipe(
        REPO / "recipes/cpu/grpo_summed_control.yaml",
        [f"mix={root / 'spread' / FILTERED_MIX}", f"run_dir={root / 'run'}"],
    )
    assert recipe.mix == str(root / "spread" / FILTERED_MIX)


def test_the_reward_term_decides_and_bad_passes_are_refused(built, scorer, tmp_path):
    root, ids = built
    # gated_language, the stricter reward, decides the same here (its language verdict L holds for the French and
    # German sentences and fails the English ones)
    s = filter_mix(root / "rl_mix", root / "base_pass", root / "gated", reward="gated_language", scorer=scorer)
    assert s["prompts"]["kept"] == 2 and s["reward"] == "gated_language"
    one = root / "one_reply"  # one reply per prompt: no share strictly between 0 and 1 exists
    write_jsonl(
        one / "completions.jsonl",
        [r for r in read_jsonl(root / "base_pass" / "default" / "completions.jsonl") if r["sample"] == 0],
    )
    with pytest.raises(DataError, match="K >= 2"):
        filter_mix(root / "rl_mix", one, root / "x", scorer=scorer)
    other = root / "other_ids"
    write_jsonl(
        other / "completions.jsonl",
        [{**r, "id": "elsewhere/" + r["id"]} for r in read_jsonl(root / "base_pass" / "default" / "completions.jsonl")],
    )
    with pytest.raises(DataError, match="ids differ"):
        filter_mix(root / "rl_mix", other, root / "x", scorer=scorer)
    with pytest.raises(DataError, match="no built mix"):
        filter_mix(tmp_path / "nowhere", root / "base_pass", root / "x", scorer=scorer)


def test_mix_filter_command(shared, built, capsys):  # shared: LCB's files
    root, _ = built
    assert (
        main(
            [
                "data",
                "mix",
                "filter",
                str(root / "rl_mix"),
                "--pass",
                str(root / "base_pass"),
                "--out",
                str(root / "cli"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2 of 6 prompts kept (1 all right, 2 all wrong, 1 without replies" in out
    assert "fr    kept     1  all right     1  all wrong     1" in out
    assert (root / "cli" / FILTERED_MIX).is_file()
    assert main(["data", "mix", "filter", str(root / "rl_mix"), "--out", str(root / "cli")]) == 2  # --pass missing

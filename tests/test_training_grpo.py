"""GRPO: reward terms computed by the benchmark's own scorer, `trainer: grpo` recipes and prompt mixes
validated before any load, and (slow) real GRPO runs on CPU: train, save, evaluate by the callback, resume
bit-identically after SIGKILL; the `language` term equals the official verdict on every released reply."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

from mlft.errors import ConfigError
from mlft.io import curve_file as curves
from mlft.training.recipe import load_recipe, uses_vllm
from mlft.training.reward_terms import ReplyScorer
from mlft.training.rewards import REWARDS, RewardSpec, reward_functions, validate_rewards
from mlft.training.rollouts import curve_row, read_reward_curves, read_rollouts
from tests.training_helpers import REPO, kill_after_first_checkpoint, mlft, noisy_lines, run

GRPO = REPO / "recipes/cpu/grpo_summed_control.yaml"
# 2 optimizer steps of 2 prompts x 2 replies x 12 tokens, a checkpoint after each, the tiny suite
TINY_GRPO = [
    "training_args.max_steps=2",
    "training_args.save_steps=1",
    "training_args.logging_steps=1",
    "training_args.per_device_train_batch_size=4",
    "training_args.num_generations=2",
    "training_args.max_completion_length=12",
    "training_args.warmup_steps=0",
    "training_args.learning_rate=1e-3",
    "evaluation.suite=lcb_tiny",
    "mix_overrides=[total=16]",
]


@pytest.fixture(scope="module")
def scorer(shared):
    return ReplyScorer(words=shared / "lcb" / "words")


def _call(name: str, replies, languages, scorer):
    return REWARDS[name](replies, languages, scorer)


# -- reward terms -----------------------------------------------------------------------------------------
def test_no_counted_line_earns_zero_not_a_skip(scorer):
    """LCB leaves a reply without a counted line (>= 5 tokens) out of LPR; as a reward it earns 0, like a wrong
    language, so the skip rule cannot be gamed with short or empty replies."""
    good = "Der Himmel ist blau, weil das Sonnenlicht in der Atmosphäre gestreut wird."
    english = "The sky is blue because sunlight is scattered by the air in the atmosphere."
    short = ["", "   ", "Ja.", "Gut, danke!", "ok ok ok\nja", '"""""']
    got = _call("language", [good, english, *short], ["de"] * (2 + len(short)), scorer)
    assert got == [1.0, 0.0] + [0.0] * len(short)
    verdicts = scorer.verdicts(short, ["de"] * len(short))
    assert not any(v.counted for v in verdicts)  # the official scorer would skip them all


def test_words_term_non_latin_only_and_degeneracy_penalty(scorer):
    ko = "서울은 한국의 수도이며 많은 사람들이 살고 있습니다 정말 아름다운 도시입니다"
    ko_english = "서울은 한국의 수도이며 많은 사람들이 살고 있습니다 정말 beautiful 도시입니다"
    de = "Der Himmel ist blau, weil das Sonnenlicht in der Atmosphäre gestreut wird."
    got = _call("words", [ko, ko_english, de], ["ko", "ko", "de"], scorer)
    assert got[2] is None  # Latin-script target: not applicable (trl leaves None out of the sum)
    assert got[0] == 1.0 and got[1] == 0.0
    assert _call("degeneracy", ["", "itititititititititit", de], ["de"] * 3, scorer) == [-1.0, -1.0, 0.0]
    v = _call("validity", [de, "Xq zzv brrk plonf qqqt wvvx"], ["de", "de"], scorer)
    assert v[0] > 0.8 and v[1] < 0.3


def test_reward_functions_read_trl_completions_and_log_names(scorer):
    specs = [RewardSpec("language", 1.0), RewardSpec("degeneracy", 2.0)]
    funcs, weights = reward_functions(specs, scorer)
    assert [f.__name__ for f in funcs] == ["language", "degeneracy"] and weights == [1.0, 2.0]
    from trl.trainer.utils import get_callable_name

    assert [get_callable_name(f) for f in funcs] == ["language", "degeneracy"]  # trl's `rewards/<name>/mean`
    completions = [
        [{"role": "assistant", "content": "Der Himmel ist blau, weil das Licht gestreut wird."}],
        [{"role": "assistant", "content": ""}],
    ]
    assert funcs[0](prompts=[[], []], completions=completions, language=["de", "de"], task=["x", "x"]) == [1.0, 0.0]
    assert funcs[1](prompts=[[], []], completions=completions, language=["de", "de"]) == [0.0, -1.0]
    row = curve_row(
        3, {"reward": 0.5, "kl": 0.01, "rewards/language/mean": 0.5, "rewards/language/std": 0.1}, {"language": 1.0}
    )
    assert row == {
        "step": 3,
        "reward": 0.5,
        "kl": 0.01,
        "terms": {"language": {"mean": 0.5, "std": 0.1, "weight": 1.0}},
    }


def brevity(replies, languages, scorer, limit: int = 100):
    return [1.0 if len(r) <= limit else 0.0 for r in replies]


def test_user_terms_and_bad_specs():
    name = f"{__name__}:brevity"
    validate_rewards([RewardSpec(name, 0.5, {"limit": 10})], "rewards")  # imported and registered
    assert name in REWARDS
    funcs, _ = reward_functions([RewardSpec(name, 0.5, {"limit": 10})], ReplyScorer())
    assert funcs[0](completions=["short", "much longer than ten"], language=["en", "en"]) == [1.0, 0.0]
    bad = [
        ([RewardSpec("langauge")], r"unknown reward term 'langauge'.*did you mean 'language'"),
        ([RewardSpec("language", -1.0)], r"rewards\[0\].weight: must be >= 0"),
        ([RewardSpec("language", float("nan"))], r"weight: must be a finite number"),
        ([RewardSpec("language", 0.0)], r"every weight is 0"),
        ([RewardSpec("language"), RewardSpec("language")], r"listed twice"),
        ([RewardSpec("language", 1.0, {"strict": True})], r"takes no option 'strict'"),
        ([RewardSpec(name, 1.0, {"limt": 3})], r"takes no option 'limt'; valid: limit"),
        ([RewardSpec("no.such.module:f")], r"cannot import reward term"),
        ([], r"at least one reward term"),
    ]
    for specs, message in bad:
        with pytest.raises(ConfigError, match=message):
            validate_rewards(specs, "rewards")


# -- the gated term: what LCB's blind spots cannot buy ----------------------------------------------------------
FR = "Le chat dort sur le canapé du salon pendant que la pluie tombe doucement dehors."
EN_PARAGRAPH = (
    "The weather is nice today and I would like to go for a walk in the park with my friends, and "
    "then we will all have dinner together at a small restaurant near the river."
)


def _terms(text, lang, scorer):
    return {n: REWARDS[n]([text], [lang], scorer)[0] for n in ("language", "validity", "degeneracy", "gated_language")}


def test_one_counted_line_does_not_buy_the_gated_reward(scorer):
    """Probe: a 5-token French line and short English lines: LCB judges the one line only (language 1)."""
    text = "Le chat dort sur canapé.\nOk sure.\nYes thanks.\nSee you soon.\nBye now."
    got = _terms(text, "fr", scorer)
    assert got["language"] == 1.0  # the official verdict (kept as the metric)
    assert got["gated_language"] == 0.0  # 5 of 14 tokens counted: below the share
    assert _terms(FR, "fr", scorer)["gated_language"] == 1.0


def test_text_after_q_is_judged_by_the_gated_reward(scorer):
    """Probe: `French line\nQ: <English paragraph>`: LCB cuts at "\nQ:" and judges the French line alone."""
    text = f"{FR}\nQ: {EN_PARAGRAPH}"
    got = _terms(text, "fr", scorer)
    assert got["language"] == 1.0 and got["validity"] == 1.0  # both cut there (official normalisation)
    assert got["gated_language"] == 0.0
    cut = REWARDS["gated_language"]([text], ["fr"], scorer, after_q="cut")[0]
    assert cut == 0.0  # unjudged, the tail still counts among the reply's tokens: below the share


@pytest.mark.parametrize("lang", ["ar", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "ru", "tr", "vi", "zh"])
def test_an_english_reply_earns_nothing(lang, scorer):
    got = _terms(EN_PARAGRAPH, lang, scorer)
    assert got["gated_language"] == 0.0 and got["validity"] <= 0.25, got


def test_real_word_salad_is_gated(scorer):
    """Probe: `Le le la la de de ...`: LCB passes it, every word is French; the repetition rule flags it, and
    the gate keeps it below a clean reply: floor + (1 - floor) * 0."""
    salad = "Le le la la de de et et un un une une des des"
    got = _terms(salad, "fr", scorer)
    assert got["language"] == 1.0 and got["degeneracy"] == -1.0
    assert got["gated_language"] == 0.5
    assert REWARDS["gated_language"]([salad], ["fr"], scorer, floor=0.0)[0] == 0.0
    with pytest.raises(ConfigError, match="floor"):
        validate_rewards([RewardSpec("gated_language", 1.0, {"floor": 1.5})], "rewards")
    with pytest.raises(ConfigError, match="after_q"):
        validate_rewards([RewardSpec("gated_language", 1.0, {"after_q": "drop"})], "rewards")


def test_reward_functions_receive_the_mix_columns(scorer):
    """trl passes the dataset's other columns (task...) as keyword arguments: a term that declares one gets it."""
    seen = {}

    def by_task(replies, languages, scorer, task=None):
        seen["task"] = task
        return [1.0 if t == "crosslingual" else 0.0 for t in task]

    REWARDS.add("by_task_test", by_task)
    funcs, _ = reward_functions([RewardSpec("by_task_test")], scorer)
    got = funcs[0](
        prompts=[[], []],
        completions=["a", "b"],
        language=["de", "de"],
        task=["crosslingual", "monolingual"],
        trainer_state=None,
    )
    assert got == [1.0, 0.0] and seen["task"] == ["crosslingual", "monolingual"]


def test_rollouts_of_each_step_are_written_with_their_terms_resumably(scorer, tmp_path):
    """As trl calls the reward functions (every term with the same completions list, the trainer state, the mix's
    columns): each step's 3 highest- and 3 lowest-total rollouts go to rollouts.jsonl with each term's value, the
    weighted total, the prompt's group and LCB's verdict; a step generated again (a resumed run) replaces its
    rows and the later ones; only the first process writes."""
    from types import SimpleNamespace

    specs = [RewardSpec("language", 1.0), RewardSpec("validity", 0.5), RewardSpec("degeneracy", 1.0)]
    funcs, weights = reward_functions(specs, scorer, run_dir=tmp_path)
    fr = [
        "Le ciel est bleu parce que la lumière du soleil est diffusée dans l'air.",
        "The sky is blue because sunlight is scattered by the air in the atmosphere.",
        "Le le la la de de et et un un une une des des",
        "",
    ]
    de = [
        "Der Himmel ist blau, weil das Sonnenlicht in der Atmosphäre gestreut wird.",
        "Ja.",
        "Here is my answer in English, as you can see right here.",
        "Der Himmel ist blau.",
    ]
    texts = fr + de
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    prompts = [[{"role": "user", "content": "Why is the sky blue? Answer in French."}]] * 4 + [
        [{"role": "user", "content": "Warum ist der Himmel blau?"}]
    ] * 4
    cols = {
        "language": ["fr"] * 4 + ["de"] * 4,
        "task": ["crosslingual"] * 4 + ["monolingual"] * 4,
        "id": ["p:fr:1"] * 4 + ["p:de:2"] * 4,
    }

    def step(global_step, batch=completions, main=True):
        state = SimpleNamespace(global_step=global_step, is_world_process_zero=main)
        return [f(prompts=prompts, completions=batch, trainer_state=state, **cols) for f in funcs]

    values = step(0)
    rows = read_rollouts(tmp_path)
    assert [r["step"] for r in rows] == [1] * 6 and [r["rank"] for r in rows] == ["top"] * 3 + ["bottom"] * 3
    totals = [sum(w * v[k] for w, v in zip(weights, values) if v[k] is not None) for k in range(8)]
    assert [r["total"] for r in rows[:3]] == sorted(totals, reverse=True)[:3]
    assert [r["total"] for r in rows[3:]] == sorted(totals)[:3]
    for r in rows:  # each term's value as the term computed it, the prompt, the mix's columns, LCB's verdict
        k = texts.index(r["completion"])
        assert r["terms"] == {s.name: values[i][k] for i, s in enumerate(specs)}
        assert (r["language"], r["task"], r["prompt_id"]) == (cols["language"][k], cols["task"][k], cols["id"][k])
        assert r["prompt"] == prompts[k][0]["content"] and r["group"]["n"] == 4
    by_text = {r["completion"]: r for r in rows}
    assert by_text[fr[0]]["verdict"] == "pass" and by_text[fr[0]]["total"] == rows[0]["total"]
    assert by_text[""]["verdict"] == "not counted" and by_text[""]["rank"] == "bottom"

    step(1)
    step(2)
    assert [r["step"] for r in read_rollouts(tmp_path)] == [1] * 6 + [2] * 6 + [3] * 6
    again = [[{"role": "assistant", "content": t}] for t in texts[::-1]]
    step(1, again)  # resumed from checkpoint-1: step 2 generated again, step 3 not yet
    assert [r["step"] for r in read_rollouts(tmp_path)] == [1] * 6 + [2] * 6
    step(2, main=False)
    assert [r["step"] for r in read_rollouts(tmp_path)] == [1] * 6 + [2] * 6


# -- recipes and mixes, before any load -----------------------------------------------------------------------
def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(f"include: {GRPO}\n{body}", encoding="utf-8")
    return p


@pytest.mark.parametrize(
    "body, message",
    [
        ("rewards: [{name: langage}]\n", r"rewards\[0\].name: unknown reward term 'langage'"),
        ("rewards: [{name: language, weight: -0.5}]\n", r"rewards\[0\].weight: must be >= 0"),
        ("rewards: [{name: language, weight: heavy}]\n", r"weight: expected float"),
        ("rewards: []\n", r"at least one reward term"),
        ("mix: data_mixes/cpu/crosslingual_sft.yaml\n", r"is a 'sft' mix but trainer 'grpo' trains on a 'prompts' mix"),
        (
            "training_args: {max_length: 256}\n",
            r"unknown GRPOConfig field 'max_length' \(it is a SFTConfig / DPOConfig",
        ),
        ("training_args: {reward_weights: [1.0]}\n", r"training_args.reward_weights: managed by mlft"),
        ("training_args: {use_vllm: true}\n", r"training_args.use_vllm: set the recipe's `generation"),
        ("training_args: {num_generatons: 4}\n", r"did you mean 'num_generations'"),
        ("generation: tgi\n", r"generation: 'tgi' is not one of"),
    ],
)
def test_bad_grpo_input_is_named_before_any_load(tmp_path, monkeypatch, body, message):
    import datasets
    import transformers

    def forbidden(*a, **k):
        raise AssertionError("a model or dataset was loaded during validation")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", forbidden)
    monkeypatch.setattr(datasets, "load_dataset", forbidden)
    with pytest.raises(ConfigError, match=message):
        load_recipe(_write(tmp_path, body))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["training_args.num_generations=1"], r"training_args.num_generations: must be >= 2"),
        (
            ["training_args.num_generations=3", "training_args.per_device_train_batch_size=8"],
            r"training_args: generation_batch_size \(8\) must be divisible by num_generations \(3\)",
        ),
        (["training_args.max_completion_length=0"], r"training_args.max_completion_length: must be >= 1"),
        (["training_args.multi_objective_aggregation=sum"], r"training_args.multi_objective_aggregation: 'sum' is not"),
        (["training_args.scale_rewards=maybe"], r"training_args.scale_rewards: 'maybe' is not one of"),
        (["training_args.epsilon_high=0.1"], r"training_args.epsilon_high: 0.1 is below epsilon"),
        (["scorer.word_check=script"], r"scorer.word_check: 'script' is not one of"),
    ],
)
def test_check_runs_trls_own_value_checks(extra, message, capsys):
    """`mlft train --check` builds the GRPOConfig the run would train with: values trl refuses (some only in the
    first step) fail here, naming the field, before any model loads."""
    from mlft.cli import main

    assert main(["train", "--check", str(GRPO), *extra]) != 0
    import re

    assert re.search(message, capsys.readouterr().err), message


def test_grpo_options_and_scorer_reach_trl_and_the_terms():
    """trl's aggregation / scaling / dropout / clip / logging options pass through training_args; the scorer's
    options come from the recipe's `scorer:` block."""
    from mlft.training.train import _trainer_config

    opts = [
        "training_args.multi_objective_aggregation=normalize_then_sum",
        "training_args.scale_rewards=batch",
        "training_args.disable_dropout=true",
        "training_args.num_iterations=2",
        "training_args.epsilon_high=0.28",
        "training_args.log_completions=true",
        "training_args.num_generations=8",
        "scorer.min_tokens=3",
        "scorer.label_aliases={id: [ms]}",
    ]
    recipe = load_recipe(GRPO, opts)
    config = _trainer_config(recipe, Path("/tmp/unused"))
    assert (
        config.multi_objective_aggregation,
        config.scale_rewards,
        config.disable_dropout,
        config.num_iterations,
        config.epsilon_high,
        config.log_completions,
        config.num_generations,
    ) == ("normalize_then_sum", "batch", True, 2, 0.28, True, 8)
    scorer = recipe.scorer.scorer()
    assert scorer.options.min_tokens == 3 and scorer.options.label_aliases == {"id": {"ms"}}
    assert not scorer.options.is_official and load_recipe(GRPO).scorer.scorer().options.is_official


def test_other_trainers_reject_rl_keys(tmp_path):
    sft = REPO / "recipes/cpu/english_sft.yaml"
    with pytest.raises(ConfigError, match=r"'num_generations' \(it is a GRPOConfig field, but trainer is 'sft'\)"):
        load_recipe(sft, ["training_args.num_generations=4"])
    with pytest.raises(ConfigError, match=r"rewards: only trainer 'grpo' takes reward terms"):
        load_recipe(sft, ["rewards=[{name: language}]"])
    bad_mix = tmp_path / "m.yaml"
    bad_mix.write_text("kind: prompts\ntotal: 10\nsources:\n  - {name: s, type: seed, path: crosslingual, share: 1}\n")
    with pytest.raises(ConfigError, match=r"seed set 'crosslingual' holds sft rows, the mix is kind 'prompts'"):
        load_recipe(GRPO, [f"mix={bad_mix}"])
    bad_mix.write_text(
        "kind: prompts\ntotal: 10\nsources:\n  - {name: s, type: seed, path: crosslingual_prompts, share: 0.5}\n"
    )
    with pytest.raises(ConfigError, match=r"shares must sum to 1"):
        load_recipe(GRPO, [f"mix={bad_mix}"])


def test_generation_backend_wiring():
    """vLLM rollouts on a GPU with vllm installed (`generation: auto`), hf otherwise; an explicit vllm without
    either is an error before anything loads. (The GPU path itself needs a GPU: not run here.)"""
    recipe = load_recipe(GRPO)
    assert uses_vllm(recipe) is False  # this CPU machine: use_cpu
    recipe.training_args["use_cpu"] = False
    assert uses_vllm(recipe, cuda=True, vllm=True) is True
    assert uses_vllm(recipe, cuda=True, vllm=False) is False
    assert uses_vllm(recipe, cuda=False, vllm=True) is False
    recipe.generation = "hf"
    assert uses_vllm(recipe, cuda=True, vllm=True) is False
    recipe.generation = "vllm"
    with pytest.raises(ConfigError, match="needs the vllm package"):
        uses_vllm(recipe, cuda=True, vllm=False)
    with pytest.raises(ConfigError, match="needs a GPU"):
        uses_vllm(recipe, cuda=False, vllm=True)
    from mlft.training.train import _trainer_config

    config = _trainer_config(load_recipe(GRPO), Path("/tmp/unused"))
    assert config.use_vllm is False and config.num_generations == 4


def test_prompt_mix_rows_languages_tasks_and_holdout(shared, tmp_path):  # LCB's test sets
    from mlft.data.mix import build_mix, load_mix
    from mlft.data.seed import heldout_keys

    mix = load_mix(REPO / "data_mixes/cpu/grpo_prompts.yaml")
    ds = build_mix(mix, tmp_path, "prompts", progress=False)
    rows = list(ds)
    assert len(rows) == 240
    assert {r["task"] for r in rows} == {"crosslingual", "monolingual"}
    assert all(r["prompt"][-1]["role"] == "user" and r["language"] for r in rows)
    assert not {r["id"].split(":")[2] for r in rows} & set(heldout_keys())
    by_task = defaultdict(int)
    for r in rows:
        by_task[r["task"]] += 1
    assert by_task["crosslingual"] == 180  # 60 % + 15 % of 240
    import json

    report = json.loads((tmp_path / "mix" / "decontamination.json").read_text())
    assert report["phrasing_overlap"]["rows"] == 0  # mlft's own phrasings, never LCB's
    # a user file: id, prompt, language (+ optional task)
    user = tmp_path / "mine.jsonl"
    user.write_text(
        '{"id": "a", "prompt": "Explain rain, in French please.", "language": "fr", '
        '"task": "crosslingual"}\n{"id": "b", "prompt": "Wie spät ist es?", "language": "de"}\n'
    )
    (tmp_path / "m.yaml").write_text(
        f"kind: prompts\ntotal: 2\nsources:\n  - {{name: mine, type: local, path: {user}, "
        "format: prompt, language_column: language, share: 1}\n"
    )
    rows = list(build_mix(load_mix(tmp_path / "m.yaml"), tmp_path / "u", "prompts", progress=False))
    assert sorted((r["language"], r["task"]) for r in rows) == [("de", "monolingual"), ("fr", "crosslingual")]


# -- the judge's verdicts on the released outputs ---------------------------------------------------------------
@pytest.mark.slow
def test_language_term_is_the_official_verdict_on_every_released_reply(shared):
    """Summed per (task, model, source, language) group of the paper's 65,816 released replies, the `language`
    term equals the official script's counts (lid.176.ftz) exactly: 1 on each counted reply without a line error,
    0 on each line error AND on each uncounted reply; `words` likewise equals the WPR counts (non-Latin)."""
    from mlft.completions import read_completions
    from mlft.languages import NON_LATIN

    completions = []
    for f in sorted((shared / "lcb" / "outputs").glob("*.csv")):
        completions += read_completions(f)
    assert len(completions) > 60000
    texts, langs = [c.completion for c in completions], [c.language for c in completions]
    scorer = ReplyScorer(words=shared / "lcb" / "words", cache_size=len(texts))  # `words` reuses the analyses
    lang_reward = REWARDS["language"](texts, langs, scorer)
    word_reward = REWARDS["words"](texts, langs, scorer)
    sums = defaultdict(lambda: [0, 0.0, 0.0])
    for c, a, b in zip(completions, lang_reward, word_reward):
        s = sums[(c.task, c.model, c.source, c.language)]
        s[0] += 1
        s[1] += a
        s[2] += b or 0.0
    with open(shared / "lcb" / "reference" / "official_counts_ftz.tsv", encoding="utf-8") as fh:
        ref = list(csv.DictReader(fh, delimiter="\t"))
    assert len(ref) == 660
    for r in ref:
        n, clean, no_words = sums[(r["task"], r["model"], r["source"], r["language"])]
        assert n == int(r["n_responses"]), r
        assert clean == int(r["n_scored"]) - int(r["n_line_err"]), r
        if r["language"] in NON_LATIN:
            assert no_words == int(r["n_scored"]) - int(r["n_line_err"]) - int(r["n_word_err"]), r
    skipped = sum(int(r["n_responses"]) - int(r["n_scored"]) for r in ref)
    assert skipped > 0  # replies LCB leaves out; each earned 0 above


# -- real runs ------------------------------------------------------------------------------------------------
def _adapter_bytes(folder: Path) -> bytes:
    return (folder / "adapter_model.safetensors").read_bytes()


@pytest.mark.slow
def test_grpo_lora_run_trains_saves_is_evaluated_and_resumes_bit_identically(shared, tmp_path, tiny):
    """A run's mechanics (rollouts, reward curves, checkpoints, a resume after a kill), on a 2-layer random model
    with the embedded model's tokenizer (tests/training_helpers.py: tiny_model): its replies are any tokens, whose
    rewards vary within a group, so it trains."""
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    model = f"model={tiny}"
    cmd = lambda d: mlft("train", str(GRPO), *TINY_GRPO, model, f"run_dir={d}", "--no-progress")  # noqa: E731
    done = run(cmd(whole), shared, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert noisy_lines(done.stdout, done.stderr) == []
    rows = curves.read_curves(whole)
    assert {(r["step"], r["variant"]) for r in rows} == {(0, "model"), (1, "model"), (2, "model")}
    metrics = {r["metric"] for r in rows}
    assert {"lpr", "wpr", "lpr@langdetect", "coverage", "degeneracy", "validity"} <= metrics, metrics
    rewards = read_reward_curves(whole)
    assert [r["step"] for r in rewards] == [1, 2]
    assert set(rewards[0]["terms"]) == {"language", "words", "validity", "degeneracy"}
    assert all(0.0 <= r["terms"]["language"]["mean"] <= 1.0 for r in rewards)
    rollouts = read_rollouts(whole)  # 4 rollouts a step: the 3 highest, then the lowest
    assert [(r["step"], r["rank"]) for r in rollouts] == [(s, k) for s in (1, 2) for k in ["top"] * 3 + ["bottom"]]
    # a LoRA run on a local model: merged weights in final/, its adapter in final_adapter/
    assert _adapter_bytes(whole / "final_adapter") != _adapter_bytes(whole / "checkpoints" / "checkpoint-1")  # trains

    kill_after_first_checkpoint(cmd(killed), killed, shared, timeout=600)
    assert not (killed / "complete").exists()
    resumed = run(cmd(killed), shared, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    for folder in ("checkpoints/checkpoint-1", "checkpoints/checkpoint-2", "final_adapter"):
        assert _adapter_bytes(killed / folder) == _adapter_bytes(whole / folder), folder
    assert (killed / "final" / "model.safetensors").read_bytes() == (whole / "final" / "model.safetensors").read_bytes()
    assert [r["step"] for r in read_reward_curves(killed)] == [1, 2]
    assert read_reward_curves(killed)[1]["terms"] == rewards[1]["terms"]
    assert read_rollouts(killed) == rollouts  # each step once, as the uninterrupted run wrote it

    def keys(d):
        return sorted((r["step"], r["task"], r["language"], r["metric"], r["value"]) for r in curves.read_curves(d))

    assert keys(killed) == keys(whole)  # the same replies, scored the same, no duplicate points


def test_most_paid_reads_the_top_rollouts_of_later_steps_with_ties_drawn(tmp_path):
    """`most_paid` (measurements/top_rollouts.py and rl_seeds.py read the most-paid rollouts through it): only
    "top" rows at steps >= from_step, highest total first; tied totals in an order drawn with the seed (the same
    seed, the same order; all seeds together, every tied row gets drawn first)."""
    from mlft.io.jsonl import write_jsonl
    from mlft.training.rollouts import most_paid

    rows = [
        {"step": s, "rank": rank, "total": t, "completion": f"{s}{rank}{t}"}
        for s in (1, 2, 3)
        for rank, t in (("top", 1.0), ("bottom", 0.0))
    ]
    rows += [{"step": 3, "rank": "top", "total": 0.25, "completion": "low"}]
    write_jsonl(tmp_path / "rollouts.jsonl", rows)
    top = most_paid(tmp_path, from_step=2, seed=0)
    assert [r["total"] for r in top] == [1.0, 1.0, 0.25] and {r["step"] for r in top} == {2, 3}
    assert most_paid(tmp_path, 2, seed=0) == top
    assert {most_paid(tmp_path, 2, seed=s)[0]["step"] for s in range(20)} == {2, 3}

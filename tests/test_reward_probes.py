"""The GRPO rewards against hand-written adversarial replies (tests/data/reward_probes.yaml).

Two parts. The blind spots 2-7 of `gated_language`, each a probe that bought the full reward before its fix. Then
the goal per reply class, under every shipped GRPO recipe but the negative controls (`*_control.yaml`), the
rewards computed as trl calls them (measurements/reward_probes.py): no dishonest class earns >= 0.5 of the honest
reply's reward for the same prompt, and honest replies with code, numbers or one short sentence earn >= 0.8. The
shipped recipes now pay answering (`answered_language`: the gate times the answer term; on these open prompts the
relevance judge decides, mlft/generation/relevance.py, 75.5 % held-out agreement). Measured (docs/rl.md, "Reply
classes x recipes"): it fixes the echo and close-language classes, leaves the other prompt-only classes paid where
the judge calls them answers, and judges some honest replies non-answers, which costs the honest classes and, through
the honest reply the ratios divide by, two reply-only classes: strict xfails naming the judge, to flip with a better
one."""

from __future__ import annotations

import importlib.util

import pytest

from mlft.generation import relevance
from mlft.training.reward_terms import ReplyScorer
from mlft.training.rewards import REWARDS
from tests.training_helpers import REPO

_spec = importlib.util.spec_from_file_location("reward_probes", REPO / "measurements" / "reward_probes.py")
probes_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probes_mod)

PROBES = {p["id"]: p for p in probes_mod.load_probes()}
NEEDS_ANSWER = pytest.mark.xfail(
    strict=True,
    reason="the relevance judge (PMI, 75.5 % held out) calls some of these replies answers: needs a better judge "
    "(none of the study's judges on the 135M model reaches 79 % held out: measurements/relevance_judge.py)",
)
# the judge calls some honest replies non-answers (43 of the labelled set's 60 answers): they earn the floor, 0.25
JUDGE_MISSES_HONEST = pytest.mark.xfail(
    strict=True,
    reason="the relevance judge calls an honest reply of the prompt a non-answer: it earns the floor (the study's "
    "judges that pass more honest replies pay length and surprise, word salad included: not used)",
)


@pytest.fixture(scope="module")
def scorer(shared):
    return ReplyScorer(words=shared / "lcb" / "words")


def gated(prompt_id: str, key: str, scorer, **options) -> float:
    p = PROBES[prompt_id]
    return REWARDS["gated_language"]([p["replies"][key]], [p["language"]], scorer, **options)[0]


def language(prompt_id: str, key: str, scorer) -> float:
    p = PROBES[prompt_id]
    return REWARDS["language"]([p["replies"][key]], [p["language"]], scorer)[0]


# -- blind spots 2-7: each probe earned gated_language 1.0 before its fix -------------------------------------------
def test_2_punctuation_digits_and_spaces_are_not_tokens(scorer):
    """`Oui … « 1 » – « 2 » – « 3 » · …`: the official normalisation strips ASCII punctuation only, so the line has
    its 5 tokens and fastText reads the guillemets as French (LCB's verdict: pass). One word is no judged line."""
    assert language("fr_velo", "punct_padding", scorer) == 1.0  # the official verdict, kept as the metric
    assert gated("fr_velo", "punct_padding", scorer) == 0.0
    assert gated("fr_velo", "honest_numbers", scorer) == 1.0  # numbers in an honest reply cost nothing


def test_2_word_tokens_drop_symbols_digits_and_jieba_spaces():
    from mlft.benchmarks.lcb.reward_view import word_tokens
    from mlft.benchmarks.lcb.tokenize import tokenize

    assert len(tokenize("好 的 ， 1 2 3", "zh")) >= 5  # the official count: spaces and digits are tokens
    assert word_tokens("好 的 ， 1 2 3", "zh") == ["好", "的"]
    assert word_tokens("Oui … « 1 » – « 2 » · …", "fr") == ["Oui"]


@pytest.mark.parametrize(
    "prompt_id,key",
    [
        ("fr_velo", "zero_width_loop"),
        ("ru_reverse", "zero_width_loop"),
        ("fr_velo", "homoglyph_loop"),
        ("de_fridge", "homoglyph_loop"),
        ("fr_velo", "template"),
        ("ko_password", "template"),
        ("zh_greatwall", "template"),
        ("fr_velo", "loop_tail"),
        ("ja_seasons", "loop_tail"),
    ],
)
def test_3_near_exact_repeats_are_degenerate(prompt_id, key, scorer):
    """A zero-width space or one look-alike letter per copy, a template with one changing word, a loop tail under
    half the reply: the guard's exact-repeat rules (>= half the reply) pass them; the reward's view does not."""
    from mlft.benchmarks.lcb.reward_view import strict_degeneracy_reason

    assert strict_degeneracy_reason(PROBES[prompt_id]["replies"][key]) is not None
    assert gated(prompt_id, key, scorer, floor=0.0) == 0.0


def test_3_honest_replies_are_not_degenerate():
    from mlft.benchmarks.lcb.reward_view import strict_degeneracy_reason

    honest = [(p["id"], k) for p in PROBES.values() for k in p["replies"] if k.startswith("honest")]
    assert len(honest) > 30
    assert [(i, k) for i, k in honest if strict_degeneracy_reason(PROBES[i]["replies"][k])] == []


@pytest.mark.parametrize("prompt_id", ["pt_language", "ru_reverse"])
def test_4_a_close_language_needs_a_margin(prompt_id, scorer):
    """Lines mixing Portuguese with Spanish (Galician) or Russian with Ukrainian: fastText's top label is the target
    at 0.5 with the neighbour 0.25-0.45 below it (LCB: pass); the reward asks for a margin of 0.3."""
    assert language(prompt_id, "close_language#2", scorer) == 1.0
    assert gated(prompt_id, "close_language#2", scorer) == 0.0
    assert gated(prompt_id, "honest", scorer) == 1.0


@pytest.mark.parametrize(
    "prompt_id,key",
    [
        ("ru_reverse", "capitalised_english"),
        ("ar_water", "capitalised_english"),
        ("hi_sky", "capitalised_english"),
        ("ko_password", "mixed_tokens"),
        ("hi_sky", "mixed_tokens"),
        ("ru_reverse", "english_45"),
        ("ko_password", "english_45"),
    ],
)
def test_5_english_words_in_a_non_latin_reply(prompt_id, key, scorer):
    """Capitalised English (`Reset`, `Password`: the official check is case-sensitive against a lowercase list) and
    English glued to Hangul / Devanagari (`Password를`): not a reply in the language."""
    assert gated(prompt_id, key, scorer) == 0.0


@pytest.mark.parametrize("prompt_id", ["fr_velo", "de_fridge", "es_moon", "tr_istanbul"])
def test_5_english_in_a_latin_reply_fails_the_stricter_validity_bar(prompt_id, scorer):
    """~45 % English in a Latin-script reply: lexical validity 0.47-0.75, above the guard's 0.5 for fr and de; the
    gate's bar is 0.8 (the honest probes' lowest is 0.89)."""
    assert gated(prompt_id, "english_45", scorer, floor=0.0) == 0.0


@pytest.mark.parametrize("prompt_id", ["fr_velo", "es_moon", "zh_greatwall", "ja_seasons", "pt_language"])
def test_6_invented_dialogue_turns_earn_nothing(prompt_id, scorer):
    """`Bonne question.\\nQ: <a question nobody asked>\\nA: <its answer>`, all in the language: `after_q: judge`
    judged the whole text and paid it in full."""
    assert gated(prompt_id, "q_turns", scorer) == 0.0
    assert gated(prompt_id, "q_turns", scorer, after_q="cut") == 0.0  # the first line alone: no judged line


@pytest.mark.parametrize("prompt_id", ["ru_reverse", "de_fridge", "fr_velo", "ja_seasons", "ko_password"])
def test_7_an_honest_reply_with_code_earns_the_reward(prompt_id, scorer):
    """A short fenced code block in an honest reply: its lines are neither judged (fastText labels them English)
    nor counted in `min_share`'s denominator."""
    assert gated(prompt_id, "honest_code", scorer) == 1.0


def test_7_prose_in_a_fence_is_still_judged(scorer):
    text = "Вот ответ на ваш вопрос.\n```\nThe weather is nice today and I would like to go for a walk.\n```"
    assert REWARDS["gated_language"]([text], ["ru"], scorer)[0] == 0.0


# -- the goal per class, under every shipped recipe but the negative controls ------------------------------------
@pytest.fixture(scope="module")
def ratios(shared):
    recipes = [r for r in probes_mod.shipped_grpo_recipes() if not r.stem.endswith("_control")]
    assert {r.name for r in recipes} >= {"grpo_gated.yaml", "grpo_on_sft.yaml", "grpo_crosslingual.yaml"}
    with pytest.MonkeyPatch.context() as mp:  # the recipes judge the same replies alike: score each once
        mp.setattr(relevance, "reply_nll", _per_reply(relevance.reply_nll))
        return probes_mod.table(recipes, list(PROBES.values()), shared / "lcb" / "words")


def _per_reply(reply_nll):
    """`reply_nll` remembered per (model, context, reply, options): the recipes' rewards send the judge overlapping
    batches (the gate decides which replies reach it), and the judge's model passes are the test's cost. Only the
    pairs not seen before go through the model, in one call (the same numbers up to float rounding: each reply's
    NLL is its own row; batch partners change only its padding)."""
    seen = {}

    def cached(model, tokenizer, prompts, replies, **kwargs):
        keys = [(id(model), repr(p), r, repr(sorted(kwargs.items()))) for p, r in zip(prompts, replies)]
        todo = list({k: i for i, k in enumerate(keys) if k not in seen}.values())
        if todo:
            values = reply_nll(model, tokenizer, [prompts[i] for i in todo], [replies[i] for i in todo], **kwargs)
            seen.update({keys[i]: v for i, v in zip(todo, values)})
        return [seen[k] for k in keys]

    return cached


def _worst(ratios, cls) -> dict[str, float]:
    return {name: max(v for v in by_class[cls] if v is not None) for name, by_class in ratios.items()}


REPLY_ONLY = [
    "q_turns",
    "zero_width_loop",
    "homoglyph_loop",
    "template",
    pytest.param("loop_tail", marks=JUDGE_MISSES_HONEST),  # 0.25 / the honest reply's 0.25 on one prompt
    "punct_padding",
    "capitalised_english",
    "mixed_tokens",
    pytest.param("english_45", marks=JUDGE_MISSES_HONEST),
]
PROMPT_ONLY = ["refusal", "promise", "echo_translated", "off_topic", "wrong_answer", "proverb", "nouns"]


@pytest.mark.slow  # measured over 40 s on the loaded machine (docs/results/test_times.json)
@pytest.mark.parametrize("cls", REPLY_ONLY)
def test_no_reply_only_class_earns_half_the_honest_reward(cls, ratios):
    worst = _worst(ratios, cls)
    assert all(v < 0.5 for v in worst.values()), worst


@pytest.mark.slow  # the relevance judge's model passes over every probe (the `ratios` fixture)
def test_close_languages_earn_under_half_the_honest_reward(ratios):
    """lid.176.ftz labels the Malay probe Indonesian (no margin separates them): the answer term's judge does not
    call it an answer to the Indonesian prompt, so it earns the floor (a strict xfail before the answer term)."""
    worst = _worst(ratios, "close_language")
    assert all(v < 0.5 for v in worst.values()), worst


@pytest.mark.slow  # the relevance judge's model passes over every probe (the `ratios` fixture)
def test_an_echo_of_the_prompt_earns_under_half_the_honest_reward(ratios):
    """The answer term refuses echoes (the judge's echo check): a strict xfail before it."""
    worst = _worst(ratios, "echo")
    assert all(v < 0.5 for v in worst.values()), worst


@pytest.mark.slow
@pytest.mark.parametrize("cls", [pytest.param(c, marks=NEEDS_ANSWER) for c in PROMPT_ONLY])
def test_no_class_that_needs_the_prompt_earns_half_the_honest_reward(cls, ratios):
    worst = _worst(ratios, cls)
    assert all(v < 0.5 for v in worst.values()), worst


@pytest.mark.slow
@pytest.mark.parametrize(
    "cls",
    [
        pytest.param("honest_code", marks=JUDGE_MISSES_HONEST),
        pytest.param("honest_numbers", marks=JUDGE_MISSES_HONEST),
        pytest.param("honest_short", marks=JUDGE_MISSES_HONEST),
        pytest.param(
            "honest_terse",
            marks=pytest.mark.xfail(
                strict=True, reason="under 5 words: no judged line, the language gate pays 0 before any answer term"
            ),
        ),
    ],
)
def test_honest_replies_earn_most_of_the_honest_reward(cls, ratios):
    """Code, numbers, one short sentence: >= 0.8 of the fluent reply. A terse answer (`Santé, rapidité,
    économies.`, under 5 words) has no judged line: only a term that checks the answer can pay it."""
    lowest = {name: min(v for v in by_class[cls] if v is not None) for name, by_class in ratios.items()}
    assert all(v >= 0.8 for v in lowest.values()), lowest

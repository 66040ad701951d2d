"""The reward terms that read the prompt (mlft/training/answer_reward.py): correctness where the mix row has an
`answer`, the relevance judge otherwise, times the language gate; the recipe check of the mix's columns."""

from pathlib import Path

import pytest

from mlft.errors import ConfigError
from mlft.training import answer_reward
from mlft.training.answer_reward import answered, answered_language
from mlft.training.recipe import load_recipe
from mlft.training.reward_terms import ReplyScorer
from mlft.training.rewards import REWARDS, RewardFunction, RewardSpec

REPO = Path(__file__).resolve().parent.parent
PROBLEM = "Lukas hat 29 Äpfel und kauft 3 dazu. Wie viele Äpfel hat Lukas jetzt?"


@pytest.fixture(scope="module")
def scorer(shared):
    return ReplyScorer(words=shared / "lcb" / "words")  # LCB's word list (skipped without ../shared, as GRPO's tests)


def test_registered_and_options_checked():
    assert "answered" in REWARDS and "answered_language" in REWARDS
    with pytest.raises(ConfigError, match="source must be one of auto, answer, judge"):
        answered_language([], [], None, source="numbers")
    with pytest.raises(ConfigError, match=r"floor must be a number in \[0, 1\)"):
        answered_language([], [], None, floor=1.0)


def test_correctness_times_the_language_gate(scorer):
    honest = "Lukas hat jetzt 32 Äpfel, denn 29 und 3 ergeben zusammen 32."
    wrong = "Lukas hat jetzt 31 Äpfel, denn 29 und 3 ergeben zusammen 31."
    refusal = "Es tut mir leid, aber bei dieser Anfrage kann ich dir leider nicht helfen."
    english = "Lukas now has 32 apples, because 29 and 3 make 32 together."
    promise = "Gute Frage! Ich beantworte sie ausführlich in meiner nächsten Nachricht an dich."
    replies = [honest, wrong, refusal, english, promise]
    p = [PROBLEM] * 5  # the problem's numbers (29, 3), restated, are not results (mlft.benchmarks.answers)
    got = answered_language(replies, ["de"] * 5, scorer, p, answer=[32] * 5, source="answer", floor=0.25)
    assert got == [1.0, 0.25, 0.25, 0.0, 0.25]  # English gets 0 even when right: the gate multiplies
    assert answered(replies, ["de"] * 5, scorer, p, answer=[32] * 5, source="answer") == [1.0, 0.0, 0.0, 1.0, 0.0]
    # floor 0: only answering replies in the language are paid
    assert answered_language(replies, ["de"] * 5, scorer, p, answer=[32] * 5, source="answer") == [1, 0, 0, 0, 0]
    # without the prompt, 29 and 3 read as two more results: not one stated answer
    assert answered([honest], ["de"], scorer, answer=[32], source="answer") == [0.0]
    with pytest.raises(ConfigError, match="a row of the mix has no `answer`"):
        answered([honest], ["de"], scorer, answer=[None], source="answer")


def test_trl_call_passes_the_prompt_and_the_answer_column(scorer):
    fn = RewardFunction(RewardSpec("answered_language", 1.0, {"source": "answer", "floor": 0.25}), scorer)
    values = fn(
        prompts=[[{"role": "user", "content": PROBLEM}]] * 2,
        completions=[
            [{"role": "assistant", "content": "Lukas hat jetzt 32 Äpfel, denn 29 und 3 ergeben zusammen 32."}],
            [{"role": "assistant", "content": "Lukas hat jetzt 30 Äpfel, denn 29 und 3 ergeben zusammen 30."}],
        ],
        completion_ids=[[1], [2]],
        language=["de", "de"],
        task=["monolingual", "monolingual"],
        answer=[32, 32],
        trainer_state=None,
    )
    assert values == [1.0, 0.25]


def test_auto_checks_rows_with_answers_and_never_loads_the_judge_for_them(scorer, monkeypatch):
    def no_judge(ref):
        raise AssertionError("the judge must not load for rows with answers")

    monkeypatch.setattr(answer_reward, "_judge_model", no_judge)
    got = answered(["Es sind 32.", "Es sind 30."], ["de", "de"], scorer, prompts=[PROBLEM] * 2, answer=[32, 32])
    assert got == [1.0, 0.0]


@pytest.mark.slow
def test_the_judge_decides_rows_without_an_answer(scorer, embedded_model, monkeypatch):
    """Replies of the labelled set (mlft/resources/labelled.jsonl, en-A): the long honest answer passes the
    judge (summed PMI 34.5 nats there), the refusal, the echo and the canned paragraph do not, and the short honest
    answer (16.3) is missed: the judge's measured weakness (measurements/relevance_judge.py)."""
    monkeypatch.setitem(answer_reward._JUDGES, None, embedded_model)
    prompt = "How can I keep cut flowers fresh for longer?"
    replies = [
        "Trim the stems at an angle every two days, change the water daily and keep the vase away from direct sun "
        "and ripening fruit. A spoonful of sugar with a few drops of bleach also helps.",
        "I'm sorry, but I can't help with that request.",
        prompt,  # an echo
        "Our company offers a wide range of high-quality products at competitive prices. Visit our website today to "
        "learn more about our latest offers and subscribe to our newsletter.",
        "Cut the stems, use clean cool water, and remove the leaves below the waterline.",
    ]
    got = answered(replies, ["en"] * 5, scorer, prompts=[prompt] * 5, answer=[None] * 5)
    assert got == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_check_refuses_a_correctness_term_over_a_mix_without_answers():
    recipe = REPO / "recipes" / "cpu" / "grpo_answered.yaml"
    load_recipe(recipe)  # the shipped recipe passes
    with pytest.raises(ConfigError) as err:
        load_recipe(recipe, ["mix=data_mixes/cpu/grpo_prompts.yaml"])
    msg = str(err.value)
    assert "rewards[0].options.source" in msg and "grpo_prompts.yaml" in msg and "sources[0]" in msg
    # source auto: the judge covers rows without answers, so the same mix is accepted -- as a control only (the PMI
    # judge does not separate answers from non-answers: mlft.training.open_prompts, tests/test_open_prompt_recipes.py)
    load_recipe(
        recipe,
        [
            "mix=data_mixes/cpu/grpo_prompts.yaml",
            "rewards=[{name: answered_language, weight: 1.0, options: {source: auto, floor: 0.25}}]",
            "control=kept to compare against",
        ],
    )


def test_a_term_that_declares_prompts_gets_the_user_turn_and_others_do_not(scorer):
    """trl hands reward functions the prompts; a term that declares `prompts` gets each rollout's last user turn
    (what the relevance judge reads), a term that does not is called without them."""
    seen = {}

    def probe(replies, languages, scorer, prompts=None):
        seen["prompts"] = prompts
        return [1.0] * len(replies)

    def plain(replies, languages, scorer, **columns):
        seen["columns"] = sorted(columns)
        return [0.0] * len(replies)

    REWARDS.add("prompt_probe", probe)
    REWARDS.add("plain_probe", plain)
    try:
        call = {
            "prompts": [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROBLEM}]],
            "completions": [[{"role": "assistant", "content": "32"}]],
            "language": ["de"],
            "task": ["monolingual"],
            "trainer_state": None,
        }
        assert RewardFunction(RewardSpec("prompt_probe"), scorer)(**call) == [1.0]
        assert seen["prompts"] == [PROBLEM]
        assert RewardFunction(RewardSpec("plain_probe"), scorer)(**call) == [0.0]
        assert seen["columns"] == ["task"]  # the prompts are not a mix column
    finally:
        REWARDS.remove("prompt_probe")
        REWARDS.remove("plain_probe")

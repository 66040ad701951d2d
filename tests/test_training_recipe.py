"""Recipe validation: every shipped recipe against the installed trl, and one clear error per bad-input kind."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from mlft.cli import main
from mlft.errors import ConfigError
from mlft.training.recipe import Recipe, load_recipe
from tests.training_helpers import REPO

RECIPES = sorted(p for p in (REPO / "recipes").rglob("*.yaml") if not p.name.startswith("_"))


@pytest.fixture(autouse=True)
def _offline_lcb(shared, monkeypatch):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    monkeypatch.chdir(REPO)


def test_every_field_has_help():
    for cls in (Recipe, *(f.type for f in dataclasses.fields(Recipe) if dataclasses.is_dataclass(f.type))):
        for f in dataclasses.fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help"


def test_all_shipped_recipes_validate_against_installed_trl():
    from trl import DPOConfig, GRPOConfig, SFTConfig

    # 12 + crosslingual_sft_vllm (every checkpoint evaluated by vLLM) + 4 GRPO (GPU; CPU, CPU language-only,
    # CPU on SFT) + grpo_answered (CPU, the answer-paying term over verifiable prompts) + grpo_verifiable (GPU and
    # CPU: the demo's RL rows, the same reward over verifiable prompts, evaluated like the other GRPO recipes)
    assert len(RECIPES) == 21
    for path in RECIPES:
        # DPO recipes (and GRPO on SFT) start from their SFT run's output, which does not exist before training
        overrides = ["model=smollm2-135m-instruct"] if "dpo" in path.stem or "on_sft" in path.stem else []
        recipe = load_recipe(path, overrides)
        assert recipe.trainer in path.stem
        cls = {"sft": SFTConfig, "dpo": DPOConfig, "grpo": GRPOConfig}[recipe.trainer]
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(recipe.training_args) <= fields
        assert Path(recipe.mix).is_file()
        if "cpu" in path.parts:
            args = recipe.training_args
            assert args["bf16"] is False and args["activation_checkpointing"] is False and args["use_cpu"] is True
            assert recipe.lora.enabled and recipe.model == "smollm2-135m-instruct"


def test_dpo_recipe_needs_the_sft_output_first(tmp_path):
    with pytest.raises(ConfigError, match=r"english_dpo.yaml: model: model 'runs/english_sft/final' not found"):
        load_recipe(REPO / "recipes/english_dpo.yaml", ["run_dir=" + str(tmp_path)])


def test_cli_overrides_beat_yaml_beat_defaults():
    r = load_recipe(REPO / "recipes/cpu/english_sft.yaml", ["training_args.learning_rate=1e-3", "lora.r=4"])
    assert r.training_args["learning_rate"] == 1e-3  # CLI
    assert r.training_args["max_steps"] == 40  # YAML (from the included _base.yaml)
    assert r.lora.r == 4 and r.lora.alpha == 32  # CLI, YAML
    assert r.evaluation.fewshot is False  # default


def test_suite_overrides_are_mappings_and_texts_are_refused_naming_the_field():
    """A recipe's `suite_overrides: {key: value}` arrive as the settings they set; the command line sets one key
    (`evaluation.suite_overrides.KEY=VALUE`) or the whole mapping; a program's typed `settings` lie over the command
    line, which lies over the YAML. The old `key=value` text lists are refused, naming the field and what to write."""
    from mlft.evals.suite import load_suite
    from mlft.training.passes import passes_for

    grpo = load_recipe(REPO / "recipes/cpu/grpo_summed_control.yaml")  # suite_overrides: {judge: langdetect}
    assert grpo.evaluation.suite_overrides == {"judge": "langdetect"}
    text = ["evaluation.suite_overrides.per_language=2", "evaluation.suite_overrides.decoding.max_new_tokens=32"]
    typed = {"evaluation": {"suite_overrides": {"per_language": 2, "decoding": {"max_new_tokens": 32}}}}
    a = load_recipe(REPO / "recipes/cpu/english_sft.yaml", text)
    b = load_recipe(REPO / "recipes/cpu/english_sft.yaml", settings=typed)
    assert a.evaluation.suite_overrides == b.evaluation.suite_overrides == typed["evaluation"]["suite_overrides"]
    (model,) = [p for p in passes_for(a.evaluation) if p.variant == "model"]
    suite = load_suite(model.suite, settings=model.settings)
    old = load_suite(model.suite, ["per_language=2", "decoding.max_new_tokens=32"])  # the same suite as the text
    assert suite.options == old.options and suite.options.decoding.max_new_tokens == 32
    c = load_recipe(
        REPO / "recipes/cpu/english_sft.yaml",
        ["lora.r=4", "training_args.max_steps=3"],
        settings={"training_args": {"max_steps": 5}},
    )
    assert (
        c.lora.r == 4
        and c.training_args["max_steps"] == 5
        and c.training_args["learning_rate"]
        == load_recipe(REPO / "recipes/cpu/english_sft.yaml").training_args["learning_rate"]
    )  # settings merge by key
    english = REPO / "recipes/cpu/english_sft.yaml"
    whole = load_recipe(english, ["evaluation.suite_overrides={per_language: 2, decoding: {max_new_tokens: 32}}"])
    assert whole.evaluation.suite_overrides == typed["evaluation"]["suite_overrides"]
    with pytest.raises(
        ConfigError,
        match=r"english_sft\.yaml: evaluation\.suite_overrides: suite settings are a mapping, not key=value texts "
        r"\(\['judge=langdetect', 'per_language=2'\]\); write \{judge: langdetect, per_language: 2\} \(on the command "
        r"line: evaluation\.suite_overrides\.judge=langdetect evaluation\.suite_overrides\.per_language=2\)",
    ):
        load_recipe(english, ["evaluation.suite_overrides=[judge=langdetect, per_language=2]"])
    with pytest.raises(
        ConfigError, match=r"evaluation\.suite_overrides: suite settings are a mapping.*\(\['judge'\]\)$"
    ):
        load_recipe(english, ["evaluation.suite_overrides=[judge]"])
    variant = {"evaluation": {"variants": [{"variant": "1-shot", "overrides": ["prompting.shots=1"]}]}}
    with pytest.raises(
        ConfigError, match=r"evaluation\.variants\[0\]\.overrides: .*; write \{prompting: \{shots: 1\}\}$"
    ):
        load_recipe(english, settings=variant)


def _write(tmp_path, text: str, name="r.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


BASE = f"include: {REPO / 'recipes/cpu/english_sft.yaml'}\n"


@pytest.mark.parametrize(
    "body, message",
    [
        ("lern_rate: 1\n", r"r.yaml: unknown key 'lern_rate'"),
        ("evaluation: {suit: lcb_tiny}\n", r"r.yaml.evaluation: unknown key 'suit' \(did you mean 'suite'\?\)"),
        (
            "training_args: {learning_rat: 0.1}\n",
            r"r.yaml: training_args: unknown SFTConfig field 'learning_rat' \(did you mean 'learning_rate'\?\)",
        ),
        ("training_args: {beta: 0.1}\n", r"'beta' \(it is a DPOConfig / GRPOConfig field, but trainer is 'sft'\)"),
        ("training_args: {output_dir: x}\n", r"training_args.output_dir: managed by mlft"),
        ("training_args: {learning_rate: fast}\n", r"training_args.learning_rate: expected float, got str 'fast'"),
        ("training_args: {max_steps: 2.5}\n", r"training_args.max_steps: expected int"),
        ("training_args: {lr_scheduler_type: cosin}\n", r"lr_scheduler_type: 'cosin' .*did you mean 'cosine'"),
        ("lora: {r: many}\n", r"r.yaml.lora.r: expected int"),
        ("trainer: ppo\n", r"r.yaml.trainer: 'ppo' is not one of \['sft', 'dpo', 'grpo'\]"),
        ("evaluation: {quantized: [w3]}\n", r"evaluation.quantized\[0\]: 'w3' is not one of"),
        ("mix: data_mixes/nope.yaml\n", r"r.yaml: mix: file not found: data_mixes/nope.yaml"),
        ("accelerate_config: configs/accelerate/nope.yaml\n", r"accelerate_config: file not found"),
        ("chat_template: nope.jinja\n", r"chat_template: file not found: nope.jinja"),
        ("model: ./no/such/folder\n", r"r.yaml: model: model './no/such/folder' not found"),
        ("mix: data_mixes/cpu/english_dpo.yaml\n", r"is a 'dpo' mix but trainer 'sft' trains on a 'sft' mix"),
        ("evaluation: {suite: lcb_nope}\n", r"r.yaml: evaluation.suite: unknown eval suite 'lcb_nope'"),
        (
            "evaluation: {suite_overrides: {languages: [de, xx]}}\n",
            r"r.yaml: evaluation.suite: .*unknown language 'xx'",
        ),
        (
            "evaluation: {fewshot: true, fewshot_variants: [{variant: 1-shot, overrides: {prompting: {shots: 9}}}]}\n",
            r"evaluation pass '1-shot'.*shots",
        ),
    ],
)
def test_bad_input_is_named_before_any_load(tmp_path, monkeypatch, body, message):
    import datasets
    import transformers

    def forbidden(*a, **k):
        raise AssertionError("a model or dataset was loaded during validation")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", forbidden)
    monkeypatch.setattr(datasets, "load_dataset", forbidden)
    path = _write(tmp_path, BASE + body)
    t0 = time.time()
    with pytest.raises(ConfigError, match=message):
        load_recipe(path)
    assert time.time() - t0 < 20  # config checks only


def test_fewshot_true_runs_the_papers_baselines_by_default(tmp_path):
    """`evaluation.fewshot: true` alone: the paper's Q/A template, 1-shot and 5-shot rows (it must not
    stop with "fewshot_variants is empty")."""
    from mlft.constants import FEWSHOT_BASELINES
    from mlft.training.passes import passes_for

    r = load_recipe(_write(tmp_path, BASE + "evaluation: {fewshot: true, quantized: [w8]}\n"))
    passes = passes_for(r.evaluation)
    assert [p.variant for p in passes] == ["model", "Q/A template", "1-shot", "5-shot", "w8"]
    shots = {p.variant: p.settings for p in passes}
    assert [shots[name] for name, _ in FEWSHOT_BASELINES] == [o for _, o in FEWSHOT_BASELINES]
    assert [p.needs_saved_weights for p in passes] == [False, False, False, False, True]  # asked of `quantize`


def test_unknown_language_in_the_mix(tmp_path):
    mix = _write(
        tmp_path,
        f"include: {REPO / 'data_mixes/base.yaml'}\nkind: sft\ntotal: 10\nsources:\n"
        "  - {name: s, type: seed, path: parallel, share: 1.0, languages: [de, klingon]}\n",
        "mix.yaml",
    )
    with pytest.raises(ConfigError, match=r"r.yaml: mix: .*mix.yaml.*unknown language 'klingon'"):
        load_recipe(_write(tmp_path, BASE + f"mix: {mix}\n"))


def test_cli_reports_error_and_exit_code(tmp_path, capsys):
    path = _write(tmp_path, BASE + "training_args: {per_device_train_batch_sise: 2}\n")
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlft train: error: ")
    assert "per_device_train_batch_sise" in err and "did you mean 'per_device_train_batch_size'" in err
    assert "Traceback" not in err


def test_cli_check_accepts_override_of_a_shipped_recipe(capsys):
    assert main(["train", "recipes/cpu/multilingual_sft.yaml", "lora.r=8", "--check"]) == 0
    assert "recipes/cpu/multilingual_sft.yaml: OK (sft" in capsys.readouterr().out


def test_training_chat_template_is_a_twin_with_assistant_masks(embedded_model):
    from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

    from mlft.training.chat_template import renders_same, training_chat_template

    _, tok = embedded_model
    assert not has_generation_markers(tok.chat_template)  # why mlft needs its own twin
    template = training_chat_template(tok)
    assert has_generation_markers(template) and renders_same(tok, template)
    assert is_chat_template_stop_token_trained(tok, chat_template=template)
    msgs = [{"role": "user", "content": "Wie geht's?"}, {"role": "assistant", "content": "Gut, danke."}]
    out = tok.apply_chat_template(
        msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True, chat_template=template
    )
    trained = [i for i, m in zip(out["input_ids"], out["assistant_masks"]) if m]
    assert tok.decode(trained) == "Gut, danke.<|im_end|>"


def test_the_chat_template_comes_from_the_model_unless_the_recipe_names_one(embedded_model, monkeypatch, tmp_path):
    """`chat_template: auto` (the GPU SFT family: no template pinned): a model with its own template trains with
    it (its training twin here, the eos untouched); a base model without one gets mlft's ChatML template and ends
    turns at <|im_end|>; a vocabulary without that token is refused naming the keys to set."""
    import copy

    import transformers

    from mlft.training import train as train_mod
    from mlft.training.chat_template import TEMPLATES, base_model_template
    from mlft.training.train import _trainer_config

    _, tok = embedded_model
    assert load_recipe(REPO / "recipes/multilingual_sft.yaml").chat_template == "auto"  # nothing pinned
    chatml = (TEMPLATES / "chatml_training.jinja").read_text(encoding="utf-8")
    recipe = load_recipe(REPO / "recipes/cpu/english_sft.yaml", [f"run_dir={tmp_path}"])
    for template, expected_template, expected_eos in [(tok.chat_template, chatml, None), (None, chatml, "<|im_end|>")]:
        own = copy.deepcopy(tok)
        own.chat_template = template
        monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, own=own, **k: own)
        config = _trainer_config(recipe, tmp_path)
        _, _, out = train_mod._model_and_tokenizer(recipe, config, "smollm2-135m-instruct")
        assert out.chat_template == expected_template and config.eos_token == expected_eos
    # a model with a template that already marks the replies keeps it as it is
    marked = copy.deepcopy(tok)
    marked.chat_template = chatml.replace("im_start", "turn_start")
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: marked)
    _, _, out = train_mod._model_and_tokenizer(recipe, _trainer_config(recipe, tmp_path), "smollm2-135m-instruct")
    assert out.chat_template == chatml.replace("im_start", "turn_start")

    class NoChatML:  # a vocabulary without <|im_end|>: every token unknown
        unk_token_id = 0

        def convert_tokens_to_ids(self, token):
            return self.unk_token_id

    with pytest.raises(ConfigError, match=r"no chat template and its vocabulary has no <\|im_end\|>"):
        base_model_template(NoChatML())

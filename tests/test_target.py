"""What is evaluated is one `Target` (mlft.generation.target): the runner, the passes and the callback take it
instead of five loose values; it validates its options as the backend's Options, describes itself into a run's
results.json and reloads from it; and one place (`Target.for_pass`) decides where a pass's model comes from."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from generation_helpers import TextBackend

from mlft.errors import ConfigError
from mlft.evals import runner
from mlft.generation.backends import REGISTRY, Capabilities, backend_options
from mlft.generation.target import SECRET, Target
from mlft.training import passes

ROOT = Path(__file__).resolve().parent.parent
LOOSE = {"model", "tokenizer", "model_ref", "backend", "backend_options"}


@dataclass
class EchoOptions:
    echo_word: str = field(default="Hallo", metadata={"help": "the word every reply repeats"})
    echo_key: str | None = field(default=None, metadata={"help": "a secret (never written)"})


class EchoBackend(TextBackend):
    name = "echo"
    Options = EchoOptions
    capabilities = Capabilities(chat=True, hooks={"strategy"})  # a served model: names it, loads nothing

    def reply(self, request) -> str:
        return " ".join([self.options.echo_word] * 12)


@pytest.fixture
def echo():
    REGISTRY.add("echo", EchoBackend)
    try:
        yield
    finally:
        REGISTRY.remove("echo")


def test_runner_passes_and_steps_take_at_most_five_parameters():
    """The issue's goal: run_suite, run_pass and evaluate_step take <= 5 parameters (keyword-only ones counted),
    and none of the five loose values travels on its own any more."""
    for fn in (runner.run_suite, passes.run_pass, passes.evaluate_step):
        params = inspect.signature(fn).parameters
        assert len(params) <= 5 and "target" in params, (fn.__name__, list(params))
        assert not LOOSE & set(params), (fn.__name__, sorted(LOOSE & set(params)))


def test_options_are_typed_once_and_changes_validated():
    t = Target("hf", {"dtype": "float32"}, model_ref="smollm2-135m-instruct")
    assert t.options == backend_options("hf", {"dtype": "float32"})  # the backend's own Options dataclass
    assert t.with_options({"device": "cpu"}).options == backend_options("hf", {"dtype": "float32", "device": "cpu"})
    assert t.with_options({}) is t
    with pytest.raises(ConfigError, match="hf backend options: unknown key 'dtyp'"):
        Target("hf", {"dtyp": "float32"})
    with pytest.raises(ConfigError, match="unknown key 'gpu_memory_utilization'"):
        t.with_options({"gpu_memory_utilization": 0.5})  # a vllm option on an hf target
    with pytest.raises(ConfigError, match="did you mean 'openai'"):
        Target("opnai")


def test_a_target_describes_itself_into_results_json_and_reloads_exactly(echo, tmp_path, shared, monkeypatch):
    monkeypatch.setenv("MLFT_LCB_DATA", str(shared / "lcb"))
    from mlft.evals.suite import load_suite

    target = Target("echo", {"echo_word": "Guten", "echo_key": "sk-secret"}, model_ref="served-model")
    assert target.describe() == {
        "backend": "echo",
        "backend_options": {"echo_word": "Guten", "echo_key": SECRET},
        "model": "served-model",
    }
    suite = load_suite("lcb_tiny", ["per_group=1", "languages=[de]", "tasks=[monolingual]"])
    result = runner.run_suite(suite, target, tmp_path, progress=False)
    assert result.value("lpr", "monolingual", "de") == 1.0
    written = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["config"]
    assert "sk-secret" not in json.dumps(written)
    assert {k: written[k] for k in ("backend", "backend_options", "model")} == target.describe()
    again = Target.from_description(written)  # the secret is left to its default, everything else is the same
    assert again == dataclasses.replace(target, options={"echo_word": "Guten"})
    assert again.describe() == {**target.describe(), "backend_options": {"echo_word": "Guten", "echo_key": None}}
    plain = Target("hf", {"dtype": "float32", "device": "cpu"}, model_ref="smollm2-135m-instruct")
    assert Target.from_description(json.loads(json.dumps(plain.describe()))) == plain
    for name in ("hf", "vllm", "openai"):  # every built-in backend's default options, named model or none
        for t in (Target(name), Target(name, model_ref="org/model")):
            assert Target.from_description(json.loads(json.dumps(t.describe()))) == t, t


def test_for_pass_decides_where_each_pass_gets_its_model():
    """A live model generates in place on a backend that takes one; a pass reading saved weights (quantize) gets
    the checkpoint, on a backend that can transform a model; a backend without a live model gets the checkpoint;
    nothing saved means nothing to run on."""
    model, tok = object(), object()
    w8 = [{"name": "quantize", "scheme": "w8"}]
    live = Target("hf", {"dtype": "float32"}, model_ref="ckpt-5", model=model, tokenizer=tok)
    assert live.live and live.for_pass() is live and live.for_pass().model is model
    quantized = live.for_pass(w8)
    assert quantized == Target("hf", {"dtype": "float32"}, model_ref="ckpt-5") and quantized.model is None
    saved = Target("hf", model_ref="ckpt-5")
    assert not saved.live and saved.for_pass() is saved
    vllm = Target("vllm", {"max_model_len": 512}, model_ref="ckpt-5", model=model, tokenizer=tok)
    assert not vllm.live and vllm.for_pass().model is None and vllm.for_pass().model_ref == "ckpt-5"
    assert vllm.for_pass(w8) == Target("hf", model_ref="ckpt-5")  # vLLM cannot quantize: hf, its default options
    nothing = live.with_model(None, model, tok)
    assert nothing.for_pass() is nothing and nothing.for_pass(w8) is None
    assert vllm.with_model(None, model, tok).for_pass() is None  # never the live model to vLLM


def test_every_pass_of_a_step_gets_its_model_from_the_target(tmp_path, monkeypatch):
    """Through evaluate_step: the plain pass runs on the live model, the quantized one on the saved checkpoint;
    evaluate-run's target (no live model) hands every pass the checkpoint."""
    calls = []

    def fake_run_suite(suite, target, out_dir, *, progress=True):
        calls.append((target.backend, target.model, target.model_ref))
        return runner.SuiteResult(suite.name, [], out_dir)

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    model = object()
    ev = passes.EvaluationOptions(suite="lcb_tiny", quantized=["w8"], quantized_at="all")
    target = passes.evaluation_target(ev)
    passes.evaluate_step(tmp_path, ev, 5, target.with_model("ckpt-5", model, object()))
    assert calls == [("hf", model, "ckpt-5"), ("hf", None, "ckpt-5")]
    calls.clear()
    passes.evaluate_step(tmp_path / "child", ev, passes.Step(5, mode="separate-process"), target.with_model("ckpt-5"))
    assert calls == [("hf", None, "ckpt-5"), ("hf", None, "ckpt-5")]


def test_the_callback_builds_its_target_once_and_puts_each_steps_model_in_it(tmp_path, monkeypatch):
    import mlft.training.callback as cb
    from mlft.training.recipe import load_recipe

    recipe = load_recipe("recipes/crosslingual_sft.yaml", ["evaluation.suite=lcb_tiny"])
    seen = []
    monkeypatch.setattr(cb, "evaluate_step", lambda run_dir, ev, step, target, **kw: seen.append((step, target)) or [])
    callback = cb.EvalCallback(recipe, tmp_path, tokenizer="tok", in_process=True, progress=False)
    assert callback.target == passes.evaluation_target(recipe.evaluation)
    model = object()
    state = SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=True)
    callback.on_train_begin(SimpleNamespace(), state, None, model=model)
    ((step, target),) = seen
    assert step == passes.Step(0, True, "in-process")
    assert (target.model, target.tokenizer, target.model_ref) == (model, "tok", recipe.model)
    assert target == callback.target.with_model(recipe.model)  # the recipe's backend and options


def _calls(tree: ast.AST, names: set[str]) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in names:
                out.append(name)
        if isinstance(node, ast.Attribute) and node.attr == "from_saved_weights" and isinstance(node.ctx, ast.Load):
            out.append("from_saved_weights")
    return out


def test_one_place_decides_where_a_passs_model_comes_from():
    """Outside mlft/generation/target.py no library module builds a backend, loads a reference model, puts a live
    model in eval mode for a pass, or asks whether an intervention reads the saved weights: they ask the Target
    (the backend for a quantized pass is chosen in `Target.for_pass`, the only caller of that choice)."""
    deciders = {"create_backend", "eval_mode", "Models", "reference_model"}
    allowed = {
        "mlft/generation/target.py",
        "mlft/generation/backends/__init__.py",  # where create_backend is defined
        "mlft/generation/models.py",  # where eval_mode is defined
        "mlft/generation/data_parallel.py",  # the other ranks' own live-model copy (no Target on those ranks)
    }
    found = {}
    for path in sorted((ROOT / "mlft").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        hits = _calls(ast.parse(path.read_text(encoding="utf-8")), deciders)
        if hits:
            found[rel] = hits
    assert found == {}

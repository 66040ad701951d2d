"""The lab behind the face: every import of an mlft internal module left in measurements/*.py and
measurements/gpu/*.py, each with its reason. A measurement uses the public API (`import mlft`; `mlft.score`,
`mlft.evaluate`, ...: the names in `mlft.__all__`) where it can; where it measures a piece the API hides (the kernel
it times, the statistics it calibrates, the file format it writes) it imports that piece, and REASONS says why.

A new internal import without a reason fails, and so does a reason whose import is gone (the list stays the list of
what is left). Read from the source (AST, imports inside functions included), not by importing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted([*(ROOT / "measurements").glob("*.py"), *(ROOT / "measurements" / "gpu").glob("*.py")])

TIMES_HF = "times the hf backend's own generate loop on requests it builds (below the public API, which hides it)"
TIMES_REQ = "builds the backend's requests by hand, to time the same prompts in each arm"
DECODING = "sets the decoding of the arms it times directly (the backend's Decoding, not a suite's)"
PROMPTING = "renders the prompts the backend is timed on, as the suite would (the chat template step alone)"
SUITE = "reads a shipped suite's prompts and settings, to time or rerun exactly what the suite runs"
SELECT = "the suite's prompt selection (which prompts, in which order), so the arms see the suite's prompts"
RESOLVE = "the model registry (a name -> a local path / hub id), to hand the same model to another tool"
LOAD = "loads the model once and reuses it across arms (mlft.evaluate would reload it per call)"
SCHEMA = "writes a results file (its schema tag) that devtools renders into the docs' numbers"
TABLE_RECORD = "writes the mitigation table's rows in the results-file form `mlft demo` writes (table_record)"
TABLES = "builds the mitigation table of finished runs (the seeds' or sweep's own table, row by row)"
SPEC = "the table spec of finished runs (which run is which row), to rebuild their table"
ENV = "records the environment (versions, git commit) in its results file"
CODES = "aggregates category codes with the library's own arithmetic (its feature layout): the same numbers"
STATS = "calibrates the statistics engine itself: the intervals and paired tests are what it measures"
TARGET = "evaluates a model it serves or loads itself as a Target (a served endpoint, an in-process model)"
RUN_SUITE = "runs a suite pass with options the public evaluate does not take (per-pass seeds, reused model, K)"
SYNC = "counts host syncs per decode step: the instrumentation it reports"
INTERVENTIONS = "builds the intervention stack whose decode-step cost it measures"
TASKS = "the task names (monolingual / crosslingual) it loops over"
GUARD = "calibrates / shows the guard's own verdicts (lexical validity, degeneracy), the thing it measures"
SCORING = "scores completions with the scorer's internals (outcomes per reply, resources loaded once)"
COMPLETION = "builds or reads completions records in the scorer's input form"
SHARED = "finds the read-only shared data folder (../shared) the measurement reads"
JSONL = "reads / writes the JSONL files of its runs"
RECIPE = "loads a shipped recipe to train or probe it with changed keys"
TRAIN = "trains in process to time it or sweep it (the run directory and curves it reads back)"
ROLLOUTS = "reads a GRPO run's rollouts and reward curves (the run directory's files)"
LCB_DATA = "loads the LCB test prompts themselves (their text and lengths)"
VALID_SHARE = "the guard's validity threshold it calibrates against"

# measurement script (from measurements/) -> {internal mlft module it imports: why}
REASONS: dict[str, dict[str, str]] = {
    "backend_speed.py": {
        "mlft.evals.lcb_options": SELECT,
        "mlft.evals.suite": SUITE,
        "mlft.generation.backends": "creates each backend (hf, vllm, openai) by name: the three arms it times",
        "mlft.generation.decoding": DECODING,
        "mlft.generation.models": RESOLVE,
        "mlft.generation.prompting": PROMPTING,
        "mlft.generation.requests": TIMES_REQ,
    },
    "bucket_plan.py": {
        "mlft.generation.backends.hf": "plans the hf backend's shape buckets: its private calls and decode steps",
        "mlft.generation.batching": "the row bucket rule whose plan it counts",
        "mlft.generation.decoding": DECODING,
    },
    "calibration.py": {
        "mlft.constants": TASKS,
        "mlft.evals.runner": RUN_SUITE,
        "mlft.evals.suite": SUITE,
        "mlft.generation.target": TARGET,
        "mlft.stats": STATS,
    },
    "callback_share.py": {
        "mlft.io.curve_file": "reads the eval callback's timings from a run's curves file",
    },
    "decode_syncs.py": {
        "mlft.generation": SYNC,
        "mlft.generation.decoding": DECODING,
        "mlft.generation.interventions": INTERVENTIONS,
        "mlft.generation.sync_count": SYNC,
    },
    "demo_seeds.py": {
        "mlft.provenance": ENV,
        "mlft.reports.mitigation": TABLES,
        "mlft.reports.results": SCHEMA + "; " + TABLE_RECORD,
        "mlft.reports.table_spec": SPEC,
    },
    "eval_pass_speed.py": {
        "mlft.evals.lcb_options": SELECT + " (and the suite's runs)",
        "mlft.evals.suite": SUITE,
        "mlft.generation.backends.hf": TIMES_HF,
        "mlft.generation.models": LOAD + " (and its LoRA eval mode)",
        "mlft.generation.processors": "the sampler/warper the pass decodes with (before and after arms)",
        "mlft.generation.prompting": PROMPTING,
        "mlft.generation.requests": TIMES_REQ,
    },
    "gate_scope_device.py": {
        "mlft.generation": SYNC,
        "mlft.generation.backends.hf": TIMES_HF,
        "mlft.generation.decoding": DECODING,
        "mlft.generation.interventions": INTERVENTIONS,
        "mlft.generation.models": RESOLVE,
        "mlft.generation.requests": TIMES_REQ,
    },
    "generate_speed.py": {
        "mlft.benchmarks.lcb.data": LCB_DATA,
        "mlft.generation.backends.hf": TIMES_HF,
        "mlft.generation.decoding": DECODING,
        "mlft.generation.models": LOAD,
        "mlft.generation.prompting": PROMPTING,
        "mlft.generation.requests": TIMES_REQ,
    },
    "extraction_base.py": {
        "mlft.benchmarks.answers": "lists the numbers each reply states, to say why a miss fails (echo, other number)",
        "mlft.benchmarks.extraction": "the task's own check and what a reply states, per reply",
        "mlft.data.extraction": "the task's generator and its settings, recorded beside the measured rates",
        "mlft.evals.runner": RUN_SUITE,
        "mlft.evals.suite": SUITE,
        "mlft.generation.target": TARGET,
        "mlft.io.jsonl": JSONL,
        "mlft.reports.results": SCHEMA,
    },
    "gpu/bench.py": {
        "mlft.benchmarks.lcb.data": LCB_DATA,
        "mlft.console": "the CLI's console setup, as each stage process is a command of its own",
        "mlft.generation.backends": "creates the backend of each stage from its options (the flags it benchmarks)",
        "mlft.generation.backends.hf": TIMES_HF,
        "mlft.generation.decoding": DECODING,
        "mlft.generation.models": LOAD,
        "mlft.generation.prompting": PROMPTING,
        "mlft.generation.requests": TIMES_REQ,
        "mlft.training.launch": "the accelerate launch line of a multi-GPU stage, as `mlft train` builds it",
        "mlft.training.recipe": RECIPE,
        "mlft.training.train": TRAIN,
    },
    "gpu/decode_check.py": {
        "mlft.generation": SYNC,
        "mlft.generation.backends": "encodes requests as the backend does, to check its decode paths agree",
        "mlft.generation.backends.hf": TIMES_HF,
        "mlft.generation.decoding": DECODING,
        "mlft.generation.models": "evaluates a LoRA model in process (eval_mode), the path it checks",
        "mlft.generation.processors": "the nucleus sampler whose device path it checks",
        "mlft.generation.requests": TIMES_REQ + " (and their draw keys)",
    },
    "gpu/train_check.py": {
        "mlft.errors": "a pass's typed refusal (a quantized pass without bitsandbytes) is the stage's verdict",
        "mlft.generation": "swaps the embedded model's registry entry for the random-weight model it builds",
        "mlft.generation.models": RESOLVE,
        "mlft.io": "reads the run's curves file back (the passes' rows and timings)",
        "mlft.io.jsonl": JSONL,
        "mlft.training.callback": "spies on the eval callback's passes (weights before and after, compile counts)",
        "mlft.training.launch": "reads the shipped ZeRO-3 accelerate config the users' command launches",
        "mlft.training.passes": "runs one pass on the live model, as the callback does, to check it in isolation",
        "mlft.training.recipe": RECIPE,
        "mlft.training.train": TRAIN,
    },
    "gpu/lengths.py": {
        "mlft.benchmarks.lcb.data": LCB_DATA,
        "mlft.completions": COMPLETION,
        "mlft.data.seed": "the seed data's items, as training rows of real text",
    },
    "gpu_hf_speed.py": {
        "mlft.generation.backends.hf": TIMES_HF,
        "mlft.generation.decoding": DECODING,
        "mlft.generation.requests": TIMES_REQ,
    },
    "grpo_sweep.py": {
        "mlft.io": "reads each sweep run's curves file",
        "mlft.provenance": ENV,
        "mlft.reports.mitigation": TABLES,
        "mlft.reports.results": SCHEMA + "; " + TABLE_RECORD,
        "mlft.reports.table_spec": SPEC,
        "mlft.training.passes": "evaluates each sweep point's checkpoint with the callback's own pass",
        "mlft.training.recipe": RECIPE,
        "mlft.training.rollouts": ROLLOUTS,
        "mlft.training.train": TRAIN,
    },
    "guard_samples.py": {
        "mlft.benchmarks.lcb.guard": GUARD,
        "mlft.constants": VALID_SHARE,
        "mlft.stats": "reads a pass's per-reply outcomes file",
    },
    "harness_parity.py": {
        "mlft.generation.models": RESOLVE,
        "mlft.harness": "the lm_eval command line of mlft's harness tasks, whose parity it checks",
    },
    "heldout.py": {
        "mlft.stats.aggregate": CODES,
        "mlft.benchmarks.lcb.scoring": SCORING,
        "mlft.completions": COMPLETION,
        "mlft.constants": TASKS,
        "mlft.evals.lcb_options": SELECT,
        "mlft.evals.runner": RUN_SUITE,
        "mlft.evals.suite": SUITE,
        "mlft.generation.backends": "cuts and encodes replies as the backend does, for its batched reruns",
        "mlft.generation.models": LOAD,
        "mlft.generation.processors": "the sampler/warper the reruns decode with",
        "mlft.generation.prompting": PROMPTING,
        "mlft.generation.requests": TIMES_REQ,
        "mlft.generation.target": TARGET,
        "mlft.io.jsonl": JSONL,
        "mlft.reports.results": SCHEMA,
        "mlft.stats": STATS,
    },
    "learned_gate_speed.py": {
        "mlft.evals.lcb_options": SELECT,
        "mlft.evals.suite": SUITE,
        "mlft.generation.backends": "creates the hf backend the two arms share",
        "mlft.generation.decoding": DECODING,
        "mlft.generation.interventions": INTERVENTIONS,
        "mlft.generation.prompting": PROMPTING,
        "mlft.generation.requests": TIMES_REQ,
    },
    "lexical_validity.py": {
        "mlft.benchmarks.lcb.guard": GUARD,
        "mlft.completions": COMPLETION,
        "mlft.constants": VALID_SHARE,
        "mlft.paths": SHARED,
    },
    "relevance_judge.py": {
        "mlft.benchmarks.lcb.data": LCB_DATA,
        "mlft.benchmarks.lcb.fluency": "the fluency NLL it compares the judge with",
        "mlft.generation.models": LOAD,
        "mlft.generation.relevance": "the relevance judge itself, whose agreement it measures",
        "mlft.reports.results": SCHEMA,
    },
    "report_page.py": {
        "mlft.benchmarks.lcb.data": LCB_DATA,
        "mlft.benchmarks.lcb.scoring": SCORING,
        "mlft.completions": COMPLETION,
        "mlft.constants": TASKS,
        "mlft.evals.lcb": "writes an eval folder's metric rows, the page's input, without a model",
        "mlft.evals.lcb_options": SELECT,
        "mlft.evals.suite": SUITE,
        "mlft.io.jsonl": JSONL,
        "mlft.paths": SHARED,
        "mlft.reports.page": "the report page writer whose size and open time it measures",
        "mlft.stats": "writes the synthetic passes' outcomes files the page reads",
    },
    "reward_probes.py": {
        "mlft.errors": "a recipe naming a model not trained yet (its ConfigError) is probed on the embedded model",
        "mlft.training.recipe": RECIPE,
        "mlft.training.reward_terms": "scores probe replies with the reward terms' scorer",
        "mlft.training.rewards": "the recipes' reward functions, which it probes",
        "mlft.training.rollouts": "the weighted total the trainer pays",
    },
    "rl_seeds.py": {
        "mlft.benchmarks.lcb.guard": GUARD,
        "mlft.commands.demo": "the demo's experiment script (its table and run layout), whose RL row it reruns",
        "mlft.provenance": ENV,
        "mlft.reports.mitigation": TABLES,
        "mlft.reports.results": SCHEMA + "; " + TABLE_RECORD,
        "mlft.reports.table_spec": SPEC,
        "mlft.reports.task_axis": "the task-axis cell of a row",
        "mlft.stats": "the paired share sd of the task axis, part of the seeds' estimate",
        "mlft.training.rollouts": ROLLOUTS,
    },
    "score_speed.py": {
        "mlft.benchmarks.lcb.metrics": "the bare loop's normalisation step, timed against the scorer",
        "mlft.benchmarks.lcb.scoring": "times the scorer and the guard separately (mlft.score runs both at once)",
        "mlft.benchmarks.lcb.tokenize": "the bare loop's tokenisation step",
        "mlft.completions": COMPLETION,
        "mlft.langid": "the bare loop's language identification step",
        "mlft.paths": SHARED,
    },
    "seed_coverage.py": {
        "mlft.provenance": ENV,
        "mlft.reports.results": SCHEMA,
        "mlft.stats": STATS,
    },
    "serve_gate.py": {
        "mlft.evals.runner": RUN_SUITE,
        "mlft.evals.suite": SUITE,
        "mlft.generation.backends.served_gate": "starts `vllm serve` with mlft's gate plugin, the server it measures",
        "mlft.generation.models": RESOLVE,
        "mlft.generation.target": TARGET,
        "mlft.stats": "the intervals and paired test of its served-vs-local comparison",
    },
    "targets.py": {
        "mlft.stats": STATS,
        "mlft.stats.aggregate": CODES,
        "mlft.stats.intervals": "the score intervals of all redrawn passes at once, with intervals()' own arithmetic",
    },
    "top_rollouts.py": {
        "mlft.benchmarks.lcb.guard": GUARD,
        "mlft.training.rollouts": ROLLOUTS,
    },
    "train_speed.py": {
        "mlft.generation.models": RESOLVE,
        "mlft.io.jsonl": JSONL,
        "mlft.training.recipe": RECIPE,
        "mlft.training.train": "times `mlft train` against plain trl on the trainer config mlft builds (private)",
    },
}


def public_names(root: Path = ROOT) -> set[str]:
    """The public API: `mlft.__all__` (mlft/__init__.py builds it from its lazy table, so it is read by running the
    file, which imports nothing heavy), `__version__` always."""
    scope: dict = {"__name__": "mlft_public_names"}
    exec(compile((root / "mlft" / "__init__.py").read_text(encoding="utf-8"), "mlft/__init__.py", "exec"), scope)
    return {"__version__", *scope["__all__"]}


def internal_imports(source: str, public: set[str]) -> set[str]:
    """The internal mlft modules a script imports (`from mlft.x import y`, `import mlft.x`, `from mlft import x`
    where x is not a public name), at any depth."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("mlft.")}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.startswith("mlft."):
                out.add(node.module)
            elif node.module == "mlft":
                out |= {f"mlft.{a.name}" for a in node.names if a.name not in public}
    return out


def unexplained(scripts: dict[str, str], reasons: dict[str, dict[str, str]], public: set[str]) -> list[str]:
    """One line per internal import without a reason, and per reason whose import is gone."""
    out = []
    for name, source in sorted(scripts.items()):
        found = internal_imports(source, public)
        given = reasons.get(name, {})
        out += [f"measurements/{name}: imports {m} with no reason in REASONS" for m in sorted(found - set(given))]
        out += [
            f"measurements/{name}: REASONS explains {m}, no longer imported: drop it"
            for m in sorted(set(given) - found)
        ]
    out += [f"measurements/{name}: in REASONS but no such script" for name in sorted(set(reasons) - set(scripts))]
    return out


def _scripts() -> dict[str, str]:
    return {p.relative_to(ROOT / "measurements").as_posix(): p.read_text(encoding="utf-8") for p in SCRIPTS}


def test_every_internal_import_left_in_measurements_has_its_reason():
    assert unexplained(_scripts(), REASONS, public_names()) == []


def test_each_reason_is_one_line():
    for name, modules in REASONS.items():
        for module, why in modules.items():
            assert module.startswith("mlft.") and why.strip() and "\n" not in why, (name, module)


def test_a_new_unexplained_import_fails_and_a_public_one_does_not():
    scripts = _scripts()
    public = public_names() | {"score"}  # `mlft.score`, the public scorer
    planted = dict(scripts)
    planted["targets.py"] += "\n\ndef planted():\n    from mlft.reports.compare import compare_runs\n"
    planted["score_speed.py"] += "\n\ndef public():\n    from mlft import score\n\n    import mlft\n"
    assert unexplained(planted, REASONS, public) == [
        "measurements/targets.py: imports mlft.reports.compare with no reason in REASONS"
    ]
    gone = dict(scripts, **{"targets.py": scripts["targets.py"].replace("from mlft.stats import", "from stats import")})
    assert unexplained(gone, REASONS, public) == [
        "measurements/targets.py: REASONS explains mlft.stats, no longer imported: drop it"
    ]
    assert internal_imports("from mlft import stats, score\n", public) == {"mlft.stats"}

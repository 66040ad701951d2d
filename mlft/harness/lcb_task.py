"""LCB as lm-evaluation-harness tasks, scored by mlft's official scorer.

The task files (mlft/harness/tasks/lcb/, written by `write_task_files`) name the functions below with
`!function utils.<name>`:
- `lcb_dataset(task, language)`: the documents, from mlft's LCB data ($MLFT_LCB_DATA, the cache, else the
  official download; `--metadata '{"lcb_data": PATH}'` points elsewhere). Sources are interleaved
  (round-robin, each in file order) so that `--limit N` samples every source of the language;
- `process_results(doc, results)`: one reply through `mlft.benchmarks.lcb.metrics.analyze_reply` (fastText lid.176, the
  official tokenisation and thresholds) and `mlft.benchmarks.lcb.guard.is_degenerate`; every metric gets the reply's
  outcome (a dict: id, source, language, counted, line_error, word_error, degenerate);
- `agg_lpr` / `agg_wpr` / `agg_lcpr` / `agg_coverage` / `agg_degeneracy`: the official aggregation of those
  outcomes (mlft.stats: per source, then the unweighted mean over sources); LCPR = harmonic mean of
  the language's LPR and WPR (non-Latin languages only, as WPR).
The groups `lcb_monolingual` / `lcb_crosslingual` take the unweighted mean over their languages (LPR over all,
WPR / LCPR over the six non-Latin ones: the paper's (all, all) rows and Table A5 LCPR); `lcb` holds both.

Decoding is the paper's (nucleus sampling T=0.3, p=0.75, 100 new tokens, no stop string but EOS); give
`--apply_chat_template` for chat models (mlft's `chat` prompting: the prompt as the user turn).
`samples_to_completions` turns lm-eval's `--log_samples` files into mlft completions (`mlft score`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from mlft.benchmarks.lcb.data import load_prompts
from mlft.benchmarks.lcb.guard import is_degenerate
from mlft.benchmarks.lcb.metrics import ScoreOptions, analyze_reply
from mlft.benchmarks.lcb.scoring import load_resources
from mlft.constants import TASKS
from mlft.errors import DataError
from mlft.languages import LANGUAGES, NON_LATIN
from mlft.stats import Outcome, intervals

GENERATION = {"until": [], "do_sample": True, "temperature": 0.3, "top_p": 0.75, "max_gen_toks": 100}
METRICS = ("lpr", "wpr", "lcpr", "coverage", "degeneracy")


def task_languages(task: str) -> list[str]:
    return [lang for lang in sorted(LANGUAGES) if not (task == "crosslingual" and lang == "en")]


def task_name(task: str, language: str) -> str:
    return f"lcb_{task}_{language}"


def metrics_for(language: str) -> tuple[str, ...]:
    return METRICS if language in NON_LATIN else ("lpr", "coverage", "degeneracy")


# ---------------------------------------------------------------- documents


def lcb_docs(task: str, language: str, data: str | None = None) -> list[dict]:
    by_source: dict[str, list] = {}
    for p in load_prompts([task], languages=[language], path=data):
        by_source.setdefault(p.source, []).append(p)
    if not by_source:
        raise DataError(f"LCB has no {task} prompts in {language!r}")
    docs, queues = [], [list(v) for _, v in sorted(by_source.items())]
    while any(queues):
        for q in queues:
            if q:
                p = q.pop(0)
                docs.append(
                    {"id": p.id, "task": p.task, "source": p.source, "language": p.language, "prompt": p.prompt}
                )
    return docs


def lcb_dataset(task: str = "", language: str = "", lcb_data: str | None = None, **_metadata):
    """lm-eval `custom_dataset`: {"test": Dataset} of one (task, language)."""
    import datasets

    return datasets.DatasetDict({"test": datasets.Dataset.from_list(lcb_docs(task, language, lcb_data))})


# ---------------------------------------------------------------- scoring


@functools.lru_cache(maxsize=1)
def _resources():
    return load_resources(None, None)


def outcome(doc: dict, reply: str) -> dict:
    """The per-reply outcome the aggregations need, judged by the official scorer."""
    lid, words = _resources()
    r = analyze_reply(reply, doc["language"], lid, words, ScoreOptions())
    return {
        "id": doc["id"],
        "task": doc["task"],
        "source": doc["source"],
        "language": doc["language"],
        "counted": bool(r.counted),
        "line_error": bool(r.line_error),
        "word_error": bool(r.word_error),
        "degenerate": bool(is_degenerate(reply)),
    }


def process_results(doc: dict, results: list) -> dict:
    reply = results[0] if results else ""
    item = outcome(doc, reply if isinstance(reply, str) else str(reply))
    return dict.fromkeys(metrics_for(doc["language"]), item)


def aggregate(items: list[dict]) -> dict[str, float]:
    """{metric: value} of one task's outcomes, over all its languages ('avg'), official aggregation."""
    outs = [
        Outcome(
            **{
                k: x[k]
                for k in ("id", "task", "source", "language", "counted", "line_error", "word_error", "degenerate")
            }
        )
        for x in items
    ]
    if not outs:
        return {}
    ests = intervals(outs, n=1, seed=0)
    langs = {o.language for o in outs}
    task = outs[0].task
    key = (task, "all", next(iter(langs)) if len(langs) == 1 else "all")
    return {m: e.value for m, e in ests[key].items()}


def _agg(metric: str):
    def agg(items):
        value = aggregate(items).get(metric)
        return float("nan") if value is None else value

    agg.__name__ = f"agg_{metric}"
    return agg


agg_lpr, agg_wpr, agg_lcpr, agg_coverage, agg_degeneracy = (_agg(m) for m in METRICS)


# ---------------------------------------------------------------- lm-eval's logged samples -> mlft completions


def samples_to_completions(paths: list[str | Path], model: str = "lm-eval") -> list[dict]:
    """mlft completion records from lm-eval `samples_lcb_*.jsonl` files (`--log_samples`): the reply is the
    sample's (unfiltered) response, the prompt's identity comes from its document."""
    out, seen = [], set()
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: file not found")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                doc = rec["doc"]
                resp = rec["resps"][0][0] if rec.get("resps") else rec["filtered_resps"][0]
                key = doc["id"]
                if doc["task"] not in TASKS:
                    raise KeyError("doc.task")
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
                raise DataError(f"{path}: line {n}: not an lm-eval LCB sample ({exc})") from None
            if key in seen:
                raise DataError(f"{path}: line {n}: prompt {key!r} appears twice")
            seen.add(key)
            out.append(
                {
                    "id": key,
                    "task": doc["task"],
                    "source": doc["source"],
                    "language": doc["language"],
                    "prompt": doc.get("prompt"),
                    "model": model,
                    "completion": resp,
                }
            )
    return out


# ---------------------------------------------------------------- the task files


def task_files() -> dict[str, str]:
    """{relative file name: text} of the LCB task folder (one YAML per task and language, groups, template)."""
    import yaml

    files = {
        "_lcb_template_yaml": (
            "# generated by mlft.harness.lcb_task.write_task_files: edit there\n"
            "custom_dataset: !function utils.lcb_dataset\n"
            "test_split: test\n"
            "output_type: generate_until\n"
            'doc_to_text: "{{prompt}}"\n'
            'doc_to_target: ""\n'
            "process_results: !function utils.process_results\n"
            + yaml.safe_dump({"generation_kwargs": GENERATION}, sort_keys=False)
            + "metadata:\n  version: 1.0\n"
        )
    }
    for task in TASKS:
        names = []
        for lang in task_languages(task):
            name = task_name(task, lang)
            names.append(name)
            metrics = "".join(
                f"  - metric: {m}\n    aggregation: !function utils.agg_{m}\n"
                f"    higher_is_better: {'false' if m == 'degeneracy' else 'true'}\n"
                for m in metrics_for(lang)
            )
            files[f"{name}.yaml"] = (
                f"include: _lcb_template_yaml\ntask: {name}\n"
                f"dataset_kwargs:\n  task: {task}\n  language: {lang}\n"
                f"metric_list:\n{metrics}"
            )
        agg = "".join(f"  - metric: {m}\n    aggregation: mean\n    weight_by_size: false\n" for m in METRICS)
        files[f"lcb_{task}.yaml"] = (
            f"group: lcb_{task}\ntask:\n"
            + "".join(f"  - {n}\n" for n in names)
            + f"aggregate_metric_list:\n{agg}metadata:\n  version: 1.0\n"
        )
    files["lcb.yaml"] = "group: lcb\ntask:\n  - lcb_monolingual\n  - lcb_crosslingual\nmetadata:\n  version: 1.0\n"
    return files


def write_task_files(folder: str | Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in task_files().items():
        (folder / name).write_text(text, encoding="utf-8")

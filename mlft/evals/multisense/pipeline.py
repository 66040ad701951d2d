"""Run multisense consistency with a live chat model.

Stages, all cached in `out_dir/generations.jsonl` (one record per model call, fsync'd; a rerun only makes the
calls that are missing, so an interrupted run resumes):
1. T_src: the task in the source language (original data, original instruction);
2. self-translation: the model translates each input sentence and each instruction piece (prefix, suffix,
   sentence word) into every target language;
3. the conditions against T_src: T (translated data + translated instruction), I (original data + translated
   instruction), X (translated data + original instruction).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from mlft.benchmarks.multisense import metrics, prompts
from mlft.benchmarks.multisense.data import Item, load_items
from mlft.benchmarks.multisense.parser import parse_prediction
from mlft.errors import ConfigError
from mlft.io.jsonl import JsonlAppender, read_jsonl

CONDITIONS = ("T", "I", "X")
# chat_fn(ids, user_texts, max_new_tokens) -> replies (same order); the system message is added by the caller
ChatFn = Callable[[list[str], list[str], int], list[str]]


@dataclass
class Plan:
    tasks: list[str]
    source: str
    targets: list[str]
    conditions: list[str]
    sample: int | None
    seed: int
    answer_tokens: int
    translation_tokens: int
    data_dir: str | None = None
    bleu: bool = True


class GenerationCache:
    """id -> reply, persisted as JSONL; `settings` guard against mixing runs with different decoding."""

    def __init__(self, path: Path, settings: dict):
        self.path = path
        self.replies: dict[str, str] = {}
        for rec in read_jsonl(path):
            if rec.get("settings") != settings:
                raise ConfigError(
                    f"{path}: made with other settings ({rec.get('settings')}, now {settings}); "
                    "use another out_dir or delete the file"
                )
            self.replies[rec["id"]] = rec["reply"]
        self.settings = settings

    def run(
        self, chat_fn: ChatFn, requests: dict[str, str], max_new_tokens: int, chunk: int, progress: bool, desc: str
    ) -> dict[str, str]:
        missing = [i for i in requests if i not in self.replies]
        if missing:
            bar = tqdm(total=len(missing), desc=desc, unit="call", disable=not progress, leave=False)
            with JsonlAppender(self.path) as out:
                for start in range(0, len(missing), chunk):
                    ids = missing[start : start + chunk]
                    replies = chat_fn(ids, [requests[i] for i in ids], max_new_tokens)
                    for i, reply in zip(ids, replies):
                        if reply is None:  # a failed call is retried on the next run
                            continue
                        self.replies[i] = reply
                        out.write({"id": i, "request": requests[i], "reply": reply, "settings": self.settings})
                    bar.update(len(ids))
            bar.close()
        return {i: self.replies.get(i, "") for i in requests}


def sample_items(items: list[Item], n: int | None, seed: int, task: str) -> list[int]:
    """Seeded item indices (the same rows in every language), in file order."""
    if n is None or n >= len(items):
        return list(range(len(items)))
    return sorted(random.Random(f"{seed}:{task}").sample(range(len(items)), n))


def _answers(
    cache: GenerationCache,
    chat_fn: ChatFn,
    plan: Plan,
    chunk: int,
    progress: bool,
    prompts_by_id: dict[str, str],
    label_map: dict[str, int],
    desc: str,
) -> tuple[list[int], list[str]]:
    replies = cache.run(chat_fn, prompts_by_id, plan.answer_tokens, chunk, progress, desc)
    ordered = [replies[i] for i in prompts_by_id]
    return [parse_prediction(r, label_map) for r in ordered], ordered


def run_task(
    task: str,
    plan: Plan,
    chat_fn: ChatFn,
    cache: GenerationCache,
    chunk: int,
    progress: bool,
    items_out: list[dict] | None = None,
) -> list[dict]:
    """All conditions of one task; returns metric rows {variant (T_src, T, I, X, translation), task, language
    (the target language; the source language for T_src), metric, value}
    and appends per-item predictions and replies (and each translated instruction) to `items_out`."""
    src = plan.source
    spec = prompts.TASKS[task]
    src_items = load_items(task, src, plan.data_dir)
    chosen = [src_items[i] for i in sample_items(src_items, plan.sample, plan.seed, task)]
    labels = [it.label for it in chosen]
    rows: list[dict] = []

    def row(variant, lang, metric, value):
        rows.append({"variant": variant, "task": task, "language": lang, "metric": metric, "value": value})

    base_ins = spec.instructions[src]
    base_prompts = {f"{task}/{src}/T_src/{it.idx}": prompts.build_prompt(base_ins, it.sentences) for it in chosen}
    base, base_replies = _answers(
        cache, chat_fn, plan, chunk, progress, base_prompts, base_ins.label_map, f"{task} T_src"
    )
    row("T_src", src, "accuracy", metrics.accuracy(base, labels))
    row("T_src", src, "invalid_rate", metrics.invalid_rate(base))
    per_item = {
        it.idx: {"task": task, "idx": it.idx, "id": it.id, "label": it.label, "T_src": {"pred": p, "reply": r}}
        for it, p, r in zip(chosen, base, base_replies)
    }

    for tgt in plan.targets:
        key = f"{task}/{src}_to_{tgt}"
        # self-translation of the inputs ...
        requests = {
            f"{key}/translate/{it.idx}/{k}": prompts.translation_request(src, tgt, s)
            for it in chosen
            for k, s in zip(spec.sentence_keys, it.sentences)
        }
        done = cache.run(chat_fn, requests, plan.translation_tokens, chunk, progress, f"{key} translate data")
        mt = {
            it.idx: tuple(prompts.strip_quotes(done[f"{key}/translate/{it.idx}/{k}"]) for k in spec.sentence_keys)
            for it in chosen
        }
        # ... and of the instruction
        pieces = {"prefix": base_ins.prefix, "suffix": base_ins.suffix.strip(), "word": base_ins.sentence_word}
        requests = {
            f"{key}/instruction/{name}": prompts.instruction_piece_request(src, tgt, text)
            for name, text in pieces.items()
        }
        done = cache.run(chat_fn, requests, plan.translation_tokens, chunk, progress, f"{key} translate instruction")
        tgt_ins = prompts.translated_instruction(task, src, tgt, *(done[f"{key}/instruction/{n}"] for n in pieces))
        if plan.bleu:
            tgt_items = load_items(task, tgt, plan.data_dir)
            hyps = [s for it in chosen for s in mt[it.idx]]
            refs = [s for it in chosen for s in tgt_items[it.idx].sentences]
            row("translation", tgt, "bleu", metrics.bleu(hyps, refs))
        for cond in plan.conditions:
            ins = base_ins if cond == "X" else tgt_ins
            cond_prompts = {
                f"{key}/{cond}/{it.idx}": prompts.build_prompt(ins, mt[it.idx] if cond in "TX" else it.sentences)
                for it in chosen
            }
            preds, replies = _answers(
                cache, chat_fn, plan, chunk, progress, cond_prompts, ins.label_map, f"{key} {cond}"
            )
            for metric, value in metrics.compare(base, preds, labels).items():
                row(cond, tgt, metric, value)
            for it, p, r in zip(chosen, preds, replies):
                per_item[it.idx][f"{src}_to_{tgt}/{cond}"] = {"pred": p, "reply": r}
        for it in chosen:
            per_item[it.idx][f"{src}_to_{tgt}/translation"] = list(mt[it.idx])
        per_item_instr = {
            "prefix": tgt_ins.prefix,
            "suffix": tgt_ins.suffix,
            "word": tgt_ins.sentence_word,
            "answers": tgt_ins.answers,
        }
        row("translation", tgt, "n_items", float(len(chosen)))
        if items_out is not None:
            items_out.append({"task": task, "direction": f"{src}_to_{tgt}", "translated_instruction": per_item_instr})
    if items_out is not None:
        for rec in per_item.values():
            items_out.append(rec)
    return rows


def average_rows(rows: list[dict]) -> list[dict]:
    """Per task, condition and metric: the mean over target languages (language 'avg')."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        if r["variant"] in CONDITIONS and r["value"] == r["value"]:  # skip NaN
            groups.setdefault((r["variant"], r["task"], r["metric"]), []).append(r["value"])
    return [
        {"variant": v, "task": t, "language": "avg", "metric": m, "value": sum(vals) / len(vals)}
        for (v, t, m), vals in groups.items()
    ]


def write_report(rows: list[dict], path: Path) -> str:
    """Markdown: per task, one line per condition and target language."""
    lines = []
    for task in dict.fromkeys(r["task"] for r in rows):
        sel = [r for r in rows if r["task"] == task]
        lines += [
            f"## {task}",
            "",
            "| condition | language | accuracy | invalid | consistency | when right | "
            "when wrong | consistency (valid pairs) | BLEU |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        keys = list(dict.fromkeys((r["variant"], r["language"]) for r in sel if r["variant"] != "translation"))
        for cond, lang in keys:
            val = {r["metric"]: r["value"] for r in sel if (r["variant"], r["language"]) == (cond, lang)}
            bleu = (
                next(
                    (
                        r["value"]
                        for r in sel
                        if r["variant"] == "translation" and r["language"] == lang and r["metric"] == "bleu"
                    ),
                    None,
                )
                if cond == "T"
                else None
            )

            def f(x):
                return "" if x is None or x != x else f"{x:.3f}"

            lines.append(
                f"| {cond} | {lang} | {f(val.get('accuracy'))} | {f(val.get('invalid_rate'))} | "
                f"{f(val.get('consistency'))} | {f(val.get('consistency_when_right'))} | "
                f"{f(val.get('consistency_when_wrong'))} | {f(val.get('consistency_valid'))} | "
                f"{'' if bleu is None else f'{bleu:.1f}'} |"
            )
        lines.append("")
    text = "\n".join(lines)
    path.write_text(text, encoding="utf-8")
    return text


def dump_rows(rows: list[dict], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")

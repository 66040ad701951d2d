"""Generate completions into mlft's JSONL format, incrementally and resumably.

Prompts are ordered by prompt length and cut into fixed chunks over the *whole* prompt list; each result is
appended (fsynced) to the file as soon as the backend yields it. Re-running the same command skips the replies
already there; every reply's draws are keyed by its request (decoding seed, prompt id, sample index), so a
resumed run draws exactly what the uninterrupted run would have drawn, whatever the batching. With `samples`
K > 1 every prompt gets K replies (records with the same `id` and `sample` 0..K-1). Records that failed (`error` set)
are dropped from the file on resume and generated
again. A backend with `start_pass` is told how many replies the pass generates (the hf backend decodes a short
pass eagerly) before its first generate call. The file is locked for the whole run: a second writer is refused at once
(mlft.io.locks).

What makes two completions files comparable — model, backend, where and in what precision it ran (device,
dtype), decoding, prompting, interventions — is written into every record and checked on resume (`settings_of`).

Inside a data-parallel evaluation (mlft.generation.data_parallel, training on several ranks) the chunks are shared
among the ranks; the file gets the same records as one rank would write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from mlft.benchmarks.lcb.data import Prompt
from mlft.errors import ConfigError
from mlft.generation import data_parallel
from mlft.generation.decoding import Decoding
from mlft.generation.interventions import describe_all, split
from mlft.generation.prompting import Prompting, build_input, cut_answer
from mlft.generation.requests import Request, Result, draw_id
from mlft.io.jsonl import JsonlAppender, read_jsonl, write_jsonl
from mlft.io.locks import OutputLock


def settings_of(
    model_name: str,
    backend_name: str,
    decoding: Decoding,
    prompting: Prompting,
    interventions: Sequence = (),
    placement: dict | None = None,
) -> dict:
    """What makes two completions files comparable (recorded in every record, checked on resume).
    `placement`: the backend's {device, dtype} (hf: "cuda"/"cpu", "bfloat16"/"float32"...)."""
    prompting_d = {k: v for k, v in asdict(prompting).items() if k != "examples"}
    return {
        "model": model_name,
        "backend": backend_name,
        **(placement or {}),
        "decoding": decoding.to_dict(),
        "prompting": prompting_d,
        "interventions": describe_all(interventions),
    }


_PLACEMENT = ("device", "dtype")


def _check_resumable(path: Path, records: list[dict], settings: dict) -> None:
    for rec in records:
        # files written before device/dtype were recorded resume as they are (they were all CPU runs)
        old = {
            k: rec.get(k, [] if k == "interventions" else settings[k] if k in _PLACEMENT else None) for k in settings
        }
        if old != settings:
            diff = [k for k in settings if old[k] != settings[k]]
            raise ConfigError(
                f"{path}: holds completions made with other settings ({', '.join(diff)}: "
                f"{[old[k] for k in diff]} vs now {[settings[k] for k in diff]}); "
                "use another output path, or delete the file to start over"
            )


def _record(p: Prompt, sample: int, req: Request, res: Result, settings: dict, prompting: Prompting) -> dict:
    completion = cut_answer(res.completion) if prompting.mode == "qa" else res.completion
    rec = {
        "id": p.id,
        "sample": sample,
        "task": p.task,
        "source": p.source,
        "language": p.language,
        "completion": completion,
        "prompt": p.prompt,
        **settings,
    }
    if p.location:
        rec.update(location=p.location, phrasing=p.phrasing)
    rec.update({"messages": req.messages} if req.messages is not None else {"input_text": req.text})
    if completion != res.completion:
        rec["raw_completion"] = res.completion
    rec.update(
        usage={"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens},
        finish_reason=res.finish_reason,
        seconds=round(res.seconds, 4),
        error=res.error,
        **res.extra,
    )
    return rec


def generate_completions(
    prompts: list[Prompt],
    backend,
    decoding: Decoding,
    prompting: Prompting,
    out_path: str | Path,
    model_name: str,
    progress: bool = True,
    desc: str = "generate",
    interventions: Sequence = (),
    samples: int = 1,
) -> list[dict]:
    """Generate what `out_path` lacks; return the finished records in the order of `prompts` (a prompt's
    `samples` replies together, in sample order). Reply k of a prompt is the request `draw_id(id, k)`: its draws
    are keyed by it, so one reply per prompt draws what the first of several draws."""
    if samples < 1:
        raise ConfigError(f"samples: must be >= 1, got {samples}")
    out_path = Path(out_path)
    settings = settings_of(
        model_name, backend.name, decoding, prompting, interventions, getattr(backend, "placement", None)
    )
    by_id = {p.id: p for p in prompts}
    # Build every request first: a missing few-shot language fails here, before any generation.
    requests, which = [], {}  # which: request id -> (prompt, sample)
    for p in by_id.values():
        built = build_input(prompting, p.prompt, p.task, p.language)
        for k in range(samples):
            rid = draw_id(p.id, k)
            if rid in which:
                raise ConfigError(
                    f"prompt ids {p.id!r} and {which[rid][0].id!r}: reply {k} of the first has the "
                    "id of the second; rename the prompt"
                )
            requests.append(Request(rid, language=p.language, **built))
            which[rid] = (p, k)
    # Model transforms (e.g. quantize) are already applied to `backend`'s model by the caller; strategies wrap
    # the backend's generate; the rest (logits processors, hooks) go to every generate call.
    _, per_call = split(interventions)
    strategies = [iv for iv in per_call if "strategy" in iv.applies_via]
    per_call = [iv for iv in per_call if "strategy" not in iv.applies_via]
    backend.check(decoding, per_call)
    generate = backend.generate
    for iv in strategies:
        generate = iv.wrap(generate, backend)
    with OutputLock(out_path):
        existing = read_jsonl(out_path)
        _check_resumable(out_path, existing, settings)
        done: dict[str, dict] = {}  # request id -> record
        for rec in existing:
            if not rec.get("error"):
                done.setdefault(draw_id(rec["id"], rec.get("sample") or 0), rec)
        if len(done) != len(existing):  # drop failed and duplicate records (they are generated again)
            write_jsonl(out_path, list(done.values()))
        requests.sort(key=backend.prompt_length)
        size = backend.batch_size
        chunks = [requests[i : i + size] for i in range(0, len(requests), size)]
        todo = [c for c in ([r for r in chunk if r.id not in done] for chunk in chunks) if c]
        with (
            JsonlAppender(out_path) as writer,
            tqdm(
                total=sum(map(len, todo)), desc=desc, unit="reply" if samples > 1 else "prompt", disable=not progress
            ) as bar,
        ):
            by_req = {r.id: r for r in requests}
            start_pass = getattr(backend, "start_pass", None)  # a backend that decodes by the pass's size
            if callable(start_pass):
                start_pass(sum(map(len, todo)))
            try:
                dp = data_parallel.current()
                if dp is not None and dp.covers(backend):
                    results = dp.generate(backend, todo, decoding, per_call, strategies, generate)
                else:
                    results = (res for chunk in todo for res in generate(chunk, decoding, per_call))
                for res in results:
                    rec = _record(*which[res.id], by_req[res.id], res, settings, prompting)
                    writer.write(rec)
                    if not rec["error"]:
                        done[res.id] = rec
                    bar.update(1)
            finally:
                if callable(start_pass):
                    start_pass(None)
    return [done[rid] for p in by_id.values() for k in range(samples) if (rid := draw_id(p.id, k)) in done]


def failed_count(path: str | Path) -> int:
    return sum(1 for r in read_jsonl(path) if r.get("error"))

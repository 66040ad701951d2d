"""How an LCB prompt becomes model input: chat messages, raw text, or the paper's base-model Q/A template,
with 0, 1 or 5 few-shot demonstrations.

Q/A template (paper Figure A2): demonstrations are joined as `Q: {user}\\nA: {answer}\\n\\n` and the prompt
ends with `Q: {prompt}\\nA:`; the answer is cut at the next `\\nQ:`. Chat models get the demonstrations as
user/assistant turns. Demonstrations are the paper's (`few_shot_examples.json`: per target language, 5 pairs
in *other* languages).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from mlft.benchmarks.lcb.fetch import ENV_VAR, FEW_SHOT
from mlft.errors import ConfigError, DataError
from mlft.io.download import download
from mlft.paths import cache_dir, lcb_data_path, shared_dir

FEW_SHOT_FILE = "few_shot_examples.json"
QA_STOP = "\nQ:"


@dataclass(frozen=True)
class Prompting:
    mode: Literal["chat", "qa", "raw"] = field(
        default="chat",
        metadata={
            "help": "chat: the model's chat template; qa: the paper's base-model Q/A template; raw: the prompt as is"
        },
    )
    shots: int = field(default=0, metadata={"help": "few-shot demonstrations (0-5) from few_shot_examples.json"})
    system_prompt: str | None = field(
        default=None, metadata={"help": "system message for chat mode (null = the template's default)"}
    )
    examples: str | None = field(
        default=None,
        metadata={
            "help": "few_shot_examples.json path (null: $MLFT_LCB_DATA, ../shared/lcb, the cache, else download)"
        },
    )

    def __post_init__(self):
        if not 0 <= self.shots <= 5:
            raise ConfigError(f"prompting.shots: must be 0..5 (the paper has 5 demonstrations), got {self.shots}")
        if self.mode == "raw" and self.shots:
            raise ConfigError("prompting.shots: few-shot needs mode 'qa' or 'chat', not 'raw'")
        if self.system_prompt is not None and self.mode != "chat":
            raise ConfigError(f"prompting.system_prompt: only used in chat mode, not {self.mode!r}")


def qa_prompt(prompt: str, demonstrations: list[tuple[str, str]] = ()) -> str:
    """The paper's base-model template."""
    shots = "".join(f"Q: {user}\nA: {answer}\n\n" for user, answer in demonstrations)
    return f"{shots}Q: {prompt}\nA:"


def cut_answer(text: str) -> str:
    """A Q/A completion ends where the model starts the next question."""
    return text.split(QA_STOP, 1)[0]


def chat_messages(prompt: str, demonstrations: list[tuple[str, str]] = (), system_prompt: str | None = None):
    messages = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
    for user, answer in demonstrations:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return messages + [{"role": "user", "content": prompt}]


def _pairs(turns: list[dict], where: str) -> list[tuple[str, str]]:
    if len(turns) % 2 or any(not isinstance(t, dict) or "message" not in t for t in turns):
        raise DataError(f"{where}: expected alternating {{role, message}} User/Chatbot turns")
    return [(turns[i]["message"], turns[i + 1]["message"]) for i in range(0, len(turns), 2)]


def _from_upstream(text: str) -> dict:
    """Read the dict literals of the official few_shot_prompting.py without executing it."""
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.startswith("few_shot_examples_"):
                out[name.removeprefix("few_shot_examples_")] = ast.literal_eval(node.value)
    return out


def examples_json(raw: bytes) -> bytes:
    data = _from_upstream(raw.decode("utf-8"))
    if set(data) != {"monolingual", "crosslingual"}:
        raise ValueError(f"found {sorted(data)}, expected monolingual and crosslingual examples")
    return json.dumps({"source": FEW_SHOT.url, **data}, ensure_ascii=False, indent=1).encode("utf-8")


def _download() -> Path:
    """The official few_shot_prompting.py (checksum-checked), stored as JSON in the cache."""
    return download(
        FEW_SHOT,
        cache_dir() / "lcb" / FEW_SHOT_FILE,
        convert=examples_json,
        offline_hint=f"offline, pass prompting.examples=PATH or put {FEW_SHOT_FILE} in ${ENV_VAR}",
    )


def locate_examples(explicit: str | None = None) -> Path:
    if explicit:
        path = Path(explicit)
        path = path / FEW_SHOT_FILE if path.is_dir() else path
        if not path.is_file():
            raise DataError(f"{explicit}: few-shot examples file not found")
        return path
    candidates = []
    if lcb_data_path() is not None:
        candidates.append(lcb_data_path() / FEW_SHOT_FILE)
    if shared_dir() is not None:
        candidates.append(shared_dir() / "lcb" / FEW_SHOT_FILE)
    candidates.append(cache_dir() / "lcb" / FEW_SHOT_FILE)
    for cand in candidates:
        if cand.is_file():
            return cand
    return _download()


@lru_cache(maxsize=4)
def _load_examples(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: unreadable few-shot examples ({exc})") from None
    for task in ("monolingual", "crosslingual"):
        if not isinstance(data.get(task), dict):
            raise DataError(f"{path}: missing the {task!r} mapping (language -> turns)")
    return data


def demonstrations(task: str, language: str, shots: int, examples: str | None = None) -> list[tuple[str, str]]:
    """The first `shots` (user, answer) pairs the paper used for prompts of `task` in `language`."""
    if shots == 0:
        return []
    path = str(locate_examples(examples))
    turns = _load_examples(path)[task].get(language)
    if turns is None:
        raise DataError(f"{path}: no {task} few-shot examples for language {language!r}")
    pairs = _pairs(turns, f"{path}: {task}.{language}")
    if len(pairs) < shots:
        raise DataError(f"{path}: {task}.{language} has {len(pairs)} demonstrations, {shots} asked")
    return pairs[:shots]


def build_input(prompting: Prompting, prompt: str, task: str, language: str) -> dict:
    """{'messages': [...]} for chat mode, else {'text': ...}: what a backend Request carries."""
    demos = demonstrations(task, language, prompting.shots, prompting.examples)
    if prompting.mode == "chat":
        return {"messages": chat_messages(prompt, demos, prompting.system_prompt)}
    if prompting.mode == "qa":
        return {"text": qa_prompt(prompt, demos)}
    return {"text": prompt}

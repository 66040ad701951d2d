"""Turn source rows into the conversational formats trl 1.16 trains on.

SFT:  {"messages": [{"role": "user", ...}, ..., {"role": "assistant", ...}]}   (SFTTrainer, language modeling)
DPO:  {"prompt": [messages...], "chosen": [{"role": "assistant", ...}], "rejected": [{"role": "assistant", ...}]}
      (DPOTrainer, conversational preference with an explicit prompt)

Row formats a source may declare (`format:` in the mix), with the columns they read (`columns:` renames them):
  messages     messages            a list of {role, content} (or ShareGPT {from, value}) turns
  instruction  prompt, response    plain strings; optional `input` (appended to the prompt) and `system`
  preference   prompt, chosen, rejected   strings or message lists (a shared prefix of chosen/rejected is
                                   taken as the prompt when `prompt` is absent, as in UltraFeedback)
  prompt       prompt, task        prompt-only rows for online RL (GRPO): {"prompt": [messages...], "task"}; the
                                   prompt is a string or a message list ending with a user turn; `task`
                                   (monolingual | crosslingual) is optional (the source's `task:` else); `answer`
                                   (off unless `columns: {answer: COLUMN}`) keeps a verifiable prompt's reference
                                   answer, which reward terms that check it read (mlft/training/answer_reward.py)
Each format is one entry of `FORMATS` (its roles, optional roles and converter); which formats feed which mix kind
is the mix kinds' table (mlft/data/mix_kinds.py). Nothing here tests a format's or a kind's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mlft.errors import DataError

PROMPT_TASKS = ("monolingual", "crosslingual")

_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
}


def column_map(fmt: str, overrides: dict[str, str]) -> dict[str, str | None]:
    cols = dict(FORMATS[fmt].roles)
    cols.update(overrides)
    return cols


def check_columns(available: list[str], fmt: str, cols: dict[str, str | None], where: str) -> None:
    """Raise a DataError naming the missing column and the mix key that names it."""
    for role, column in cols.items():
        if column is None:
            continue
        if column not in available and role not in FORMATS[fmt].optional:
            raise DataError(
                f"{where}.columns.{role}: column {column!r} not found; the data has "
                f"{', '.join(available) or 'no columns'}"
            )


def _message(turn, where: str) -> dict:
    if not isinstance(turn, dict):
        raise ValueError(f"{where}: a turn is not a mapping")
    role = turn.get("role", turn.get("from"))
    content = turn.get("content", turn.get("value"))
    if role not in _ROLES or not isinstance(content, str):
        raise ValueError(f"{where}: turn has role {role!r} / content of type {type(content).__name__}")
    return {"role": _ROLES[role], "content": content}


def _messages(value, default_role: str, where: str) -> list[dict]:
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, list):
        return [_message(t, where) for t in value]
    raise ValueError(f"{where}: expected text or a list of turns, got {type(value).__name__}")


def _valid(messages: list[dict]) -> bool:
    return bool(messages) and all(m["content"].strip() for m in messages)


def _finish_sft(messages: list[dict]) -> dict | None:
    if not _valid(messages) or messages[-1]["role"] != "assistant" or not any(m["role"] == "user" for m in messages):
        return None
    return {"messages": messages}


def messages_to_sft(row: dict, cols: dict[str, str | None], task: str | None = None) -> dict | None:
    """{"messages": [...]} ending with an assistant turn from a `messages` row, or None if empty/malformed."""
    try:
        messages = _messages(row[cols["messages"]], "user", "messages")
    except (ValueError, KeyError, TypeError):
        return None
    return _finish_sft(messages)


def instruction_to_sft(row: dict, cols: dict[str, str | None], task: str | None = None) -> dict | None:
    """{"messages": [(system), user, assistant]} from an `instruction` row, or None if empty/malformed."""
    try:
        prompt = row[cols["prompt"]]
        if cols.get("input") and row.get(cols["input"]):
            prompt = f"{prompt}\n\n{row[cols['input']]}"
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": row[cols["response"]]}]
        if cols.get("system") and row.get(cols["system"]):
            messages.insert(0, {"role": "system", "content": row[cols["system"]]})
    except (ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(m["content"], str) for m in messages):
        return None
    return _finish_sft(messages)


def to_preference(row: dict, cols: dict[str, str | None], task: str | None = None) -> dict | None:
    """{"prompt", "chosen", "rejected"} with assistant-only completions, or None if malformed."""
    try:
        chosen = _messages(row[cols["chosen"]], "assistant", "chosen")
        rejected = _messages(row[cols["rejected"]], "assistant", "rejected")
        prompt_value = row.get(cols["prompt"]) if cols.get("prompt") else None
        prompt = _messages(prompt_value, "user", "prompt") if prompt_value else []
    except (ValueError, KeyError, TypeError):
        return None
    # Strip the conversation both completions share (it is the prompt, e.g. UltraFeedback's user turn).
    shared = 0
    while shared < min(len(chosen), len(rejected)) - 1 and chosen[shared] == rejected[shared]:
        shared += 1
    if not prompt:
        prompt = chosen[:shared]
    elif chosen[: len(prompt)] == prompt and rejected[: len(prompt)] == prompt:
        shared = len(prompt)
    chosen, rejected = chosen[shared:], rejected[shared:]
    if not (_valid(prompt) and _valid(chosen) and _valid(rejected)):
        return None
    if prompt[-1]["role"] != "user" or any(m["role"] != "assistant" for m in chosen + rejected):
        return None
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}


def to_prompt(row: dict, cols: dict[str, str | None], task: str | None = None) -> dict | None:
    """{"prompt": [messages ending with a user turn], "task"[, "answer"]} or None if malformed (an unknown task, or
    no answer in a row of a source that maps the `answer` role)."""
    try:
        prompt = _messages(row[cols["prompt"]], "user", "prompt")
    except (ValueError, KeyError, TypeError):
        return None
    value = row.get(cols["task"]) if cols.get("task") else None
    task = value if value else (task or "monolingual")
    if not _valid(prompt) or prompt[-1]["role"] != "user" or task not in PROMPT_TASKS:
        return None
    if cols.get("answer"):  # a verifiable prompt's reference answer (reward terms that check it read `answer`)
        answer = row.get(cols["answer"])
        if answer is None or answer == "":
            return None
        return {"prompt": prompt, "task": task, "answer": answer}
    return {"prompt": prompt, "task": task}


@dataclass(frozen=True)
class RowFormat:
    """A row format a hub or local source may declare (`format:`): the roles it reads, with their default columns
    (None: off unless the source maps it in `columns:`), the roles a row may lack, and its converter
    `(row, columns, task) -> example | None` (None: a malformed row, skipped and counted; `task` is the source's
    `task:`, which only prompt rows read)."""

    name: str
    roles: dict[str, str | None]
    convert: Callable[[dict, dict[str, str | None], str | None], dict | None]
    optional: frozenset[str] = frozenset()


FORMATS: dict[str, RowFormat] = {
    f.name: f
    for f in (
        RowFormat("messages", {"messages": "messages"}, messages_to_sft),
        RowFormat(
            "instruction",
            {"prompt": "instruction", "response": "response", "input": None, "system": None},
            instruction_to_sft,
            optional=frozenset({"input", "system"}),
        ),
        RowFormat(
            "preference",
            {"prompt": "prompt", "chosen": "chosen", "rejected": "rejected"},
            to_preference,
            optional=frozenset({"prompt"}),  # the shared prefix of chosen / rejected is the prompt when absent
        ),
        RowFormat(
            "prompt",
            {"prompt": "prompt", "task": "task", "answer": None},
            to_prompt,
            optional=frozenset({"task", "answer"}),
        ),
    )
}


def convert_row(row: dict, fmt: str, cols: dict[str, str | None], task: str | None = None) -> dict | None:
    """The normalised example of `row` in format `fmt`, or None if it is empty or malformed."""
    return FORMATS[fmt].convert(row, cols, task)


def prompt_turns(example: dict) -> list[str]:
    """The user turns of a normalised example: what decontamination compares with LCB prompts."""
    messages = example["messages"] if "messages" in example else example["prompt"]
    return [m["content"] for m in messages if m["role"] == "user"]


def completion_text(example: dict) -> str:
    """The text trained on (SFT: assistant turns; DPO: chosen) — for token counts."""
    if "messages" in example:
        return "\n".join(m["content"] for m in example["messages"] if m["role"] == "assistant")
    if "chosen" not in example:  # a prompt-only row: nothing to train on but the model's own replies
        return ""
    return "\n".join(m["content"] for m in example["chosen"])

"""The kinds of mix (`kind:` in a mix file), one entry each: what a mix of that kind holds and what it can do.

A kind names the row formats a hub or local source may feed it (mlft.data.normalize.FORMATS: each format brings its
own converter), the columns its rows carry, whether its sources may name their rows' `task`, and whether the mix
also writes its prompts as a prompt file (a base pass with K replies each, `mlft data mix filter`). The loader, the
sources and the mix writer ask the entry and test no kind's name, as the trainers table does for trainers
(mlft.training.trainers: a trainer names the mix kind it trains on). Adding a kind (a KTO mix, say) is one entry
here, plus a row format in normalize.py if its rows are new.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlft.config import did_you_mean
from mlft.errors import ConfigError


@dataclass(frozen=True)
class MixKind:
    """One kind of mix."""

    name: str
    help: str  # what its rows are (the mix file's `kind:` help)
    formats: tuple[str, ...]  # the row formats (normalize.FORMATS) a hub / local source may feed it
    columns: frozenset[str]  # the columns of its rows besides source / language / id
    mapped_columns: frozenset[str] = frozenset()  # further columns, present when a source maps that role
    takes_task: bool = False  # its sources may set `task:` (the task of their prompt-only rows)
    prompt_file: bool = False  # the mix also writes its prompts as a prompt file (mix/prompts.jsonl)

    def source_columns(self, mapped: dict[str, str]) -> frozenset[str]:
        """The columns a hub / local source with role mapping `mapped` (its `columns:`) brings into this mix."""
        return self.columns | {role for role in self.mapped_columns if mapped.get(role)}


MIX_KINDS: dict[str, MixKind] = {
    k.name: k
    for k in (
        MixKind("sft", "chat `messages`", ("messages", "instruction"), frozenset({"messages"})),
        MixKind("dpo", "prompt/chosen/rejected", ("preference",), frozenset({"prompt", "chosen", "rejected"})),
        MixKind(
            "prompts",
            "prompt-only rows with the requested reply `language` and `task` (online RL, trainer grpo)",
            ("prompt",),
            frozenset({"prompt", "task"}),
            mapped_columns=frozenset({"answer"}),
            takes_task=True,
            prompt_file=True,
        ),
    )
}


def mix_kind(name: str, where: str = "mix.kind") -> MixKind:
    """The entry of kind `name`; a ConfigError naming `where` (the file and field) for an unknown one."""
    try:
        return MIX_KINDS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"{where}: {name!r} is not a mix kind{did_you_mean(str(name), MIX_KINDS)}; valid: {', '.join(MIX_KINDS)}"
        ) from None


def kinds_help() -> str:
    """The mix file's `kind:` help, from the table."""
    return "; ".join(f"{k.name}: {k.help}" for k in MIX_KINDS.values()) + "."

"""A recipe's `training_args:` against the installed trl: field names (with did-you-mean and transformers' renames),
types, the settings mlft manages, and the attention / padding-free / kernel settings resolved on this machine.

Kept apart from `recipe.py` (the recipe's fields and the checks that read other parts of the house) because it reads
only trl's config dataclasses and the trainers' table.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import typing
from enum import Enum
from typing import Any

from mlft.config import coerce, did_you_mean
from mlft.errors import ConfigError
from mlft.training.trainers import TRAINERS, trainer_entry


def trl_config_class(trainer: str):
    return trainer_entry(trainer).config()


def _check_arg_type(value: Any, tp: Any, where: str) -> Any:
    """Type-check one trl config value; enum-typed fields accept only their members' string values."""
    if isinstance(tp, type) and issubclass(tp, Enum):
        valid = [m.value for m in tp]
        if value in valid or isinstance(value, tp):
            return value
        raise ConfigError(f"{where}: {value!r} is not one of {valid}{did_you_mean(str(value), map(str, valid))}")
    enums = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, Enum)]
    if enums and isinstance(value, str):  # `SchedulerType | str`: the str must name a member
        return _check_arg_type(value, enums[0], where)
    return coerce(value, tp, where)


# transformers 5.2x renamed `gradient_checkpointing(_kwargs)` to `activation_checkpointing(_kwargs)` (the old names
# stay there as deprecated aliases); earlier 5.x releases (5.17 on the GPU image) know only the old names. A recipe
# may use either: the new name is passed as the old one where the installed config class lacks it.
RENAMED_ARGS = {
    "activation_checkpointing": "gradient_checkpointing",
    "activation_checkpointing_kwargs": "gradient_checkpointing_kwargs",
}


def installed_arg_name(key: str, fields) -> str:
    """`key`, or its older name when the installed config class (field names `fields`) has only that."""
    old = RENAMED_ARGS.get(key)
    return old if old is not None and key not in fields and old in fields else key


def validate_training_args(args: dict, trainer: str, where: str) -> dict:
    """Check names against the installed trl config dataclass (with did-you-mean) and types against its hints."""
    cls = trl_config_class(trainer)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    out = {}
    managed = trainer_entry(trainer).managed()
    for key, value in args.items():
        if key in managed:
            raise ConfigError(f"{where}.{key}: managed by mlft: {managed[key]}")
        name = installed_arg_name(key, fields)
        if name != key:
            if name in args:
                raise ConfigError(
                    f"{where}: {key!r} and {name!r} are the same setting (the installed "
                    f"transformers knows only {name!r}): set one"
                )
            out[name] = _check_arg_type(value, hints[name], f"{where}.{key}")
            continue
        if key not in fields:
            others = [
                trl_config_class(t).__name__
                for t in TRAINERS
                if t != trainer and key in {f.name for f in dataclasses.fields(trl_config_class(t))}
            ]
            # another trainer's field: say so (a did-you-mean to a similar name would mislead)
            hint = (
                f" (it is a {' / '.join(others)} field, but trainer is {trainer!r})"
                if others
                else did_you_mean(key, fields)
            )
            raise ConfigError(f"{where}: unknown {cls.__name__} field {key!r}{hint}")
        out[key] = _check_arg_type(value, hints[key], f"{where}.{key}")
    return out


# ---------------------------------------------------------------- attention, padding-free rows, kernels

VARLEN_ATTENTION = ("flash_attention_2", "flash_attention_3", "flex_attention")  # no dense L x L mask for joined rows
AUTO_ARGS = ("padding_free", "use_liger_kernel")  # training_args that may say `auto` (resolved on this machine)


def default_attention() -> str:
    """flash_attention_2 on a GPU with the flash-attn package installed, else PyTorch's sdpa."""
    if importlib.util.find_spec("flash_attn") is None:
        return "sdpa"
    import torch

    return "flash_attention_2" if torch.cuda.is_available() else "sdpa"


def attention_of(args: dict) -> str:
    """The attention implementation training will load the model with (model_init_kwargs, else the default)."""
    return (args.get("model_init_kwargs") or {}).get("attn_implementation") or default_attention()


def joins_rows(args: dict, trainer: str) -> bool:
    """Does trl join a batch's rows into one row (padding-free)? SFT's `packing` with the bfd strategies turns it
    on (trl 1.16 SFTTrainer)."""
    return bool(args.get("padding_free")) or (
        trainer_entry(trainer).packing_joins_rows
        and bool(args.get("packing"))
        and args.get("packing_strategy", "bfd") in ("bfd", "bfd_split")
    )


def resolve_auto_args(args: dict, trainer: str, where: str) -> dict:
    """`padding_free: auto`: on for SFT where the attention is varlen (flash-attn installed on a GPU, or
    flex_attention), else off; `use_liger_kernel: auto`: on when liger-kernel is installed. Resolved where the
    recipe is loaded (the training process writes the resolved values into the run's recipe.yaml)."""
    out = dict(args)
    for key in AUTO_ARGS:
        if out.get(key) == "auto":
            if key == "padding_free":
                out[key] = trainer_entry(trainer).padding_free and attention_of(out) in VARLEN_ATTENTION
            else:
                out[key] = importlib.util.find_spec("liger_kernel") is not None
        elif isinstance(out.get(key), str):
            raise ConfigError(f"{where}.{key}: true, false or auto, got {out[key]!r}")
    return out


def check_joined_rows(args: dict, trainer: str, where: str) -> None:
    """Refuse padding-free rows where they cost more than padding: trl joins a batch's rows into one row of up to
    rows x max_length tokens and, with sdpa or eager attention, transformers builds a dense L x L block-diagonal
    mask over it (the attention work of every pair of rows, not of each row with itself)."""
    entry = trainer_entry(trainer)
    if not entry.padding_free and args.get("padding_free"):
        raise ConfigError(
            f"{where}.padding_free: trl's {entry.trainer_class} turns padding_free off (trl 1.16); set it false"
        )
    if not joins_rows(args, trainer):
        return
    attn = attention_of(args)
    if attn in VARLEN_ATTENTION:
        return
    rows = int(args.get("per_device_train_batch_size", 8))
    what = "packing (bfd strategy: padding-free)" if args.get("packing") else "padding_free"
    raise ConfigError(
        f"{where}: {what} with attn_implementation {attn!r}: trl joins the {rows} rows of a batch into one row and "
        f"{attn} attends over it through a dense L x L block-diagonal mask (up to {rows}x the attention work of "
        "the rows apart, and an L x L mask in memory). Use a varlen attention (pip install flash-attn for "
        "flash_attention_2 on a GPU, or model_init_kwargs: {attn_implementation: flex_attention}), "
        "padding_free: auto (on only where it is cheap), or packing_strategy: wrapped."
    )

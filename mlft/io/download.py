"""Checksummed, atomic downloads: every file mlft fetches from the internet comes through `download`.

A `RemoteFile` names a URL and the digest of its exact content; `download` streams it into a temporary file
beside the destination, checks the digest, and only then moves it into place, so an interrupted or corrupted
download never leaves a file that looks finished. `convert` (optional) turns the verified bytes into the
stored form (e.g. the few-shot examples: a Python module read as data).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlft.errors import DataError


@dataclass(frozen=True)
class RemoteFile:
    name: str
    url: str
    digest: str
    algo: str = "sha256"


def file_digest(path: Path, algo: str = "sha256") -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(
    remote: RemoteFile,
    dest: Path,
    offline_hint: str = "",
    convert: Callable[[bytes], bytes] | None = None,
    timeout: float = 60,
) -> Path:
    """Download `remote` to `dest`: checksum-checked, then (optionally) converted, then atomically moved."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", delete=False) as tmp:
        try:
            with urllib.request.urlopen(remote.url, timeout=timeout) as resp:  # noqa: S310 (fixed https URL)
                shutil.copyfileobj(resp, tmp)
        except OSError as exc:
            tmp.close()
            os.unlink(tmp.name)
            raise DataError(
                f"could not download {remote.name} from {remote.url} ({exc})"
                + (f"; {offline_hint}" if offline_hint else "")
            ) from None
    got = file_digest(Path(tmp.name), remote.algo)
    if got != remote.digest:
        os.unlink(tmp.name)
        raise DataError(f"{remote.url}: checksum mismatch ({remote.algo} {got}, expected {remote.digest})")
    if convert is not None:
        try:
            data = convert(Path(tmp.name).read_bytes())
        except (ValueError, SyntaxError) as exc:
            os.unlink(tmp.name)
            raise DataError(f"{remote.url}: unexpected content ({exc})") from None
        Path(tmp.name).write_bytes(data)
    os.replace(tmp.name, dest)
    return dest


def verified(path: Path, remote: RemoteFile, verify: bool = True) -> Path:
    """`path` if its digest is `remote`'s (or `verify` is off), else a DataError naming the file."""
    if verify and file_digest(path, remote.algo) != remote.digest:
        raise DataError(
            f"{path}: not the official {remote.name} ({remote.algo} mismatch); pass --no-verify to use a modified copy"
        )
    return path


def locate(
    remote: RemoteFile,
    explicit: str | Path | None = None,
    verify: bool = True,
    *,
    data_path: Path | None,
    cache: Path,
    offline_hint: str = "",
) -> Path:
    """Path of a local, verified copy of `remote`: `explicit` (a file, or a folder holding it), else `data_path`
    (the folder or file the environment points at, e.g. `mlft.paths.lcb_data_path()`; used when it holds
    `remote`), else `cache/remote.name`, else a download into `cache`."""
    if explicit is not None:
        given = Path(explicit)
        cand = given / remote.name if given.is_dir() else given
        if not cand.is_file():
            raise DataError(f"{explicit}: no {remote.name} there")
        return verified(cand, remote, verify)
    if data_path is not None:
        cand = data_path / remote.name if data_path.is_dir() else data_path
        if cand.is_file() and cand.name == remote.name:
            return verified(cand, remote, verify)
    cached = cache / remote.name
    if cached.is_file() and file_digest(cached, remote.algo) == remote.digest:
        return cached
    return download(remote, cached, offline_hint)

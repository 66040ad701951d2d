"""Advisory locks on the files mlft appends to (completions, curves, eval passes).

A second process that tries to write the same file fails at once with a message naming the file and the
holder's pid, instead of interleaving records. The lock is `flock` on a hidden sidecar file (`.NAME.lock`
beside the data file): the data file itself is sometimes replaced atomically (compaction), which would
orphan a lock taken on it. The sidecar holds the holder's pid; it is never truncated by a contender
(which is why this is not `filelock.FileLock`: that truncates the lock file on open, erasing the pid).

Locks are re-entrant within a process (the training callback holds the curves lock for a whole pass while
the pass appends to it) and released when the process dies, so a crash never leaves a stale lock.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from mlft.errors import MlftError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: locking is a no-op
    fcntl = None


class OutputLocked(MlftError):
    """Another process is writing the same output file."""


_held: dict[Path, list] = {}  # lock path -> [fd, depth]
_mutex = threading.Lock()


def lock_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


class OutputLock:
    """`with OutputLock(path):` — exclusive right to append to `path` for this process."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lock_file = lock_path(self.path).absolute()

    def acquire(self) -> OutputLock:
        if fcntl is None:
            return self
        with _mutex:
            entry = _held.get(self.lock_file)
            if entry is not None:
                entry[1] += 1
                return self
            self.lock_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise OutputLocked(
                    f"{self.path}: another mlft process (pid {holder}) is writing this file; "
                    "wait for it to finish, or choose another output"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _held[self.lock_file] = [fd, 1]
        return self

    def check(self) -> None:
        """Refuse at once if another process holds the lock, without creating anything (a pre-flight check
        before slow work such as loading a model; the lock itself is taken later)."""
        if fcntl is None or self.lock_file in _held or not self.lock_file.exists():
            return
        try:
            fd = os.open(self.lock_file, os.O_RDWR)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise OutputLocked(
                f"{self.path}: another mlft process (pid {holder}) is writing this file; "
                "wait for it to finish, or choose another output"
            ) from None
        finally:
            os.close(fd)

    def release(self) -> None:
        if fcntl is None:
            return
        with _mutex:
            entry = _held.get(self.lock_file)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                fd = entry[0]
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                del _held[self.lock_file]

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()

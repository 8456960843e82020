"""Crash-safe file primitives: locked appends of whole lines and atomic rewrites."""

from __future__ import annotations

# The C module, not ``threading``: its wrapper costs a cold prompt (which appends the access log) ~2-6 ms to import.
import _thread
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lore.errors import LockTimeoutError

LOCK_NAME = ".lore.lock"
LOCK_TIMEOUT_S = 30.0

_locks: dict[str, _FileLock] = {}
_locks_guard = _thread.allocate_lock()
# How often a writer that waits for the lock tries again.
_POLL_S = 0.005


class _FileLock:
    """An exclusive ``flock`` on one file, re-entrant within a thread; threads exclude each other.

    What ``filelock.FileLock`` did here on Unix (the same ``flock``, so processes of either
    kind exclude each other), without its import: ~15-35 ms (it loads ``logging`` and more)
    that every write process paid. Elsewhere (no ``fcntl``) ``filelock`` still serves.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.held = _thread._local()  # this thread's descriptor and depth

    def acquire(self, timeout: float) -> bool:
        import fcntl

        depth = getattr(self.held, "depth", 0)
        if depth:
            self.held.depth = depth + 1
            return True
        deadline = time.monotonic() + timeout
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL_S)
                continue
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.held.fd, self.held.depth = fd, 1
                return True
            os.close(fd)  # the file was deleted or replaced while this process waited: lock the one there now

    def release(self) -> None:
        import fcntl

        self.held.depth -= 1
        if not self.held.depth:
            fd = self.held.fd
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


@contextlib.contextmanager
def data_lock(data_dir: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the data dir's write lock (re-entrant within a process).

    One lock for the whole data dir: appends must also exclude rewrites, or a
    record appended between a rewrite's read and its rename would be lost.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    key = str((data_dir / LOCK_NAME).absolute())
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - no flock (Windows): filelock's own
        with _portable_lock(data_dir, key, timeout):
            yield
        return
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = _FileLock(key)
    if not lock.acquire(timeout):
        raise _timed_out(data_dir, key, timeout)
    try:
        yield
    finally:
        lock.release()


_portable: dict[str, Any] = {}


@contextlib.contextmanager
def _portable_lock(data_dir: Path, key: str, timeout: float) -> Iterator[None]:  # pragma: no cover - not on Unix
    import filelock

    with _locks_guard:
        lock = _portable.setdefault(key, filelock.FileLock(key))  # one object a file: it counts re-entries
    try:
        with lock.acquire(timeout=timeout):
            yield
    except filelock.Timeout as exc:
        raise _timed_out(data_dir, key, timeout) from exc


def _timed_out(data_dir: Path, key: str, timeout: float) -> LockTimeoutError:
    return LockTimeoutError(
        f"another lore process has held the lock on {data_dir} for over {timeout:.0f}s",
        hint=f"if no lore process is running, delete {key}",
    )


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, *, make_parent: bool = True) -> None:
    """Write ``data`` to ``path`` via a temp file, fsync and rename: all or nothing.

    ``make_parent=False``: a missing directory is an error (``FileNotFoundError``), never created again.
    """
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # (with shutil, bz2, lzma: 2.5 ms) only for whole-file writes, not for appends

    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp_name, 0o644 if not path.exists() else path.stat().st_mode & 0o777)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_dir(path.parent)


def replace_derived(path: Path, parts: list[bytes]) -> bool:
    """Write a derived file (a cache, checked when read) whole and rename it into place, without fsync;
    False, leaving no temporary file, when it cannot be written."""
    import threading

    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(b"".join(parts))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def append_line(path: Path, line: bytes, *, durable: bool = True, mode: int = 0o644) -> None:
    """Append one complete line with a single write (caller holds the data lock).

    If an earlier crash left a partial last line, start on a fresh line so the
    new record is never glued onto the broken one. ``durable=False`` skips the
    fsync, for derived logs that may lose their last line but not corrupt it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = line.rstrip(b"\n") + b"\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, mode)
    try:
        size = os.fstat(fd).st_size
        if size:
            last = os.pread(fd, 1, size - 1)
            if last != b"\n":
                payload = b"\n" + payload
        written = os.write(fd, payload)
        if written != len(payload):  # pragma: no cover - regular files write fully
            raise OSError(f"short write to {path}")
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)

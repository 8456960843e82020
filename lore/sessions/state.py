"""How far each session's transcript was read, per data dir, in the state dir.

One small JSON file per session (written atomically): the last line read and its
byte offset, the tool calls still waiting for their results, what the session
touched so far (for its one observation) and the model tokens spent on it.
A capture holds the data dir's capture lock, so two hooks of one session never
read the same lines twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.errors import LockTimeoutError
from lore.paths import state_dir
from lore.store.fileio import atomic_write

if TYPE_CHECKING:
    from lore.paths import Directories

LOCK_TIMEOUT_S = 120.0


def root(data_dir: Path, settings: Directories) -> Path:
    digest = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return state_dir(settings) / "capture" / f"{data_dir.name or 'root'}-{digest}"


def store_marker(data_dir: Path) -> str | None:
    """What tells this store from another at the same path: a digest of its audit log's first line.

    The state dir is keyed by the data dir's path, so a data dir deleted and created again
    (or another store checked out there) would inherit sessions marked as read; its first
    audit entry (the first write, hash-chained) differs. None before the first write.
    """
    from lore.store import audit

    try:
        with (data_dir / audit.AUDIT_PATH).open("rb") as handle:
            first = handle.readline()
    except OSError:
        return None
    return hashlib.sha1(first).hexdigest()[:16] if first.strip() else None


def _file(base: Path, session_id: str) -> Path:
    return base / (re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:120] + ".json")


def load(base: Path, session_id: str) -> dict[str, Any]:
    try:
        value = json.loads(_file(base, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def save(base: Path, session_id: str, value: dict[str, Any]) -> None:
    atomic_write(_file(base, session_id), json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8"))


@contextlib.contextmanager
def locked(base: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    import filelock

    base.mkdir(parents=True, exist_ok=True)
    try:
        with filelock.FileLock(str(base / ".capture.lock"), timeout=timeout):
            yield
    except filelock.Timeout as exc:
        raise LockTimeoutError(f"another capture has held {base} for over {timeout:.0f}s") from exc

"""Where lore keeps things: the data dir (truth), the index dir and the cache dir (derived)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

try:  # the same SHA-1 without hashlib, whose OpenSSL binding cost the hook ~3 ms to import
    from _sha1 import sha1
except ImportError:  # pragma: no cover - a Python built without its own SHA-1
    from hashlib import sha1

APP_NAME = "lore"


def _platform_data_dir() -> Path:
    # ~/.local/share/lore on Linux: the original bash Lore's default.
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(base) / APP_NAME
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """Per-user cache dir (indexes, hook log, helper sockets)."""
    env = os.environ.get("LORE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / APP_NAME
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def state_dir() -> Path:
    """Per-user state dir (access history for reinforcement, hook opt-outs)."""
    env = os.environ.get("LORE_STATE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        return Path(base) / APP_NAME
    import platformdirs

    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


def safe_name(value: str) -> str:
    """``value`` (a session id from an agent) as one file name: other characters become ``_``, 120 at most."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", value)[:120] or "_"


def require_data_dir(data_dir: Path) -> None:
    """Raise the standard error when the data dir is missing (cheap: no store import)."""
    if not data_dir.is_dir():
        from lore.errors import NotFoundError

        if data_dir.exists():
            raise NotFoundError(f"data directory {data_dir} is not a directory",
                                hint="point --data-dir / LORE_DATA_DIR at a directory")  # fmt: skip
        raise NotFoundError(
            f"data directory {data_dir} does not exist",
            hint="create it with `lore init`, or point --data-dir / LORE_DATA_DIR at an existing one",
        )


def resolve_data_dir(option: str | Path | None = None) -> Path:
    """``--data-dir``, else ``LORE_DATA_DIR``, else the platform data dir."""
    raw = option or os.environ.get("LORE_DATA_DIR")
    path = Path(raw).expanduser() if raw else _platform_data_dir()
    return path.absolute()


def resolve_index_dir(data_dir: Path, option: str | Path | None = None) -> Path:
    """``--index-dir``, else ``LORE_INDEX_DIR``, else a per-data-dir folder in the cache dir."""
    raw = option or os.environ.get("LORE_INDEX_DIR")
    if raw:
        return Path(raw).expanduser().absolute()
    digest = sha1(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return cache_dir() / "indexes" / f"{data_dir.name or 'root'}-{digest}"


class Locations:
    """Resolved data and index dirs (a plain class: dataclasses would cost the hook ~10 ms)."""

    __slots__ = ("data_dir", "index_dir")

    def __init__(self, data_dir: Path, index_dir: Path) -> None:
        self.data_dir = data_dir
        self.index_dir = index_dir

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Locations) and (self.data_dir, self.index_dir) == (other.data_dir, other.index_dir)

    def __hash__(self) -> int:
        return hash((self.data_dir, self.index_dir))

    def __repr__(self) -> str:
        return f"Locations(data_dir={self.data_dir!r}, index_dir={self.index_dir!r})"

    @classmethod
    def resolve(cls, data_dir: str | Path | None = None, index_dir: str | Path | None = None) -> Locations:
        data = resolve_data_dir(data_dir)
        return cls(data_dir=data, index_dir=resolve_index_dir(data, index_dir))

    @property
    def access_log(self) -> Path:
        # Reinforcement history is neither source of truth (it would churn git diffs)
        # nor disposable index (a rebuild must not forget it): it lives in the state dir.
        digest = sha1(str(self.data_dir.resolve()).encode()).hexdigest()[:12]
        return state_dir() / "access" / f"{self.data_dir.name or 'root'}-{digest}.jsonl"

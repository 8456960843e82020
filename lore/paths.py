"""Where lore keeps things: the data dir (truth), the index dir and the cache dir (derived), the state dir.

Every directory comes from the settings the caller passes (``Settings.from_env()``, read
once by the surface): nothing here reads the environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Not `from typing import ...`: typing costs ~3 ms, and the warm `lore search` client imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Directories(Protocol):
        """The settings that place lore's directories: ``lore.settings.Settings`` has them all."""

        @property
        def data_dir(self) -> str | None: ...
        @property
        def index_dir(self) -> str | None: ...
        @property
        def cache_dir(self) -> str | None: ...
        @property
        def state_dir(self) -> str | None: ...
        @property
        def xdg_data_home(self) -> str | None: ...
        @property
        def xdg_cache_home(self) -> str | None: ...
        @property
        def xdg_state_home(self) -> str | None: ...
        @property
        def embed_model(self) -> str | None: ...

try:  # the same SHA-1 without hashlib, whose OpenSSL binding cost the hook ~3 ms to import
    from _sha1 import sha1
except ImportError:  # pragma: no cover - a Python built without its own SHA-1
    from hashlib import sha1

APP_NAME = "lore"


def _user_dir(configured: str | None, xdg_home: str | None, xdg_default: tuple[str, ...], platform: str) -> Path:
    """A per-user directory: lore's own variable, else the XDG one (Linux), else the platform's (platformdirs)."""
    if configured:
        return Path(configured).expanduser()
    if sys.platform.startswith("linux"):
        return Path(xdg_home or os.path.join(os.path.expanduser("~"), *xdg_default)) / APP_NAME
    import platformdirs

    return Path(getattr(platformdirs, platform)(APP_NAME, appauthor=False))


def cache_dir(settings: Directories) -> Path:
    """Per-user cache dir (indexes, hook log, helper sockets): ``LORE_CACHE_DIR``, else ``~/.cache/lore``."""
    return _user_dir(settings.cache_dir, settings.xdg_cache_home, (".cache",), "user_cache_dir")


def write_check_dir(settings: Directories) -> Path:
    """Where the write check keeps its pool of decisions between processes (``lore.curate.pool``)."""
    return cache_dir(settings) / "write-check"


def state_dir(settings: Directories) -> Path:
    """Per-user state dir (access history for reinforcement, hook opt-outs): ``LORE_STATE_DIR``, else ``~/.local/state/lore``."""
    return _user_dir(settings.state_dir, settings.xdg_state_home, (".local", "state"), "user_state_dir")


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


def resolve_data_dir(option: str | Path | None, settings: Directories) -> Path:
    """``--data-dir``, else ``LORE_DATA_DIR``, else the platform data dir (``~/.local/share/lore``: the bash Lore's)."""
    raw = option or settings.data_dir
    path = Path(raw).expanduser() if raw else _user_dir(None, settings.xdg_data_home, (".local", "share"), "user_data_dir")
    return path.absolute()


def resolve_index_dir(data_dir: Path, option: str | Path | None, settings: Directories) -> Path:
    """``--index-dir``, else ``LORE_INDEX_DIR``, else a per-data-dir folder in the cache dir."""
    raw = option or settings.index_dir
    if raw:
        return Path(raw).expanduser().absolute()
    digest = sha1(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return cache_dir(settings) / "indexes" / f"{data_dir.name or 'root'}-{digest}"


class Locations:
    """A data dir and what is derived from it: its index dir, the model its index embeds with, the state dir.

    A plain class: dataclasses would cost the hook ~10 ms. ``embed_model`` is
    ``Settings.embed_model`` (None: the bundled model), carried here so that what builds,
    refreshes and reads an index gets it with the index dir.
    """

    __slots__ = ("data_dir", "embed_model", "index_dir", "state_dir")

    def __init__(self, data_dir: Path, index_dir: Path, state_dir: Path, embed_model: str | None = None) -> None:
        self.data_dir = data_dir
        self.index_dir = index_dir
        self.state_dir = state_dir
        self.embed_model = embed_model

    def _key(self) -> tuple[Path, Path, Path, str | None]:
        return self.data_dir, self.index_dir, self.state_dir, self.embed_model

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Locations) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Locations(data_dir={self.data_dir!r}, index_dir={self.index_dir!r}, state_dir={self.state_dir!r}, "
                f"embed_model={self.embed_model!r})")  # fmt: skip

    @classmethod
    def resolve(cls, data_dir: str | Path | None, index_dir: str | Path | None, settings: Directories) -> Locations:
        """The options given (``--data-dir``, ``--index-dir``), else the settings', else the defaults."""
        data = resolve_data_dir(data_dir, settings)
        return cls(data, resolve_index_dir(data, index_dir, settings), state_dir(settings), settings.embed_model)

    @property
    def access_log(self) -> Path:
        # Reinforcement history is neither source of truth (it would churn git diffs)
        # nor disposable index (a rebuild must not forget it): it lives in the state dir.
        digest = sha1(str(self.data_dir.resolve()).encode()).hexdigest()[:12]
        return self.state_dir / "access" / f"{self.data_dir.name or 'root'}-{digest}.jsonl"

"""The agent surfaces' failure log (``hook.log`` in the cache dir): the hooks and the helper never raise at their caller."""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# The cache dir, once the entry point has read the settings (``use_cache_dir``).
_cache: list[Path] = []


def use_cache_dir(cache: Path) -> None:
    """Log into ``cache`` (the cache dir of the entry point's settings) from now on."""
    _cache[:] = [cache]


def _cache_dir() -> Path:
    """The cache dir: the entry point's, else placed by the two variables alone, read here and not through
    ``Settings.from_env``: a bad value of another setting is itself what gets logged."""
    if _cache:
        return _cache[0]
    import os

    from lore.paths import cache_dir

    class CacheOnly:  # lore.paths.Directories, of which cache_dir reads these two
        cache_dir = os.environ.get("LORE_CACHE_DIR", "").strip() or None
        xdg_cache_home = os.environ.get("XDG_CACHE_HOME", "").strip() or None

    return cache_dir(CacheOnly())  # type: ignore[arg-type]


def log_failure(kind: str, message: str) -> None:
    """One line per failure in the cache dir; never raises."""
    try:
        path = _cache_dir() / "hook.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} {kind}: {' '.join(str(message).split())[:500]}\n"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
    except Exception:
        pass

"""The agent surfaces' failure log (``hook.log`` in the cache dir): the hooks and the helper never raise at their caller."""

from __future__ import annotations

import time


def log_failure(kind: str, message: str) -> None:
    """One line per failure in the cache dir; never raises."""
    try:
        from lore.paths import cache_dir

        path = cache_dir() / "hook.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} {kind}: {' '.join(str(message).split())[:500]}\n"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
    except Exception:
        pass

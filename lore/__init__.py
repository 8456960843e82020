"""lore: a memory that compounds, for software engineers and their coding agents.

The public API is ``Lore`` (docs/api.md), its record and response types and its
errors. They resolve on first use, so ``import lore`` stays as cheap as the prompt
hook and ``lore --version`` need it to be.
"""

from __future__ import annotations

from lore.version import __version__

# Not `from typing import ...`: typing costs ~3 ms to import and `import lore` is on the path of
# every hook and every terminal command the warm helper answers (mypy reads this name as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from lore.api import Lore, SearchHit, SearchResponse
    from lore.context import ContextBlock, ContextItem
    from lore.errors import (
        DataError,
        DuplicateError,
        IndexUnavailableError,
        LockTimeoutError,
        LoreError,
        LoreWarning,
        ModelError,
        NotFoundError,
        UnsafeRewriteError,
        UsageError,
    )
    from lore.store.graphfile import Edge
    from lore.store.records import Record

__all__ = [
    "ContextBlock",
    "ContextItem",
    "DataError",
    "DuplicateError",
    "Edge",
    "IndexUnavailableError",
    "LockTimeoutError",
    "Lore",
    "LoreError",
    "LoreWarning",
    "ModelError",
    "NotFoundError",
    "Record",
    "SearchHit",
    "SearchResponse",
    "UnsafeRewriteError",
    "UsageError",
    "__version__",
]

_HOMES = {
    "Lore": "lore.api", "SearchHit": "lore.api", "SearchResponse": "lore.api",
    "ContextBlock": "lore.context", "ContextItem": "lore.context",
    "Record": "lore.store.records", "Edge": "lore.store.store",
    **dict.fromkeys(("DataError", "DuplicateError", "IndexUnavailableError", "LockTimeoutError", "LoreError",
                     "LoreWarning", "ModelError", "NotFoundError", "UnsafeRewriteError", "UsageError"), "lore.errors"),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        # AttributeError (not ImportError) lets `from lore import capture` import the submodule.
        raise AttributeError(f"module 'lore' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)

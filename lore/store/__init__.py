"""The flat-file store: load, validate and write the source-of-truth files.

Re-exports resolve lazily, so importing a light submodule (``lore.store.layout``,
``lore.store.fileio``) from the hook path does not load the whole store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lore.store.records import KINDS, Record, normalise_kind
    from lore.store.store import Snapshot, Store

__all__ = ["KINDS", "Record", "Snapshot", "Store", "normalise_kind"]


def __getattr__(name: str) -> Any:
    if name in ("KINDS", "Record", "normalise_kind"):
        from lore.store import records

        return getattr(records, name)
    if name in ("Snapshot", "Store"):
        from lore.store import store

        return getattr(store, name)
    raise AttributeError(name)

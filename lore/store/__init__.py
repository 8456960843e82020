"""The flat-file store: load, validate and write the source-of-truth files."""

from lore.store.records import KINDS, Record, normalise_kind
from lore.store.store import Snapshot, Store

__all__ = ["KINDS", "Record", "Snapshot", "Store", "normalise_kind"]

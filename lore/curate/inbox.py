"""The review inbox: captured records wait as ``status: candidate`` until accepted or rejected.

A rejected candidate's text is remembered (``inbox/data/rejected.jsonl``, one line per
rejection, append-only) so capture never proposes the same text again: see
``rejected_before``. The text compared is normalised (lowercase, whitespace collapsed)
and only its sha256 is kept, never the text itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from lore.store.fileio import append_line, data_lock
from lore.store.readers import read_jsonl

if TYPE_CHECKING:
    from lore.store.store import Store

# Not a record file: the store's loader never reads it. Lines carry no "id" key, so
# `lore sync`'s merge driver (*.jsonl merge=lore) keeps both clones' lines and
# deduplicates identical ones instead of treating them as records.
REJECTED = Path("inbox/data/rejected.jsonl")


def normalise_text(text: str) -> str:
    """Lowercase with every run of whitespace collapsed to one space (ends trimmed)."""
    return " ".join(text.lower().split())


def text_hash(text: str) -> str:
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def candidate_text(kind: str, raw: dict[str, Any]) -> str:
    """The text of a record that rejection remembers: its title, body and extras as search sees them.

    Capture should call ``rejected_before(store, kind, candidate_text(kind, raw))`` for a
    proposed record's raw mapping, so a rejected record and its re-proposal hash alike.
    """
    from lore.store.records import Record

    return Record(kind=kind, id=str(raw.get("id") or ""), raw=raw).content


def rejected_hashes(store: Store) -> set[tuple[str, str]]:
    """Every remembered ``(kind, hash)``; malformed lines are skipped (never fatal)."""
    read = read_jsonl(store.path(REJECTED))
    found: set[tuple[str, str]] = set()
    for _, item in read.items:
        digest, kind = item.get("hash"), item.get("kind")
        if isinstance(digest, str) and isinstance(kind, str):
            found.add((kind, digest))
    return found


def rejected_before(store: Store, kind: str, text: str) -> bool:
    """True when a candidate of ``kind`` with the same normalised text was rejected before."""
    if not text.strip():
        return False
    return (kind, text_hash(text)) in rejected_hashes(store)


def remember_rejection(store: Store, kind: str, text: str, record_id: str) -> None:
    """Append one rejection line (takes the data lock; re-entrant inside a Store write)."""
    entry = {"hash": text_hash(text), "kind": kind, "rejected_at": store.now_iso(), "record_id": record_id}
    with data_lock(store.data_dir):
        append_line(store.path(REJECTED), orjson.dumps(entry))

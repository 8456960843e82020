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
    from lore.store.records import Record
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


# -- auto-accept -------------------------------------------------------------------------

# A kind's confidence once accepted (what `lore remember`, `lore learn`, ... store by default);
# `lore inbox accept` raises a candidate's lower confidence to this, never lowers it.
NORMAL_CONFIDENCE = {
    "decision": 0.8, "pattern": 0.5, "anti_pattern": 0.8, "lesson": 0.8,
    "handoff": 0.8, "failure": 0.8, "observation": 0.8,
}  # fmt: skip


def auto_accept_kinds(value: str) -> frozenset[str]:
    """The kinds ``LORE_AUTO_ACCEPT`` stores active directly (comma-separated kinds, or ``all``).

    Capture consults ``capture_status(kind)`` for every record it is about to store: an
    auto-accepted kind is stored ``active`` at its normal confidence and reaches the hooks
    at once; any other kind waits in ``lore inbox`` as a ``candidate``.
    """
    from lore import settings

    return settings.auto_accept_kinds(value)


def capture_status(kind: str, value: str) -> str:
    """``active`` when ``kind`` is auto-accepted (``LORE_AUTO_ACCEPT``), else ``candidate``."""
    return "active" if kind in auto_accept_kinds(value) else "candidate"


def confidence_field(kind: str, raw: dict[str, Any]) -> str:
    return "rule_confidence" if kind == "lesson" and ("rule_confidence" in raw or "confidence" not in raw) else "confidence"


# -- listing and review --------------------------------------------------------------------


def list_candidates(store: Store, kinds: frozenset[str] | None = None) -> list[Record]:
    """Every candidate (of ``kinds``), oldest first: the order they were captured in."""
    from datetime import UTC, datetime

    epoch = datetime.min.replace(tzinfo=UTC)
    found = [r for r in store.load().records.values() if r.status == "candidate" and (kinds is None or r.kind in kinds)]
    return sorted(found, key=lambda r: (r.timestamp or epoch, r.id))


def provenance_line(record: Record) -> str:
    """``session S, transcript T lines A-B (method)`` from a captured record's provenance, or ``""``."""
    provenance = record.raw.get("provenance")
    if not isinstance(provenance, dict):
        return ""
    parts: list[str] = []
    if provenance.get("session_id"):
        parts.append(f"session {provenance['session_id']}")
    transcript = provenance.get("transcript")
    if transcript:
        where = Path(str(transcript)).name
        lines = provenance.get("lines")
        if isinstance(lines, list | tuple) and len(lines) == 2:
            where += f":{lines[0]}-{lines[1]}"
        elif lines not in (None, ""):
            where += f":{lines}"
        parts.append(where)
    if provenance.get("method"):
        parts.append(f"({provenance['method']})")
    return " ".join(parts)


def _resolve(store: Store, ids: list[str], *, all_candidates: bool) -> list[Record]:
    from lore.errors import UsageError

    snapshot = store.load()
    if all_candidates:
        if ids:
            raise UsageError("give record ids or --all, not both")
        return list_candidates(store)
    if not ids:
        raise UsageError("no record ids given", hint="list candidates with `lore inbox`, or add --all")
    chosen: list[Record] = []
    for wanted in ids:
        record = snapshot.get(wanted)
        if record.status != "candidate":
            raise UsageError(f"{record.id} is {record.status}, not a candidate",
                             hint="only records waiting in `lore inbox` can be accepted or rejected")  # fmt: skip
        if record not in chosen:
            chosen.append(record)
    return chosen


def accept(store: Store, ids: list[str], *, all_candidates: bool = False) -> list[Record]:
    """Make candidates active, their confidence raised to their kind's normal default (audited ``accept``)."""
    store.require()
    accepted: list[Record] = []
    with data_lock(store.data_dir):
        now = store.now_iso()
        for record in _resolve(store, ids, all_candidates=all_candidates):
            def mutate(raw: dict[str, Any], kind: str = record.kind) -> None:
                raw["status"] = "active"
                raw["status_changed_at"] = now
                key = confidence_field(kind, raw)
                current = raw.get(key)
                floor = NORMAL_CONFIDENCE.get(kind, 0.8)
                raw[key] = max(float(current), floor) if isinstance(current, int | float) and not isinstance(current, bool) else floor

            accepted.append(store.update(record.id, mutate, op="accept"))
    return accepted


def reject(store: Store, ids: list[str], *, all_candidates: bool = False) -> list[Record]:
    """Delete candidates (and their edges) as `lore delete` does, audited ``reject``; remember their text."""
    store.require()
    rejected: list[Record] = []
    with data_lock(store.data_dir):
        for record in _resolve(store, ids, all_candidates=all_candidates):
            removed = store.delete(record.id, op="reject")
            remember_rejection(store, removed.kind, candidate_text(removed.kind, removed.raw), removed.id)
            rejected.append(removed)
    return rejected


# Fields `lore inbox edit` never changes: identity, review state and where it came from.
FIXED_FIELDS = frozenset({"id", "status", "provenance", "schema_version", "kind", "lesson_pattern_id"})


def edit(store: Store, record_id: str, changes: dict[str, Any]) -> Record:
    """Set fields of a candidate (text fields scrubbed); the record is refused if it no longer validates."""
    from lore.capture import Scrubber, parse_tags
    from lore.errors import UsageError
    from lore.store.validate import check_record, check_text

    if not changes:
        raise UsageError("nothing to change", hint="give --field value pairs, e.g. --rationale 'because ...'")
    fixed = sorted(set(changes) & FIXED_FIELDS)
    if fixed:
        raise UsageError(f"{fixed[0]} cannot be edited", hint="accept or reject changes the status")
    scrub = Scrubber()
    cleaned: dict[str, Any] = {}
    for name, value in changes.items():
        if name == "tags" and isinstance(value, str):
            cleaned[name] = parse_tags([value])
        elif isinstance(value, str):
            cleaned[name] = scrub(check_text(name, value, required=False))
        else:
            cleaned[name] = value
    store.require()
    with data_lock(store.data_dir):
        record = _resolve(store, [record_id], all_candidates=False)[0]
        merged = {**record.raw, **cleaned}
        problems = check_record(record.kind, merged)
        if problems:
            name, message = problems[0]
            raise UsageError(f"{record.id}: {name}: {message}")

        def mutate(raw: dict[str, Any]) -> None:
            raw.update(cleaned)

        return store.update(record.id, mutate, op="update", detail={"fields": sorted(cleaned)})

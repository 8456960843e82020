"""Hash-chained audit log of every write (``audit/log.jsonl``).

Each entry's ``hash`` is sha256 over its canonical JSON (without ``hash``),
which includes ``prev_hash``: editing, removing or reordering any entry breaks
the chain from that entry on, and ``verify`` names the first bad ``seq``.
"""

from __future__ import annotations

import getpass
import hashlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from lore.store.fileio import append_line

AUDIT_PATH = Path("audit") / "log.jsonl"
GENESIS = "0" * 64
OPS = ("retain", "retract", "delete", "link", "unlink", "supersede", "merge", "lesson", "migrate", "validate",
       "outcome", "prune", "restore", "reflect", "update", "sync", "import",
       "accept", "reject", "distill")


def default_actor(channel: str = "cli") -> str:
    try:
        user = getpass.getuser()
    except Exception:  # getuser raises various errors without a passwd entry
        user = "unknown"
    return f"{channel}:{user}@{socket.gethostname()}"


def content_sha256(record: dict[str, Any] | None) -> str:
    if record is None:
        return hashlib.sha256(b"").hexdigest()
    return hashlib.sha256(orjson.dumps(record, option=orjson.OPT_SORT_KEYS)).hexdigest()


def entry_hash(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _last_entry(path: Path) -> dict[str, Any] | None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    with path.open("rb") as handle:
        chunk = 8192
        while True:
            start = max(0, size - chunk)
            handle.seek(start)
            data = handle.read(size - start)
            lines = [line for line in data.split(b"\n") if line.strip()]
            if len(lines) >= 2 or start == 0:
                break
            chunk *= 4
    for line in reversed(lines):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def append(
    data_dir: Path,
    *,
    op: str,
    record_id: str,
    project: str | None,
    actor: str,
    record: dict[str, Any] | None,
    timestamp: str,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Append one chained entry (the caller holds the data lock)."""
    return append_many(data_dir, [AuditEvent(op, record_id, project, record, detail)], actor=actor,
                       timestamp=timestamp)[0]  # fmt: skip


@dataclass(frozen=True)
class AuditEvent:
    """One write to audit (``append_many`` chains a list of them)."""

    op: str
    record_id: str
    project: str | None
    record: dict[str, Any] | None
    detail: dict[str, Any] | None = None


def append_many(data_dir: Path, events: list[AuditEvent], *, actor: str, timestamp: str) -> list[dict[str, Any]]:
    """Append chained entries for ``events`` with one write and one fsync (the caller holds the data lock).

    The chain is exactly what one ``append`` per event would write: each entry's
    ``prev_hash`` is the previous entry's ``hash`` and ``seq`` counts on.
    """
    if not events:
        return []
    path = data_dir / AUDIT_PATH
    last = _last_entry(path)
    seq = int(last.get("seq", 0)) + 1 if last else 1
    prev_hash = str(last.get("hash", GENESIS)) if last else GENESIS
    entries: list[dict[str, Any]] = []
    for event in events:
        entry: dict[str, Any] = {
            "seq": seq,
            "timestamp": timestamp,
            "op": event.op,
            "id": event.record_id,
            "project": event.project,
            "actor": actor,
            "content_sha256": content_sha256(event.record),
        }
        if event.detail:
            entry["detail"] = event.detail
        entry["prev_hash"] = prev_hash
        entry["hash"] = entry_hash(entry)
        entries.append(entry)
        seq += 1
        prev_hash = entry["hash"]
    append_line(path, b"\n".join(orjson.dumps(entry) for entry in entries))
    return entries


@dataclass(frozen=True)
class AuditProblem:
    seq: int | None
    line: int
    message: str


def iter_entries(data_dir: Path) -> Iterator[tuple[int, dict[str, Any] | None, bytes]]:
    path = data_dir / AUDIT_PATH
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            yield number, None, line
            continue
        yield number, value if isinstance(value, dict) else None, line


def verify(data_dir: Path) -> tuple[int, AuditProblem | None]:
    """Check the whole chain; return (entries checked, first problem or None)."""
    expected_prev = GENESIS
    expected_seq = 1
    count = 0
    for number, entry, _ in iter_entries(data_dir):
        if entry is None:
            return count, AuditProblem(None, number, "line is not a JSON object")
        seq = entry.get("seq")
        if seq != expected_seq:
            return count, AuditProblem(
                seq if isinstance(seq, int) else None, number,
                f"expected seq {expected_seq}, found {seq!r} (an entry was removed, inserted or reordered)",
            )  # fmt: skip
        if entry.get("prev_hash") != expected_prev:
            return count, AuditProblem(seq, number, "prev_hash does not match the previous entry's hash")
        if entry.get("hash") != entry_hash(entry):
            return count, AuditProblem(seq, number, "hash does not match the entry's content (it was edited)")
        expected_prev = str(entry["hash"])
        expected_seq += 1
        count += 1
    return count, None


def history(data_dir: Path, record_id: str | None = None) -> list[dict[str, Any]]:
    """Every readable entry, or those about ``record_id``: as the subject or as an edge's target."""
    return [
        entry
        for _, entry, _ in iter_entries(data_dir)
        if entry is not None and (record_id is None or record_id in (entry.get("id"), _edge_target(entry)))
    ]


def _edge_target(entry: dict[str, Any]) -> Any:
    detail = entry.get("detail")
    return detail.get("to") if isinstance(detail, dict) else None


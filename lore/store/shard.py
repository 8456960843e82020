"""`lore migrate --shard`: split the single JSONL record files into month shards, on request only.

A sync commits whole files, so its cost in git follows the size of the files it touches
(docs/sync.md). Splitting ``journal/data/decisions.jsonl`` into
``journal/data/decisions/2026-03.jsonl`` (the month each record was created in) makes a sync
rewrite a month's file instead of the whole store. The same for failures and observations
(``lore.store.layout.SHARDABLE``); signals.jsonl (the bash Lore's) stays as it is.

Nothing is lost, nothing is rewritten: every line moves byte for byte, every line of one id
goes to one shard (the month of the id's last line, which a load reads as the record), in the
order it had, and a load afterwards returns the same records. A file that does not parse
completely is refused before anything is written. The single file is copied to
``backups/<UTC timestamp>/`` first, each shard is written atomically, and the single file is
emptied last (not deleted: a clone that still appends to it merges as before); a run cut off
half-way is finished by the next one, which skips the lines a shard already holds. A second
run finds nothing to move.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from lore.store import audit
from lore.store.fileio import atomic_write, data_lock
from lore.store.layout import SHARDABLE, shard_dir, shard_name
from lore.store.readers import read_jsonl
from lore.store.records import Record, parse_time

if TYPE_CHECKING:
    from lore.store.store import Store



@dataclass
class ShardedFile:
    """One single file split: where its lines went."""

    path: Path  # relative to the data dir
    kind: str
    records: int = 0  # lines moved (records and versions of records)
    shards: dict[str, int] = field(default_factory=dict)  # shard file (relative) -> lines moved into it
    already_held: int = 0  # lines a shard already held (a run cut off half-way): not written twice


@dataclass
class ShardReport:
    files: list[ShardedFile] = field(default_factory=list)
    created_dirs: list[Path] = field(default_factory=list)
    backup_dir: Path | None = None
    dry_run: bool = False

    @property
    def moved(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def changed(self) -> bool:
        return bool(self.files or self.created_dirs)


def _line_shards(lines: list[bytes]) -> list[str]:
    """The shard each line goes to: every line of one id to the month of its last line's creation time."""
    values = []
    last_of: dict[str, int] = {}
    for index, line in enumerate(lines):
        value = orjson.loads(line)
        values.append(value)
        record_id = value.get("id") if isinstance(value, dict) else None
        if isinstance(record_id, str):
            last_of[record_id] = index
    targets = []
    for value in values:
        record_id = value.get("id") if isinstance(value, dict) else None
        owner = values[last_of[record_id]] if isinstance(record_id, str) else value
        moment = parse_time(owner.get("timestamp") or owner.get("created_at")) if isinstance(owner, dict) else None
        targets.append(shard_name(moment))
    return targets


def split(store: Store, *, dry_run: bool = False) -> ShardReport:
    """Shard every single JSONL file lore writes; with ``dry_run`` only say what would move."""
    store.require()
    report = ShardReport(dry_run=dry_run)
    with data_lock(store.data_dir):
        plans: list[tuple[ShardedFile, dict[Path, list[bytes]], list[tuple[str, dict[str, Any]]]]] = []
        for kind, single in SHARDABLE.items():
            directory = store.path(shard_dir(single))
            if not directory.is_dir():
                report.created_dirs.append(shard_dir(single))
            path = store.path(single)
            if not path.is_file() or not path.read_bytes().strip():
                continue
            read = read_jsonl(path)
            store.refuse_if_incomplete(read)  # names the file and the line; nothing is written
            lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
            moved = ShardedFile(single, kind)
            by_shard: dict[Path, list[bytes]] = {}
            events: list[tuple[str, dict[str, Any]]] = []
            for line, name in zip(lines, _line_shards(lines), strict=True):
                by_shard.setdefault(directory / name, []).append(line)
            for target, new_lines in list(by_shard.items()):
                held = set(target.read_bytes().split(b"\n")) if target.is_file() else set()
                kept = [line for line in new_lines if line not in held]
                moved.already_held += len(new_lines) - len(kept)
                by_shard[target] = kept
                relative = str(target.relative_to(store.data_dir))
                if kept:
                    moved.shards[relative] = len(kept)
                for line in kept:
                    value = orjson.loads(line)
                    if isinstance(value, dict):
                        events.append((relative, value))
            moved.records = sum(moved.shards.values())
            report.files.append(moved)
            plans.append((moved, by_shard, events))
        if dry_run or not report.changed:
            return report
        for folder in report.created_dirs:
            store.path(folder).mkdir(parents=True, exist_ok=True)
        if plans:
            report.backup_dir = store.new_backup_dir()
        audit_events: list[audit.AuditEvent] = []
        for moved, by_shard, events in plans:
            assert report.backup_dir is not None
            backup = report.backup_dir / moved.path
            backup.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(store.path(moved.path), backup)
            for target, new_lines in by_shard.items():
                if not new_lines:
                    continue
                # The single file is read before its shards: its lines go first, so a later line still wins.
                existing = target.read_bytes() if target.is_file() else b""
                body = b"\n".join(new_lines) + b"\n"
                if existing.strip():
                    body += existing if existing.endswith(b"\n") else existing + b"\n"
                atomic_write(target, body)
            for relative, value in events:
                record_id = value.get("id")
                if isinstance(record_id, str) and record_id:
                    project = Record(moved.kind, record_id, value).project
                    audit_events.append(audit.AuditEvent("migrate", record_id, project, value, {
                        "file": str(moved.path), "shard": relative,
                        "backup": str(report.backup_dir.relative_to(store.data_dir) / moved.path)}))
            atomic_write(store.path(moved.path), b"")  # last: every line is in a shard by now
        if audit_events:
            store.record_audit_many(audit_events)
    return report



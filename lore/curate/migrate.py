"""Upgrade records written without ``schema_version`` (the original format, version 0) to version 1.

Reading never needs this: every reader accepts version 0. Migrating only *adds*: it sets
``schema_version: 1`` and the fields the current schema expects with the value a reader
already assumes when the field is missing (so nothing reads differently afterwards). It
never drops, renames or overwrites a field, and a record that already has a
``schema_version`` is left byte for byte as it is.

Before a file is rewritten it is copied to ``<data-dir>/backups/<UTC timestamp>/<relative path>``
(one folder per run). A file that did not parse completely is refused before anything is
written. Each migrated record gets one audit entry with op ``migrate``.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lore.store import Store
from lore.store.fileio import atomic_write, data_lock
from lore.store.layout import jsonl_files
from lore.store.readers import FileRead, read_json, read_jsonl, read_patterns_yaml
from lore.store.records import (
    DEFAULT_CONFIDENCE,
    DEFAULT_IMPORTANCE,
    SCHEMA_VERSION,
    record_kind_for_pattern_item,
)
from lore.store.store import DECISIONS, FAILURES, OBSERVATIONS, PATTERNS, SESSIONS, SIGNALS

# Fields added when missing, per kind: each value is what a reader assumes for a missing field.
DEFAULTS: dict[str, dict[str, Any]] = {
    "decision": {
        "alternatives": [], "outcome": "pending", "status": "active", "superseded_by": None,
        "retracted_reason": None, "status_changed_at": None, "tags": [], "project": None,
        "importance": DEFAULT_IMPORTANCE, "confidence": DEFAULT_CONFIDENCE,
    },
    "pattern": {"confidence": DEFAULT_CONFIDENCE, "validations": 0, "examples": [], "tags": [], "project": None},
    "lesson": {"validations": 0, "tags": ["lesson_learned"], "project": None},
    "anti_pattern": {"tags": [], "project": None},
    "failure": {"project": None},
    "observation": {"tags": [], "project": None},
    "handoff": {},
}  # fmt: skip


def upgrade(kind: str, raw: dict[str, Any]) -> list[str]:
    """Add what version 1 expects to ``raw`` in place; return the names of the fields added."""
    if "schema_version" in raw:
        return []
    added: list[str] = []

    def put(name: str, value: Any) -> None:
        if name not in raw:
            raw[name] = value
            added.append(name)

    for name, value in DEFAULTS.get(kind, {}).items():
        put(name, orjson.loads(orjson.dumps(value)))  # a fresh copy of list defaults
    if kind == "lesson":
        put("kind", "lesson")
        # A lesson read without rule_confidence uses its confidence (or the default).
        confidence = raw.get("confidence")
        usable = isinstance(confidence, int | float) and not isinstance(confidence, bool)
        put("rule_confidence", confidence if usable else DEFAULT_CONFIDENCE)
        if isinstance(raw.get("tags"), list) and "lesson_learned" not in raw["tags"] and "tags" not in added:
            raw["tags"].append("lesson_learned")
            added.append("tags[lesson_learned]")
        if isinstance(raw.get("error_pattern"), str) and "lesson_pattern_id" not in raw:
            scope = raw.get("scope") if isinstance(raw.get("scope"), str) else ""
            put("lesson_pattern_id", hashlib.sha256((raw["error_pattern"] + scope).encode()).hexdigest()[:16])
    raw["schema_version"] = SCHEMA_VERSION
    added.append("schema_version")
    return added


@dataclass
class RecordChange:
    record_id: str
    kind: str
    added: list[str]
    project: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class FileChange:
    path: Path  # relative to the data dir
    records: list[RecordChange] = field(default_factory=list)
    new_bytes: bytes = b""


@dataclass
class MigrationReport:
    files: list[FileChange] = field(default_factory=list)
    backup_dir: Path | None = None
    dry_run: bool = False

    @property
    def record_count(self) -> int:
        return sum(len(f.records) for f in self.files)


def _project(raw: dict[str, Any]) -> str | None:
    project = raw.get("project")
    if not project and isinstance(raw.get("context"), dict):
        project = raw["context"].get("project")
    return str(project) if project else None


def _change(kind: str, raw: dict[str, Any], fallback_id: str) -> RecordChange | None:
    added = upgrade(kind, raw)
    if not added:
        return None
    return RecordChange(str(raw.get("id") or fallback_id), kind, added, _project(raw), raw)


def _plan_jsonl(store: Store, relative: Path, kind: str) -> FileChange | None:
    path = store.path(relative)
    if not path.exists():
        return None
    store.refuse_if_incomplete(read_jsonl(path))
    lines = path.read_bytes().split(b"\n")
    change = FileChange(relative)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        raw = orjson.loads(line)
        found = _change(kind, raw, f"line {index + 1}")
        if found is not None:
            change.records.append(found)
            lines[index] = orjson.dumps(raw)
    change.new_bytes = b"\n".join(lines)
    return change if change.records else None


def _plan_patterns(store: Store) -> FileChange | None:
    path = store.path(PATTERNS)
    if not path.exists():
        return None
    read = read_patterns_yaml(path)
    store.refuse_if_incomplete(read)
    change = FileChange(PATTERNS)
    for _, item in read.items:
        section = item.pop("__section__", "patterns")
        found = _change(record_kind_for_pattern_item(item, section), item, "?")
        if found is not None:
            change.records.append(found)
    return change if change.records else None


def _plan_session(store: Store, path: Path) -> FileChange | None:
    read: FileRead = read_json(path)
    store.refuse_if_incomplete(read)
    if not read.items:
        return None
    raw = read.items[0][1]
    found = _change("handoff", raw, path.stem)
    if found is None:
        return None
    relative = path.relative_to(store.data_dir)
    return FileChange(relative, [found], orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b"\n")


def plan(store: Store) -> list[FileChange]:
    """What a migration would change, file by file; refuses (raises) on a file that did not parse."""
    def every(single: Path, kind: str) -> list[FileChange | None]:  # the single file and its month shards
        return [_plan_jsonl(store, path.relative_to(store.data_dir), kind) for path in jsonl_files(store.data_dir, single)]

    changes: list[FileChange | None] = [
        *every(DECISIONS, "decision"),
        _plan_patterns(store),
        *every(FAILURES, "failure"),
        *every(OBSERVATIONS, "observation"),
        *every(SIGNALS, "observation"),
    ]
    sessions = store.path(SESSIONS)
    if sessions.is_dir():
        changes.extend(_plan_session(store, p) for p in sorted(sessions.glob("*.json")))
    return [c for c in changes if c is not None]


def migrate(store: Store, *, dry_run: bool = False) -> MigrationReport:
    """Upgrade every version-0 record; with ``dry_run`` only report what would change."""
    store.require()
    report = MigrationReport(dry_run=dry_run)
    with data_lock(store.data_dir):
        report.files = plan(store)
        if dry_run or not report.files:
            return report
        report.backup_dir = store.new_backup_dir()
        for change in report.files:
            source = store.path(change.path)
            target = report.backup_dir / change.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        for change in report.files:
            if change.path == PATTERNS:

                def edit(document: dict[str, Any]) -> None:
                    for section in ("patterns", "anti_patterns"):
                        for item in document.get(section) or []:
                            if isinstance(item, dict):
                                upgrade(record_kind_for_pattern_item(item, section), item)

                store.rewrite_patterns(edit)
            else:
                atomic_write(store.path(change.path), change.new_bytes)
            for record in change.records:
                store.record_audit("migrate", record.record_id, record.project, record.raw,
                             {"file": str(change.path), "added": record.added,
                              "backup": str(report.backup_dir.relative_to(store.data_dir) / change.path)})  # fmt: skip
    return report

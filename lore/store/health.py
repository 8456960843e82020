"""What a data dir holds and what is wrong with it: the figures of `lore stats` and the checks of `lore doctor`.

Both the CLI and `lore ui` call these, so a finding reads the same in a
terminal and in a browser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lore.store import audit
from lore.store.layout import GRAPH
from lore.store.records import KINDS, RELATIONS

if TYPE_CHECKING:
    from lore.store.store import Snapshot, Store


@dataclass(frozen=True)
class Problem:
    kind: str  # malformed, duplicate-id, dangling-edge, unknown-relation, dangling-reference, audit-chain
    where: str  # file[:line]
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "where": self.where, "message": self.message}


@dataclass
class Diagnosis:
    records: int
    audit_entries: int
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def summary(store: Store, snapshot: Snapshot) -> dict[str, Any]:
    """Records by type, status and project, edges and load warnings (the `lore stats --json` payload)."""
    by_kind: dict[str, int] = {}
    by_status: dict[str, int] = {}
    by_project: dict[str, int] = {}
    for record in snapshot.records.values():
        by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
        by_status[record.status] = by_status.get(record.status, 0) + 1
        by_project[record.project or "-"] = by_project.get(record.project or "-", 0) + 1
    return {
        "data_dir": str(store.data_dir),
        "records": len(snapshot.records),
        "by_type": {k: by_kind[k] for k in KINDS if k in by_kind},
        "by_status": dict(sorted(by_status.items())),
        "by_project": dict(sorted(by_project.items(), key=lambda kv: (-kv[1], kv[0]))),
        "edges": len(snapshot.edges),
        "warnings": len(snapshot.warnings),
    }


def diagnose(store: Store, snapshot: Snapshot) -> Diagnosis:
    """Malformed lines, duplicate ids, dangling edges and references, unknown relations, a broken audit chain."""
    problems: list[Problem] = []
    for warning in snapshot.warnings:
        where = f"{warning.path}" + (f":{warning.line}" if warning.line else "")
        message = (f"field '{warning.field}': " if warning.field else "") + warning.message
        problems.append(Problem("malformed", where, message))
    for record_id, places in snapshot.duplicate_ids.items():
        for path, line in places[:-1]:
            problems.append(Problem("duplicate-id", f"{path}:{line}", f"{record_id} also appears later; the last version wins"))
    graph_path = store.path(GRAPH)
    for edge in snapshot.edges:
        where = f"{graph_path}:{edge.line}" if edge.line else str(graph_path)
        for end in (edge.source, edge.target):
            if end not in snapshot.records:
                problems.append(Problem("dangling-edge", where, f"{edge.source} -{edge.relation}-> {edge.target}: {end} does not exist"))
        if edge.relation not in RELATIONS:
            problems.append(Problem("unknown-relation", where, f"relation {edge.relation!r} is not one of {', '.join(RELATIONS)}"))
    for record in snapshot.records.values():
        target = record.raw.get("superseded_by")
        if isinstance(target, str) and target and target not in snapshot.records:
            problems.append(Problem("dangling-reference", f"{record.source}:{record.line}", f"{record.id} is superseded by missing {target}"))
    checked, broken = audit.verify(store.data_dir)
    if broken is not None:
        where = f"{store.data_dir / audit.AUDIT_PATH}:{broken.line}"
        problems.append(Problem("audit-chain", where, f"seq {broken.seq}: {broken.message}" if broken.seq else broken.message))
    return Diagnosis(records=len(snapshot.records), audit_entries=checked, problems=problems)

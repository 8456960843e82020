"""graph.json: the typed edges between records, read into a snapshot and edited.

``GraphFile`` is the part of ``Store`` that writes graph.json (``link``, ``link_many``,
``unlink``): every edit holds the data-dir lock, rewrites the file atomically, refuses a
file that did not parse completely and appends audit entries, as the record writes do.
Edges name records by id; graph.json's nodes map a node key to its record (the bash
Lore's layout), and a node is added for a record the first time it is linked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from lore.errors import NotFoundError, UsageError
from lore.store import audit
from lore.store.fileio import atomic_write, data_lock
from lore.store.layout import GRAPH
from lore.store.readers import FileRead, LoadWarning, read_json
from lore.store.records import RELATIONS, Record, kind_from_id

if TYPE_CHECKING:
    from typing import Protocol

    class Snapshot(Protocol):
        """What the graph code reads of ``lore.store.store.Snapshot`` (a type only: that module imports this one)."""

        edges: list[Edge]
        warnings: list[LoadWarning]
        incomplete_files: set[Path]

        def get(self, record_id: str) -> Record: ...

NODE_TYPES = {
    "decision": "decision", "pattern": "pattern", "lesson": "pattern", "anti_pattern": "anti_pattern",
    "handoff": "session", "failure": "failure", "observation": "observation",
}  # fmt: skip
# The graph.json edge fields lore interprets; any other field is kept in ``Edge.extra``.
_EDGE_FIELDS = frozenset(("from", "to", "relation", "weight", "bidirectional", "status", "created_at"))


@dataclass(frozen=True)
class Edge:
    source: str  # record id
    target: str  # record id
    relation: str
    weight: float = 1.0
    created_at: str | None = None
    index: int = 0  # position in graph.json's edge list
    line: int | None = None  # line in graph.json, for located reports
    # Fields of the graph.json edge lore does not interpret (an import's original relation name, ...).
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class NewEdge:
    """An edge to add with ``Store.link_many`` (the arguments of ``Store.link``)."""

    source: str
    target: str
    relation: str = "relates_to"
    weight: float = 1.0
    extra: dict[str, Any] | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class Link:
    """An edge seen from one of its records: ``direction`` is "out" when that record is the source."""

    direction: str
    relation: str
    other_id: str
    other: Record | None  # None: the edge names a record that does not exist
    edge: Edge


def load_graph(path: Path, snapshot: Snapshot) -> None:
    """graph.json's active edges into ``snapshot`` (a bidirectional edge both ways), its problems as warnings."""
    read = read_json(path)
    if read.warnings and read.warnings[0].message == "file is empty":
        read.warnings.clear()
        read.complete = True
    snapshot.warnings.extend(read.warnings)
    if not read.complete:
        snapshot.incomplete_files.add(read.path)
    if not read.items:
        return
    document = read.items[0][1]
    node_ids = node_record_ids(document.get("nodes"))
    edges = document.get("edges") or []
    if not isinstance(edges, list):
        snapshot.warnings.append(LoadWarning(read.path, None, "expected a list", "edges"))
        return
    lines = _edge_lines(read.path)
    for index, edge in enumerate(edges):
        line = lines[index] if index < len(lines) else None
        if not isinstance(edge, dict):
            snapshot.warnings.append(LoadWarning(read.path, line, f"edge {index + 1}: expected an object"))
            continue
        if edge.get("status", "active") != "active":
            continue
        source = node_ids.get(str(edge.get("from")), str(edge.get("from", "")))
        target = node_ids.get(str(edge.get("to")), str(edge.get("to", "")))
        relation = str(edge.get("relation", "relates_to"))
        if not source or not target:
            snapshot.warnings.append(LoadWarning(read.path, line, f"edge {index + 1}: missing from/to"))
            continue
        weight = edge.get("weight", 1.0)
        extra = {k: v for k, v in edge.items() if k not in _EDGE_FIELDS}
        snapshot.edges.append(
            Edge(
                source=source, target=target, relation=relation,
                weight=float(weight) if isinstance(weight, int | float) else 1.0,
                created_at=edge.get("created_at"), index=index, line=line, extra=extra,
            )
        )  # fmt: skip
        if edge.get("bidirectional"):
            snapshot.edges.append(Edge(target, source, relation, snapshot.edges[-1].weight, edge.get("created_at"), index, line))


class GraphFile:
    """``Store``'s graph.json writes; the rest of ``Store`` (its lock, load, audit) is what they use."""

    data_dir: Path

    if TYPE_CHECKING:  # what the graph writes use of the rest of ``Store`` (lore.store.store)

        def require(self) -> None: ...
        def path(self, relative: Path) -> Path: ...
        def load(self, kinds: Iterable[str] | None = None) -> Snapshot: ...
        def now_iso(self) -> str: ...
        def refuse_if_incomplete(self, read: FileRead) -> None: ...
        def record_audit(self, op: str, record_id: str, project: str | None, raw: dict[str, Any] | None,
                         detail: dict[str, Any] | None = None) -> None: ...  # fmt: skip
        def record_audit_many(self, events: list[audit.AuditEvent]) -> None: ...

    def link(self, source: str, target: str, relation: str, *, weight: float = 1.0,
             extra: dict[str, Any] | None = None, created_at: str | None = None) -> Edge:  # fmt: skip
        """Add (or reactivate) an edge; ``extra`` fields are stored on a new edge as they are, and
        ``created_at`` keeps an imported edge's own time (default: now)."""
        if relation not in RELATIONS:
            raise UsageError(f"unknown relation {relation!r}", hint="relations: " + ", ".join(RELATIONS))
        if source == target:
            raise UsageError("a record cannot be linked to itself")
        self.require()
        with data_lock(self.data_dir):
            snapshot = self.load()
            src, dst = snapshot.get(source), snapshot.get(target)
            created_at = created_at or self.now_iso()
            changed = [True]

            def edit(document: dict[str, Any], nodes: dict[str, str]) -> None:
                src_node = ensure_node(document, nodes, src, created_at)
                dst_node = ensure_node(document, nodes, dst, created_at)
                edges = document.setdefault("edges", [])
                for edge in edges:
                    if (isinstance(edge, dict) and edge.get("from") == src_node and edge.get("to") == dst_node
                            and edge.get("relation") == relation):  # fmt: skip
                        changed[0] = edge.get("weight") != weight or edge.get("status", "active") != "active"
                        edge["weight"] = weight
                        edge["status"] = "active"
                        return
                edges.append({
                    **(extra or {}), "from": src_node, "to": dst_node, "relation": relation, "weight": weight,
                    "bidirectional": False, "status": "active", "created_at": created_at,
                })  # fmt: skip

            self._rewrite_graph(edit)
            if changed[0]:  # linking again what is already linked is not a new event
                self.record_audit("link", src.id, src.project, None, {"to": dst.id, "relation": relation})
        return Edge(src.id, dst.id, relation, weight, created_at, extra=dict(extra or {}))

    def link_many(self, links: Iterable[NewEdge | tuple[str, str, str]]) -> list[Edge]:
        """Add (or reactivate) many edges with one load and one graph.json rewrite: the batched ``link``.

        Every edge is checked as ``link`` checks it (known relation, not a self-link, both
        records exist) before anything is written; one audit entry per edge that changed.
        """
        wanted = [item if isinstance(item, NewEdge) else NewEdge(*item) for item in links]
        if not wanted:
            return []
        for item in wanted:
            if item.relation not in RELATIONS:
                raise UsageError(f"unknown relation {item.relation!r}", hint="relations: " + ", ".join(RELATIONS))
            if item.source == item.target:
                raise UsageError("a record cannot be linked to itself")
        self.require()
        with data_lock(self.data_dir):
            snapshot = self.load()
            resolved = [(snapshot.get(i.source), snapshot.get(i.target), i) for i in wanted]
            now = self.now_iso()
            changed: list[tuple[Record, Record, str]] = []
            made: list[Edge] = []

            def edit(document: dict[str, Any], nodes: dict[str, str]) -> None:
                edges = document.setdefault("edges", [])
                known: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
                for existing in edges:  # the first of duplicate edges is the one `link` updates
                    if isinstance(existing, dict):
                        known.setdefault((existing.get("from"), existing.get("to"), existing.get("relation")), existing)
                for src, dst, item in resolved:
                    created_at = item.created_at or now
                    src_node = ensure_node(document, nodes, src, created_at)
                    dst_node = ensure_node(document, nodes, dst, created_at)
                    edge = known.get((src_node, dst_node, item.relation))
                    if edge is not None:
                        if edge.get("weight") != item.weight or edge.get("status", "active") != "active":
                            changed.append((src, dst, item.relation))
                        edge["weight"] = item.weight
                        edge["status"] = "active"
                    else:
                        edge = {
                            **(item.extra or {}), "from": src_node, "to": dst_node, "relation": item.relation,
                            "weight": item.weight, "bidirectional": False, "status": "active", "created_at": created_at,
                        }  # fmt: skip
                        edges.append(edge)
                        known[(src_node, dst_node, item.relation)] = edge
                        changed.append((src, dst, item.relation))
                    made.append(Edge(src.id, dst.id, item.relation, item.weight, created_at, extra=dict(item.extra or {})))

            self._rewrite_graph(edit)
            self.record_audit_many([audit.AuditEvent("link", src.id, src.project, None, {"to": dst.id, "relation": relation})
                                    for src, dst, relation in changed])  # fmt: skip
        return made

    def unlink(self, source: str, target: str, relation: str | None = None) -> int:
        self.require()
        with data_lock(self.data_dir):
            snapshot = self.load()
            matching = [e for e in snapshot.edges if e.source == source and e.target == target
                        and (relation is None or e.relation == relation)]  # fmt: skip
            if not matching:
                what = f" with relation {relation}" if relation else ""
                raise NotFoundError(f"no edge from {source} to {target}{what}")
            removed: list[int] = []
            self._rewrite_graph(lambda doc, nodes: removed.append(drop_edges(doc, nodes, source, target, relation)))
            self.record_audit("unlink", source, None, None, {"to": target, "relation": relation})
        return removed[0] if removed else 0

    def _rewrite_graph(self, edit: Callable[[dict[str, Any], dict[str, str]], Any]) -> None:
        path = self.path(GRAPH)
        if path.exists() and path.stat().st_size:
            read = read_json(path)
            self.refuse_if_incomplete(read)
            document = read.items[0][1] if read.items else {"nodes": {}, "edges": []}
        else:
            document = {"nodes": {}, "edges": []}
        if not isinstance(document.get("nodes"), dict):
            document["nodes"] = {}
        nodes = {rid: key for key, rid in node_record_ids(document["nodes"]).items()}
        edit(document, nodes)
        atomic_write(path, orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")


def node_record_ids(nodes: Any) -> dict[str, str]:
    """Graph node key -> record id (``data.journal_id``, else ``name``, else the key)."""
    mapping: dict[str, str] = {}
    if not isinstance(nodes, dict):
        return mapping
    for key, node in nodes.items():
        record_id = str(key)
        if isinstance(node, dict):
            data: dict[str, Any] = node["data"] if isinstance(node.get("data"), dict) else {}
            for candidate in (data.get("journal_id"), data.get("record_id"), node.get("name")):
                if isinstance(candidate, str) and kind_from_id(candidate):
                    record_id = candidate
                    break
        mapping[str(key)] = record_id
    return mapping


def ensure_node(document: dict[str, Any], nodes: dict[str, str], record: Record, created_at: str) -> str:
    if record.id in nodes:
        return nodes[record.id]
    node_type = NODE_TYPES.get(record.kind, record.kind)
    key = f"{node_type}-{hashlib.sha256(record.id.encode()).hexdigest()[:8]}"
    data: dict[str, Any] = {"record_id": record.id}
    if record.kind == "decision":
        data = {"journal_id": record.id, "decision": record.title}
    document["nodes"][key] = {
        "type": node_type, "name": record.id, "data": data, "created_at": created_at, "updated_at": created_at,
    }  # fmt: skip
    nodes[record.id] = key
    return key


def drop_edges(document: dict[str, Any], nodes: dict[str, str], source: str, target: str | None,
                relation: str | None) -> int:  # fmt: skip
    """Remove edges from ``source`` to ``target`` (or, with no target, every edge touching ``source``)."""
    keys = {key: rid for rid, key in nodes.items()}

    def rid(node: Any) -> str:
        return keys.get(str(node), str(node))

    kept, removed = [], 0
    for edge in document.get("edges", []):
        if isinstance(edge, dict):
            a, b = rid(edge.get("from")), rid(edge.get("to"))
            if target is None:
                hit = source in (a, b)
            else:
                hit = a == source and b == target and (relation is None or edge.get("relation") == relation)
            if hit:
                removed += 1
                continue
        kept.append(edge)
    document["edges"] = kept
    return removed


def _edge_lines(path: Path) -> list[int]:
    """Line of each edge object in graph.json, for located warnings."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    start = text.find('"edges"')
    if start < 0:
        return []
    lines, offset = [], start
    while True:
        found = text.find('"from"', offset)
        if found < 0:
            break
        lines.append(text.count("\n", 0, found) + 1)
        offset = found + 6
    return lines

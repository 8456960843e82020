"""Export a data dir as portable JSON Lines, and import records and edges from other memories.

Every import goes through the same plan: read the source into records and edges,
scrub each text field, then merge into the store through ``Store.add`` and
``Store.link``. Merging is idempotent by content hash:

- a record whose id exists with the same content is skipped;
- a record whose id exists with different content is stored under a
  deterministic new id (``<id>-imp<hash8>``) and counted as a conflict, so
  nothing is overwritten and importing the same source again adds nothing;
- an edge that already exists (same records and relation) is skipped; an edge
  naming a record that is in neither the source nor the store is reported.

A record written without ``schema_version`` (the original format) is upgraded
as ``lore migrate`` would before it is stored, so what lands is a proper
version-1 record. Content hashes are taken after that upgrade on both sides
and cover every field except the id, ``schema_version`` and the timestamps
(``timestamp``, ``created_at``, ``updated_at``): a record re-created at another
moment with the same content is still the same record.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from lore.errors import UsageError
from lore.store import Store
from lore.store.readers import read_jsonl
from lore.store.records import KINDS, RELATIONS, kind_from_id
from lore.store.store import NewEdge, Snapshot

EXPORT_VERSION = 1
_HASH_IGNORED = frozenset(("id", "schema_version", "timestamp", "created_at", "updated_at"))
# Values that are identifiers or enumerations, not prose: never run through the scrubber.
_NOT_SCRUBBED = frozenset((
    "id", "timestamp", "created_at", "updated_at", "started_at", "ended_at", "schema_version", "kind", "type",
    "status", "outcome", "severity", "session_id", "origin", "source_id",
))  # fmt: skip


@dataclass(frozen=True)
class Problem:
    """A line of the source that could not be imported (the rest still is)."""

    path: Path | None  # None: an edge between records, not a line of a file
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}: " if self.path and self.line else f"{self.path}: " if self.path else ""
        return where + self.message


@dataclass(frozen=True)
class IncomingEdge:
    source: str
    target: str
    relation: str
    weight: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    created_at: str | None = None


@dataclass
class Source:
    """What an importer read: records as ``(kind, raw)``, edges between their ids, and problems."""

    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    edges: list[IncomingEdge] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass
class Summary:
    """Counts by outcome (added, skipped, conflicts) and by record kind or "edge"."""

    dry_run: bool = False
    added: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    conflicts: Counter[str] = field(default_factory=Counter)
    renamed: dict[str, str] = field(default_factory=dict)  # source id -> id it was stored under
    problems: list[Problem] = field(default_factory=list)
    redactions: list[str] = field(default_factory=list)  # kinds of secret redacted

    def lines(self) -> list[str]:
        verb = "would add" if self.dry_run else "added"
        out = []
        for label, counts in ((verb, self.added), ("skipped (already present)", self.skipped),
                              ("conflicts (stored under a new id)", self.conflicts)):  # fmt: skip
            detail = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
            out.append(f"{label}: {detail}")
        if self.problems:
            out.append(f"problems: {len(self.problems)} (listed above)")
        return out


def content_hash(raw: dict[str, Any]) -> str:
    """The identity of a record's content (compare records only after ``as_current_schema``)."""
    kept = {k: v for k, v in raw.items() if k not in _HASH_IGNORED}
    return hashlib.sha256(orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)).hexdigest()


def as_current_schema(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``raw`` upgraded to the current schema (unchanged when it has a ``schema_version``)."""
    from lore.curate.migrate import upgrade

    copy: dict[str, Any] = orjson.loads(orjson.dumps(raw))
    upgrade(kind, copy)
    return copy


# -- export --------------------------------------------------------------------------------------
def export_lines(snapshot: Snapshot) -> list[bytes]:
    """Every record (ordered by kind, then id) and every edge (ordered by ends and relation)."""
    order = {kind: i for i, kind in enumerate(KINDS)}
    lines = []
    for record in sorted(snapshot.records.values(), key=lambda r: (order.get(r.kind, len(order)), r.id)):
        lines.append(orjson.dumps({"lore_export": EXPORT_VERSION, "type": "record", "kind": record.kind,
                                   "id": record.id, "record": record.raw}))  # fmt: skip
    edges = sorted(snapshot.edges, key=lambda e: (e.source, e.target, e.relation, e.weight))
    seen: set[tuple[str, str, str]] = set()
    for edge in edges:
        key = (edge.source, edge.target, edge.relation)
        if key in seen:
            continue
        seen.add(key)
        entry: dict[str, Any] = {"lore_export": EXPORT_VERSION, "type": "edge", "from": edge.source,
                                 "to": edge.target, "relation": edge.relation, "weight": edge.weight}  # fmt: skip
        if edge.created_at:
            entry["created_at"] = edge.created_at
        if edge.extra:
            entry["extra"] = edge.extra
        lines.append(orjson.dumps(entry, option=orjson.OPT_SORT_KEYS))
    return lines


def write_export(store: Store, out: IO[bytes]) -> int:
    """Write the export to ``out``; returns the number of lines."""
    store.require()
    lines = export_lines(store.load())
    for line in lines:
        out.write(line + b"\n")
    return len(lines)


# -- readers -------------------------------------------------------------------------------------
def read_lore_export(path: Path) -> Source:
    source = Source()
    read = _read_lines(path, source)
    for line, item in read:
        if item.get("lore_export") != EXPORT_VERSION:
            source.problems.append(Problem(path, line, f"not a lore export line (lore_export: {EXPORT_VERSION} missing)"))
        elif item.get("type") == "record":
            kind, raw = item.get("kind"), item.get("record")
            if kind not in KINDS or not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
                source.problems.append(Problem(path, line, "record line needs a known kind and a record with an id"))
                continue
            source.records.append((str(kind), raw))
        elif item.get("type") == "edge":
            ends, relation = (item.get("from"), item.get("to")), item.get("relation")
            if not all(isinstance(v, str) and v for v in (*ends, relation)):
                source.problems.append(Problem(path, line, "edge line needs from, to and relation"))
                continue
            weight = item.get("weight", 1.0)
            extra: dict[str, Any] = item["extra"] if isinstance(item.get("extra"), dict) else {}
            created_at = item.get("created_at") if isinstance(item.get("created_at"), str) else None
            source.edges.append(IncomingEdge(str(ends[0]), str(ends[1]), str(relation),
                                             float(weight) if isinstance(weight, int | float) else 1.0,
                                             extra, created_at))  # fmt: skip
        else:
            source.problems.append(Problem(path, line, f"unknown line type {item.get('type')!r}"))
    return source


def read_bash_lore(data_dir: Path) -> Source:
    """Another Lore data dir (the original bash layout), read by lore's own store."""
    other = Store(data_dir)
    other.require()
    snapshot = other.load()
    source = Source(problems=[Problem(w.path, w.line, w.message) for w in snapshot.warnings])
    for record in sorted(snapshot.records.values(), key=lambda r: r.id):
        source.records.append((record.kind, dict(record.raw)))
    seen: set[tuple[str, str, str]] = set()
    for edge in snapshot.edges:
        if (edge.source, edge.target, edge.relation) not in seen:
            seen.add((edge.source, edge.target, edge.relation))
            source.edges.append(IncomingEdge(edge.source, edge.target, edge.relation, edge.weight, edge.extra,
                                             edge.created_at))  # fmt: skip
    return source


_MCP_RELATIONS = {
    "uses": "depends_on", "requires": "depends_on", "needs": "depends_on", "depends_on": "depends_on",
    "implements": "implements", "part_of": "part_of", "belongs_to": "part_of", "is_part_of": "part_of",
    "derived_from": "derived_from", "based_on": "derived_from", "supersedes": "supersedes",
    "replaces": "supersedes", "contradicts": "contradicts", "affects": "affects", "produces": "produces",
    "learned_from": "learned_from", "relates_to": "relates_to", "related_to": "relates_to",
}  # fmt: skip


def mcp_entity_id(name: str) -> str:
    """One observation per entity, its id fixed by the entity's name (so re-imports find it)."""
    return "obs-mcp-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


def mcp_relation(relation_type: str) -> str:
    normalised = "_".join(relation_type.strip().lower().replace("-", " ").split())
    return _MCP_RELATIONS.get(normalised, "relates_to")


def read_mcp_memory(path: Path, *, project: str | None = None) -> Source:
    """The reference MCP memory server's JSON Lines: each entity becomes one observation record
    (its observations as the lines of the content); each relation a typed edge."""
    source = Source()
    names: set[str] = set()
    relations: list[tuple[int | None, dict[str, Any]]] = []
    for line, item in _read_lines(path, source):
        kind = item.get("type")
        if kind == "entity":
            name, entity_type, observations = item.get("name"), item.get("entityType"), item.get("observations", [])
            if not isinstance(name, str) or not name.strip() or not isinstance(observations, list):
                source.problems.append(Problem(path, line, "entity needs a name and a list of observations"))
                continue
            texts = [str(o) for o in observations if str(o).strip()]
            header = f"{name} ({entity_type})" if isinstance(entity_type, str) and entity_type else name
            raw: dict[str, Any] = {
                "id": mcp_entity_id(name),
                "content": "\n".join([header, *(f"- {t}" for t in texts)]),
                "tags": ["mcp-memory", *([entity_type] if isinstance(entity_type, str) and entity_type else [])],
                "entity_name": name,
                "entity_type": entity_type if isinstance(entity_type, str) else None,
                "observations": texts,
                "source": "mcp-memory",
            }
            if project:
                raw["project"] = project
            names.add(name)
            source.records.append(("observation", raw))
        elif kind == "relation":
            relations.append((line, item))
        else:
            source.problems.append(Problem(path, line, f"unknown type {kind!r} (expected entity or relation)"))
    for line, item in relations:
        ends, relation_type = (item.get("from"), item.get("to")), item.get("relationType")
        if not all(isinstance(v, str) and v for v in (*ends, relation_type)):
            source.problems.append(Problem(path, line, "relation needs from, to and relationType"))
            continue
        missing = [str(n) for n in ends if n not in names]
        if missing:
            source.problems.append(Problem(path, line, f"relation names an unknown entity: {', '.join(missing)}"))
            continue
        relation = mcp_relation(str(relation_type))
        extra = {} if relation == str(relation_type) else {"original_relation": relation_type}
        source.edges.append(IncomingEdge(mcp_entity_id(str(ends[0])), mcp_entity_id(str(ends[1])), relation, 1.0, extra))
    return source


def _read_lines(path: Path, source: Source) -> list[tuple[int | None, dict[str, Any]]]:
    if not path.is_file():
        raise UsageError(f"{path} is not a file")
    read = read_jsonl(path)
    source.problems.extend(Problem(w.path, w.line, w.message) for w in read.warnings)
    return read.items


# -- merge ---------------------------------------------------------------------------------------
def _scrub_value(value: Any, key: str | None, found: list[str]) -> Any:
    if isinstance(value, str):
        if key in _NOT_SCRUBBED or not value:
            return value
        from lore.scrub import scrub

        result = scrub(value)
        found.extend(f.kind for f in result.findings)
        return result.text
    if isinstance(value, list):
        return [_scrub_value(v, key, found) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_value(v, k, found) for k, v in value.items()}
    return value


# Records and edges written per hold of the data-dir lock. An interrupted import keeps every
# chunk written before it; running it again skips those (by content hash) and goes on.
CHUNK = 500
Progress = Callable[[int, int], None]  # (done, total) over records then edges


def merge(store: Store, source: Source, *, dry_run: bool = False, redact: bool = True,
          progress: Progress | None = None, chunk: int = CHUNK) -> Summary:  # fmt: skip
    """Merge ``source`` into ``store`` (nothing is written with ``dry_run``).

    Records go to ``Store.add_many`` and edges to ``Store.link_many`` in chunks of ``chunk``:
    one lock hold, one append per file and one rewrite of patterns.yaml or graph.json per
    chunk, instead of one per record (and a whole-store reload per edge).
    """
    summary = Summary(dry_run=dry_run, problems=list(source.problems))
    total = len(source.records) + len(source.edges)

    def report(done: int) -> None:
        if progress is not None:
            progress(done, total)

    if not dry_run:
        store.prepare_write()
    snapshot = store.load() if store.exists() else Snapshot()
    hashes = {rid: content_hash(as_current_schema(r.kind, r.raw)) for rid, r in snapshot.records.items()}
    _merge_records(store, source, summary, hashes, dry_run=dry_run, redact=redact, chunk=chunk, report=report)
    _merge_edges(store, source, summary, snapshot, hashes, dry_run=dry_run, chunk=chunk, report=report)
    report(total)
    return summary


def _merge_records(store: Store, source: Source, summary: Summary, hashes: dict[str, str], *, dry_run: bool,
                   redact: bool, chunk: int, report: Callable[[int], None]) -> None:  # fmt: skip
    """``merge``'s records: a record already stored is skipped, one whose id holds other content is renamed
    (``summary.renamed``); ``hashes`` gains the ids stored."""
    done = 0
    pending: list[tuple[str, dict[str, Any]]] = []

    def flush_records() -> None:
        nonlocal done
        if pending and not dry_run:
            store.add_many(pending, op="import")
        done += len(pending)
        pending.clear()
        report(done)

    now = store.now_iso()
    for kind, incoming in source.records:
        redactions: list[str] = []  # reported only for records that are stored
        raw = as_current_schema(kind, _scrub_value(incoming, None, redactions) if redact else incoming)
        original_id = str(raw["id"])
        digest = content_hash(raw)
        record_id = original_id
        if original_id in hashes and hashes[original_id] != digest:
            record_id = f"{original_id}-imp{digest[:8]}"
            summary.renamed[original_id] = record_id
            if record_id not in hashes:
                summary.conflicts[kind] += 1
        if record_id in hashes:
            if hashes[record_id] == digest:
                summary.skipped[kind] += 1
            else:  # pragma: no cover - a renamed id is derived from this very content
                summary.problems.append(Problem(None, None, f"{original_id}: id collision after renaming"))
            continue
        if kind_from_id(record_id) is None:
            summary.problems.append(Problem(None, None, f"{record_id}: id has no known kind prefix; skipped"))
            continue
        raw = {**raw, "id": record_id}
        if kind != "handoff" and not raw.get("timestamp") and not raw.get("created_at"):
            raw["timestamp"] = now
        pending.append((kind, raw))
        if len(pending) >= chunk:
            flush_records()
        hashes[record_id] = digest
        summary.redactions.extend(redactions)
        if record_id == original_id:
            summary.added[kind] += 1
    flush_records()


def _merge_edges(store: Store, source: Source, summary: Summary, snapshot: Snapshot, hashes: dict[str, str], *,
                 dry_run: bool, chunk: int, report: Callable[[int], None]) -> None:  # fmt: skip
    """``merge``'s edges, between the records' ids as stored (renamed ones followed); an edge already there is skipped."""
    done = len(source.records)  # skipped records count as done too
    links: list[NewEdge] = []

    def flush_links() -> None:
        nonlocal done
        if links and not dry_run:
            store.link_many(links)
        done += len(links)
        links.clear()
        report(done)

    existing = {(e.source, e.target, e.relation) for e in snapshot.edges}
    for edge in source.edges:
        ends = (summary.renamed.get(edge.source, edge.source), summary.renamed.get(edge.target, edge.target))
        relation = edge.relation if edge.relation in RELATIONS else "relates_to"
        extra = dict(edge.extra)
        if relation != edge.relation:
            extra.setdefault("original_relation", edge.relation)
        missing = [rid for rid in ends if rid not in hashes]
        if missing:
            summary.problems.append(Problem(None, None, f"edge {edge.source} -> {edge.target}: no record {', '.join(missing)}"))
            continue
        if (ends[0], ends[1], relation) in existing:
            summary.skipped["edge"] += 1
            continue
        links.append(NewEdge(ends[0], ends[1], relation, weight=edge.weight, extra=extra or None, created_at=edge.created_at))
        if len(links) >= chunk:
            flush_links()
        existing.add((ends[0], ends[1], relation))
        summary.added["edge"] += 1
    flush_links()

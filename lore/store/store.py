"""The data directory: load a consistent snapshot, and write records safely.

Every write holds the data-dir lock, goes through a whole-line append or an
atomic rewrite, and appends one entry to the hash-chained audit log. A file
that did not parse completely is never rewritten.

``Store`` is filed by job: the records (this module: load, add, update, delete),
graph.json (``lore.store.graphfile``: its edges and their edits, which ``Store``
inherits as ``link``, ``link_many``, ``unlink``) and the data dir as a git work tree
(``lore.store.gitfiles``, for ``init(git=True)``). ``Edge``, ``NewEdge`` and ``Link``
are re-exported here, where callers have always imported them.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from lore.errors import DataError, NotFoundError, UnsafeRewriteError, UsageError
from lore.paths import require_data_dir
from lore.store import audit
from lore.store.fileio import append_line, atomic_write, data_lock
from lore.store.gitfiles import write_git_files
from lore.store.graphfile import Edge, GraphFile, Link, NewEdge, drop_edges, load_graph  # noqa: F401  (Edge, Link, NewEdge: re-exported)
from lore.store.layout import (
    BACKUPS,
    DECISIONS,
    FAILURES,
    GRAPH,
    JSONL_SINGLE,
    OBSERVATIONS,
    PATTERNS,
    SESSIONS,
    SHARDABLE,
    SIGNALS,  # noqa: F401  (re-exported: lore.curate.migrate imports it from here)
    is_sharded,
    jsonl_files,
    shard_dir,
    shard_name,
    source_files,
)
from lore.store.readers import (
    FileRead,
    LoadWarning,
    patterns_from_bytes,
    read_json,
    read_jsonl,
    read_patterns_yaml,
)
from lore.store.records import (
    KINDS,
    SCHEMA_VERSION,
    Record,
    format_time,
    parse_time,
    record_kind_for_pattern_item,
)
from lore.store.validate import check_record

# The kinds patterns.yaml holds (its sections and its items' kind field decide which).
_PATTERN_KINDS = frozenset({"pattern", "anti_pattern", "lesson"})
# The JSONL files in the order a load reads them (before patterns.yaml and the session files);
# each is read with its month shards after it (lore.store.layout).
_JSONL_LOAD_ORDER = JSONL_SINGLE
JSONL_FILES = SHARDABLE
PATTERN_SECTIONS = {"pattern": "patterns", "lesson": "patterns", "anti_pattern": "anti_patterns"}
PATTERNS_HEADER = "# Pattern Learner Database\n"
_ID_FIELD = re.compile(rb'"id"\s*:\s*"([^"]+)"')


def utc_now() -> datetime:
    return datetime.now(UTC)


def resolve_id(ids: Iterable[str], wanted: str, *, hint: str = "list ids with `lore list`") -> str:
    """An exact id, or a unique prefix of 6+ characters; a clear error otherwise."""
    known = ids if isinstance(ids, (set, dict)) else set(ids)
    if wanted in known:
        return wanted
    matches = sorted(rid for rid in known if rid.startswith(wanted)) if len(wanted) >= 6 else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:5]) + (f" and {len(matches) - 5} more" if len(matches) > 5 else "")
        raise NotFoundError(f"ambiguous id prefix {wanted!r}: {len(matches)} records match", hint=f"did you mean {shown}?")
    if wanted and any(rid.startswith(wanted) for rid in known):
        # Under six characters a prefix is never taken as an id: "dec-" names every decision.
        raise NotFoundError(f"no record with id {wanted!r}",
                            hint="a prefix needs at least 6 characters and must match one record")  # fmt: skip
    raise NotFoundError(f"no record with id {wanted!r}", hint=hint)


@dataclass
class Snapshot:
    """Everything in the data dir at one moment, resolved to records and edges."""

    records: dict[str, Record] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    warnings: list[LoadWarning] = field(default_factory=list)
    incomplete_files: set[Path] = field(default_factory=set)
    duplicate_ids: dict[str, list[tuple[Path, int | None]]] = field(default_factory=dict)

    def get(self, record_id: str) -> Record:
        return self.records[resolve_id(self.records, record_id)]

    def of_kind(self, *kinds: str) -> list[Record]:
        return [r for r in self.records.values() if r.kind in kinds]

    def select(self, *, kinds: Iterable[str] | None = None, project: str | None = None, tags: Iterable[str] = (),
               since: datetime | None = None, until: datetime | None = None, include_all: bool = False,
               limit: int | None = None) -> list[Record]:  # fmt: skip
        """The records passing every filter, newest first (ties by id): `lore list`, the MCP server and ``Lore.records``.

        ``kinds`` are normalised kind names; ``tags`` must all be present (case and a leading
        ``#`` ignored); ``since`` is inclusive, ``until`` exclusive, and a record without a
        time passes neither; superseded and retracted records only with ``include_all``.
        """
        wanted_kinds = set(kinds) if kinds else None
        wanted_tags = [t.lstrip("#").lower() for t in tags]
        selected = []
        for record in self.records.values():
            if wanted_kinds and record.kind not in wanted_kinds:
                continue
            if project and record.project != project:
                continue
            if not include_all and not record.active:
                continue
            if wanted_tags and not all(t in [x.lower() for x in record.tags] for t in wanted_tags):
                continue
            moment = record.timestamp
            if since and (moment is None or moment < since):
                continue
            if until and (moment is None or moment >= until):
                continue
            selected.append(record)
        epoch = datetime.min.replace(tzinfo=UTC)
        selected.sort(key=lambda r: (r.timestamp or epoch, r.id), reverse=True)
        return selected[:limit] if limit else selected

    def links_of(self, record_id: str) -> list[dict[str, Any]]:
        """The edges touching a record as JSON (``from``, ``to``, ``relation``, ``weight``), in file order.

        What `lore show --json`, the MCP ``show`` tool and ``Lore.links`` return.
        """
        return [{"from": e.source, "to": e.target, "relation": e.relation, "weight": e.weight}
                for e in self.edges_of(record_id)]  # fmt: skip

    def edges_of(self, record_id: str) -> list[Edge]:
        """The graph.json edges touching a record, in file order."""
        return [e for e in self.edges if record_id in (e.source, e.target)]

    def links(self, record_id: str) -> list[Link]:
        """The graph.json edges touching a record, in file order, each seen from that record."""
        found = []
        for edge in self.edges:
            if edge.source == record_id:
                found.append(Link("out", edge.relation, edge.target, self.records.get(edge.target), edge))
            elif edge.target == record_id:
                found.append(Link("in", edge.relation, edge.source, self.records.get(edge.source), edge))
        return found


def skips(problems: list[tuple[str, str]]) -> bool:
    """Whether ``Store.load`` leaves out a record with these problems (``check_record``): no text to show or search."""
    return any(name in ("decision", "name", "content", "handoff", "error_message") for name, _ in problems)


# Views of a record file that a process keeps current (lore.curate.pool), by the file's resolved
# path: ``Store.add`` takes the file's ids from a current one instead of reading the whole file
# (20-40 ms for decisions.jsonl at 10,000 decisions) and tells it what it appended.
_WATCHERS: dict[Path, Any] = {}


def watch(path: Path, watcher: Any) -> None:
    """Register ``watcher`` (``ids_if_current() -> set | None``, ``appended()``, ``lock``) for the record file ``path``.

    Process-wide (``_WATCHERS``), as the pools that register here (``lore.curate.pool.pool_for`` says
    why): every ``Store`` of the process appending to ``path`` must find the view, and the store,
    below the write checks, cannot be handed it. A watcher answers only when it is current with the file.
    """
    _WATCHERS[path] = watcher


class Store(GraphFile):
    """A lore data directory in the original bash Lore's layout."""

    def __init__(self, data_dir: Path, *, actor: str | None = None, clock: Callable[[], datetime] = utc_now,
                 create_missing: bool = False) -> None:  # fmt: skip
        """``create_missing``: the first write scaffolds a missing data dir (the default dir on a
        fresh machine); an explicitly named one that does not exist stays an error."""
        self.data_dir = Path(data_dir)
        self.actor = actor or audit.default_actor()  # the surfaces pass LORE_ACTOR (Settings.actor) when set
        self.clock = clock
        self.create_missing = create_missing

    def prepare_write(self) -> None:
        """Before a first write: scaffold the default data dir if it is missing, else require it."""
        if self.create_missing and not self.data_dir.exists():
            self.init()
        self.require()

    def path(self, relative: Path) -> Path:
        return self.data_dir / relative

    def new_backup_dir(self) -> Path:
        """A directory under ``backups/`` named for now that no earlier backup uses (not created here)."""
        stamp = self.clock().strftime("%Y%m%dT%H%M%SZ")
        base = self.path(BACKUPS) / stamp
        candidate, n = base, 1
        while candidate.exists():
            n += 1
            candidate = base.with_name(f"{stamp}-{n}")
        return candidate

    def exists(self) -> bool:
        return self.data_dir.is_dir()

    def require(self) -> None:
        require_data_dir(self.data_dir)

    def source_files(self) -> list[Path]:
        return source_files(self.data_dir)

    # -- init ------------------------------------------------------------------
    def init(self, *, git: bool = False, shard: bool = False) -> list[Path]:
        """Scaffold the layout; never touches files that already exist.

        ``shard``: the decisions, failures and observations go to month shards (an empty one for
        the current month is created, so that git carries the layout to every clone); a data dir
        that already holds records in the single files is refused (``lore migrate --shard`` splits them).
        """
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise DataError(f"{self.data_dir} is a file, not a data directory",
                            hint="choose another --data-dir, or move the file away")  # fmt: skip
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataError(f"cannot create the data directory {self.data_dir}: {error.strerror or error}") from error
        created: list[Path] = []
        with data_lock(self.data_dir):
            if shard:
                held = [self.path(r) for r in SHARDABLE.values() if self.path(r).is_file() and self.path(r).stat().st_size]
                if held and not all(is_sharded(self.data_dir, r) for r in SHARDABLE.values()):
                    raise UsageError(f"{held[0]} already holds records in the single-file layout",
                                     hint="`lore migrate --shard` splits them into month shards")  # fmt: skip
            for relative in (DECISIONS, FAILURES, OBSERVATIONS):
                path = self.path(relative)
                if shard:
                    directory = self.path(shard_dir(relative))
                    if not directory.is_dir():
                        directory.mkdir(parents=True)
                        current = directory / shard_name(self.clock())
                        current.touch()
                        created.append(current)
                elif not path.exists() and not is_sharded(self.data_dir, relative):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.touch()
                    created.append(path)
            patterns = self.path(PATTERNS)
            if not patterns.exists():
                atomic_write(patterns, (PATTERNS_HEADER + "patterns: []\nanti_patterns: []\n").encode())
                created.append(patterns)
            sessions = self.path(SESSIONS)
            if not sessions.exists():
                sessions.mkdir(parents=True)
                created.append(sessions)
            graph = self.path(GRAPH)
            if not graph.exists():
                atomic_write(graph, orjson.dumps({"nodes": {}, "edges": []}, option=orjson.OPT_INDENT_2) + b"\n")
                created.append(graph)
            if git:
                created.extend(write_git_files(self.data_dir))
        return created

    # -- load ------------------------------------------------------------------
    def load(self, kinds: Iterable[str] | None = None) -> Snapshot:
        """Every record and edge; with ``kinds``, only the records of those kinds, and no edges.

        ``kinds`` skips the files before the first that can hold them (a read-only view
        for a hook: the session-start block needs the handoffs and lessons, which come
        last, not 50,000 decisions, which took ~1 s to read). A later file wins an id
        (the original Lore appended new versions), so every file after that first one is
        still read: the records returned are exactly those a whole load has of those kinds.
        """
        wanted = None if kinds is None else frozenset(kinds)
        unknown = (wanted or frozenset()) - frozenset(KINDS)
        if unknown:
            raise UsageError(f"unknown record types {sorted(unknown)}")
        # The files in load order (the JSONL files, patterns.yaml, the session files) and the
        # kinds each holds; reading starts at the first that holds a wanted kind.
        held = [*(frozenset({kind}) for kind, _ in _JSONL_LOAD_ORDER), _PATTERN_KINDS, frozenset({"handoff"})]
        first = 0 if wanted is None else next((i for i, kinds_in in enumerate(held) if kinds_in & wanted), len(held))
        patterns_at, sessions_at = len(_JSONL_LOAD_ORDER), len(_JSONL_LOAD_ORDER) + 1
        snapshot = Snapshot()
        seen: dict[str, tuple[Path, int | None]] = {}

        def take(kind: str, raw: dict[str, Any], read: FileRead, line: int | None, fallback_id: str | None = None):
            record_id = raw.get("id", fallback_id)
            if not isinstance(record_id, str) or not record_id.strip():
                snapshot.warnings.append(LoadWarning(read.path, line, "missing or not text; record skipped", "id"))
                snapshot.incomplete_files.add(read.path)
                return
            problems = check_record(kind, raw)
            for field_name, message in problems:
                snapshot.warnings.append(LoadWarning(read.path, line, message, field_name))
            if skips(problems):
                return  # no text to show or search: keep the rest, skip this one
            if record_id in seen:
                snapshot.duplicate_ids.setdefault(record_id, [seen[record_id]]).append((read.path, line))
            seen[record_id] = (read.path, line)
            # Later lines win: the original Lore appended updated versions of a record.
            snapshot.records.pop(record_id, None)
            snapshot.records[record_id] = Record(kind=kind, id=record_id, raw=raw, source=read.path, line=line)

        def absorb(read: FileRead) -> None:
            snapshot.warnings.extend(read.warnings)
            if not read.complete:
                snapshot.incomplete_files.add(read.path)

        for position, (kind, relative) in enumerate(_JSONL_LOAD_ORDER):
            if position < first:
                continue
            for path in jsonl_files(self.data_dir, relative):
                read = read_jsonl(path)
                absorb(read)
                for line, raw in read.items:
                    take(kind, raw, read, line)

        if first <= patterns_at:
            read = read_patterns_yaml(self.path(PATTERNS))
            absorb(read)
            for line, item in read.items:
                section = item.pop("__section__")
                take(record_kind_for_pattern_item(item, section), item, read, line)

        sessions = self.path(SESSIONS)
        if first <= sessions_at and sessions.is_dir():
            for session_file in sorted(sessions.glob("*.json")):
                read = read_json(session_file)
                absorb(read)
                for line, raw in read.items:
                    take("handoff", raw, read, line, fallback_id=session_file.stem)

        if wanted is None:
            load_graph(self.path(GRAPH), snapshot)
        else:  # the files read hold other kinds too
            snapshot.records = {key: record for key, record in snapshot.records.items() if record.kind in wanted}
        return snapshot

    # -- writes ------------------------------------------------------------------
    def now_iso(self) -> str:
        return format_time(self.clock())

    def new_id(self, kind: str, existing: Iterable[str] = ()) -> str:
        taken = set(existing)
        for _ in range(100):
            if kind == "decision":
                candidate = f"dec-{secrets.token_hex(4)}"
            elif kind in ("pattern", "lesson"):
                candidate = f"pat-{int(time.time())}-{secrets.token_hex(2)}"
            elif kind == "anti_pattern":
                candidate = f"anti-{int(time.time())}-{secrets.token_hex(2)}"
            elif kind == "failure":
                candidate = f"fail-{secrets.token_hex(4)}"
            elif kind == "observation":
                candidate = f"obs-{secrets.token_hex(4)}"
            elif kind == "handoff":
                candidate = f"session-{self.clock().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
            else:  # pragma: no cover - kinds are closed
                raise UsageError(f"cannot create records of type {kind}")
            if candidate not in taken:
                return candidate
        raise DataError("could not allocate a unique id")  # pragma: no cover

    def add(self, kind: str, raw: dict[str, Any], *, op: str = "retain") -> Record:
        """Store a new record (``raw`` without an id gets one) and audit it."""
        self.prepare_write()
        with data_lock(self.data_dir), self._watcher(kind) as watcher:
            known = watcher.ids_if_current() if watcher is not None else None
            snapshot_ids = known if known is not None else self._ids_of_kind_quick(kind)
            raw = dict(raw)
            if not raw.get("id"):
                raw = {"id": self.new_id(kind, snapshot_ids), **raw}
            elif raw["id"] in snapshot_ids:
                raise UsageError(f"a record with id {raw['id']} already exists")
            raw.setdefault("schema_version", SCHEMA_VERSION)
            record_id = str(raw["id"])
            if kind in JSONL_FILES:
                target = self.jsonl_target(kind, raw)
                append_line(target, orjson.dumps(raw))
                if known is not None:
                    watcher.appended(target)
            elif kind in PATTERN_SECTIONS:
                self.append_pattern(PATTERN_SECTIONS[kind], raw)
            elif kind == "handoff":
                path = self.path(SESSIONS) / f"{record_id}.json"
                if path.exists():
                    raise UsageError(f"session file {path} already exists")
                atomic_write(path, orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b"\n")
            else:  # pragma: no cover
                raise UsageError(f"cannot store records of type {kind}")
            record = Record(kind=kind, id=record_id, raw=raw)
            self.record_audit(op, record_id, record.project, raw)
        return record

    @contextlib.contextmanager
    def _watcher(self, kind: str) -> Iterator[Any]:
        """This process's current view of the file a record of ``kind`` goes to (``watch``), held; None if none."""
        watcher = _WATCHERS.get(self.path(JSONL_FILES[kind]).resolve()) if _WATCHERS and kind in JSONL_FILES else None
        if watcher is None:
            yield None
            return
        with watcher.lock:
            yield watcher

    def add_many(self, items: Iterable[tuple[str, dict[str, Any]]], *, op: str = "retain") -> list[Record]:
        """Store many new records under one hold of the lock: the batched form of ``add``.

        Every rule of ``add`` holds (ids checked against the files, whole-line appends,
        atomic rewrites, one audit entry per record, a file that did not parse completely
        is refused), but each JSONL file gets one append of all its new lines, patterns.yaml
        one rewrite, and the id sets are read once. All or nothing per file, not per batch:
        callers that want to resume (``lore import``) call it in chunks and skip what is stored.
        """
        batch = [(kind, dict(raw)) for kind, raw in items]
        if not batch:
            return []
        self.prepare_write()
        with data_lock(self.data_dir):
            taken: dict[str, set[str]] = {}
            by_file: dict[Path, list[bytes]] = {}
            sections: dict[str, list[dict[str, Any]]] = {}
            sessions: list[tuple[Path, dict[str, Any]]] = []
            records: list[Record] = []
            for kind, raw in batch:
                group = "pattern" if kind in PATTERN_SECTIONS else kind
                if group not in taken:
                    taken[group] = self._ids_of_kind_quick(kind)
                ids = taken[group]
                if not raw.get("id"):
                    raw = {"id": self.new_id(kind, ids), **raw}
                elif raw["id"] in ids:
                    raise UsageError(f"a record with id {raw['id']} already exists")
                raw.setdefault("schema_version", SCHEMA_VERSION)
                record_id = str(raw["id"])
                ids.add(record_id)
                if kind in JSONL_FILES:
                    by_file.setdefault(self.jsonl_target(kind, raw), []).append(orjson.dumps(raw))
                elif kind in PATTERN_SECTIONS:
                    sections.setdefault(PATTERN_SECTIONS[kind], []).append(raw)
                elif kind == "handoff":
                    path = self.path(SESSIONS) / f"{record_id}.json"
                    if path.exists():
                        raise UsageError(f"session file {path} already exists")
                    sessions.append((path, raw))
                else:  # pragma: no cover
                    raise UsageError(f"cannot store records of type {kind}")
                records.append(Record(kind=kind, id=record_id, raw=raw))
            if sections:
                def edit(doc: dict[str, Any]) -> None:
                    for section, new in sections.items():
                        doc.setdefault(section, []).extend(new)

                self.rewrite_patterns(edit)  # refuses a patterns.yaml that did not parse completely
            for path, lines in by_file.items():
                append_line(path, b"\n".join(lines))
            for path, raw in sessions:
                atomic_write(path, orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b"\n")
            self.record_audit_many([audit.AuditEvent(op, r.id, r.project, r.raw) for r in records])
        return records

    def jsonl_target(self, kind: str, raw: dict[str, Any]) -> Path:
        """The file a new record of ``kind`` is appended to: its single file, or, when the kind is
        sharded, the shard of the month the record was created in (now, for a record without a time)."""
        single = JSONL_FILES[kind]
        if not is_sharded(self.data_dir, single):
            return self.path(single)
        created = parse_time(raw.get("timestamp") or raw.get("created_at")) or self.clock()
        return self.path(shard_dir(single)) / shard_name(created)

    def _ids_of_kind_quick(self, kind: str) -> set[str]:
        """Ids already used in the files that hold records of ``kind`` (its single file and its shards).

        Appends must stay O(file) rather than O(store): a full load per append
        made 8 concurrent writers spend most of their time parsing.
        """
        if kind in JSONL_FILES:
            found: set[str] = set()
            for path in jsonl_files(self.data_dir, JSONL_FILES[kind]):
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                found.update(m.decode() for m in _ID_FIELD.findall(data))
            return found
        if kind in PATTERN_SECTIONS:
            read = read_patterns_yaml(self.path(PATTERNS))
            return {str(item.get("id")) for _, item in read.items}
        sessions = self.path(SESSIONS)
        return {p.stem for p in sessions.glob("*.json")} if sessions.is_dir() else set()

    def update(self, record_id: str, mutate: Callable[[dict[str, Any]], None], *, op: str = "update",
               detail: dict[str, Any] | None = None) -> Record:  # fmt: skip
        """Rewrite one record in place; every other byte of its file stays as it was."""
        self.require()
        with data_lock(self.data_dir):
            record = self.load().get(record_id)
            raw = _deep_copy(record.raw)
            mutate(raw)
            # When two clones edit one record, `lore sync` keeps the newest edit of each field both changed.
            raw["updated_at"] = self.now_iso()
            self._replace(record, raw)
            updated = Record(kind=record.kind, id=record.id, raw=raw, source=record.source, line=record.line)
            self.record_audit(op, record.id, updated.project, raw, detail)
        return updated

    def delete(self, record_id: str, *, op: str = "delete") -> Record:
        self.require()
        with data_lock(self.data_dir):
            snapshot = self.load()
            record = snapshot.get(record_id)
            self._replace(record, None)
            if any(record.id in (e.source, e.target) for e in snapshot.edges):
                self._rewrite_graph(lambda doc, nodes: drop_edges(doc, nodes, record.id, None, None))
            self.record_audit(op, record.id, record.project, None)
        return record

    def _replace(self, record: Record, raw: dict[str, Any] | None) -> None:
        if record.kind in JSONL_FILES or (record.source and record.source.suffix == ".jsonl"):
            assert record.source is not None
            self._rewrite_jsonl(record.source, record.id, raw)
        elif record.kind in PATTERN_SECTIONS:
            section = PATTERN_SECTIONS[record.kind]

            def edit(doc: dict[str, Any]) -> None:
                items = doc.get(section) or []
                for index in range(len(items) - 1, -1, -1):
                    if isinstance(items[index], dict) and items[index].get("id") == record.id:
                        if raw is None:
                            del items[index]
                        else:
                            items[index] = raw
                        return
                raise NotFoundError(f"{record.id} is no longer in {self.path(PATTERNS)}")

            self.rewrite_patterns(edit)
        elif record.kind == "handoff":
            assert record.source is not None
            if raw is None:
                record.source.unlink()
            else:
                self.refuse_if_incomplete(read_json(record.source))
                atomic_write(record.source, orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b"\n")

    def refuse_if_incomplete(self, read: FileRead) -> None:
        if not read.complete:
            first = read.warnings[0] if read.warnings else None
            raise UnsafeRewriteError(
                f"refusing to rewrite a file that did not parse completely ({first.message if first else 'unreadable'})",
                path=read.path, line=first.line if first else None,
                hint="fix or remove the bad line first; `lore doctor` lists every problem",
            )  # fmt: skip

    def _rewrite_jsonl(self, path: Path, record_id: str, raw: dict[str, Any] | None) -> None:
        data = path.read_bytes()
        lines = data.split(b"\n")
        matches: list[int] = []
        for index, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise UnsafeRewriteError(
                    f"refusing to rewrite a file with an unparseable line ({exc.msg})", path=path, line=index + 1,
                    hint="fix or remove that line first; `lore doctor` lists every problem",
                ) from exc  # fmt: skip
            if isinstance(value, dict) and value.get("id") == record_id:
                matches.append(index)
        if not matches:
            raise NotFoundError(f"{record_id} is no longer in {path}")
        if raw is None:
            for index in reversed(matches):
                del lines[index]
        else:
            lines[matches[-1]] = orjson.dumps(raw)
        atomic_write(path, b"\n".join(lines))

    def rewrite_patterns(self, edit: Callable[[dict[str, Any]], None], read: FileRead | None = None) -> None:
        """Apply ``edit`` to patterns.yaml's document and rewrite it atomically (caller holds the lock).

        ``read``: the file as the caller just read it (and refused if incomplete), under the same hold of the lock.
        """
        path = self.path(PATTERNS)
        if read is None and path.exists():
            read = read_patterns_yaml(path)
            self.refuse_if_incomplete(read)
        if read is not None:
            document = read.extra.get("document") or {}
            header = read.extra.get("header") or PATTERNS_HEADER
        else:
            document, header = {}, PATTERNS_HEADER
        document.setdefault("patterns", [])
        document.setdefault("anti_patterns", [])
        edit(document)
        atomic_write(path, (header + dump_yaml(document)).encode("utf-8"))

    def append_pattern(self, section: str, raw: dict[str, Any]) -> None:
        """Add ``raw`` to the end of ``section`` of patterns.yaml (caller holds the lock).

        The new item alone is emitted and written after the list's last one, when the file
        then reads back as its document plus that item; otherwise (a first item, a hand-laid
        list) the whole document is rewritten. Re-emitting it all took PyYAML's pure-Python
        emitter 80 ms at 51 patterns, growing with them, on every `lore learn` and `lore lesson`.
        """
        path = self.path(PATTERNS)
        read = None
        if path.exists():
            read = read_patterns_yaml(path)
            self.refuse_if_incomplete(read)
            spliced = patterns_append(read, section, raw)
            if spliced is not None:
                atomic_write(path, spliced.encode("utf-8"))
                return
        self.rewrite_patterns(lambda doc: doc.setdefault(section, []).append(raw), read)

    # -- audit -----------------------------------------------------------------
    def record_audit_many(self, events: list[audit.AuditEvent]) -> None:
        """Append one chained audit entry per event with a single write (the caller holds the data lock)."""
        audit.append_many(self.data_dir, events, actor=self.actor, timestamp=self.now_iso())

    def record_audit(self, op: str, record_id: str, project: str | None, raw: dict[str, Any] | None,
                     detail: dict[str, Any] | None = None) -> None:  # fmt: skip
        """Append one audit entry (the caller holds the data lock)."""
        audit.append(
            self.data_dir, op=op, record_id=record_id, project=project, actor=self.actor,
            record=raw, timestamp=self.now_iso(), detail=detail,
        )  # fmt: skip



def _deep_copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def patterns_append(read: FileRead, section: str, raw: dict[str, Any]) -> str | None:
    """patterns.yaml's text with ``raw`` emitted after the last item of ``section``; None unless it reads back right.

    The item is emitted as ``dump_yaml`` emits it in the whole document, so a file lore
    wrote gets the bytes a rewrite would give. Right means: its items sit where
    ``dump_yaml`` puts them, and the text parses to the document with ``raw`` appended.
    """
    text, document = read.extra.get("text"), read.extra.get("document")
    place = (read.extra.get("list_ends") or {}).get(section)
    if not isinstance(text, str) or not isinstance(document, dict) or place is None or "\r" in text:
        return None
    end, column = place
    item = dump_yaml({section: [raw]})
    heading, _, lines = item.partition("\n")
    if column != 2 or heading != f"{section}:" or not lines.startswith("  - "):
        return None
    before = text[:end] if text[:end].endswith("\n") else text[:end] + "\n"
    spliced = before + lines + text[end:]
    # Read back as the next read will (whose parse it then finds cached, by these bytes).
    after = patterns_from_bytes(read.path, spliced.encode("utf-8"))
    if not after.complete or after.extra.get("document") != {**document, section: [*document[section], raw]}:
        return None
    return spliced


def dump_yaml(document: dict[str, Any]) -> str:
    """YAML as the original wrote it: block style, list items indented under their key."""
    import yaml

    class IndentedDumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            return super().increase_indent(flow, False)

    return yaml.dump(
        document, Dumper=IndentedDumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )

"""The records table: what ranking and rendering need per record, without reading the sources.

Columns (ids, kinds, projects, times, confidence, ...) are one typed columns file
(``lore.index.columns``: one read, no JSON parse of the rows); each record's text
lives in a JSONL file read by offset only for shown results.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.index import columns as column_file

if TYPE_CHECKING:
    from lore.store.records import Record

CONTENT_LIMIT = 4000


class IndexFileError(ValueError):
    """An index file that is there but unusable; ``name`` is its path inside the generation.

    Raised by the parts that read several files (BM25 and its term sequence, the docs
    beside the table) so that ``IndexReader`` can name the one at fault.
    """

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name


def describe(exc: BaseException, limit: int = 120) -> str:
    """A one-line reason for a failed read: the exception's class and first line, shortened."""
    if isinstance(exc, IndexFileError):
        text = str(exc)
    elif isinstance(exc, FileNotFoundError):
        text = "missing"
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.__class__.__name__}: {exc.strerror}"
    else:
        first = (str(exc).strip().splitlines() or [""])[0]
        text = f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def record_hash(record: Record) -> str:
    import hashlib  # the build's: OpenSSL's binding cost the cold hook ~3 ms to import

    import orjson  # the build's too: its import brings uuid, dataclasses and inspect

    return hashlib.sha256(orjson.dumps(record.raw, option=orjson.OPT_SORT_KEYS) + record.kind.encode()).hexdigest()[:20]


def embedding_text(record: Record) -> str:
    fields = record.fields()
    return "\n".join(t for t in (fields["title"], fields["title"], fields["body"], fields["tags"]) if t)[:6000]


# Raw keys that hold bookkeeping, not text a person would search for.
_NOT_TEXT = frozenset({
    "id", "timestamp", "session_id", "status", "superseded_by", "retracted_reason", "status_changed_at",
    "project", "importance", "confidence", "type", "schema_version", "valid_at", "spec_quality", "git_commit",
    "outcome", "kind", "created_at", "updated_at", "related_decisions", "derived_from", "pinned", "validations",
})  # fmt: skip


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        if value.strip():
            out.append(value.strip())
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)


def lexical_fields(record: Record) -> tuple[str, str]:
    """The two BM25 fields of a record: its title, and all the other text it holds.

    "All" means every text field of the stored record (rationale, alternatives,
    entities, problem, fix, next steps...), not only the ones a result shows: a
    channel that saw only title and body lost to a textbook BM25 over all of a
    record's text (docs/search.md, "The lexical channel").
    """
    title = record.fields()["title"]
    parts: list[str] = []
    for key, value in record.raw.items():
        if key not in _NOT_TEXT:
            _strings(value, parts)
    if title in parts:
        parts.remove(title)  # counted once, as the title
    return title, "\n".join(parts)


def doc_of(record: Record) -> dict[str, Any]:
    return {
        "title": record.title,
        "content": record.content[:CONTENT_LIMIT],
        "summary": record.summary[:1200],
        "superseded_by": record.raw.get("superseded_by"),
        "intent_chain": record.raw.get("intent_chain") or record.raw.get("intents") or [],
        "severity": record.raw.get("severity"),
    }


class Table:
    """The index's per-row columns (one list per field) and where each row's doc line starts.

    A plain class, not a dataclass: the cold prompt hook loads one on every prompt and imports no dataclasses.
    """

    def __init__(self, ids: list[str] | None = None, kinds: list[str] | None = None,
                 projects: list[str | None] | None = None, statuses: list[str] | None = None,
                 times: list[float | None] | None = None, confidence: list[float] | None = None,
                 importance: list[int] | None = None, pinned: list[bool] | None = None, tags: list[str] | None = None,
                 hashes: list[str] | None = None, offsets: list[int] | None = None) -> None:  # fmt: skip
        self.ids: list[str] = [] if ids is None else ids
        self.kinds: list[str] = [] if kinds is None else kinds
        self.projects: list[str | None] = [] if projects is None else projects
        self.statuses: list[str] = [] if statuses is None else statuses
        self.times: list[float | None] = [] if times is None else times
        self.confidence: list[float] = [] if confidence is None else confidence
        self.importance: list[int] = [] if importance is None else importance
        self.pinned: list[bool] = [] if pinned is None else pinned
        # Each row's tags joined by TAG_SEPARATOR: one string per row loads several times
        # faster than a list per row, and only the rows a query touches are ever split (``tags_of``).
        self.tags: list[str] = [] if tags is None else tags
        self.hashes: list[str] = [] if hashes is None else hashes
        self.offsets: list[int] = [] if offsets is None else offsets
        self.docs_path: Path | None = None
        # A merged view (base then delta segment): rows from ``delta_start`` on read their docs here.
        self.delta_docs_path: Path | None = None
        self.delta_start = -1
        self._row: dict[str, int] | None = None
        self._seen_rows: dict[str, int] = {}
        self._projects: set[str | None] | None = None
        self._docs_cache: dict[int, dict[str, Any]] = {}
        # Set by the index reader: turns a docs line that cannot be read into its own error.
        self.on_damage: Callable[[str, Exception], Exception] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def tags_of(self, row: int) -> list[str]:
        joined = self.tags[row]
        return joined.split(TAG_SEPARATOR) if joined else []

    def id_of(self, row: int) -> str:
        """Row ``row``'s id, remembered so that ``row`` finds it again without a map of every id."""
        record_id = self.ids[row]
        self._seen_rows[record_id] = row
        return record_id

    def row(self, record_id: str) -> int | None:
        """The row of ``record_id``: from the rows ``id_of`` handed out, else from a map of every id (built once)."""
        found = self._seen_rows.get(record_id)
        if found is not None:
            return found
        if self._row is None:
            self._row = {rid: i for i, rid in enumerate(self.ids)}
        return self._row.get(record_id)

    def knows_project(self, project: str) -> bool:
        """Whether any row is ``project``'s (a set built at the first question, as ``row``'s map)."""
        if self._projects is None:
            projects = self.projects
            self._projects = projects.distinct() if isinstance(projects, column_file.Categories) else set(projects)
        return project in self._projects

    def rows_where(self, column: str, accepted: set[Any]) -> Sequence[bool]:
        """Per row, whether ``column``'s value is in ``accepted`` (a categories column answers without decoding rows)."""
        values = getattr(self, column)
        if isinstance(values, column_file.Categories):
            return values.matching(accepted)
        return [value in accepted for value in values]

    def append(self, record: Record, record_hash_value: str) -> None:
        moment = record.timestamp
        self.ids.append(record.id)
        self.kinds.append(record.kind)
        self.projects.append(record.project)
        self.statuses.append(record.status)
        self.times.append(moment.timestamp() if moment else None)
        self.confidence.append(record.confidence)
        self.importance.append(record.importance)
        self.pinned.append(record.pinned)
        self.tags.append(TAG_SEPARATOR.join(t.replace(TAG_SEPARATOR, " ") for t in record.tags))
        self.hashes.append(record_hash_value)

    def append_row_of(self, other: Table, row: int) -> None:
        """Copy row ``row`` of ``other`` (an unchanged record on an incremental refresh)."""
        for name in COLUMNS:
            if name != "offsets":  # offsets are the docs file's, set by ``save``
                getattr(self, name).append(getattr(other, name)[row])

    def doc(self, row: int) -> dict[str, Any]:
        """Title, content and summary of one row, read by offset from the docs file."""
        cached = self._docs_cache.get(row)
        if cached is not None:
            return cached
        assert self.docs_path is not None
        path = self.delta_docs_path if self.delta_docs_path is not None and row >= self.delta_start else self.docs_path
        try:
            with path.open("rb") as handle:
                handle.seek(self.offsets[row])
                # The standard library's parser: a few shown rows per search, and the cold hook imports no orjson.
                value = json.loads(handle.readline())
            if not isinstance(value, dict):
                raise ValueError(f"line at byte {self.offsets[row]} is not a JSON object")
        except (OSError, ValueError) as exc:
            if self.on_damage is None:
                raise
            raise self.on_damage(path.name, exc) from exc
        self._docs_cache[row] = value
        return value

    def check_docs(self) -> None:
        """Check the docs file against the offsets without reading it all: its size, first and last line."""
        assert self.docs_path is not None
        name = self.docs_path.name
        size = self.docs_path.stat().st_size
        if not self.offsets:
            if size:
                raise IndexFileError(name, f"{size} bytes for no records")
            return
        last = self.offsets[-1]
        if self.offsets[0] != 0 or not 0 <= last < size:
            raise IndexFileError(name, f"offsets do not fit a file of {size} bytes")
        with self.docs_path.open("rb") as handle:
            first = handle.readline()
            handle.seek(last)
            tail = handle.read()
        for line in (first, tail):
            if not line.endswith(b"\n") or line.count(b"\n") != 1:
                raise IndexFileError(name, "a line does not end where the next one starts")
            try:
                if not isinstance(json.loads(line), dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                raise IndexFileError(name, describe(exc)) from exc

    def save(self, table_path: Path, docs_path: Path, docs: Sequence[dict[str, Any] | bytes]) -> None:
        """Write the columns and the docs file; a doc given as bytes is an already serialised line."""
        import orjson

        offsets, chunks, position = [], [], 0
        for doc in docs:
            line = doc if isinstance(doc, bytes) else orjson.dumps(doc) + b"\n"
            offsets.append(position)
            chunks.append(line)
            position += len(line)
        docs_path.write_bytes(b"".join(chunks))
        self.offsets = offsets
        self.docs_path = docs_path
        table_path.write_bytes(column_file.dump({name: (COLUMNS[name], getattr(self, name)) for name in COLUMNS}))

    @classmethod
    def load(cls, table_path: Path, docs_path: Path, *, lazy: bool = False) -> Table:
        """The table in ``table_path``; ``lazy``: each column decoded as its rows are read (the cold hook's reader)."""
        try:
            columns = column_file.load(table_path.read_bytes())
        except column_file.ColumnsError as exc:
            raise ValueError(f"{table_path.name}: {exc}") from exc
        if not all(isinstance(columns.get(name), Sequence) for name in COLUMNS):
            raise ValueError(f"{table_path.name}: not a records table")
        table = cls(**{name: columns[name] if lazy else list(columns[name]) for name in COLUMNS})  # type: ignore[arg-type]
        table.docs_path = docs_path
        if len({len(getattr(table, name)) for name in COLUMNS}) != 1:
            raise ValueError(f"{table_path.name}: columns of different lengths")
        return table

    @classmethod
    def merged(cls, base: Table, dead: Sequence[int], delta: Table) -> Table:
        """The live rows of ``base`` (all but ``dead``), then the rows of ``delta``: what a search reads."""
        retired = set(dead)
        if retired:
            keep = [row for row in range(len(base)) if row not in retired]
            columns = {}
            for name in COLUMNS:
                whole = list(getattr(base, name))  # decoded at once: a lazily read column answers one row at a time
                columns[name] = [whole[row] for row in keep] + list(getattr(delta, name))
        else:
            columns = {name: list(getattr(base, name)) + list(getattr(delta, name)) for name in COLUMNS}
        table = cls(**columns)
        table.docs_path = base.docs_path
        table.delta_docs_path = delta.docs_path
        table.delta_start = len(base) - len(retired)
        return table

    def read_doc_lines(self) -> list[bytes]:
        """Every row's serialised doc line (newline included), in row order."""
        assert self.docs_path is not None
        lines = self.docs_path.read_bytes().splitlines(keepends=True)
        if len(lines) != len(self.ids):
            raise ValueError(f"{self.docs_path}: {len(lines)} docs for {len(self.ids)} rows")
        return lines


def read_dead(path: Path) -> list[int]:
    """A delta segment's retired base rows (here, not in ``delta``: the hook's cold reader must not import the writer)."""
    rows = json.loads(path.read_bytes())
    if not isinstance(rows, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in rows):
        raise ValueError(f"{path.name}: not a list of row numbers")
    return rows


TAG_SEPARATOR = "\x1f"  # ASCII unit separator (replaced by a space inside a tag, should one contain it)
# Each column and the kind its file stores it as (``lore.index.columns``).
COLUMNS = {"ids": "str", "kinds": "str", "projects": "str", "statuses": "str", "times": "d", "confidence": "d",
           "importance": "q", "pinned": "B", "tags": "str", "hashes": "str", "offsets": "q"}  # fmt: skip

"""Three-way merges of lore's files by record id: what ``lore merge-driver`` runs inside ``git merge``.

The rules (docs/sync.md says the same for people):

* Records are matched by id across the common ancestor (base), ours and theirs.
  A record changed on one side only takes that side's version; deleted on one
  side and unchanged on the other, it is deleted; deleted on one side and
  edited on the other, the edit is kept (a merge never loses a record).
* A record edited on both sides is merged field by field: a field changed on
  one side only keeps that change, fields only one side has are kept (unknown
  fields included). A field both sides changed differently takes the value of
  the version with the newest ``updated_at`` (else ``status_changed_at``,
  ``ended_at``, its creation time); on a tie, the version whose canonical JSON
  has the larger sha256. The losing version is reported so ``lore sync`` can
  keep it in the audit log.
* An id minted on two clones for two different records (no common ancestor
  holds it, and the two versions differ in creation time or title) is a
  duplicate: the version with the smaller identity digest keeps the id, the
  other is renamed to an id derived from the old id and its own identity.
  Every clone derives the same name, so merging in either direction, or
  twice, gives the same files. A side that already renamed a record is
  followed: the other side's edits go to the new id.
* The output does not depend on which side is "ours": records of the base keep
  their order, new ones follow sorted by creation time and id. Identical
  lines collapse to one.

Pure functions on bytes; no git, no data-dir lock (``lore sync`` holds it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from lore.store.records import Record, format_time, kind_from_id, record_kind_for_pattern_item

_MISSING: Any = object()
_EPOCH = "0000"
_HEX_TAIL = re.compile(r"^(.*-)([0-9a-f]+)$")
_HEADER_COMMENT = re.compile(r"\A((?:[ \t]*#.*\n|[ \t]*\n)*)")
PATTERN_SECTIONS = ("patterns", "anti_patterns")


def jsonl_default_kind(path: str) -> str:
    """The kind of a JSONL file's records whose id does not tell: by the file's name, or its folder's for a month shard.

    By name, not by the whole path: a data dir inside a project's repository has a prefix.
    """
    parent, _, name = path.rpartition("/")
    folder = parent.rpartition("/")[2]
    return _JSONL_NAMES.get(name) or _SHARD_FOLDERS.get(folder) or "observation"


_JSONL_NAMES = {"decisions.jsonl": "decision", "failures.jsonl": "failure", "observations.jsonl": "observation",
                "signals.jsonl": "observation"}  # fmt: skip
_SHARD_FOLDERS = {"decisions": "decision", "failures": "failure", "observations": "observation"}


class MergeParseError(Exception):
    """A side of the merge is not valid JSON/YAML: the caller falls back to a line merge."""


@dataclass(frozen=True)
class Conflict:
    """A record both sides edited in the same field: ``lost`` is the version whose values lost."""

    path: str
    record_id: str
    kept: dict[str, Any]
    lost: dict[str, Any]
    fields: list[str]


@dataclass(frozen=True)
class Rename:
    """A duplicate id: the version from ``side`` ("ours"/"theirs") now lives at ``new_id``."""

    path: str
    old_id: str
    new_id: str
    side: str
    record: dict[str, Any]


@dataclass
class Notes:
    conflicts: list[Conflict] = field(default_factory=list)
    renames: list[Rename] = field(default_factory=list)


# -- values ------------------------------------------------------------------------


class Written:
    """A record as a file holds it: its text, kept byte for byte when the merge does not change it."""

    text: bytes | str

    @property
    def raw(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def rebuilt(self, raw: dict[str, Any]) -> Written:
        """The same kind of value for a record the merge changed."""
        raise NotImplementedError


class Line(Written):
    """A JSONL line: its parsed object (None when it is not a JSON object) and its bytes."""

    __slots__ = ("_raw", "text")

    def __init__(self, raw: dict[str, Any] | None, text: bytes) -> None:
        self._raw = raw
        self.text = text

    @property
    def raw(self) -> dict[str, Any] | None:
        return self._raw

    def rebuilt(self, raw: dict[str, Any]) -> Line:
        return Line(raw, orjson.dumps(raw))


class NotLoreLayout(Exception):
    """patterns.yaml is not laid out as lore writes it: merge the parsed documents instead."""


class Chunk(Written):
    """One item of patterns.yaml as lore lays it out; parsed only when the sides' texts differ."""

    __slots__ = ("_raw", "text")
    text: str

    def __init__(self, text: str, raw: dict[str, Any] | None = None) -> None:
        self.text = text
        self._raw = raw

    @property
    def raw(self) -> dict[str, Any]:
        if self._raw is None:
            from lore.store.readers import YamlSyntaxError, parse_yaml

            try:
                value = parse_yaml(self.text)
            except YamlSyntaxError as exc:
                raise NotLoreLayout(str(exc)) from exc
            if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict)):
                raise NotLoreLayout("an item chunk is not one mapping")
            self._raw = value[0]
        return self._raw

    def rebuilt(self, raw: dict[str, Any]) -> Chunk:
        from lore.store.store import dump_yaml

        return Chunk(dump_yaml({"patterns": [raw]}).split("\n", 1)[1], raw)


def _canonical(value: Any) -> bytes:
    if isinstance(value, Written):
        raw = value.raw
        if raw is not None:
            return _canonical(raw)
        return b"\x00" + (value.text if isinstance(value.text, bytes) else value.text.encode())
    if isinstance(value, bytes):
        return b"\x00" + value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def _same_one(a: Any, b: Any) -> bool:
    if isinstance(a, Written) and isinstance(b, Written) and a.text == b.text:
        return True  # the common case, decided without parsing
    return _canonical(a) == _canonical(b)


def _same(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING or a is None or b is None:
        return a is b
    if isinstance(a, list) and isinstance(b, list) and a and isinstance(a[0], Written):
        return len(a) == len(b) and all(_same_one(x, y) for x, y in zip(a, b, strict=True))
    return _same_one(a, b)


def _raw(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Written):
        return value.raw
    return value if isinstance(value, dict) else None


def _dedup_key(value: Any) -> Any:
    return value.text if isinstance(value, Chunk) else _canonical(value)


def _time_text(value: Any) -> str | None:
    from lore.store.records import parse_time

    parsed = parse_time(value)
    return format_time(parsed) if parsed else None


def updated_time(raw: dict[str, Any]) -> str:
    """When a version was last changed, as sortable text: the "newest updated" of the merge rule."""
    for key in ("updated_at", "status_changed_at", "ended_at", "created_at", "timestamp", "started_at"):
        found = _time_text(raw.get(key))
        if found:
            return found
    return _EPOCH


def creation_time(raw: dict[str, Any] | None) -> str:
    if raw is None:
        return ""
    handoff = raw.get("handoff")
    nested = handoff.get("created_at") if isinstance(handoff, dict) else None
    for value in (raw.get("timestamp"), raw.get("created_at"), raw.get("started_at"), nested):
        found = _time_text(value)
        if found:
            return found
    return ""


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether ``a`` wins over ``b``: newest update first, then the larger content digest (symmetric)."""
    return (updated_time(a), _digest(a)) > (updated_time(b), _digest(b))


def merge_values(base: Any, ours: Any, theirs: Any, ours_wins: bool, path: tuple[str, ...] = (),
                 conflicts: list[str] | None = None) -> Any:  # fmt: skip
    """Three-way merge of JSON values; mappings field by field, anything else whole."""
    if _same(ours, theirs):
        return ours
    if _same(ours, base):
        return theirs
    if _same(theirs, base):
        return ours
    if isinstance(ours, dict) and isinstance(theirs, dict):
        base_map = base if isinstance(base, dict) else {}
        first, second = (ours, theirs) if ours_wins else (theirs, ours)
        merged: dict[str, Any] = {}
        for key in [*first, *(k for k in second if k not in first)]:
            value = merge_values(base_map.get(key, _MISSING), ours.get(key, _MISSING), theirs.get(key, _MISSING),
                                 ours_wins, (*path, str(key)), conflicts)  # fmt: skip
            if value is not _MISSING:
                merged[key] = value
        return merged
    if conflicts is not None:
        conflicts.append(".".join(path) or "(value)")
    return ours if ours_wins else theirs


# -- records keyed by id -------------------------------------------------------------

Entries = list[tuple[str, Any]]


@dataclass
class _Side:
    versions: dict[str, list[Any]]  # key -> its versions in file order (several: the original's appended updates)
    position: dict[str, int]

    @classmethod
    def of(cls, entries: Entries) -> _Side:
        versions: dict[str, list[Any]] = {}
        position: dict[str, int] = {}
        for index, (key, value) in enumerate(entries):
            position.setdefault(key, index)
            bucket = versions.setdefault(key, [])
            if bucket:
                # Identical versions collapse to their last occurrence (which is the one that counts).
                same = _dedup_key(value)
                bucket[:] = [v for v in bucket if _dedup_key(v) != same]
            bucket.append(value)
        return cls(versions, position)

    def effective(self, key: str) -> dict[str, Any] | None:
        found = self.versions.get(key)
        return _raw(found[-1]) if found else None

    def move(self, old: str, new: str, rekey: Callable[[Any, str], Any]) -> None:
        if old not in self.versions or new in self.versions:
            return
        self.versions[new] = [rekey(v, new) for v in self.versions.pop(old)]
        self.position[new] = self.position.pop(old)


class RecordMerger:
    """Merge three versions of a list of records (or edges, or nodes) keyed by id."""

    def __init__(self, path: str, notes: Notes, *, kind_of: Callable[[dict[str, Any]], str] | None = None,
                 rekey: Callable[[Any, str], Any] | None = None, log_conflicts: bool = True) -> None:  # fmt: skip
        self.path = path
        self.notes = notes
        self.kind_of = kind_of
        self.rekey = rekey
        self.log_conflicts = log_conflicts

    def identity(self, raw: dict[str, Any], key: str) -> str:
        """What makes two versions the same record: creation time and title (both survive lore's edits)."""
        assert self.kind_of is not None
        record = Record(kind=self.kind_of(raw), id=key, raw=raw)
        return hashlib.sha256(f"{creation_time(raw)}\n{record.title}".encode()).hexdigest()[:16]

    def merge(self, base: Entries, ours: Entries, theirs: Entries) -> Entries:
        b, o, t = _Side.of(base), _Side.of(ours), _Side.of(theirs)
        if self.kind_of is not None and self.rekey is not None:
            self._follow_renames(b, o, t)
            self._split_duplicates(b, o, t)
        merged: list[tuple[tuple[int, int, str, str], str, list[Any]]] = []
        for key in {**b.versions, **o.versions, **t.versions}:
            versions = self._merge_key(key, b.versions.get(key), o.versions.get(key), t.versions.get(key))
            if not versions:
                continue
            if key in b.position:
                order = (0, b.position[key], "", "")
            else:
                order = (1, 0, creation_time(_raw(versions[-1])), key)
            merged.append((order, key, versions))
        merged.sort(key=lambda item: item[0])
        return [(key, value) for _, key, versions in merged for value in versions]

    def _merge_key(self, key: str, b: list[Any] | None, o: list[Any] | None, t: list[Any] | None) -> list[Any] | None:
        if _same(o, t):
            return _stable_pick(o, t)
        if _same(o, b):
            return t
        if _same(t, b):
            return o
        if o is None:  # deleted here, edited there: the edit is kept
            return t
        if t is None:
            return o
        o_raw, t_raw = _raw(o[-1]), _raw(t[-1])
        if o_raw is None or t_raw is None:
            return _keep_all(o, t)
        ours_wins = _newer(o_raw, t_raw)
        if len(o) > 1 or len(t) > 1:
            winner, loser = (o, t) if ours_wins else (t, o)
            return _keep_all(loser, winner)
        base_raw = _raw(b[-1]) if b else _MISSING
        fields: list[str] = []
        value = merge_values(base_raw, o_raw, t_raw, ours_wins, (), fields)
        fields = [f for f in fields if f != "updated_at"]  # bookkeeping: both sides stamp it on every edit
        if fields and self.log_conflicts:
            kept, lost = (o_raw, t_raw) if ours_wins else (t_raw, o_raw)
            self.notes.conflicts.append(Conflict(self.path, key, kept, lost, sorted(set(fields))))
        return [o[-1].rebuilt(value) if isinstance(o[-1], Written) else value]

    def _split_duplicates(self, b: _Side, o: _Side, t: _Side) -> None:
        taken = set(b.versions) | set(o.versions) | set(t.versions)
        for key in sorted(set(o.versions) & set(t.versions) - set(b.versions)):
            if _same(o.versions[key], t.versions[key]):
                continue
            o_raw, t_raw = o.effective(key), t.effective(key)
            if o_raw is None or t_raw is None:
                continue
            o_id, t_id = self.identity(o_raw, key), self.identity(t_raw, key)
            if o_id == t_id:
                continue  # the same record, added on both sides: an ordinary two-sided edit
            keep_ours = o_id < t_id
            loser, loser_id, side = (t, t_id, "theirs") if keep_ours else (o, o_id, "ours")
            new = renamed_id(key, loser_id, taken)
            taken.add(new)
            assert self.rekey is not None
            loser.move(key, new, self.rekey)
            renamed = loser.effective(new)
            self.notes.renames.append(Rename(self.path, key, new, side, renamed or {}))

    def _follow_renames(self, b: _Side, o: _Side, t: _Side) -> None:
        """One side renamed a duplicate earlier: move base's and the other side's version to the new id."""
        assert self.rekey is not None
        for key in list(b.versions):
            changed = [id(side) for side in (o, t)
                       if key in side.versions and not _same(side.versions[key], b.versions[key])]  # fmt: skip
            if not changed:
                continue  # the common case: no side changed this record, nothing to parse
            b_raw = b.effective(key)
            if b_raw is None:
                continue
            b_id = self.identity(b_raw, key)
            for side, other in ((o, t), (t, o)):
                s_raw = side.effective(key) if id(side) in changed else None
                if s_raw is None or self.identity(s_raw, key) == b_id:
                    continue
                for candidate in _renamed_candidates(key, b_id):
                    c_raw = side.effective(candidate)
                    if c_raw is not None and self.identity(c_raw, candidate) == b_id:
                        b.move(key, candidate, self.rekey)
                        o_raw = other.effective(key)
                        if o_raw is not None and self.identity(o_raw, key) == b_id:
                            other.move(key, candidate, self.rekey)
                        break
                if key not in b.versions:
                    break


def _stable_pick(a: list[Any] | None, b: list[Any] | None) -> list[Any] | None:
    """Equal in meaning; pick the same bytes whichever side is ours."""
    if a is None or b is None:
        return a

    def written(values: list[Any]) -> list[bytes]:
        def one(value: Any) -> bytes:
            if isinstance(value, Written):
                return value.text if isinstance(value.text, bytes) else value.text.encode()
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)

        return [one(v) for v in values]

    return b if written(b) < written(a) else a


def _keep_all(first: list[Any], then: list[Any]) -> list[Any]:
    """Every distinct version of both, ``then``'s last (the original's "last line wins")."""
    later = {_canonical(v) for v in then}
    return [v for v in first if _canonical(v) not in later] + list(then)


def _renamed_candidates(old: str, identity: str) -> list[str]:
    candidates = []
    for attempt in range(8):
        digest = hashlib.sha256(f"{old}\n{identity}\n{attempt}".encode()).hexdigest()
        match = _HEX_TAIL.match(old)
        candidates.append(match.group(1) + digest[: max(8, len(match.group(2)))] if match else f"{old}-{digest[:8]}")
    return candidates


def renamed_id(old: str, identity: str, taken: set[str]) -> str:
    """The new id of a duplicate: derived from the old id and the record's identity, so every clone agrees."""
    candidates = _renamed_candidates(old, identity)
    return next((c for c in candidates if c not in taken), candidates[-1])


def _rekey_raw(value: Any, new: str) -> Any:
    if isinstance(value, Written):
        raw = value.raw
        return value if raw is None else value.rebuilt({**raw, "id": new})
    if isinstance(value, dict):
        return {**value, "id": new}
    return value


# -- JSON Lines -------------------------------------------------------------------


def _jsonl_entries(data: bytes) -> Entries:
    entries: Entries = []
    for text in data.split(b"\n"):
        text = text.strip()
        if not text:
            continue
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
            entries.append((value["id"], Line(value, text)))
        else:
            entries.append(("\x00" + text.decode("utf-8", "replace"), Line(None, text)))
    return entries


def jsonl_keys(data: bytes) -> list[str]:
    """The id of each line of a JSONL text (a line that is not a record: its text), as the merge matches them."""
    return [key for key, _ in _jsonl_entries(data)]


def merge_jsonl(base: bytes, ours: bytes, theirs: bytes, path: str, notes: Notes) -> bytes:
    default_kind = jsonl_default_kind(path)

    def kind_of(raw: dict[str, Any]) -> str:
        return kind_from_id(str(raw.get("id", ""))) or default_kind

    merger = RecordMerger(path, notes, kind_of=kind_of, rekey=_rekey_raw)
    entries = merger.merge(_jsonl_entries(base), _jsonl_entries(ours), _jsonl_entries(theirs))
    lines = [value.text for _, value in entries]
    return b"\n".join(lines) + b"\n" if lines else b""


# -- patterns.yaml --------------------------------------------------------------------


def _load_yaml(data: bytes) -> tuple[str, dict[str, Any]]:
    from lore.store.readers import YamlSyntaxError, parse_yaml

    if not data.strip():
        return "", {}
    try:
        text = data.decode("utf-8")
        document = parse_yaml(text)
    except (UnicodeDecodeError, YamlSyntaxError) as exc:
        raise MergeParseError(f"not valid YAML: {exc}") from exc
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise MergeParseError("expected a mapping at the top")
    header = _HEADER_COMMENT.match(text)
    return (header.group(1) if header else ""), document


def _item_entries(items: Any) -> Entries:
    entries: Entries = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]:
            entries.append((str(item["id"]), item))
        else:
            entries.append(("\x00" + _canonical(item).decode("utf-8", "replace"), item))
    return entries


def _top_keys(*documents: dict[str, Any], first: tuple[str, ...]) -> list[str]:
    keys = [k for k in first if any(k in d for d in documents)]
    for document in documents[:1]:
        keys.extend(k for k in document if k not in keys)
    keys.extend(sorted({str(k) for d in documents[1:] for k in d} - set(keys)))
    return keys


def _merge_scalar_text(base: str, ours: str, theirs: str) -> str:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    return max(ours, theirs)


_SECTION_LINE = re.compile(r"^(patterns|anti_patterns):( \[\])?$")
_ID_LINE = re.compile(r"""^  - id: (['"]?)([A-Za-z][\w.:]*-[\w.:-]+)\1[ \t]*$""")


def split_patterns(data: bytes) -> tuple[str, dict[str, list[str]]]:
    """patterns.yaml as lore (and the original) lays it out: header comments, then each section's items,
    one chunk of text per item (``  - `` at two spaces, its lines deeper). Anything else raises NotLoreLayout."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotLoreLayout("not UTF-8") from exc
    if "\r" in text or "\t" in text.split("\n", 1)[0]:
        raise NotLoreLayout("unusual line endings")
    match = _HEADER_COMMENT.match(text)
    header = match.group(1) if match else ""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text[len(header):].splitlines(keepends=True):
        bare = line.rstrip("\n")
        section = _SECTION_LINE.match(bare)
        if section:
            if section.group(1) in sections:
                raise NotLoreLayout(f"{section.group(1)} twice")
            sections[section.group(1)] = []
            current = None if section.group(2) else sections[section.group(1)]
        elif current is not None and (bare.startswith("  - ") or bare == "  -"):
            current.append(line if line.endswith("\n") else line + "\n")
        elif current and (not bare.strip() or bare.startswith("    ")):
            current[-1] += line if line.endswith("\n") else line + "\n"
        else:
            raise NotLoreLayout(f"unexpected line {bare[:40]!r}")
    return header, sections


def _chunk_entries(chunks: list[str]) -> Entries:
    entries: Entries = []
    for text in chunks:
        first = _ID_LINE.match(text.split("\n", 1)[0])
        chunk = Chunk(text)
        if first:
            entries.append((first.group(2), chunk))
            continue
        record_id = chunk.raw.get("id")
        key = str(record_id) if isinstance(record_id, str) and record_id else "\x00" + text
        entries.append((key, chunk))
    return entries


def _merge_patterns_chunked(base: bytes, ours: bytes, theirs: bytes, path: str, notes: Notes) -> bytes:
    from lore.store.store import PATTERNS_HEADER

    (b_head, b_sec), (o_head, o_sec), (t_head, t_sec) = (split_patterns(d) for d in (base, ours, theirs))
    out = [_merge_scalar_text(b_head, o_head, t_head) or PATTERNS_HEADER]
    for section in PATTERN_SECTIONS:
        if not any(section in sections for sections in (b_sec, o_sec, t_sec)):
            continue

        def kind_of(raw: dict[str, Any], section: str = section) -> str:
            return record_kind_for_pattern_item(raw, section)

        merger = RecordMerger(path, notes, kind_of=kind_of, rekey=_rekey_raw)
        entries = merger.merge(*(_chunk_entries(sections.get(section, [])) for sections in (b_sec, o_sec, t_sec)))
        chunks = [value.text for _, value in entries]
        out.append(f"{section}:\n" + "".join(chunks) if chunks else f"{section}: []\n")
    return "".join(out).encode("utf-8")


def merge_patterns(base: bytes, ours: bytes, theirs: bytes, path: str, notes: Notes) -> bytes:
    """By item; items whose text no side changed are neither parsed nor rewritten (a 2,700-item file
    costs seconds to load and dump in full), unless a side is not in lore's layout."""
    attempt = Notes()
    try:
        merged = _merge_patterns_chunked(base, ours, theirs, path, attempt)
    except NotLoreLayout:
        return _merge_pattern_documents(base, ours, theirs, path, notes)
    notes.conflicts.extend(attempt.conflicts)
    notes.renames.extend(attempt.renames)
    return merged


def _merge_pattern_documents(base: bytes, ours: bytes, theirs: bytes, path: str, notes: Notes) -> bytes:
    from lore.store.store import PATTERNS_HEADER, dump_yaml

    (b_head, b_doc), (o_head, o_doc), (t_head, t_doc) = _load_yaml(base), _load_yaml(ours), _load_yaml(theirs)
    document: dict[str, Any] = {}
    for key in _top_keys(b_doc, o_doc, t_doc, first=PATTERN_SECTIONS):
        b_val, o_val, t_val = b_doc.get(key, _MISSING), o_doc.get(key, _MISSING), t_doc.get(key, _MISSING)
        if key in PATTERN_SECTIONS and all(v is _MISSING or isinstance(v, list) for v in (b_val, o_val, t_val)):

            def kind_of(raw: dict[str, Any], section: str = key) -> str:
                return record_kind_for_pattern_item(raw, section)

            merger = RecordMerger(path, notes, kind_of=kind_of, rekey=_rekey_raw)
            entries = merger.merge(*(_item_entries(v if v is not _MISSING else []) for v in (b_val, o_val, t_val)))
            document[key] = [value for _, value in entries]
            continue
        value = merge_values(b_val, o_val, t_val, _digest(o_val if o_val is not _MISSING else None)
                             > _digest(t_val if t_val is not _MISSING else None))  # fmt: skip
        if value is not _MISSING:
            document[key] = value
    header = _merge_scalar_text(b_head, o_head, t_head) or PATTERNS_HEADER
    return (header + dump_yaml(document)).encode("utf-8")


# -- graph.json ---------------------------------------------------------------------


def _load_json(data: bytes) -> dict[str, Any]:
    if not data.strip():
        return {}
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MergeParseError(f"not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise MergeParseError("expected a JSON object")
    return document


def edge_key(edge: Any) -> str:
    if isinstance(edge, dict) and "from" in edge and "to" in edge:
        return f"{edge.get('from')}\x00{edge.get('to')}\x00{edge.get('relation', 'relates_to')}"
    return "\x00" + _canonical(edge).decode("utf-8", "replace")


def dump_json(document: dict[str, Any]) -> bytes:
    """JSON as lore's store writes it (two-space indent, final newline)."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


def merge_graph(base: bytes, ours: bytes, theirs: bytes, path: str, notes: Notes) -> bytes:
    b_doc, o_doc, t_doc = _load_json(base), _load_json(ours), _load_json(theirs)
    document: dict[str, Any] = {}
    for key in _top_keys(b_doc, o_doc, t_doc, first=("nodes", "edges")):
        b_val, o_val, t_val = b_doc.get(key, _MISSING), o_doc.get(key, _MISSING), t_doc.get(key, _MISSING)
        values = [v for v in (b_val, o_val, t_val) if v is not _MISSING]
        merger = RecordMerger(path, notes, log_conflicts=False)
        if key == "nodes" and all(isinstance(v, dict) for v in values):
            entries = merger.merge(*([(str(k), n) for k, n in v.items()] if v is not _MISSING else []
                                     for v in (b_val, o_val, t_val)))  # fmt: skip
            document[key] = dict(entries)
        elif key == "edges" and all(isinstance(v, list) for v in values):
            entries = merger.merge(*([(edge_key(e), e) for e in v] if v is not _MISSING else []
                                     for v in (b_val, o_val, t_val)))  # fmt: skip
            document[key] = [edge for _, edge in entries]
        else:
            value = merge_values(b_val, o_val, t_val, _digest(o_val if o_val is not _MISSING else None)
                                 > _digest(t_val if t_val is not _MISSING else None))  # fmt: skip
            if value is not _MISSING:
                document[key] = value
    return dump_json(document)


# -- session files --------------------------------------------------------------------


def merge_session(base: bytes, ours: bytes, theirs: bytes, path: str, notes: Notes) -> tuple[bytes, list[dict[str, Any]]]:
    """One handoff per file; a duplicate id's renamed version is returned to be written as its own file."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".json")

    def entries(data: bytes) -> Entries:
        document = _load_json(data)
        return [(str(document.get("id") or stem), document)] if document else []

    merger = RecordMerger(path, notes, kind_of=lambda raw: "handoff", rekey=_rekey_raw)
    merged = merger.merge(entries(base), entries(ours), entries(theirs))
    kept = [value for key, value in merged if key == stem] or [value for _, value in merged[:1]]
    extra = [value for key, value in merged if key != stem and value is not (kept[0] if kept else None)]
    return (dump_json(kept[-1]) if kept else b""), extra


def replace_references(value: Any, old: str, new: str) -> Any:
    """``value`` with every string equal to ``old`` replaced by ``new`` (ids named in a record's fields)."""
    if isinstance(value, str):
        return new if value == old else value
    if isinstance(value, list):
        return [replace_references(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: replace_references(v, old, new) for k, v in value.items()}
    return value


# -- what a file holds, for counting what changed -----------------------------------------


def record_versions(path: str, data: bytes | None) -> dict[str, tuple[str, Any]]:
    """id -> (kind, value) of the records one file holds (the last version of an id), for change counts.

    Values are compared as ``Written`` texts first, so counting the changes in a
    large patterns.yaml parses only the items that differ.
    """
    if not data:
        return {}
    name = path.rsplit("/", 1)[-1]
    found: dict[str, tuple[str, Any]] = {}
    if name.endswith(".jsonl"):
        default_kind = jsonl_default_kind(path)
        for key, line in _jsonl_entries(data):
            if not key.startswith("\x00"):
                found[key] = (kind_from_id(key) or default_kind, line)
        return found
    if path.endswith("patterns/data/patterns.yaml"):
        try:
            _, sections = split_patterns(data)
            for section, chunks in sections.items():
                for key, chunk in _chunk_entries(chunks):
                    if not key.startswith("\x00"):
                        found[key] = (section, chunk)
        except NotLoreLayout:
            try:
                _, document = _load_yaml(data)
            except MergeParseError:
                return {}
            for section in PATTERN_SECTIONS:
                for key, item in _item_entries(document.get(section)):
                    if not key.startswith("\x00"):
                        found[key] = (section, item)
        return {key: (record_kind_for_pattern_item(_raw(value) or {}, section), value)
                for key, (section, value) in found.items()}  # fmt: skip
    if "transfer/data/sessions/" in path and name.endswith(".json"):
        try:
            document = _load_json(data)
        except MergeParseError:
            return {}
        if document:
            found[str(document.get("id") or name.removesuffix(".json"))] = ("handoff", document)
    return found


def same_version(a: Any, b: Any) -> bool:
    return _same_one(a, b)


def version_raw(value: Any) -> dict[str, Any]:
    return _raw(value) or {}

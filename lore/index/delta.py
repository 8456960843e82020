"""Refresh proportional to the change: records appended to the JSONL files go to a delta segment.

Measured before this existed (10k records, 2 cores): one new decision made the
next ``lore index`` spend 1.1 s beyond a no-op run, because a refresh re-read the
whole store (0.23 s), loaded model2vec (0.31 s), and rewrote every whole-corpus
file (table, docs, vectors, BM25 postings: ~0.4 s). Here a refresh that only
*appends* lines to the JSONL record files (what ``lore add``, the hook's capture
and most writes do) reads just the appended bytes and writes a small delta
segment beside the untouched base files:

- ``delta-table-N.bin``/``delta-docs-N.jsonl``: the delta rows (a record's newer
  version included);
- ``delta-vectors-N.npy``: their embeddings (the light query encoder: no model2vec, and for a
  few records no ``tokenizers`` either: ``embedder.PureBpe``);
- ``delta-bm25-*-N``: their BM25 term counts; a query computes impacts from
  collection statistics merged over base and delta (``bm25.Delta``);
- ``delta-dead-N.json``: base rows a newer version in the delta retires.

``meta.json`` is replaced last, as for any refresh: the generation, ``CURRENT`` and every safety property of
``manager`` stay as they were. Whole process at 10k records this path cost 0.20-0.29 s
beyond a no-op ``lore index``; about 0.1 s now (docs/index.md, "Whole process"). Anything else (an edited or rewritten line, YAML or
handoff changes, graph edits, a new record that makes or changes an edge, a delta
past ``DELTA_LIMIT``) takes the full refresh of ``build``, which also folds the
delta back into the base.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from lore.index import bm25
from lore.index import graph as graph_index
from lore.index.freshness import changed_sources, source_manifest
from lore.index.layout import GenerationMeta, file_sizes
from lore.index.table import COLUMNS, Table, doc_of, embedding_text, lexical_fields, read_dead, record_hash
from lore.store.fileio import atomic_write
from lore.store.layout import SHARDABLE, jsonl_files, jsonl_kind
from lore.store.readers import appended_records

if TYPE_CHECKING:
    from lore.index.build import BuildReport
    from lore.index.reader import IndexReader
    from lore.store.records import Record

# A delta past this many rows is folded into the base by the next refresh (a full refresh:
# ~1 s at 10k records); below it every append costs the same small amount.
DELTA_MIN_LIMIT = 256
DELTA_SHARE_LIMIT = 0.05
DELTA_KEYS = ("delta_table", "delta_docs", "delta_vectors", "delta_bm25_vocab", "delta_bm25_forward", "delta_dead")


def delta_names(revision: int) -> dict[str, str]:
    return {
        "delta_table": f"delta-table-{revision}.bin",
        "delta_docs": f"delta-docs-{revision}.jsonl",
        "delta_vectors": f"delta-vectors-{revision}.npy",
        "delta_bm25_vocab": f"delta-bm25-vocab-{revision}.json",
        "delta_bm25_forward": f"delta-bm25-forward-{revision}.npz",
        "delta_dead": f"delta-dead-{revision}.json",
    }


def _implicit(adjacency: graph_index.Adjacency, record_id: str) -> bool:
    """Whether the saved graph holds an edge derived from record ``record_id``'s own fields."""
    out = any(e.implicit for e in adjacency.out.get(record_id, []))
    return out or any(e.implicit and e.relation == "supersedes" for e in adjacency.into.get(record_id, []))


def _segments_of(reader: IndexReader, directory: Path) -> tuple[list[str | None], list[str | None], Table, list[int]]:
    """The base's ids and kinds by base row (None for a retired row), the delta table and the dead rows, from a loaded reader.

    The reader the manager's check loaded already holds the merged table: reading the base
    table again cost 11 ms at 10k records (about 50 ms at 50k).
    """
    merged = reader.table
    dead = list(reader.dead_rows)
    if not reader.has_delta:
        return list[str | None](merged.ids), list[str | None](merged.kinds), Table(), dead
    start = merged.delta_start
    size = start + len(dead)
    retired = set(dead)
    live = [row for row in range(size) if row not in retired]
    if len(live) != start:
        raise ValueError("the merged table does not match its dead rows")
    ids: list[str | None] = [None] * size
    kinds: list[str | None] = [None] * size
    for position, row in enumerate(live):
        ids[row] = merged.ids[position]
        kinds[row] = merged.kinds[position]
    delta = Table(**{name: getattr(merged, name)[start:] for name in COLUMNS})
    delta.docs_path = directory / reader.meta.files["delta_docs"]
    return ids, kinds, delta, dead


MOVED_LINES_LIMIT = 256  # the most trailing lines an insertion may have moved (a clone's unpushed records)


def _inserted_records(path: Path, kind: str, content: bytes, old_size: int,
                      digest: str | None) -> list[tuple[int, int, Record]] | None:  # fmt: skip
    """The records of lines inserted before the last lines of what was indexed, or None if it is not that shape.

    What ``lore sync`` makes of a clone's own unpushed records when the remote moved on: the
    remote's new lines go in before them (a rebase), so the file is the indexed text with a block
    of lines inserted before its last few lines. Found by trying each count of trailing lines
    (up to MOVED_LINES_LIMIT) against the indexed digest: one pass over the file. The moved lines
    must be clean records none of the inserted lines names, as their index rows stay as they are.
    """
    if digest is None or not content.endswith(b"\n"):
        return None
    grown = len(content) - old_size
    starts = []  # where each candidate run of moved trailing lines starts, shortest run first
    position = len(content) - 1
    for _ in range(MOVED_LINES_LIMIT):
        start = content.rfind(b"\n", 0, position) + 1
        if start - grown < 0:
            break
        starts.append(start)
        if start == 0:
            break
        position = start - 1
    candidates = [start for start in starts if start - grown == 0 or content[start - grown - 1 : start - grown] == b"\n"]
    if not candidates:
        return None
    view = memoryview(content)
    lowest = min(candidates) - grown
    prefix = hashlib.sha256(view[:lowest])
    for start in candidates:
        cut = start - grown  # the indexed text was content[:cut] + content[start:]
        hashed = prefix.copy()
        hashed.update(view[lowest:cut])
        hashed.update(view[start:])
        if hashed.hexdigest()[:24] != digest:
            continue
        inserted = appended_records(path, kind, bytes(view[cut:start]), 0)
        moved = appended_records(path, kind, content, start)
        if inserted is None or moved is None or {r.id for _, _, r in inserted} & {r.id for _, _, r in moved}:
            return None
        return inserted
    return None


def _last_file(data_dir: Path, kind: str) -> str | None:
    """The last file a load reads records of ``kind`` from (relative), of its single file and shards."""
    files = jsonl_files(data_dir, SHARDABLE[kind])
    return str(files[-1].relative_to(data_dir)) if files else None


def _appended(meta: GenerationMeta, data_dir: Path,
              changed: list[str]) -> tuple[dict[str, Record], dict[str, Any], dict[str, str], set[str]] | None:  # fmt: skip
    """The records appended to the ``changed`` record files since ``meta`` (the last line of an id wins), the files'
    manifest and digests after the read, and the ids appended to an earlier file than the last of their kind;
    None when a change is not an append of whole lines (or adds nothing)."""
    manifest = source_manifest(data_dir)
    digests = dict(meta.digests)
    appended: list[Record] = []
    earlier: set[str] = set()
    for relative in changed:
        kind = jsonl_kind(relative)  # a single JSONL file or one of its month shards, each on its own
        if kind is None:
            return None
        path = data_dir / relative
        try:
            stat = path.stat()
            content = path.read_bytes()
        except OSError:
            return None
        old_size = meta.sources[relative][0] if relative in meta.sources else 0  # 0: a new month's shard
        if len(content) <= old_size:
            return None  # not an append of whole lines
        # One pass over the file: the old prefix's digest, then the same hash carried on to the
        # end (three passes before: 8 ms each at 10k records, 12 MB; 40 ms each at 50k).
        view = memoryview(content)
        hashed: Any = None
        if not old_size or content[old_size - 1 : old_size] == b"\n":
            hashed = hashlib.sha256(view[:old_size])
            if relative in meta.sources and hashed.hexdigest()[:24] != meta.digests.get(relative):
                hashed = None  # something before the old end changed
        if hashed is not None:
            hashed.update(view[old_size:])
            found = appended_records(path, kind, content, old_size)
        else:
            found = _inserted_records(path, kind, content, old_size, meta.digests.get(relative))
            hashed = hashlib.sha256(view)
        if found is None:
            return None
        if found and kind in SHARDABLE and relative != _last_file(data_dir, kind):
            # A known id appended to an earlier file than the last of its kind loses to the later one in a load.
            earlier.update(record.id for _, _, record in found)
        appended.extend(record for _, _, record in found)
        # What was read, stamped with the mtime from before the read: a write after it moves
        # the mtime, so the next freshness check sees it.
        manifest[relative] = [len(content), stat.st_mtime_ns]
        digests[relative] = hashed.hexdigest()[:24]
    latest: dict[str, Record] = {}
    for record in appended:  # later lines win, as in ``Store.load``
        latest.pop(record.id, None)
        latest[record.id] = record
    if not latest:
        return None
    return latest, manifest, digests, earlier


def _write_rows(directory: Path, files: dict[str, str], names: dict[str, str], delta: Table, kept_delta: list[int],
                fresh: list[Record], dead: set[int]) -> tuple[Table, list[int]]:  # fmt: skip
    """Write the delta segment's table, retired base rows and BM25 counts under ``names``; the table and the
    retired rows, sorted."""
    has_delta = "delta_table" in files
    # The table: kept delta rows as they were (columns and serialised docs), then the fresh ones.
    table = Table()
    docs: list[dict[str, Any] | bytes] = []
    old_lines = delta.read_doc_lines() if has_delta else []
    for row in kept_delta:
        table.append_row_of(delta, row)
        docs.append(old_lines[row])
    for record in fresh:
        table.append(record, record_hash(record))
        docs.append(doc_of(record))
    table.save(directory / names["delta_table"], directory / names["delta_docs"], docs)
    new_dead = sorted(dead)
    (directory / names["delta_dead"]).write_bytes(orjson.dumps(new_dead))

    # BM25 counts: kept rows copied, fresh ones analysed.
    old_forward = (bm25.read_forward(directory / files["delta_bm25_vocab"], directory / files["delta_bm25_forward"])
                   if has_delta else bm25.forward_from_terms([]))  # fmt: skip
    sources = [*kept_delta, *(-(k + 1) for k in range(len(fresh)))]
    forward = bm25.reassemble(old_forward, sources, [lexical_fields(r) for r in fresh])
    bm25.write_forward(forward, directory / names["delta_bm25_vocab"], directory / names["delta_bm25_forward"])
    return table, new_dead


def _write_vectors(directory: Path, files: dict[str, str], names: dict[str, str], kept_delta: list[int],
                   fresh: list[Record], model: str | None) -> bool:  # fmt: skip
    """Write the delta segment's vectors: the kept rows' as they were, then the fresh records' (False: no model
    to embed them)."""
    import numpy as np

    from lore.embedder import get_query_encoder
    from lore.errors import ModelError
    from lore.index import vectors

    has_delta = "delta_table" in files
    try:
        encoded = get_query_encoder(model).encode([embedding_text(r) for r in fresh])
    except ModelError:
        return False
    old_matrix = vectors.load_file(directory / files["delta_vectors"]) if has_delta else None
    kept = np.asarray(old_matrix[kept_delta], dtype=np.float32) if old_matrix is not None and kept_delta else None
    matrix = encoded if kept is None else np.concatenate([kept, encoded])
    vectors.save_as(directory / names["delta_vectors"], matrix)
    return True


def _delta_can_hold(latest: dict[str, Record], earlier: set[str], base_rows: dict[str, int], delta_rows: dict[str, int],
                    base_kinds: list[str | None], delta: Table, dangling: set[str], adjacency: Any) -> bool:  # fmt: skip
    """Whether a delta segment can hold the ``latest`` records, or the full refresh must read them."""
    for record in latest.values():
        if record.id in earlier and (record.id in base_rows or record.id in delta_rows):
            return False  # which version wins is the load order's: the full refresh reads it
        if graph_index.implicit_edges([record]) or record.id in dangling:
            return False  # the graph would change: the full refresh rebuilds it
        row = base_rows.get(record.id)
        known_kind = base_kinds[row] if row is not None else delta.kinds[delta_rows[record.id]] if record.id in delta_rows else None
        if known_kind is not None and (known_kind != record.kind or record.kind == "observation" or _implicit(adjacency, record.id)):
            return False
    return True


def append(data_dir: Path, directory: Path, meta: GenerationMeta, reader: IndexReader | None = None, *,
           model: str | None = None) -> tuple[GenerationMeta, BuildReport] | None:  # fmt: skip
    """Write a delta segment for records appended since ``meta``; None when the full refresh is needed.

    ``reader``: the generation's reader, loaded (by the manager's check), whose parts are used
    instead of reading them again. Returns the new meta (not yet committed: the caller writes
    ``meta.json``) and the report.
    """
    from lore.index.build import BuildReport

    changed = changed_sources(meta, data_dir)
    if not changed:
        return None
    read = _appended(meta, data_dir, changed)
    if read is None:
        return None
    latest, manifest, digests, earlier = read
    files = meta.files
    has_delta = "delta_table" in files
    try:
        if reader is not None:
            base_ids, base_kinds, delta, dead = _segments_of(reader, directory)
            adjacency = reader.adjacency
        else:
            base = Table.load(directory / files["table"], directory / files["docs"])
            base_ids, base_kinds = list[str | None](base.ids), list[str | None](base.kinds)
            delta = Table.load(directory / files["delta_table"], directory / files["delta_docs"]) if has_delta else Table()
            dead = read_dead(directory / files["delta_dead"]) if has_delta else []
            adjacency = graph_index.Adjacency.load_file(directory / files["graph"])
        dangling = graph_index.load_dangling(directory / files["graph"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    if dangling is None:
        return None
    retired = set(dead)
    base_rows = {rid: row for row, rid in enumerate(base_ids) if rid is not None and row not in retired}
    delta_rows = {rid: row for row, rid in enumerate(delta.ids)}
    if not _delta_can_hold(latest, earlier, base_rows, delta_rows, base_kinds, delta, dangling, adjacency):
        return None
    updated_base = [base_rows[rid] for rid in latest if rid in base_rows]
    kept_delta = [row for row, rid in enumerate(delta.ids) if rid not in latest]
    total_delta = len(kept_delta) + len(latest)
    if total_delta + len(dead) + len(updated_base) > max(DELTA_MIN_LIMIT, DELTA_SHARE_LIMIT * len(base_ids)):
        return None  # fold the delta into the base

    revision = meta.revision + 1
    names = delta_names(revision)
    fresh = list(latest.values())
    table, new_dead = _write_rows(directory, files, names, delta, kept_delta, fresh, retired | set(updated_base))
    warning = None
    if meta.embeddings and "vectors" in files:
        if not _write_vectors(directory, files, names, kept_delta, fresh, model):
            return None
    else:
        names.pop("delta_vectors")

    all_names = {key: name for key, name in files.items() if key not in DELTA_KEYS} | names
    gone = set(new_dead)
    merged_kinds = [kind for row, kind in enumerate(base_kinds) if row not in gone and kind is not None] + table.kinds
    counts: dict[str, int] = {}
    for kind in merged_kinds:
        counts[kind] = counts.get(kind, 0) + 1
    import time

    new_meta = meta._replace(
        revision=revision, updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), counts=counts,
        files=all_names, sizes=file_sizes(directory, all_names), sources=manifest,
        digests={name: digests[name] for name in manifest if name in digests}, damaged=None,
    )  # fmt: skip
    if set(new_meta.digests) != set(manifest):
        return None  # a file appeared meanwhile: let the full refresh see it
    added = sum(1 for r in fresh if r.id not in base_rows and r.id not in delta_rows)
    report = BuildReport("incremental", len(merged_kinds), added=added, updated=len(fresh) - added,
                         warnings=[warning] if warning else [], delta=True)  # fmt: skip
    return new_meta, report


def commit(directory: Path, meta: GenerationMeta, previous: GenerationMeta) -> None:
    """Write ``meta.json`` (the commit point), then delete the delta files of older revisions.

    The previous revision's files stay for a reader that opened it a moment ago (as after a
    full refresh); before, every append left its six files behind until the next fold.
    """
    import contextlib

    from lore.index.layout import META

    atomic_write(directory / META, meta.to_json())
    keep = {*meta.files.values(), *previous.files.values()}
    for child in directory.glob("delta-*"):
        if child.name not in keep:
            with contextlib.suppress(OSError):
                child.unlink()

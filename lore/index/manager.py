"""Build, refresh, check and open the derived index.

Layout of the index dir::

    CURRENT                 names the live generation (atomically replaced)
    gen-<id>/meta.json      the commit point: manifest, model, file names, counts
    gen-<id>/lexical/       Whoosh index (positions: phrase queries)
    gen-<id>/bm25-*-N.*     BM25F impact index (the lexical channel) and its forward counts
    gen-<id>/vectors-N.npy  embeddings (row i = table row i)
    gen-<id>/table-N.json   records table columns; docs-N.jsonl holds the texts
    gen-<id>/graph-N.json   typed-edge adjacency
    gen-<id>/DAMAGED        written when a reader found a file unreadable: rebuild
    .build.lock             one builder at a time

A full build writes a new generation and then swaps ``CURRENT``; an
incremental refresh writes new ``-N`` files, updates Whoosh in place
(its commit is atomic) and then replaces ``meta.json``. Killing either at any
moment leaves the previous state usable; anything unreadable is rebuilt:
``meta.json`` records every file's size, ``IndexReader.load`` checks them and
opens what a search reads before the search starts (cheap: memory-map headers,
JSON the search would parse anyway, a few stats), and ``build`` and ``status``
also open Whoosh.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from lore import __version__
from lore.errors import IndexUnavailableError, LockTimeoutError, ModelError
from lore.index import bm25, lexical
from lore.index import graph as graph_index
from lore.index.table import (
    IndexFileError,
    Table,
    describe,
    doc_of,
    embedding_text,
    lexical_fields,
    record_hash,
)
from lore.paths import Locations
from lore.store.fileio import atomic_write
from lore.store.layout import source_files

if TYPE_CHECKING:
    import numpy as np

    from lore.store import Store
    from lore.store.records import Record

FORMAT_VERSION = 9
CURRENT = "CURRENT"
META = "meta.json"
LOCK = ".build.lock"
DAMAGED = "DAMAGED"
MODEL_CHANGED = "embedding model changed"
# Above this share of changed records a fresh build is cheaper than patching.
INCREMENTAL_LIMIT = 0.3

Progress = Callable[[str, int, int], None]


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


class IndexDamagedError(IndexUnavailableError):
    """A file of the live generation cannot be read; ``file`` names it, ``reason`` says why."""

    def __init__(self, file: str, reason: str, *, replaced: bool = False) -> None:
        self.file = file
        self.reason = reason
        # The generation was replaced or refreshed while it was read: not damage, just run again.
        self.replaced = replaced
        if replaced:
            super().__init__(f"the index changed while it was being read ({file}: {reason})",
                             hint="another lore process rebuilt it; run the command again")  # fmt: skip
        else:
            super().__init__(f"index unreadable ({file}: {reason})",
                             hint="the next search rebuilds it, or run `lore index`")  # fmt: skip


@dataclass
class BuildReport:
    mode: str  # "full", "incremental" or "up-to-date"
    records: int
    added: int = 0
    updated: int = 0
    deleted: int = 0
    seconds: float = 0.0
    embeddings: bool = True
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class IndexStatus:
    exists: bool
    stale: bool
    reason: str
    meta: dict[str, Any] | None
    size_bytes: int
    index_dir: Path


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:24]


def _tree_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_size
    return total


class IndexManager:
    def __init__(self, locations: Locations, store: Store | None = None) -> None:
        self.locations = locations
        self.index_dir = locations.index_dir
        self.data_dir = locations.data_dir
        self._store = store

    @property
    def store(self) -> Store:
        # The store (YAML, validation) is only needed to build; readers stay light.
        if self._store is None:
            from lore.store import Store

            self._store = Store(self.data_dir)
        return self._store

    # -- reading the current state ------------------------------------------------
    def current_dir(self) -> Path | None:
        try:
            name = (self.index_dir / CURRENT).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not name.startswith("gen-") or "/" in name:
            return None
        path = self.index_dir / name
        return path if path.is_dir() else None

    def read_meta(self) -> tuple[Path, dict[str, Any]] | None:
        """The live generation and its meta, or None if missing, corrupt or incompatible."""
        directory = self.current_dir()
        if directory is None:
            return None
        try:
            meta = orjson.loads((directory / META).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
            return None
        files = meta.get("files") or {}
        if not all((directory / str(name)).exists() for name in files.values()):
            return None
        if not lexical.is_valid(directory / "lexical") or (directory / DAMAGED).exists():
            return None
        return directory, meta

    def damage_note(self) -> str | None:
        """What a reader found unreadable in the live generation (its ``DAMAGED`` marker), if anything."""
        directory = self.current_dir()
        if directory is None:
            return None
        try:
            text = (directory / DAMAGED).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None
        return (text.splitlines() or ["index unreadable"])[0][:300]

    def check(self, directory: Path, meta: dict[str, Any], *, deep: bool = True) -> IndexDamagedError | None:
        """Why this generation cannot be read, or None: ``IndexReader.load`` (plus Whoosh if ``deep``)."""
        reader = IndexReader(directory, meta)
        try:
            reader.load(deep=deep)
        except IndexDamagedError as error:
            return error
        finally:
            reader.close()
        return None

    def source_manifest(self) -> dict[str, list[int]]:
        manifest: dict[str, list[int]] = {}
        for path in source_files(self.data_dir):
            with contextlib.suppress(OSError):
                stat = path.stat()
                manifest[str(path.relative_to(self.data_dir))] = [stat.st_size, stat.st_mtime_ns]
        return manifest

    def staleness(self, meta: dict[str, Any]) -> str | None:
        """Why the index is out of step with the data dir, or None if it is not (stat only)."""
        from lore.index.embedder import model_identity, model_spec

        if meta.get("damaged"):  # set by a reader that found a file unreadable
            return str(meta["damaged"])
        if meta.get("data_dir") != str(self.data_dir.resolve()):
            return "built for another data dir"
        if meta.get("embeddings"):
            if meta.get("model") != model_identity():
                return MODEL_CHANGED
        elif "model_wanted" in meta:
            # Built without embeddings because the configured model could not be loaded: only
            # another model (or this one appearing) makes re-embedding worth trying, not every search.
            if meta.get("model_wanted") != model_identity():
                return f"{MODEL_CHANGED} (the index was built without embeddings)"
        elif meta.get("model_spec") != model_spec():  # indexes from before ``model_wanted``
            return f"{MODEL_CHANGED} (the index was built without embeddings)"
        indexed = meta.get("sources") or {}
        current = self.source_manifest()
        if set(indexed) != set(current):
            return "files added or removed"
        for name, (size, mtime) in current.items():
            old = indexed[name]
            if old[0] != size or old[1] != mtime:
                digests = meta.get("digests") or {}
                path = self.data_dir / name
                if digests.get(name) and digests[name] == _file_digest(path):
                    continue  # touched, not changed
                return f"{name} changed"
        return None

    def status(self) -> IndexStatus:
        found = self.read_meta()
        size = _tree_size(self.index_dir) if self.index_dir.exists() else 0
        if found is None:
            if not (self.index_dir / CURRENT).exists():
                reason = "no index yet"
            else:
                reason = self.damage_note() or "index unreadable or from another version"
            return IndexStatus(False, True, reason, None, size, self.index_dir)
        directory, meta = found
        damage = self.check(directory, meta)
        if damage is not None:
            return IndexStatus(False, True, damage.message, None, size, self.index_dir)
        stale_reason = self.staleness(meta)
        return IndexStatus(True, stale_reason is not None, stale_reason or "up to date", meta, size, self.index_dir)

    # -- building ----------------------------------------------------------------
    @contextlib.contextmanager
    def _build_lock(self, timeout: float) -> Any:
        import filelock

        self.index_dir.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(self.index_dir / LOCK), timeout=timeout)
        try:
            with lock:
                yield
        except filelock.Timeout as exc:
            raise LockTimeoutError(f"another lore process is building the index in {self.index_dir}") from exc

    def build(self, *, rebuild: bool = False, progress: Progress = _no_progress, lock_timeout: float = 600.0,
              procs: int | None = None) -> BuildReport:  # fmt: skip
        """Bring the index up to date: incrementally when possible, from scratch when needed."""
        self.store.require()
        started = time.perf_counter()
        with self._build_lock(lock_timeout):
            warnings: list[str] = []
            found = None if rebuild else self.read_meta()
            if found is None and not rebuild and (note := self.damage_note()):
                warnings.append(f"{note}; rebuilt it")
            if found is not None:
                directory, meta = found
                reason = self.staleness(meta)
                full = reason is not None and (reason.startswith(MODEL_CHANGED) or reason == "built for another data dir")
                # Whatever a refresh keeps, or an up-to-date index serves, must be readable.
                damage = None if full else self.check(directory, meta)
                if damage is not None:
                    warnings.append(f"{damage.message}; rebuilt it")
                elif reason is None:
                    return BuildReport("up-to-date", sum((meta.get("counts") or {}).values()),
                                       seconds=time.perf_counter() - started, embeddings=bool(meta.get("embeddings")))  # fmt: skip
                elif not full:
                    report = self._incremental(directory, meta, progress)
                    if report is not None:
                        report.seconds = time.perf_counter() - started
                        return report
            report = self._full(progress, procs)
        report.warnings[:0] = warnings
        report.seconds = time.perf_counter() - started
        return report

    def _embed(self, records: list[Record], progress: Progress) -> tuple[np.ndarray | None, str | None, str | None]:
        return self._embed_texts([embedding_text(r) for r in records], progress)

    @staticmethod
    def _embed_texts(texts: list[str], progress: Progress = _no_progress) -> tuple[np.ndarray | None, str | None, str | None]:
        """(vectors, model identity, model error) — a broken model leaves lexical search working."""
        from lore.index.embedder import get_embedder, model_identity, model_spec

        spec = model_spec()
        try:
            embedder = get_embedder(spec)
        except ModelError as error:
            return None, None, error.message
        chunks = []
        step = 4096
        for start in range(0, len(texts), step):
            chunks.append(embedder.encode(texts[start : start + step]))
            progress("embeddings", min(start + step, len(texts)), len(texts))
        import numpy as np

        matrix = np.concatenate(chunks) if chunks else np.zeros((0, embedder.dim), dtype=np.float32)
        return matrix, model_identity(spec), None

    def _full(self, progress: Progress, procs: int | None) -> BuildReport:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        snapshot = self.store.load()
        records = list(snapshot.records.values())
        timings["load"] = time.perf_counter() - t0
        self.index_dir.mkdir(parents=True, exist_ok=True)
        directory = self.index_dir / f"gen-{int(time.time() * 1000):x}-{secrets.token_hex(3)}"
        directory.mkdir()
        revision = 1

        # Embeddings and BM25 analysis run beside Whoosh: in a separate process for
        # large builds (Whoosh indexing is pure Python and holds the GIL, so a thread
        # would only interleave), in a thread for small ones (a process costs ~1 s to start).
        embedded: dict[str, Any] = {}
        texts = [embedding_text(r) for r in records]
        record_fields = [r.fields() for r in records]
        field_pairs = [lexical_fields(r) for r in records]

        def embed() -> None:
            t = time.perf_counter()
            try:
                if len(texts) >= EMBED_PROCESS_THRESHOLD:
                    *embedded["result"], embedded["forward"] = _side_jobs_in_subprocess(texts, field_pairs)
                else:
                    embedded["result"] = self._embed_texts(texts, progress)
            except BaseException as exc:  # surfaced in the main thread
                embedded["error"] = exc
            embedded["seconds"] = time.perf_counter() - t

        worker = threading.Thread(target=embed, name="lore-embed", daemon=True)
        worker.start()

        t1 = time.perf_counter()
        total = len(records)

        def lexical_docs() -> Any:
            for number, (record, fields) in enumerate(zip(records, record_fields, strict=True), start=1):
                if number % 2000 == 0:
                    progress("lexical", number, total)
                yield lexical.LexicalDoc(record.id, fields["title"], fields["body"], fields["extra"], fields["tags"])

        use_procs = procs if procs is not None else (2 if total >= 20000 and (os.cpu_count() or 1) >= 2 else 1)
        lexical.create(directory / "lexical", lexical_docs(), procs=use_procs)
        progress("lexical", total, total)
        timings["lexical"] = time.perf_counter() - t1

        t2 = time.perf_counter()
        table = Table()
        docs = []
        for record in records:
            table.append(record, record_hash(record))
            docs.append(doc_of(record))
        names = self._file_names(revision)
        table.save(directory / names["table"], directory / names["docs"], docs)
        graph = graph_index.build(snapshot.records, self._explicit_edges(snapshot))
        graph_index.save_as(directory / names["graph"], graph)
        timings["table_graph"] = time.perf_counter() - t2

        worker.join()
        if "error" in embedded:
            raise embedded["error"]
        matrix, identity, warning = embedded["result"]
        timings["embeddings"] = embedded["seconds"]
        t3 = time.perf_counter()
        forward = embedded.get("forward") or bm25.build_forward(field_pairs)
        bm25.save(directory, names, forward, bm25.derive(forward))
        timings["bm25"] = time.perf_counter() - t3
        if matrix is not None:
            from lore.index import vectors

            vectors.save_as(directory / names["vectors"], matrix)
        else:
            names.pop("vectors")
        meta = self._meta(directory, snapshot_counts(records), names, revision, identity, matrix is not None, built=True,
                          model_error=warning)  # fmt: skip
        atomic_write(directory / META, orjson.dumps(meta, option=orjson.OPT_INDENT_2))
        atomic_write(self.index_dir / CURRENT, directory.name.encode())
        self._collect_garbage(keep=directory)
        return BuildReport("full", total, added=total, embeddings=matrix is not None,
                           warnings=[f"{warning} (indexed without embeddings)"] if warning else [], timings=timings)  # fmt: skip

    def _incremental(self, directory: Path, meta: dict[str, Any], progress: Progress) -> BuildReport | None:
        from lore.index import vectors

        files = meta["files"]
        try:
            old = Table.load(directory / files["table"], directory / files["docs"])
            old_doc_lines = old.read_doc_lines()
            old_vectors = vectors.load_file(directory / files["vectors"], len(old)) if "vectors" in files else None
            old_forward = bm25.load_forward(directory, files)
            old_graph = graph_index.Adjacency.load_file(directory / files["graph"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: the caller rebuilds
        snapshot = self.store.load()
        records = list(snapshot.records.values())
        old_rows = {rid: i for i, rid in enumerate(old.ids)}
        hashes = [record_hash(r) for r in records]
        changed = [r for r, h in zip(records, hashes, strict=True) if old_rows.get(r.id) is None or old.hashes[old_rows[r.id]] != h]
        current_ids = {r.id for r in records}
        deleted = [rid for rid in old.ids if rid not in current_ids]
        if len(changed) + len(deleted) > max(50, INCREMENTAL_LIMIT * max(len(records), 1)):
            return None
        revision = int(meta.get("revision", 1)) + 1
        names = self._file_names(revision)

        new_matrix = None
        identity = meta.get("model")
        warning = None
        if old_vectors is not None:
            embedded_changed, identity, warning = self._embed(changed, progress)
            if embedded_changed is None:
                return None
            import numpy as np

            fresh = {r.id: i for i, r in enumerate(changed)}
            # Unchanged rows gathered in one fancy-index read of the memory map, fresh rows
            # filled after. Only rows the old index holds are read: it may hold none at all.
            dim = old_vectors.shape[1] if old_vectors.ndim == 2 else embedded_changed.shape[1]
            new_matrix = np.zeros((len(records), dim), dtype=np.float32)
            kept = [(row, old_rows[r.id]) for row, r in enumerate(records) if r.id not in fresh]
            if kept:
                new_positions, old_positions = (np.asarray(side, dtype=np.int64) for side in zip(*kept, strict=True))
                new_matrix[new_positions] = old_vectors[old_positions]
            for row, record in enumerate(records):
                if record.id in fresh:
                    new_matrix[row] = embedded_changed[fresh[record.id]]
        table = Table()
        docs: list[dict[str, Any] | bytes] = []
        changed_ids = {r.id for r in changed}
        for record, h in zip(records, hashes, strict=True):
            if record.id in changed_ids:
                table.append(record, h)
                docs.append(doc_of(record))
            else:  # unchanged: its columns are copied, not re-derived from the record
                table.append_row_of(old, old_rows[record.id])
                docs.append(old_doc_lines[old_rows[record.id]])  # copied as bytes, not re-parsed
        table.save(directory / names["table"], directory / names["docs"], docs)
        explicit = self._explicit_edges(snapshot)
        if graph_index.same_edges(graph_index.valid_edges(snapshot.records, explicit), old_graph):
            names["graph"] = files["graph"]  # most refreshes touch no edge: keep the file, skip NetworkX
        else:
            graph_index.save_as(directory / names["graph"], graph_index.build(snapshot.records, explicit))
        if new_matrix is not None:
            vectors.save_as(directory / names["vectors"], new_matrix)
        else:
            names.pop("vectors")
        fresh_rows = {r.id: k for k, r in enumerate(changed)}
        changed_fields = [r.fields() for r in changed]
        sources = [-(fresh_rows[r.id] + 1) if r.id in fresh_rows else old_rows[r.id] for r in records]
        forward = bm25.reassemble(old_forward, sources, [lexical_fields(r) for r in changed])
        bm25.save(directory, names, forward, bm25.derive(forward))
        upserts = [lexical.LexicalDoc(r.id, f["title"], f["body"], f["extra"], f["tags"])
                   for r, f in zip(changed, changed_fields, strict=True)]  # fmt: skip
        lexical.update(directory / "lexical", upserts, deleted)
        new_meta = self._meta(directory, snapshot_counts(records), names, revision, identity, new_matrix is not None,
                              built=False, previous=meta,
                              model_error=meta.get("model_error"))  # fmt: skip
        atomic_write(directory / META, orjson.dumps(new_meta, option=orjson.OPT_INDENT_2))
        self._collect_old_revisions(directory, keep={*names.values(), *files.values()})
        added = sum(1 for r in changed if r.id not in old_rows)
        return BuildReport("incremental", len(records), added=added, updated=len(changed) - added, deleted=len(deleted),
                           embeddings=new_matrix is not None, warnings=[warning] if warning else [])  # fmt: skip

    @staticmethod
    def _file_names(revision: int) -> dict[str, str]:
        return {
            "table": f"table-{revision}.json",
            "docs": f"docs-{revision}.jsonl",
            "graph": f"graph-{revision}.json",
            "vectors": f"vectors-{revision}.npy",
            **bm25.file_names(revision),
        }

    @staticmethod
    def _explicit_edges(snapshot: Any) -> list[graph_index.GraphEdge]:
        return graph_index.explicit_edges(snapshot.edges)

    def _meta(self, directory: Path, counts: dict[str, int], names: dict[str, str], revision: int,
              identity: str | None, embeddings: bool, *, built: bool, previous: dict[str, Any] | None = None,
              model_error: str | None = None) -> dict[str, Any]:  # fmt: skip
        from lore.index.embedder import model_identity, model_spec

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest = self.source_manifest()
        return {
            "format": FORMAT_VERSION,
            "lore_version": __version__,
            "data_dir": str(self.store.data_dir.resolve()),
            "built_at": now if built or previous is None else previous.get("built_at", now),
            "updated_at": now,
            "revision": revision,
            "model": identity,
            "model_spec": model_spec(),
            # The model that was configured (its identity): without embeddings, the index is
            # stale only once this changes (``staleness``), not on every search.
            "model_wanted": model_identity(),
            "model_error": None if embeddings else model_error,
            "embeddings": embeddings,
            "counts": counts,
            "files": names,
            "sizes": _file_sizes(directory, names),
            "sources": manifest,
            "digests": {name: _file_digest(self.store.data_dir / name) for name in manifest},
        }

    def _collect_garbage(self, keep: Path) -> None:
        for child in self.index_dir.iterdir():
            if child.is_dir() and child.name.startswith("gen-") and child != keep:
                shutil.rmtree(child, ignore_errors=True)

    @staticmethod
    def _collect_old_revisions(directory: Path, keep: set[str]) -> None:
        # The previous revision's files stay for readers that opened it a moment ago.
        for child in directory.iterdir():
            if child.is_file() and child.name != META and "-" in child.name and child.name not in keep:
                with contextlib.suppress(OSError):
                    child.unlink()

    # -- opening for search --------------------------------------------------------
    def open(self, *, policy: str = "refresh", progress: Progress = _no_progress) -> tuple[IndexReader, list[str]]:
        """An up-to-date reader (building or refreshing first if needed), plus warnings.

        The reader is loaded (``IndexReader.load``) before it is returned: a generation with an
        unreadable file is rebuilt, like a missing one, whatever the policy.
        """
        warnings: list[str] = []
        attempts = 3
        for attempt in range(attempts):
            found = self.read_meta()
            if found is None:
                warnings.extend(self.build(progress=progress).warnings)
                found = self.read_meta()
            else:
                reason = self.staleness(found[1])
                if reason is not None:
                    if policy == "refresh":
                        try:
                            report = self.build(progress=progress, lock_timeout=10.0)
                            warnings.extend(report.warnings)
                        except LockTimeoutError:
                            warnings.append("index is being rebuilt by another process; results may be stale")
                        found = self.read_meta() or found
                    elif policy == "warn":
                        warnings.append(f"index is stale ({reason}); run `lore index`")
            if found is None:
                raise IndexUnavailableError(f"could not build an index in {self.index_dir}")
            reader = IndexReader(*found)
            try:
                reader.load()
            except IndexDamagedError as damage:
                reader.close()
                if attempt == attempts - 1:
                    raise
                if not damage.replaced:
                    # Under the build lock, ``build`` checks the generation again: one another
                    # process is refreshing right now is left to it, a damaged one is rebuilt
                    # (its warning names the file).
                    warnings.extend(self.build(progress=progress).warnings)
                continue
            self._explain_missing_embeddings(found[1], warnings)
            return reader, list(dict.fromkeys(warnings))
        raise AssertionError("unreachable")

    @staticmethod
    def _explain_missing_embeddings(meta: dict[str, Any], warnings: list[str]) -> None:
        error = meta.get("model_error")
        if not meta.get("embeddings") and error and not any("lexical" in w or "embedding" in w for w in warnings):
            warnings.append(f"the index has no embeddings: {error}")


EMBED_PROCESS_THRESHOLD = 3000


def _side_jobs_in_subprocess(texts: list[str], fields: list[tuple[str, str]]) -> tuple[Any, str | None, str | None, bm25.Forward | None]:
    """Embed and analyse in ``python -m lore.index.build_worker``.

    Returns (vectors, model identity, warning, BM25 forward index); on a worker
    failure embeds here and leaves the forward index to the caller (None).
    """
    import subprocess
    import sys
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory(prefix="lore-build-") as tmp:
        work = Path(tmp)
        (work / "texts.jsonl").write_bytes(b"\n".join(orjson.dumps(t) for t in texts))
        (work / "fields.jsonl").write_bytes(b"\n".join(orjson.dumps(f) for f in fields))
        # One core for the worker, one for Whoosh: left alone, the tokenizer's thread pool
        # (and BLAS) would take both and slow the Whoosh writer it runs beside.
        single = dict.fromkeys(("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
        env = {**os.environ, **single, "TOKENIZERS_PARALLELISM": "false"}
        done = subprocess.run([sys.executable, "-m", "lore.index.build_worker", str(work)], capture_output=True,
                              check=False, env=env)  # fmt: skip
        if done.returncode == 0 and (work / "embedding.json").exists():
            info = orjson.loads((work / "embedding.json").read_bytes())
            forward = bm25.read_forward(work / "vocab.json", work / "forward.npz")
            if info.get("identity") is None:
                return None, None, info.get("warning"), forward
            return np.load(work / "vectors.npy"), info["identity"], info.get("warning"), forward
    return (*IndexManager._embed_texts(texts), None)


def _file_sizes(directory: Path, names: dict[str, str]) -> dict[str, int]:
    """Every file of a generation (the Whoosh ones included) and its size, for ``IndexReader.load``."""
    sizes = {name: (directory / name).stat().st_size for name in names.values()}
    for child in sorted((directory / "lexical").iterdir()):
        if child.is_file() and not child.name.endswith("LOCK"):  # Whoosh's (empty) write lock comes and goes
            sizes[f"lexical/{child.name}"] = child.stat().st_size
    return sizes


def _still_live(directory: Path, meta: dict[str, Any]) -> bool:
    """Whether ``directory`` is still the live generation, at the revision ``meta`` describes."""
    try:
        live = (directory.parent / CURRENT).read_text(encoding="utf-8").strip()
        on_disk = orjson.loads((directory / META).read_bytes())
    except (OSError, ValueError):
        return False
    return (live == directory.name and isinstance(on_disk, dict)
            and (on_disk.get("revision"), on_disk.get("updated_at")) == (meta.get("revision"), meta.get("updated_at")))  # fmt: skip


T = TypeVar("T")


def snapshot_counts(records: list[Record]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.kind] = counts.get(record.kind, 0) + 1
    return counts


class IndexReader:
    """One generation's parts, each loaded on first use (``load`` opens them up front and checks every file).

    A part that cannot be read raises ``IndexDamagedError`` naming its file. Found by
    ``load`` (``IndexManager.open`` calls it), the generation is simply rebuilt; found
    later, mid-query (Whoosh, opened only for quoted phrases, or a docs line), the
    generation is also marked ``DAMAGED`` so that the next open rebuilds it, and
    ``meta["damaged"]`` makes ``staleness`` tell a warm session to reopen.
    """

    def __init__(self, directory: Path, meta: dict[str, Any]) -> None:
        self.directory = directory
        self.meta = meta
        self._table: Table | None = None
        self._lexical: lexical.LexicalSearcher | None = None
        self._bm25: bm25.Bm25Index | None = None
        self._vectors: Any = None
        self._adjacency: graph_index.Adjacency | None = None
        self._active: list[bool] | None = None
        self._searchable: list[bool] | None = None
        self._checking = False

    def load(self, *, deep: bool = False) -> None:
        """Open what every search reads and check every file; Whoosh is opened only if ``deep``.

        Costs a few stats, the docs file's first and last line and the head of Whoosh's
        table of contents beyond what a search loads anyway (no whoosh import unless ``deep``).
        """
        self._checking = True
        try:
            sizes = self.meta.get("sizes")
            for name, size in (sizes.items() if isinstance(sizes, dict) else ()):
                try:
                    actual = (self.directory / str(name)).stat().st_size
                except OSError as exc:
                    raise self._damaged(str(name), exc) from exc
                if actual != size:
                    raise self._damaged(str(name), IndexFileError(str(name), f"{actual} bytes, {size} expected"))
            table = self.table
            self._load(self.meta["files"]["docs"], table.check_docs)
            _ = self.bm25, self.adjacency
            if self.has_vectors:
                _ = self.vectors
            self._load("lexical", lambda: lexical.check(self.directory / "lexical", len(table) if deep else None))
        finally:
            self._checking = False

    def _load(self, file: str, loader: Callable[[], T]) -> T:
        try:
            return loader()
        except MemoryError:
            raise
        except Exception as exc:
            raise self._damaged(file, exc) from exc

    def _damaged(self, file: str, exc: Exception) -> IndexDamagedError:
        if isinstance(exc, IndexDamagedError):
            return exc
        if isinstance(exc, IndexFileError):
            file = exc.name
        if not _still_live(self.directory, self.meta):
            return IndexDamagedError(file, describe(exc), replaced=True)
        error = IndexDamagedError(file, describe(exc))
        if not self._checking:  # mid-query: leave a note for the next open (``load``'s caller rebuilds now)
            self.meta["damaged"] = error.message
            with contextlib.suppress(OSError):
                atomic_write(self.directory / DAMAGED, error.message.encode())
        return error

    @property
    def has_vectors(self) -> bool:
        return bool(self.meta.get("embeddings")) and "vectors" in self.meta.get("files", {})

    @property
    def table(self) -> Table:
        if self._table is None:
            files = self.meta["files"]
            self._table = self._load(files["table"], lambda: Table.load(self.directory / files["table"],
                                                                         self.directory / files["docs"]))  # fmt: skip
            self._table.on_damage = self._damaged
        return self._table

    @property
    def lexical(self) -> lexical.LexicalSearcher:
        if self._lexical is None:
            self._lexical = self._load("lexical", lambda: lexical.LexicalSearcher(self.directory / "lexical"))
        return self._lexical

    @property
    def bm25(self) -> bm25.Bm25Index:
        if self._bm25 is None:
            rows = len(self.table)
            self._bm25 = self._load("bm25", lambda: bm25.Bm25Index(self.directory, self.meta["files"], rows))
        return self._bm25

    @property
    def vectors(self) -> Any:
        if self._vectors is None:
            import numpy as np

            from lore.index import vectors

            rows = len(self.table)
            name = self.meta["files"]["vectors"]
            stored = self._load(name, lambda: vectors.load_file(self.directory / name, rows))
            # Indexes are float32 on disk (memory-mapped as is); convert anything else once.
            self._vectors = stored if stored.dtype == np.float32 else np.asarray(stored, dtype=np.float32)
        return self._vectors

    @property
    def active_rows(self) -> list[bool]:
        """Which rows are active (the default filter), computed once per reader."""
        if self._active is None:
            self._active = [status == "active" for status in self.table.statuses]
        return self._active

    @property
    def searchable_rows(self) -> list[bool]:
        """Active rows and candidates (what `lore search` shows by default), computed once per reader."""
        if self._searchable is None:
            self._searchable = [status in ("active", "candidate") for status in self.table.statuses]
        return self._searchable

    @property
    def adjacency(self) -> graph_index.Adjacency:
        if self._adjacency is None:
            name = self.meta["files"]["graph"]
            self._adjacency = self._load(name, lambda: graph_index.Adjacency.load_file(self.directory / name))
        return self._adjacency

    def close(self) -> None:
        """Release what the reader holds open: Whoosh's files and the memory maps of the arrays.

        A memory-mapped array keeps a file descriptor until the array is freed, and the
        table refers back to the reader (``on_damage``), so a dropped reader waited for
        the cyclic garbage collector: the warm helper, which swaps in a fresh reader
        after every write, kept six descriptors (and the replaced files' pages) per
        refresh. Dropping the references here frees them at once; a part used again
        after ``close`` is simply loaded again.
        """
        if self._lexical is not None:
            self._lexical.close()
            self._lexical = None
        if self._table is not None:
            self._table.on_damage = None
        self._table = self._bm25 = self._vectors = self._adjacency = None
        self._active = self._searchable = None

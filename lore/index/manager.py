"""Build, refresh, check and open the derived index.

Layout of the index dir::

    CURRENT                 names the live generation (atomically replaced)
    gen-<id>/meta.json      the commit point: manifest, model, file names, counts
    gen-<id>/lexical/       Whoosh index (positions: phrase queries)
    gen-<id>/bm25-*-N.*     BM25F impact index (the lexical channel) and its forward counts
    gen-<id>/vectors-N.npy  embeddings (row i = table row i)
    gen-<id>/table-N.json   records table columns; docs-N.jsonl holds the texts
    gen-<id>/graph-N.json   typed-edge adjacency
    .build.lock             one builder at a time

A full build writes a new generation and then swaps ``CURRENT``; an
incremental refresh writes new ``-N`` files, updates Whoosh in place
(its commit is atomic) and then replaces ``meta.json``. Killing either at any
moment leaves the previous state usable; anything unreadable is rebuilt.
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
from typing import TYPE_CHECKING, Any

import orjson

from lore import __version__
from lore.errors import IndexUnavailableError, LockTimeoutError, ModelError
from lore.index import bm25, lexical
from lore.index import graph as graph_index
from lore.index.table import Table, doc_of, embedding_text, record_hash
from lore.paths import Locations
from lore.store.fileio import atomic_write
from lore.store.layout import source_files

if TYPE_CHECKING:
    import numpy as np

    from lore.store import Store
    from lore.store.records import Record

FORMAT_VERSION = 7
CURRENT = "CURRENT"
META = "meta.json"
LOCK = ".build.lock"
# Above this share of changed records a fresh build is cheaper than patching.
INCREMENTAL_LIMIT = 0.3

Progress = Callable[[str, int, int], None]


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


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
        if not lexical.is_valid(directory / "lexical"):
            return None
        return directory, meta

    def source_manifest(self) -> dict[str, list[int]]:
        manifest: dict[str, list[int]] = {}
        for path in source_files(self.data_dir):
            with contextlib.suppress(OSError):
                stat = path.stat()
                manifest[str(path.relative_to(self.data_dir))] = [stat.st_size, stat.st_mtime_ns]
        return manifest

    def staleness(self, meta: dict[str, Any]) -> str | None:
        """Why the index is out of step with the data dir, or None if it is not (stat only)."""
        from lore.index.embedder import model_identity

        if meta.get("data_dir") != str(self.data_dir.resolve()):
            return "built for another data dir"
        if meta.get("embeddings") and meta.get("model") != model_identity():
            return "embedding model changed"
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
            reason = "no index yet" if not (self.index_dir / CURRENT).exists() else "index unreadable or from another version"
            return IndexStatus(False, True, reason, None, size, self.index_dir)
        _, meta = found
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
            found = None if rebuild else self.read_meta()
            if found is not None:
                directory, meta = found
                reason = self.staleness(meta)
                if reason is None:
                    return BuildReport("up-to-date", sum((meta.get("counts") or {}).values()),
                                       seconds=time.perf_counter() - started, embeddings=bool(meta.get("embeddings")))  # fmt: skip
                if reason not in ("embedding model changed", "built for another data dir"):
                    report = self._incremental(directory, meta, progress)
                    if report is not None:
                        report.seconds = time.perf_counter() - started
                        return report
            report = self._full(progress, procs)
        report.seconds = time.perf_counter() - started
        return report

    def _embed(self, records: list[Record], progress: Progress) -> tuple[np.ndarray | None, str | None, str | None]:
        return self._embed_texts([embedding_text(r) for r in records], progress)

    @staticmethod
    def _embed_texts(texts: list[str], progress: Progress = _no_progress) -> tuple[np.ndarray | None, str | None, str | None]:
        """(vectors, model identity, warning) — a broken model leaves lexical search working."""
        from lore.index.embedder import get_embedder, model_identity

        try:
            embedder = get_embedder()
        except ModelError as error:
            return None, None, f"{error.message}; indexed without embeddings (lexical search only)"
        chunks = []
        step = 4096
        for start in range(0, len(texts), step):
            chunks.append(embedder.encode(texts[start : start + step]))
            progress("embeddings", min(start + step, len(texts)), len(texts))
        import numpy as np

        matrix = np.concatenate(chunks) if chunks else np.zeros((0, embedder.dim), dtype=np.float32)
        return matrix, model_identity(), None

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
        field_pairs = [(f["title"], f["body"]) for f in record_fields]

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
        meta = self._meta(snapshot_counts(records), names, revision, identity, matrix is not None, built=True)
        meta["null_cosine"] = _null_cosine(matrix)
        atomic_write(directory / META, orjson.dumps(meta, option=orjson.OPT_INDENT_2))
        atomic_write(self.index_dir / CURRENT, directory.name.encode())
        self._collect_garbage(keep=directory)
        return BuildReport("full", total, added=total, embeddings=matrix is not None,
                           warnings=[warning] if warning else [], timings=timings)  # fmt: skip

    def _incremental(self, directory: Path, meta: dict[str, Any], progress: Progress) -> BuildReport | None:
        from lore.index import vectors

        files = meta["files"]
        try:
            old = Table.load(directory / files["table"], directory / files["docs"])
            old_doc_lines = old.read_doc_lines()
            old_vectors = vectors.load_file(directory / files["vectors"]) if "vectors" in files else None
            old_forward = bm25.load_forward(directory, files)
        except (OSError, ValueError, KeyError, orjson.JSONDecodeError):
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
        old_graph = graph_index.Adjacency.load_file(directory / files["graph"])
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
        forward = bm25.reassemble(old_forward, sources, [(f["title"], f["body"]) for f in changed_fields])
        bm25.save(directory, names, forward, bm25.derive(forward))
        upserts = [lexical.LexicalDoc(r.id, f["title"], f["body"], f["extra"], f["tags"])
                   for r, f in zip(changed, changed_fields, strict=True)]  # fmt: skip
        lexical.update(directory / "lexical", upserts, deleted)
        new_meta = self._meta(snapshot_counts(records), names, revision, identity, new_matrix is not None,
                              built=False, previous=meta)  # fmt: skip
        new_meta["null_cosine"] = _null_cosine(new_matrix)
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
        return [graph_index.GraphEdge(e.source, e.target, e.relation, e.weight) for e in snapshot.edges]

    def _meta(self, counts: dict[str, int], names: dict[str, str], revision: int, identity: str | None,
              embeddings: bool, *, built: bool, previous: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        from lore.index.embedder import model_spec

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
            "embeddings": embeddings,
            "counts": counts,
            "files": names,
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
        """An up-to-date reader (building or refreshing first if needed), plus warnings."""
        warnings: list[str] = []
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
        directory, meta = found
        return IndexReader(directory, meta), warnings


EMBED_PROCESS_THRESHOLD = 3000


def _null_cosine(matrix: Any) -> list[float] | None:
    """How close off-topic queries get to this corpus: the evidence-gap floor's reference."""
    if matrix is None or len(matrix) == 0:
        return None
    from lore.index.embedder import get_query_encoder
    from lore.rank.gap import NULL_QUERIES, null_statistics

    try:
        stats = null_statistics(get_query_encoder().encode(list(NULL_QUERIES)), matrix)
    except ModelError:
        return None
    return [round(v, 5) for v in stats] if stats else None


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


def snapshot_counts(records: list[Record]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.kind] = counts.get(record.kind, 0) + 1
    return counts


class IndexReader:
    """Lazy access to one generation's parts; each loads on first use."""

    def __init__(self, directory: Path, meta: dict[str, Any]) -> None:
        self.directory = directory
        self.meta = meta
        self._table: Table | None = None
        self._lexical: lexical.LexicalSearcher | None = None
        self._bm25: bm25.Bm25Index | None = None
        self._vectors: Any = None
        self._adjacency: graph_index.Adjacency | None = None
        self._active: list[bool] | None = None

    @property
    def has_vectors(self) -> bool:
        return bool(self.meta.get("embeddings")) and "vectors" in self.meta.get("files", {})

    @property
    def table(self) -> Table:
        if self._table is None:
            files = self.meta["files"]
            self._table = Table.load(self.directory / files["table"], self.directory / files["docs"])
        return self._table

    @property
    def lexical(self) -> lexical.LexicalSearcher:
        if self._lexical is None:
            self._lexical = lexical.LexicalSearcher(self.directory / "lexical")
        return self._lexical

    @property
    def bm25(self) -> bm25.Bm25Index:
        if self._bm25 is None:
            self._bm25 = bm25.Bm25Index(self.directory, self.meta["files"], len(self.table))
        return self._bm25

    @property
    def vectors(self) -> Any:
        if self._vectors is None:
            import numpy as np

            from lore.index import vectors

            stored = vectors.load_file(self.directory / self.meta["files"]["vectors"])
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
    def adjacency(self) -> graph_index.Adjacency:
        if self._adjacency is None:
            self._adjacency = graph_index.Adjacency.load_file(self.directory / self.meta["files"]["graph"])
        return self._adjacency

    def close(self) -> None:
        if self._lexical is not None:
            self._lexical.close()
            self._lexical = None

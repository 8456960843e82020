"""Build the index: a full build into a new generation, or a refresh of the live one.

A full build writes a new generation and then swaps ``CURRENT``; an
incremental refresh writes new ``-N`` files and then replaces ``meta.json``.
Killing either at any moment leaves the previous state usable. Both run under the build lock
(``IndexManager.build``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.errors import ModelError
from lore.index import bm25
from lore.index import graph as graph_index
from lore.index.freshness import source_manifest
from lore.index.layout import CURRENT, META, GenerationMeta, file_digest, file_names, file_sizes
from lore.index.table import Table, doc_of, embedding_text, lexical_fields, record_hash
from lore.store.fileio import atomic_write
from lore.version import __version__

if TYPE_CHECKING:
    import numpy as np

    from lore.store import Store
    from lore.store.records import Record

# Above this share of changed records a fresh build is cheaper than patching.
INCREMENTAL_LIMIT = 0.3

Progress = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
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
    delta: bool = False  # an incremental refresh that only wrote a delta segment (``lore.index.delta``)
    timings: dict[str, float] = field(default_factory=dict)



def embed_texts(texts: list[str], model: str | None,
                progress: Progress = no_progress) -> tuple[np.ndarray | None, str | None, str | None]:  # fmt: skip
    """(vectors, model identity, model error) — a broken model leaves lexical search working.

    ``model``: the configured model (``Settings.embed_model``; None: the bundled one).
    """
    from lore.embedder import get_query_encoder, model_identity, model_spec

    spec = model_spec(model)
    try:
        # The encoder the queries and the delta segment use (model2vec's own sums the float16
        # embeddings in float16: up to 9e-5 apart): every vector of the index comes from one
        # function, so a base plus a delta holds exactly the vectors a rebuild would.
        embedder = get_query_encoder(spec)
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



def _merged_vectors(records: list[Record], old_rows: dict[str, int], old_vectors: Any, changed: list[Record],
                    embedded_changed: Any) -> Any:  # fmt: skip
    """The vectors of ``records``, in order: the old index's row for an unchanged record, the fresh one for a changed one.

    Unchanged rows gathered in one fancy-index read of the memory map, fresh rows filled
    after. Only rows the old index holds are read: it may hold none at all.
    """
    import numpy as np

    fresh = {r.id: i for i, r in enumerate(changed)}
    dim = old_vectors.shape[1] if old_vectors.ndim == 2 else embedded_changed.shape[1]
    new_matrix = np.zeros((len(records), dim), dtype=np.float32)
    kept = [(row, old_rows[r.id]) for row, r in enumerate(records) if r.id not in fresh]
    if kept:
        new_positions, old_positions = (np.asarray(side, dtype=np.int64) for side in zip(*kept, strict=True))
        new_matrix[new_positions] = old_vectors[old_positions]
    for row, record in enumerate(records):
        if record.id in fresh:
            new_matrix[row] = embedded_changed[fresh[record.id]]
    return new_matrix


class Builder:
    """Writes generations of the index in ``index_dir`` from the records of ``store``."""

    def __init__(self, index_dir: Path, store: Store, model: str | None) -> None:
        self.index_dir = index_dir
        self.store = store
        self.data_dir = store.data_dir
        self.model = model  # Settings.embed_model (None: the bundled model)

    def full(self, progress: Progress) -> BuildReport:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        snapshot = self.store.load()
        records = list(snapshot.records.values())
        timings["load"] = time.perf_counter() - t0
        self.index_dir.mkdir(parents=True, exist_ok=True)
        directory = self.index_dir / f"gen-{int(time.time() * 1000):x}-{secrets.token_hex(3)}"
        directory.mkdir()
        revision = 1
        names = file_names(revision)

        texts = [embedding_text(r) for r in records]
        embedding = EmbeddingJob(texts, self.model, progress, work_in=directory)
        total = len(records)
        counts = snapshot_counts(records)
        try:
            t1 = time.perf_counter()
            forward = bm25.build_forward(lexical_fields(r) for r in records)
            bm25.save(directory, names, forward, bm25.derive(forward))
            del forward
            progress("lexical", total, total)
            timings["bm25"] = time.perf_counter() - t1

            t2 = time.perf_counter()
            table = Table()
            docs = []
            for record in records:
                table.append(record, record_hash(record))
                docs.append(doc_of(record))
            table.save(directory / names["table"], directory / names["docs"], docs)
            del docs, table
            embedding.docs_written(directory, directory / names["docs"])
            explicit = graph_index.explicit_edges(snapshot.edges)
            graph_index.save_edges(directory / names["graph"], graph_index.ordered_edges(snapshot.records, explicit),
                                   graph_index.dangling_ids(snapshot.records, explicit))  # fmt: skip
            timings["table_graph"] = time.perf_counter() - t2
        except BaseException:
            embedding.cancel()
            raise
        # The records are written out: their memory (~230 MB at 50k) is free for this
        # process's share of the embeddings, which is where a large build peaked.
        del snapshot, records

        t3 = time.perf_counter()
        matrix, identity, warning = embedding.result()
        timings["embeddings_wait"] = time.perf_counter() - t3
        timings["embeddings"] = embedding.seconds
        timings["embedding_chunks_here"] = embedding.chunks_here
        if embedding.hook_files_seconds is not None:
            timings["hook_files_in_worker"] = embedding.hook_files_seconds
        if matrix is not None:
            from lore.index import vectors

            vectors.save_as(directory / names["vectors"], matrix)
        else:
            names.pop("vectors")
        meta = self.meta(directory, counts, names, revision, identity, matrix is not None, built=True,
                         model_error=warning)  # fmt: skip
        atomic_write(directory / META, meta.to_json())
        atomic_write(self.index_dir / CURRENT, directory.name.encode())
        self.collect_garbage(keep=directory)
        return BuildReport("full", total, added=total, embeddings=matrix is not None,
                           warnings=[f"{warning} (indexed without embeddings)"] if warning else [], timings=timings)  # fmt: skip

    def incremental(self, directory: Path, meta: GenerationMeta, progress: Progress) -> BuildReport | None:
        from lore.index import vectors

        files = meta.files
        try:
            old = Table.load(directory / files["table"], directory / files["docs"])
            old_doc_lines = old.read_doc_lines()
            old_vectors = vectors.load_file(directory / files["vectors"], len(old)) if "vectors" in files else None
            old_forward = bm25.load_forward(directory, files)
            old_graph = graph_index.Adjacency.load_file(directory / files["graph"])
            old_dangling = graph_index.load_dangling(directory / files["graph"])
            delta_ids = Table.load(directory / files["delta_table"], directory / files["delta_docs"]).ids if "delta_table" in files else []
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: the caller rebuilds
        snapshot = self.store.load()
        records = list(snapshot.records.values())
        old_rows = {rid: i for i, rid in enumerate(old.ids)}
        hashes = [record_hash(r) for r in records]
        changed = [r for r, h in zip(records, hashes, strict=True) if old_rows.get(r.id) is None or old.hashes[old_rows[r.id]] != h]
        current_ids = {r.id for r in records}
        # Records a delta segment added are indexed too (delta rows are re-derived as changed ones).
        indexed_ids = dict.fromkeys([*old.ids, *delta_ids])
        deleted = [rid for rid in indexed_ids if rid not in current_ids]
        if len(changed) + len(deleted) > max(50, INCREMENTAL_LIMIT * max(len(records), 1)):
            return None
        revision = meta.revision + 1
        names = file_names(revision)

        new_matrix = None
        identity = meta.model
        warning = None
        if old_vectors is not None:
            embedded_changed, identity, warning = embed_texts([embedding_text(r) for r in changed], self.model, progress)
            if embedded_changed is None:
                return None
            new_matrix = _merged_vectors(records, old_rows, old_vectors, changed, embedded_changed)
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
        explicit = graph_index.explicit_edges(snapshot.edges)
        dangling = graph_index.dangling_ids(snapshot.records, explicit)
        if old_dangling == set(dangling) and graph_index.same_edges(graph_index.valid_edges(snapshot.records, explicit), old_graph):
            names["graph"] = files["graph"]  # most refreshes touch no edge: keep the file as it is
        else:
            graph_index.save_edges(directory / names["graph"], graph_index.ordered_edges(snapshot.records, explicit), dangling)
        if new_matrix is not None:
            vectors.save_as(directory / names["vectors"], new_matrix)
        else:
            names.pop("vectors")
        fresh_rows = {r.id: k for k, r in enumerate(changed)}
        sources = [-(fresh_rows[r.id] + 1) if r.id in fresh_rows else old_rows[r.id] for r in records]
        forward = bm25.reassemble(old_forward, sources, [lexical_fields(r) for r in changed])
        bm25.save(directory, names, forward, bm25.derive(forward))
        new_meta = self.meta(directory, snapshot_counts(records), names, revision, identity, new_matrix is not None,
                             built=False, previous=meta, model_error=meta.model_error)  # fmt: skip
        atomic_write(directory / META, new_meta.to_json())
        self.collect_old_revisions(directory, keep={*names.values(), *files.values()})
        added = sum(1 for r in changed if r.id not in indexed_ids)
        return BuildReport("incremental", len(records), added=added, updated=len(changed) - added, deleted=len(deleted),
                           embeddings=new_matrix is not None, warnings=[warning] if warning else [])  # fmt: skip

    def meta(self, directory: Path, counts: dict[str, int], names: dict[str, str], revision: int,
              identity: str | None, embeddings: bool, *, built: bool, previous: GenerationMeta | None = None,
              model_error: str | None = None) -> GenerationMeta:  # fmt: skip
        from lore.embedder import model_identity, model_spec

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest = source_manifest(self.data_dir)
        return GenerationMeta(
            lore_version=__version__,
            data_dir=str(self.data_dir.resolve()),
            built_at=now if built or previous is None else previous.built_at,
            updated_at=now,
            revision=revision,
            model=identity,
            model_spec=model_spec(self.model),
            # The model that was configured (its identity): without embeddings, the index is
            # stale only once this changes (``freshness.staleness``), not on every search.
            model_wanted=model_identity(self.model),
            model_error=None if embeddings else model_error,
            embeddings=embeddings,
            counts=counts,
            files=names,
            sizes=file_sizes(directory, names),
            sources=manifest,
            digests={name: file_digest(self.data_dir / name) for name in manifest},
        )

    def collect_garbage(self, keep: Path) -> None:
        for child in self.index_dir.iterdir():
            if child.is_dir() and child.name.startswith("gen-") and child != keep:
                shutil.rmtree(child, ignore_errors=True)

    @staticmethod
    def collect_old_revisions(directory: Path, keep: set[str]) -> None:
        # The previous revision's files stay for readers that opened it a moment ago.
        for child in directory.iterdir():
            if child.is_file() and child.name != META and "-" in child.name and child.name not in keep:
                with contextlib.suppress(OSError):
                    child.unlink()


# From this many records on, a build embeds in a second process (``build_worker``) as well
# as in its own; below it, in a thread (a process costs ~0.4 s of CPU to start and import
# numpy and the tokenizer). Whole builds of git commits, worker against thread, 3 runs each:
# 1,000 records 0.63-0.72 vs 0.70-0.71 s, 1,500 0.72-0.77 vs 0.79-0.90 s, 3,000 1.2 vs 1.5 s
# (0.1-0.2 s more CPU with the worker). Chunks of texts are what the two sides claim.
EMBED_PROCESS_THRESHOLD = 1500
EMBED_CHUNK = 512
# Where the builder names the new generation's docs for the worker (``EmbeddingJob.docs_written``).
HOOK_FILES = "hook-files.json"


def claim(workdir: Path, chunk: int) -> bool:
    """Take chunk ``chunk`` for a process; False if the other side already has it."""
    try:
        os.close(os.open(workdir / f"claim-{chunk}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class EmbeddingJob:
    """The embeddings of a full build, computed beside the rest of it: ``result()`` finishes and returns them.

    Large builds start ``python -P -m lore.index.build_worker``, which embeds chunks from
    the front while this process builds everything else; ``result()`` then embeds chunks
    from the back until the two meet (see that module). Chunks the worker claimed but did
    not finish (it died, or cannot load the model) are embedded here, so a broken worker
    costs time, never the index. Small builds embed in a thread.
    """

    def __init__(self, texts: list[str], model: str | None, progress: Progress = no_progress,
                 work_in: Path | None = None) -> None:  # fmt: skip
        """``model``: ``Settings.embed_model`` (None: the bundled one); ``work_in``: where the worker's files go
        (the new generation: a killed build's are collected with it)."""
        self.texts = texts
        self.model = model
        self.progress = progress
        self._work_in = work_in
        self.seconds = 0.0
        self.chunks_here = 0  # chunks this process embedded (the rest were the worker's)
        self.hook_files_seconds: float | None = None  # the worker's writing of the cold hook's files
        self._ordered = False  # ``docs_written`` has told the worker
        self._started = time.perf_counter()
        self._outcome: dict[str, Any] = {}
        self._process: Any = None
        self._thread: threading.Thread | None = None
        self._work: Path | None = None
        if len(texts) >= EMBED_PROCESS_THRESHOLD:
            self._spawn()
        else:
            self._thread = threading.Thread(target=self._embed_in_thread, name="lore-embed", daemon=True)
            self._thread.start()

    def _spawn(self) -> None:
        import subprocess
        import tempfile

        import orjson

        from lore.interpreter import python_argv

        self._work = Path(tempfile.mkdtemp(prefix=".embedding-", dir=self._work_in))
        with (self._work / "texts.jsonl").open("wb") as handle:  # line by line: no second copy of every text
            for number, text in enumerate(self.texts):
                handle.write(b"\n" + orjson.dumps(text) if number else orjson.dumps(text))
        # One core for the worker, one for this process: left alone, the tokenizer's thread
        # pool (and BLAS) would take both and slow the analysis it runs beside.
        single = dict.fromkeys(("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
        env = {**os.environ, **single, "TOKENIZERS_PARALLELISM": "false"}
        with (self._work / "worker.log").open("wb") as log:
            self._process = subprocess.Popen(
                python_argv("-m", "lore.index.build_worker", str(self._work), str(EMBED_CHUNK),
                            *([self.model] if self.model else [])),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
            )  # fmt: skip

    def docs_written(self, directory: Path | None, docs: Path | None) -> None:
        """The new generation's docs are complete: the worker writes the cold hook's files from them.

        None: there will be none (the worker stops waiting for them). A small build (a thread)
        leaves them to ``IndexManager.build``, as a refresh does.
        """
        if self._work is None or self._ordered:
            return
        import orjson

        self._ordered = True
        order = self._work / HOOK_FILES
        partial = order.with_suffix(".part")
        partial.write_bytes(orjson.dumps({"directory": str(directory) if directory else None, "docs": str(docs) if docs else None}))
        partial.replace(order)

    def cancel(self) -> None:
        """Stop the worker and remove its files (the build failed before it needed them)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)

    def _embed_in_thread(self) -> None:
        try:
            self._outcome["result"] = embed_texts(self.texts, self.model, self.progress)
        except BaseException as exc:  # surfaced by ``result``
            self._outcome["error"] = exc

    def result(self) -> tuple[np.ndarray | None, str | None, str | None]:
        """(vectors, model identity, model error), as ``embed_texts`` gives them."""
        if self._thread is not None:
            self._thread.join()
            if "error" in self._outcome:
                raise self._outcome["error"]
            result: tuple[np.ndarray | None, str | None, str | None] = self._outcome["result"]
        else:
            assert self._work is not None
            try:
                result = self._share()
            finally:
                self.cancel()  # the worker has exited unless ``_share`` returned early or failed
        self.seconds = time.perf_counter() - self._started
        return result

    def _share(self) -> tuple[np.ndarray | None, str | None, str | None]:
        import numpy as np
        import orjson

        assert self._work is not None
        work, texts = self._work, self.texts
        count = -(-len(texts) // EMBED_CHUNK)
        done: dict[int, np.ndarray] = {}
        identity: str | None = None
        for chunk in reversed(range(count)):
            if not claim(work, chunk):
                break  # the worker has it, and every chunk before it
            matrix, identity, warning = embed_texts(texts[chunk * EMBED_CHUNK : (chunk + 1) * EMBED_CHUNK], self.model)
            if matrix is None:
                return None, None, warning
            done[chunk] = matrix
            self.chunks_here += 1
            self.progress("embeddings", len(done) * EMBED_CHUNK, len(texts))
        self.docs_written(None, None)  # unless told already: no hook files, so the worker exits
        self._process.wait()
        try:
            seconds = orjson.loads((work / "embedding.json").read_bytes()).get("hook_files_seconds")
            self.hook_files_seconds = float(seconds) if seconds is not None else None
        except (OSError, ValueError, AttributeError, TypeError):
            pass  # the worker died: the hook's files are written after the build, as for a refresh
        for chunk in range(count):
            if chunk in done:
                continue
            try:
                done[chunk] = np.load(work / f"vectors-{chunk}.npy")
                continue
            except (OSError, ValueError):
                pass  # the worker did not finish it: embed it here
            matrix, identity, warning = embed_texts(texts[chunk * EMBED_CHUNK : (chunk + 1) * EMBED_CHUNK], self.model)
            if matrix is None:
                return None, None, warning
            done[chunk] = matrix
            self.chunks_here += 1
        if identity is None:  # every chunk came from the worker
            from lore.embedder import model_identity, model_spec

            identity = model_identity(model_spec(self.model))
        if not done:
            return np.zeros((0, 0), dtype=np.float32), identity, None
        return np.concatenate([done[chunk] for chunk in range(count)]), identity, None


def snapshot_counts(records: list[Record]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.kind] = counts.get(record.kind, 0) + 1
    return counts



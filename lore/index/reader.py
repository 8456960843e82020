"""Read one generation of the index: each part loaded on first use, every file checked by ``load``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lore.errors import IndexUnavailableError
from lore.index import graph as graph_index
from lore.index.layout import DAMAGED, GenerationMeta, still_live
from lore.index.table import IndexFileError, Table, describe, read_dead

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lore.index import bm25
    from lore.index.bm25 import Delta

T = TypeVar("T")


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



class PhraseMatcher:
    """Quoted phrases: the records whose title or body holds each phrase's analysed terms in order, adjacent.

    Whoosh's positional index answered this until a full build spent most of its time
    writing it (35 of 36 s at 10,866 records); the BM25 index now keeps each record's
    terms in order (``bm25.Forward.sequence``), so phrases are matched with the same
    analysis as ranking (docs/whoosh-choice.md, "Whoosh no longer built").
    """

    def __init__(self, reader: IndexReader) -> None:
        self.reader = reader

    def matching(self, phrases: Sequence[str]) -> set[str] | None:
        """Ids of the records that contain every phrase; None if no phrase has a word."""
        from functools import partial

        from lore.analysis import terms

        reader = self.reader
        found: set[str] | None = None
        for phrase in phrases:
            words = terms(phrase)
            if not words:
                continue
            rows = reader._load(reader.meta.files["bm25_sequence"], partial(reader.bm25.phrase_rows, words))
            ids = reader.table.ids
            matched = {ids[int(row)] for row in rows}
            found = matched if found is None else found & matched
        return found


class IndexReader:
    """One generation's parts, each loaded on first use (``load`` opens them up front and checks every file).

    A part that cannot be read raises ``IndexDamagedError`` naming its file. Found by
    ``load`` (``IndexManager.open`` calls it), the generation is simply rebuilt; found
    later, mid-query (the term sequence, read only for quoted phrases, or a docs line), the
    generation is also marked ``DAMAGED`` so that the next open rebuilds it, and
    ``meta.damaged`` makes ``staleness`` tell a warm session to reopen.
    """

    # What the pipeline's retrieval reads (lore.rank.retrieval): numpy arrays, so the dense
    # backend; ``ColdReader`` (lore.index.cold) reads BM25 without numpy, so the sparse one.
    numpy_free = False

    def __init__(self, directory: Path, meta: GenerationMeta) -> None:
        self.directory = directory
        self.meta = meta
        self._table: Table | None = None
        self._bm25: bm25.Bm25Index | None = None
        self._vectors: Any = None
        self._adjacency: graph_index.Adjacency | None = None
        self._active: Sequence[bool] | None = None
        self._searchable: Sequence[bool] | None = None
        self._masks: dict[int, tuple[Sequence[bool], Any]] = {}
        self._dead: list[int] | None = None
        self._checking = False

    def load(self, *, deep: bool = False) -> None:
        """Open what every search reads and check every file; the phrase files' headers too if ``deep``.

        Costs a few stats and the docs file's first and last line beyond what a search loads
        anyway. The term sequence that quoted phrases read is opened only if ``deep``
        (``lore index`` and ``lore status``); its size is checked either way.
        """
        self._checking = True
        try:
            for name, size in self.meta.sizes.items():
                try:
                    actual = (self.directory / str(name)).stat().st_size
                except OSError as exc:
                    raise self._damaged(str(name), exc) from exc
                if actual != size:
                    raise self._damaged(str(name), IndexFileError(str(name), f"{actual} bytes, {size} expected"))
            self._table = None  # loaded again while checking: the docs files are checked as it loads
            _ = self.table, self.bm25, self.adjacency
            if self.has_vectors:
                _ = self.vectors
            if deep:
                self._load("bm25", lambda: self.bm25.check_phrase_files())
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
        if not still_live(self.directory, self.meta):
            return IndexDamagedError(file, describe(exc), replaced=True)
        error = IndexDamagedError(file, describe(exc))
        if not self._checking:  # mid-query: leave a note for the next open (``load``'s caller rebuilds now)
            self.meta = self.meta.with_damage(error.message)
            from lore.store.fileio import atomic_write  # tempfile, shutil...: not on the hook's cold path

            with contextlib.suppress(OSError):
                atomic_write(self.directory / DAMAGED, error.message.encode())
        return error

    # Columns decoded as their rows are read (the cold hook's reader reads a few dozen rows once),
    # or all at once (a long-lived reader).
    lazy_table = False

    @property
    def has_vectors(self) -> bool:
        return self.meta.embeddings and "vectors" in self.meta.files

    @property
    def has_delta(self) -> bool:
        return "delta_table" in self.meta.files

    @property
    def dead_rows(self) -> list[int]:
        """Base rows a delta segment retires (a newer version of the record is in the delta)."""
        if self._dead is None:
            self._dead = []
            if self.has_delta:
                name = self.meta.files["delta_dead"]
                self._dead = self._load(name, lambda: read_dead(self.directory / name))
        return self._dead

    @property
    def table(self) -> Table:
        if self._table is None:
            files = self.meta.files
            table = self._load(files["table"], lambda: Table.load(self.directory / files["table"], self.directory / files["docs"],
                                                                  lazy=self.lazy_table))  # fmt: skip
            if self._checking:
                # Before any merge: the base docs file is checked against the base offsets
                # (loading the base table a second time for it cost the cold hook ~8 ms at 10k).
                self._load(files["docs"], table.check_docs)
            if self.has_delta:
                delta = self._load(files["delta_table"], lambda: Table.load(self.directory / files["delta_table"],
                                                                            self.directory / files["delta_docs"]))  # fmt: skip
                if self._checking:
                    self._load(files["delta_docs"], delta.check_docs)
                dead = self.dead_rows
                if any(not 0 <= row < len(table) for row in dead):
                    raise self._damaged(files["delta_dead"], IndexFileError(files["delta_dead"], "row out of range"))
                table = Table.merged(table, dead, delta)
            self._table = table
            self._table.on_damage = self._damaged
        return self._table

    @property
    def phrases(self) -> PhraseMatcher:
        """What answers quoted phrases: the BM25 index's term sequence (Whoosh's job before index format 11)."""
        return PhraseMatcher(self)

    @property
    def bm25(self) -> bm25.Bm25Index:
        if self._bm25 is None:
            from lore.index import bm25

            rows = len(self.table)
            self._bm25 = self._load("bm25", lambda: bm25.Bm25Index(self.directory, self.meta.files, rows, self._bm25_delta()))
        return self._bm25

    def _bm25_delta(self) -> Delta | None:
        if not self.has_delta:
            return None
        from lore.index import bm25

        files = self.meta.files
        forward = self._load(files["delta_bm25_forward"], lambda: bm25.read_forward(
            self.directory / files["delta_bm25_vocab"], self.directory / files["delta_bm25_forward"]))  # fmt: skip
        return bm25.Delta.of(forward, self.dead_rows)

    @property
    def vectors(self) -> Any:
        if self._vectors is None:
            import numpy as np

            from lore.index import vectors

            rows = len(self.table)
            name = self.meta.files["vectors"]
            if self.has_delta:
                delta_name = self.meta.files.get("delta_vectors", "delta_vectors")
                delta = self._load(delta_name, lambda: vectors.load_file(self.directory / delta_name))
                base_rows = rows - len(delta) + len(self.dead_rows)
                stored = self._load(name, lambda: vectors.load_file(self.directory / name, base_rows))
                keep = None
                if self.dead_rows:
                    live = np.ones(base_rows, dtype=bool)
                    live[np.asarray(self.dead_rows, dtype=np.int64)] = False
                    keep = np.flatnonzero(live)
                self._vectors = vectors.StackedMatrix(stored, keep, delta)
                return self._vectors
            stored = self._load(name, lambda: vectors.load_file(self.directory / name, rows))
            # Indexes are float32 on disk (memory-mapped as is); convert anything else once.
            self._vectors = stored if stored.dtype == np.float32 else np.asarray(stored, dtype=np.float32)
        return self._vectors

    @property
    def active_rows(self) -> Sequence[bool]:
        """Which rows are active (the default filter), computed once per reader."""
        if self._active is None:
            self._active = self.table.rows_where("statuses", {"active"})
        return self._active

    def row_mask(self, rows: Sequence[bool]) -> Any:
        """``rows`` (a list of bools or a bytes of 0/1) as a numpy bool array.

        The reader's own active and searchable rows are converted once: converting 50,000
        bools on every prompt cost the warm helper ~4 ms a prompt.
        """
        import numpy as np

        kept = self._masks.get(id(rows))
        if kept is not None and kept[0] is rows:
            return kept[1]
        mask = np.frombuffer(rows, dtype=np.uint8).astype(bool) if isinstance(rows, bytes | bytearray) else np.asarray(rows, dtype=bool)
        if rows is self._active or rows is self._searchable:
            self._masks[id(rows)] = (rows, mask)
        return mask

    @property
    def searchable_rows(self) -> Sequence[bool]:
        """Active rows and candidates (what `lore search` shows by default), computed once per reader."""
        if self._searchable is None:
            self._searchable = self.table.rows_where("statuses", {"active", "candidate"})
        return self._searchable

    @property
    def adjacency(self) -> graph_index.Adjacency:
        if self._adjacency is None:
            name = self.meta.files["graph"]
            self._adjacency = self._load(name, lambda: graph_index.Adjacency.load_file(self.directory / name))
        return self._adjacency

    def close(self) -> None:
        """Release what the reader holds open: the memory maps of the arrays.

        A memory-mapped array keeps a file descriptor until the array is freed, and the
        table refers back to the reader (``on_damage``), so a dropped reader waited for
        the cyclic garbage collector: the warm helper, which swaps in a fresh reader
        after every write, kept six descriptors (and the replaced files' pages) per
        refresh. Dropping the references here frees them at once; a part used again
        after ``close`` is simply loaded again.
        """
        if self._table is not None:
            self._table.on_damage = None
        self._table = self._bm25 = self._vectors = self._adjacency = None
        self._active = self._searchable = self._dead = None
        self._masks = {}

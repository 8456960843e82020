"""The write check's vectors of decision texts, kept on disk so a CLI write reads them instead of encoding.

A `lore remember` process compares its decision with up to ``dedup.EMBED_CANDIDATES``
shortlisted decisions, each by two texts (the decision line, and it with its rationale):
encoding those ~100 texts was most of the check's time at 10,000 real commits. The pool
(``lore.curate.pool``) keeps their vectors here, beside its cache file, one set per model:

- keyed by the text (a 128-bit BLAKE2b digest), not by the pool's entries: a pool built again
  after a rewrite of decisions.jsonl, or saved by another process, finds the vectors of the
  texts it already had; a text's vector depends on the text and the model alone;
- two files of one format: the main one, written when the pool has vectors for all its live
  decisions (a whole build, or a refill), and a small one of the rows added since (each write's
  own texts), merged into the main one past ``RECENT_ROWS``;
- each written whole and renamed into place; read through a memory map. A file is checked when
  opened (its size, its model, the digest of its keys, which must be sorted) and each row when
  read (its CRC-32): a file that fails is ignored, as if absent, and the rows are encoded again.
  Two processes saving at once may lose the other's recent rows: they are encoded when next needed.

Filled (``DecisionPool.fill_vectors``) for the decisions a pool takes in: every one when no
whole main file is there (a first build, another model, a damaged file), else those appended
since (their texts not already kept). A fill of more than ``INLINE_FILL`` texts is left to a
detached process (``spawn_fill``: one at a time, by a lock file), so no write waits for it; the
warm helper fills ``FILL_STEP`` texts per idle step. Until then a write encodes what it compares.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import sys
import time
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import orjson

from lore.store.fileio import replace_derived

FORMAT = 1
MAGIC = b"lorevec1"
# Rows the recent file holds before a save merges them into the main file (~1 KB each at 256 dimensions).
RECENT_ROWS = 1024
# Texts a write encodes itself when no main file holds its decisions' vectors (~1 s of commit
# messages on a loaded 2-core machine). Past that a detached process fills them (``spawn_fill``):
# a first write at 10,000 real commits would otherwise take 4-7 s more than its build of the pool.
INLINE_FILL = 4096
# A fill whose process has not finished after this long is taken for dead (its lock is ignored).
FILL_STALE_S = 900

Key = tuple[int, int]


def text_key(text: str) -> Key:
    """The key of ``text``: its 128-bit BLAKE2b digest as two integers (the first orders the file)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")


def _row_crc(row: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(row, dtype=np.float32).tobytes())


class VectorsFile:
    """One file's keys (sorted by their first half), row checksums and float32 rows, checked as described above."""

    def __init__(self, first: np.ndarray, second: np.ndarray, crcs: np.ndarray, rows: np.ndarray,
                 keep: object = None) -> None:  # fmt: skip
        self.first, self.second, self.crcs, self.rows = first, second, crcs, rows
        self._keep = keep  # the memory map the arrays read from
        self.damaged = False  # a row failed its checksum: the file is no longer used

    def __len__(self) -> int:
        return len(self.first)

    @classmethod
    def open(cls, path: Path, identity: str) -> VectorsFile | None:
        """The file at ``path`` if it is whole and of model ``identity``; else None."""
        try:
            with path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < 16:
                    return None
                view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        try:
            if view[:8] != MAGIC:
                return None
            length = int.from_bytes(view[8:16], "little")
            header = orjson.loads(view[16 : 16 + length])
            count, dim = int(header["count"]), int(header["dim"])
            if header.get("format") != FORMAT or header.get("model") != identity or count < 0 or dim <= 0:
                return None
            at = 16 + length
            at += -at % 8
            if size != at + count * (8 + 8 + 4) + count * dim * 4:
                return None
            keys = view[at : at + count * 20]
            if hashlib.sha256(keys).hexdigest() != header.get("keys_sha256"):
                return None
            first = np.frombuffer(view, dtype="<u8", count=count, offset=at)
            second = np.frombuffer(view, dtype="<u8", count=count, offset=at + count * 8)
            crcs = np.frombuffer(view, dtype="<u4", count=count, offset=at + count * 16)
            rows = np.frombuffer(view, dtype="<f4", count=count * dim, offset=at + count * 20).reshape(count, dim)
            if count > 1 and not bool(np.all(first[1:] > first[:-1])):
                return None
        except (ValueError, KeyError, TypeError):
            return None
        return cls(first, second, crcs, rows, view)

    def find(self, keys: list[Key]) -> np.ndarray:
        """The row of each key, -1 where the file has none."""
        if not keys or not len(self.first) or self.damaged:
            return np.full(len(keys), -1, dtype=np.int64)
        first = np.fromiter((k[0] for k in keys), dtype=np.uint64, count=len(keys))
        second = np.fromiter((k[1] for k in keys), dtype=np.uint64, count=len(keys))
        at = np.minimum(np.searchsorted(self.first, first), len(self.first) - 1)
        found = (self.first[at] == first) & (self.second[at] == second)
        return np.where(found, at, -1).astype(np.int64)

    def read(self, rows: np.ndarray) -> np.ndarray | None:
        """Rows ``rows`` (copied), each checked against its CRC-32; None (and the file damaged) if one fails."""
        vectors = np.array(self.rows[rows], dtype=np.float32)
        crcs = self.crcs[rows]
        if any(_row_crc(vector) != int(crc) for vector, crc in zip(vectors, crcs, strict=True)):
            self.damaged = True
            return None
        return vectors


def write_file(path: Path, identity: str, keys: list[Key], rows: np.ndarray) -> bool:
    """Write ``keys`` and their ``rows`` to ``path`` (sorted, a key's first half once), whole and renamed into place."""
    dim = int(rows.shape[1]) if rows.ndim == 2 and rows.shape[1] else 0
    if not dim:
        return False
    first = np.fromiter((k[0] for k in keys), dtype=np.uint64, count=len(keys))
    second = np.fromiter((k[1] for k in keys), dtype=np.uint64, count=len(keys))
    order = np.argsort(first, kind="stable")
    first, second, rows = first[order], second[order], np.ascontiguousarray(rows[order], dtype=np.float32)
    if len(first) > 1:  # two texts whose digests share a first half (never seen): keep one, encode the other each time
        unique = np.concatenate([[True], first[1:] != first[:-1]])
        first, second, rows = first[unique], second[unique], rows[unique]
    crcs = np.fromiter((_row_crc(row) for row in rows), dtype=np.uint32, count=len(rows))
    keys_bytes = first.astype("<u8").tobytes() + second.astype("<u8").tobytes() + crcs.astype("<u4").tobytes()
    header = orjson.dumps({"format": FORMAT, "model": identity, "dim": dim, "count": len(first),
                           "keys_sha256": hashlib.sha256(keys_bytes).hexdigest()})  # fmt: skip
    start = 16 + len(header)
    parts = [MAGIC, len(header).to_bytes(8, "little"), header, b"\0" * (-start % 8), keys_bytes, rows.astype("<f4").tobytes()]
    return replace_derived(path, parts)


class TextVectors:
    """The vectors of one pool's texts by one model: its two files, and the rows this process added since it saved."""

    def __init__(self, base: Path, identity: str) -> None:
        from lore.paths import sha1

        tag = sha1(identity.encode()).hexdigest()[:12]
        self.identity = identity
        self.main_path = base.with_name(f"{base.name}.{tag}.vectors")
        self.recent_path = base.with_name(f"{base.name}.{tag}.recent")
        self.main: VectorsFile | None = None
        self.recent: VectorsFile | None = None
        self._stamps: tuple[object, object] = (None, None)
        self.fresh: dict[Key, np.ndarray] = {}  # rows not yet in a file
        self.rewrite_main = False  # the next save writes the main file (of the keys ``save`` is given)
        self.reopen()

    @staticmethod
    def _stamp(path: Path) -> object:
        try:
            stat = path.stat()
        except OSError:
            return None
        return stat.st_ino, stat.st_size, stat.st_mtime_ns

    def reopen(self) -> None:
        """Open the files again if another process replaced them (a few stat calls otherwise)."""
        stamps = (self._stamp(self.main_path), self._stamp(self.recent_path))
        if stamps != self._stamps:
            self._stamps = stamps
            self.main = VectorsFile.open(self.main_path, self.identity) if stamps[0] is not None else None
            self.recent = VectorsFile.open(self.recent_path, self.identity) if stamps[1] is not None else None

    @property
    def complete(self) -> bool:
        """Whether a whole main file is there: the pool filled it for all its decisions once (else it fills it)."""
        return self.main is not None and not self.main.damaged

    def has(self, keys: list[Key]) -> np.ndarray:
        """Whether a vector is kept for each key (its row not read yet, so not checked)."""
        found = np.fromiter((key in self.fresh for key in keys), dtype=bool, count=len(keys))
        for source in (self.recent, self.main):
            if source is not None and not source.damaged:
                found |= source.find(keys) >= 0
        return found

    def get(self, keys: list[Key]) -> list[np.ndarray | None]:
        """The vector of each key, None where none is kept (or its row failed its check)."""
        found: list[np.ndarray | None] = [self.fresh.get(key) for key in keys]
        for source in (self.recent, self.main):
            missing = [i for i, vector in enumerate(found) if vector is None]
            if source is None or source.damaged or not missing:
                continue
            rows = source.find([keys[i] for i in missing])
            hit = [(i, int(row)) for i, row in zip(missing, rows.tolist(), strict=True) if row >= 0]
            if not hit:
                continue
            vectors = source.read(np.asarray([row for _, row in hit], dtype=np.int64))
            if vectors is None:
                continue  # damaged: ignored from now on (a damaged main file is filled again)
            for (i, _), vector in zip(hit, vectors, strict=True):
                found[i] = vector
        return found

    def add(self, keys: Iterable[Key], vectors: np.ndarray) -> None:
        for key, vector in zip(keys, vectors, strict=True):
            self.fresh[key] = np.asarray(vector, dtype=np.float32)

    def save(self, live: set[Key] | None = None) -> None:
        """Write the fresh rows into the recent file; into a new main file after a fill of every decision
        (``rewrite_main``: then of the keys in ``live`` alone, the texts of the pool's decisions, when given),
        or when the recent file would pass ``RECENT_ROWS``."""
        if not self.fresh and not self.rewrite_main:
            return
        self.reopen()
        recent = self._rows_of(self.recent)
        if self.rewrite_main or (self.complete and len(recent) + len(self.fresh) > RECENT_ROWS):
            merged = {**self._rows_of(self.main), **recent}
            if self.rewrite_main and live is not None:
                merged = {key: row for key, row in merged.items() if key in live}
            merged.update(self.fresh)
            written = bool(merged) and write_file(self.main_path, self.identity, list(merged), np.stack(list(merged.values())))
            if written and self.recent is not None:
                with contextlib.suppress(OSError):
                    self.recent_path.unlink()  # its rows are in the main file (another process's newer ones are lost: re-encoded)
        else:
            merged = {**recent, **self.fresh}
            written = write_file(self.recent_path, self.identity, list(merged), np.stack(list(merged.values())))
        if written:
            self.fresh, self.rewrite_main = {}, False
        self.reopen()

    @staticmethod
    def _rows_of(source: VectorsFile | None) -> dict[Key, np.ndarray]:
        if source is None or source.damaged or not len(source):
            return {}
        rows = source.read(np.arange(len(source)))
        if rows is None:
            return {}
        return {(int(a), int(b)): row for a, b, row in zip(source.first.tolist(), source.second.tolist(), rows, strict=True)}


def fill_lock(vectors: TextVectors) -> Path:
    """The file a fill process holds while it runs (its pid inside)."""
    return vectors.main_path.with_name(vectors.main_path.name + ".filling")


def filling(lock: Path) -> bool:
    """Whether a live fill process holds ``lock`` (a dead one, a zombie, or one past ``FILL_STALE_S`` does not)."""
    try:
        pid = int(lock.read_text() or "0")
        age = time.time() - lock.stat().st_mtime
    except (OSError, ValueError):
        return False
    if pid <= 0 or age > FILL_STALE_S:
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child (a long-lived process spawned it), exited
            return False
    from lore.interpreter import running

    return running(pid)


def spawn_fill(data_dir: Path, cache_file: Path, model: str | None, lock: Path) -> int | None:
    """Start a detached process that fills the main vectors file of ``cache_file``'s pool; its pid, or None
    when one already runs (or it cannot start: the writes then go on encoding what they compare)."""
    from lore.interpreter import python_argv

    if filling(lock):
        return None
    with contextlib.suppress(OSError):
        lock.unlink()  # a dead one's
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return None  # another writer is starting one
    os.write(handle, str(os.getpid()).encode())
    os.close(handle)
    argv = python_argv("-m", "lore.curate.write_check", str(data_dir), str(cache_file), str(lock), model or "")
    try:
        actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
        pid = os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions, setsid=True)
    except OSError:
        with contextlib.suppress(OSError):
            lock.unlink()
        return None
    with contextlib.suppress(OSError):
        lock.write_text(str(pid))
    return pid

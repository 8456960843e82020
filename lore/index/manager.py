"""The index's front: is it there and fresh, bring it up to date, open it for search.

The parts live beside it: ``layout`` (files, ``GenerationMeta``), ``freshness``
(stat-only staleness), ``build`` (full build and refresh) and ``reader``
(``IndexReader``). Killing a build at any moment leaves the previous state
usable; anything unreadable is rebuilt: ``meta.json`` records every file's
size, ``IndexReader.load`` checks them and opens what a search reads before the
search starts (cheap: memory-map headers, JSON the search would parse anyway, a
few stats), and ``build`` and ``status`` also open the term sequence phrases read.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.errors import IndexUnavailableError, LockTimeoutError
from lore.index import delta
from lore.index.build import Builder, BuildReport, Progress, no_progress
from lore.index.freshness import MODEL_CHANGED, needs_full_build, source_manifest
from lore.index.freshness import staleness as _staleness
from lore.index.layout import CURRENT, DAMAGED, LOCK, GenerationMeta, MetaError, current_dir, tree_size
from lore.index.reader import IndexDamagedError, IndexReader
from lore.paths import Locations

if TYPE_CHECKING:
    from lore.store import Store

__all__ = ["CURRENT", "MODEL_CHANGED", "BuildReport", "IndexDamagedError", "IndexManager", "IndexReader",
           "IndexStatus", "Progress"]  # fmt: skip

# Old names, kept for callers outside the package.
_no_progress = no_progress
_tree_size = tree_size


@dataclass
class IndexStatus:
    exists: bool
    stale: bool
    reason: str
    meta: GenerationMeta | None
    size_bytes: int
    index_dir: Path



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

    @property
    def builder(self) -> Builder:
        return Builder(self.index_dir, self.store, self.locations.embed_model)

    # -- reading the current state ------------------------------------------------
    def current_dir(self) -> Path | None:
        return current_dir(self.index_dir)

    def read_meta(self) -> tuple[Path, GenerationMeta] | None:
        """The live generation and its meta, or None if missing, corrupt or incompatible."""
        directory = self.current_dir()
        if directory is None:
            return None
        try:
            meta = GenerationMeta.read(directory)
        except (OSError, MetaError):
            return None
        if not all((directory / name).exists() for name in meta.files.values()):
            return None
        if (directory / DAMAGED).exists():
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

    def check(self, directory: Path, meta: GenerationMeta, *, deep: bool = True) -> IndexDamagedError | None:
        """Why this generation cannot be read, or None: ``IndexReader.load`` (plus the phrase files if ``deep``)."""
        reader, error = self._loaded(directory, meta, deep=deep)
        if reader is not None:
            reader.close()
        return error

    @staticmethod
    def _loaded(directory: Path, meta: GenerationMeta, *, deep: bool = True) -> tuple[IndexReader | None, IndexDamagedError | None]:
        """The generation's reader, loaded and checked (the caller closes it), or why it cannot be read."""
        reader = IndexReader(directory, meta)
        try:
            reader.load(deep=deep)
        except IndexDamagedError as error:
            reader.close()
            return None, error
        except BaseException:
            reader.close()
            raise
        return reader, None

    def source_manifest(self) -> dict[str, list[int]]:
        return source_manifest(self.data_dir)

    def staleness(self, meta: GenerationMeta) -> str | None:
        """Why the index is out of step with the data dir, or None if it is not (stat only)."""
        return _staleness(meta, self.data_dir, self.locations.embed_model)

    def status(self) -> IndexStatus:
        found = self.read_meta()
        size = tree_size(self.index_dir) if self.index_dir.exists() else 0
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

    def build(self, *, rebuild: bool = False, progress: Progress = no_progress, lock_timeout: float = 600.0) -> BuildReport:
        """Bring the index up to date: incrementally when possible, from scratch when needed.

        Then the live generation's query token cache (``cold_vectors.prepare``): the cold
        prompt hook's vector channel reads it, and writing it on a prompt costs ~0.1 s.
        """
        self.store.require()
        # The hook's files are written under the build lock too: a racing builder that publishes a newer
        # generation removes this one, and a write still going into it would leave the directory behind.
        with self._build_lock(lock_timeout):
            report = self._build(rebuild=rebuild, progress=progress, locked=True)
            found = self.read_meta()
            if found is not None:
                from lore.index.cold_vectors import prepare

                started = time.perf_counter()
                prepare(*found)
                # The cold hook's files (its token cache, each row's passage tokens): a part of the build like the others.
                report.timings["hook_files"] = time.perf_counter() - started
                report.seconds += report.timings["hook_files"]
        return report

    def _build(self, *, rebuild: bool, progress: Progress, lock_timeout: float = 600.0, locked: bool = False) -> BuildReport:
        self.store.require()
        started = time.perf_counter()
        with contextlib.nullcontext() if locked else self._build_lock(lock_timeout):
            warnings: list[str] = []
            found = None if rebuild else self.read_meta()
            if found is None and not rebuild and (note := self.damage_note()):
                warnings.append(f"{note}; rebuilt it")
            if found is not None:
                directory, meta = found
                reason = self.staleness(meta)
                full = needs_full_build(reason)
                # Whatever a refresh keeps, or an up-to-date index serves, must be readable. The
                # reader that checked it also serves the delta refresh (the parts it loaded).
                reader, damage = (None, None) if full else self._loaded(directory, meta)
                try:
                    if damage is None and reason is None:
                        return BuildReport("up-to-date", meta.records, seconds=time.perf_counter() - started,
                                           embeddings=meta.embeddings)  # fmt: skip
                    appended = None if damage is not None or full else delta.append(self.data_dir, directory, meta, reader, model=self.locations.embed_model)
                finally:
                    if reader is not None:
                        reader.close()
                if damage is not None:
                    warnings.append(f"{damage.message}; rebuilt it")
                elif appended is not None:
                    delta.commit(directory, appended[0], meta)
                    appended[1].embeddings = appended[0].embeddings
                    appended[1].seconds = time.perf_counter() - started
                    return appended[1]
                elif not full:
                    report = self.builder.incremental(directory, meta, progress)
                    if report is not None:
                        report.seconds = time.perf_counter() - started
                        return report
            report = self.builder.full(progress)
        report.warnings[:0] = warnings
        report.seconds = time.perf_counter() - started
        return report

    def append_delta(self, reader: IndexReader, *, lock_timeout: float = 0.2) -> GenerationMeta | None:
        """The delta segment for the lines appended since ``reader``'s revision, committed: its meta.

        For a process that holds the live revision loaded (the warm helper, after a write it
        ran): ``delta.append`` reuses the reader's parts, so nothing is read twice and no
        process is started. None, with nothing written, when that is not the change (a
        rewrite, a new file, a delta past its bound: a refresh decides), when another
        process refreshed the index first, or when the build lock is busy.
        """
        try:
            with self._build_lock(lock_timeout):
                found = self.read_meta()
                if found is None or found[0] != reader.directory or found[1].revision != reader.meta.revision:
                    return None
                directory, meta = found
                reason = self.staleness(meta)
                if reason is None or needs_full_build(reason):
                    return None
                appended = delta.append(self.data_dir, directory, meta, reader)
                if appended is None:
                    return None
                delta.commit(directory, appended[0], meta)
                return appended[0]
        except LockTimeoutError:
            return None

    # -- opening for search --------------------------------------------------------
    def open(self, *, policy: str = "refresh", progress: Progress = no_progress) -> tuple[IndexReader, list[str]]:
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
    def _explain_missing_embeddings(meta: GenerationMeta, warnings: list[str]) -> None:
        error = meta.model_error
        if not meta.embeddings and error and not any("lexical" in w or "embedding" in w for w in warnings):
            warnings.append(f"the index has no embeddings: {error}")


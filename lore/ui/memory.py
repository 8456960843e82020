"""What the web view reads, through lore's core: the store's snapshot, the graph, search, audit, health.

One ``Memory`` serves every request of a ``lore ui`` process. Requests run in
threads, so the snapshot is swapped whole and searches take a lock (a
``SearchSession`` holds one open index and is not meant for concurrent use).
Nothing here writes to the data dir.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lore.paths import Locations

if TYPE_CHECKING:
    from lore.index.graph import Adjacency, Neighbourhood
    from lore.index.manager import IndexStatus
    from lore.rank.pipeline import SearchOptions, SearchResponse
    from lore.settings import Settings
    from lore.store.health import Diagnosis
    from lore.store.store import Snapshot, Store


@dataclass
class Loaded:
    """A snapshot and the graph over it, from one reading of the files."""

    signature: tuple[tuple[str, int, int], ...]
    snapshot: Snapshot
    adjacency: Adjacency


class Memory:
    """The web view's reading of a ``lore.Lore`` (its settings, project, store and search session), made safe
    for the threads that answer requests."""

    def __init__(self, locations: Locations, *, current_project: str | None, settings: Settings | None = None) -> None:
        from lore.api import Lore

        self.lore = Lore(project=current_project, settings=settings, locations=locations, channel="ui")
        self.locations = locations
        self.settings = self.lore.settings
        self.current_project = current_project
        self._loaded: Loaded | None = None
        self._load_lock = threading.Lock()
        self._search_lock = threading.Lock()

    @property
    def store(self) -> Store:
        return self.lore.store_for("ui")

    def _signature(self) -> tuple[tuple[str, int, int], ...]:
        from lore.store import audit
        from lore.store.layout import source_files

        parts = []
        for path in [*source_files(self.locations.data_dir), self.locations.data_dir / audit.AUDIT_PATH]:
            with contextlib.suppress(OSError):
                stat = path.stat()
                parts.append((str(path), stat.st_size, stat.st_mtime_ns))
        return tuple(parts)

    def loaded(self) -> Loaded:
        """The current snapshot; read again when a source file or the audit log changed (by stat)."""
        from lore.index.graph import Adjacency, explicit_edges, valid_edges

        signature = self._signature()
        current = self._loaded
        if current is not None and current.signature == signature:
            return current
        with self._load_lock:
            current = self._loaded
            if current is not None and current.signature == signature:
                return current
            store = self.store
            store.require()
            snapshot = store.load()
            adjacency = Adjacency(valid_edges(snapshot.records, explicit_edges(snapshot.edges)))
            self._loaded = Loaded(signature, snapshot, adjacency)
            return self._loaded

    @property
    def snapshot(self) -> Snapshot:
        return self.loaded().snapshot

    def neighbourhood(self, record_id: str, depth: int, limit: int = 40) -> Neighbourhood:
        from lore.index.graph import neighbourhood

        return neighbourhood(self.loaded().adjacency, record_id, depth, limit=limit)

    def options(self, **chosen: Any) -> SearchOptions:
        from lore.search import search_options

        # The project the view was opened for (None: it favours none), as given, not detected.
        return search_options(current_project=self.current_project, **chosen)

    def search(self, query: str, options: SearchOptions) -> SearchResponse:
        """`lore search`'s pipeline, as the CLI runs it, without logging the query as an access.

        A person browsing is not an agent retrieving: reinforcement counts what agents
        were given. The access history is read afresh, so the ranking matches the CLI's.
        """
        with self._search_lock:
            self.lore.search_session().access = None
            return self.lore.run_search(query, options, log_access=False)

    def warm(self) -> None:
        """Open (and if needed refresh) the index, so the first search does not wait for it."""
        with self._search_lock:
            session = self.lore.search_session()
            session.open(self.settings.index_refresh)
            session.get_encoder()

    def audit_entries(self, record_id: str) -> list[dict[str, Any]]:
        from lore.store import audit

        return audit.history(self.locations.data_dir, record_id)

    def diagnosis(self) -> Diagnosis:
        from lore.store.health import diagnose

        return diagnose(self.store, self.snapshot)

    def summary(self) -> dict[str, Any]:
        from lore.store.health import summary

        return summary(self.store, self.snapshot)

    def index_status(self) -> IndexStatus:
        from lore.index.manager import IndexManager

        with self._search_lock:
            return IndexManager(self.locations).status()

"""``lore.Lore``: lore as a library, one object in front of the core the CLI uses.

Every method is a thin wrapper over the same core function a CLI command calls
(``lore.capture``, ``lore.store``, ``lore.search``, ``lore.context``, ``lore.curate``),
so a write through the API gets the same input checks, secret scrubber, duplicate and
contradiction checks and audit entry as ``lore remember``. Constructing a ``Lore``
imports nothing heavy and reads nothing: the store is read on the first call that
needs it, the index opened (and refreshed) on the first search, and the embedding
model loaded on the first query that needs vectors.

Reference: docs/api.md.
"""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from lore.errors import LoreWarning, NotFoundError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import datetime

    from lore.capture import WriteOptions, WriteResult
    from lore.context import ContextBlock, Profile
    from lore.index.manager import Progress
    from lore.paths import Locations
    from lore.rank.options import SearchOptions
    from lore.rank.pipeline import SearchResponse
    from lore.rank.stages import Candidate as SearchHit
    from lore.search import SearchSession
    from lore.sessions.pipeline import CaptureReport
    from lore.settings import Settings
    from lore.store import Record, Store
    from lore.store.graphfile import Edge

__all__ = ["Lore", "SearchHit", "SearchResponse"]

# The search options ``Lore.search`` accepts: those of `lore search`, by their core names.
SEARCH_OPTIONS = frozenset({
    "limit", "kinds", "project", "tags", "since", "until", "include_all", "intent", "graph_depth",
    "channels", "diversity", "disable", "weights", "adaptive", "fusion", "include_candidates", "syntax",
})  # fmt: skip
# Per kind: the capture function (in lore.capture) and its main text parameter; ``text=`` names it too.
_WRITERS = {
    "decision": ("remember", "decision"),
    "pattern": ("learn", "name"),
    "anti_pattern": ("learn_anti", "name"),
    "handoff": ("handoff", "message"),
    "failure": ("fail", "message"),
    "observation": ("observe", "content"),
}
_WRITE_OPTIONS = ("redact", "force", "merge")
# The settings naming directories: relative ones start from the memory's working directory.
_DIRECTORIES = ("data_dir", "index_dir", "state_dir", "cache_dir")


# The response types are the search pipeline's own (one type for every surface): a
# ``SearchResponse`` (lore.rank.pipeline) whose hits are ``SearchHit``s (lore.rank.stages'
# ``Candidate``), each with its record's text. Resolved on first use, as ``lore`` does, so
# constructing a ``Lore`` imports no ranking code.
_RESPONSE_TYPES = {"SearchHit": ("lore.rank.stages", "Candidate"), "SearchResponse": ("lore.rank.pipeline", "SearchResponse")}


def __getattr__(name: str) -> Any:
    found = _RESPONSE_TYPES.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(found[0]), found[1])


class Lore:
    """A lore memory: a data dir (the flat files, the truth) and its index (derived, disposable).

    ``data_dir`` and ``index_dir`` default as on the command line (``LORE_DATA_DIR``, the
    platform data dir; ``LORE_INDEX_DIR``, a per-data-dir cache folder). ``project`` is
    the project new records belong to and searches favour (default: detected from the
    working directory, as the CLI does). ``actor`` is who the audit log names (default:
    ``LORE_ACTOR``, else ``api:user@host``). ``settings`` are the ``LORE_*`` settings
    (default: ``Settings.from_env()``, read and checked here, once; docs/settings.md).
    """

    def __init__(self, data_dir: str | Path | None = None, index_dir: str | Path | None = None,
                 project: str | None = None, *, actor: str | None = None, settings: Settings | None = None,
                 environ: Mapping[str, str] | None = None, cwd: str | Path | None = None, channel: str = "api",
                 debug: bool = False, session: SearchSession | None = None, terminal: Mapping[str, str] | None = None,
                 locations: Locations | None = None, save_pool: bool = True,
                 read_settings: bool = True) -> None:  # fmt: skip
        """The surfaces' keywords (the CLI, the warm helper running a command for a ``lore`` process):

        ``environ`` is the environment the settings are read from (default ``os.environ``) and
        ``cwd`` the working directory the project is detected in and relative paths start from
        (default the process's): the helper passes its client's, and swaps neither. ``channel``
        names the surface in the audit log's default actor. ``session`` is a warm search session
        to serve from (the helper's). ``terminal`` is the environment of the terminal a renderer draws
        for (what rich reads, ``LORE_TERMINAL_WIDTH`` its width; None: this process's own). ``read_settings=False`` defers reading the settings to their
        first use (the CLI: ``lore hook ...`` must exit 0 whatever the environment holds).
        """
        self._settings = settings
        self._environ = environ
        self.cwd = Path(cwd) if cwd is not None else None
        self.channel = channel
        self.debug = debug
        self.terminal = terminal
        self.given_data_dir = data_dir
        self.given_index_dir = index_dir
        self.given_project = project
        self._actor = actor
        self._project: str | None = None
        self._locations: Locations | None = locations
        self._given_locations = locations
        self._store: Store | None = None
        self._shared_session = session
        self.save_pool = save_pool
        self._session: SearchSession | None = None
        if read_settings:
            _ = self.settings

    @property
    def settings(self) -> Settings:
        """The ``LORE_*`` settings, read from ``environ`` and checked once (a bad value is a ``UsageError``)."""
        if self._settings is None:
            from lore.settings import Settings

            self._settings = Settings.from_env(self._environ)
        return self._settings

    def __repr__(self) -> str:
        return f"Lore(data_dir={str(self.data_dir)!r})"

    # -- where ----------------------------------------------------------------------
    @property
    def locations(self) -> Locations:
        if self._locations is None:
            from lore.paths import Locations

            settings, data_dir, index_dir = self.settings, self.given_data_dir, self.given_index_dir
            if self.cwd is not None:  # relative to the asking process's directory, not this one's
                data_dir, index_dir = self._from_cwd(data_dir), self._from_cwd(index_dir)
                moved: dict[str, Any] = {name: self._from_cwd(getattr(settings, name)) for name in _DIRECTORIES}
                settings = settings._replace(**moved)
            self._locations = Locations.resolve(data_dir, index_dir, settings)
        return self._locations

    def _from_cwd(self, path: str | Path | None) -> str | None:
        import os

        if not path:
            return None
        return os.path.join(str(self.cwd), os.path.expanduser(str(path)))

    @property
    def data_dir(self) -> Path:
        return self.locations.data_dir

    @property
    def index_dir(self) -> Path:
        return self.locations.index_dir

    @property
    def project(self) -> str:
        """The project new records belong to and searches favour: the one given, else detected from ``cwd``."""
        if self._project is None:
            self._project = self.current_project()
        return self._project

    def current_project(self, cwd: Path | None = None) -> str:
        """The project given, else the one detected from ``cwd`` (default: this memory's working directory)."""
        if self.given_project:
            return self.given_project
        from lore.project import detect_project

        return detect_project(cwd if cwd is not None else self.cwd)

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self.store_for(self.channel)
        return self._store

    def store_for(self, channel: str) -> Store:
        """A store whose audit entries name ``channel`` unless an actor is set (``actor=``, ``LORE_ACTOR``)."""
        from lore.store import Store
        from lore.store.audit import default_actor

        # Only the default data dir is created on a first write: a --data-dir or LORE_DATA_DIR
        # that does not exist is more likely a typo than a wish for a new store.
        default = self.given_data_dir is None and self._given_locations is None and not self.settings.data_dir
        actor = self._actor or self.settings.actor or default_actor(channel)
        return Store(self.data_dir, actor=actor, create_missing=default)

    def init(self) -> list[Path]:
        """Create the data dir in the original Lore layout (existing files are kept); the files created."""
        return self.store.init()

    # -- writes ---------------------------------------------------------------------
    def add(self, kind: str, text: str | None = None, /, **fields: Any) -> Record:
        """Store a record of ``kind`` (decision, pattern, anti-pattern, lesson, handoff, failure, observation).

        ``fields`` are those of the matching CLI command, by their core names (docs/api.md);
        the main text is the first argument or ``text=``. ``redact`` (default True),
        ``force`` and ``merge`` are the write options. A near-duplicate raises
        ``DuplicateError`` unless ``force`` or ``merge`` (which returns the record merged
        into); contradictions and other notices are issued as ``LoreWarning``.
        """
        from lore import capture
        from lore.kinds import normalise_kind

        kind = normalise_kind(kind)
        if "text" in fields:
            if text is not None:
                raise UsageError("the text is given twice (as an argument and as text=)")
            text = fields.pop("text")
        if kind == "lesson":
            if text is not None:
                raise UsageError("a lesson has no main text", hint="give situation=, error_pattern=, oversight=, fix=, rule=, severity=, scope=")
            _check_fields(self.distill_lesson, fields, kind, ())
            return self.distill_lesson(**fields)
        function_name, main = _WRITERS[kind]
        writer: Callable[..., WriteResult] = getattr(capture, function_name)
        if text is not None:
            if main in fields:
                raise UsageError(f"the text is given twice (as an argument and as {main}=)")
            fields[main] = text
        redact, force, merge = (bool(fields.pop(name, default)) for name, default in zip(_WRITE_OPTIONS, (True, False, False), strict=True))
        if force and merge:
            raise UsageError("force and merge exclude each other")
        _check_fields(writer, fields, kind, _WRITE_OPTIONS)
        options = self.write_options(redact=redact, force=force, merge=merge,
                                     check_duplicates=kind in ("decision", "pattern", "anti_pattern"))
        result = writer(self.store, project=self.project, options=options, **fields)
        _warn(result.notices, result.record.id)
        return result.record

    ingest = add

    def write_options(self, **options: Any) -> WriteOptions:
        """A write's options (``lore.capture.WriteOptions``) with this memory's model, write-check cache and pool saving."""
        from lore.capture import WriteOptions

        return WriteOptions.configured(self.settings, save_pool=self.save_pool, **options)

    def retract(self, record_id: str, reason: str) -> Record:
        """Hide a record from search, keeping it in its file with the reason (``restore`` undoes it)."""
        from lore import capture

        return capture.retract(self.store, record_id, reason)

    def restore(self, record_id: str) -> Record:
        """Make a retracted (or pruned) record active again."""
        from lore.curate.reliability import restore

        return restore(self.store, record_id)

    def delete(self, record_id: str) -> Record:
        """Remove a record and its edges from the files for good; the deleted record."""
        return self.store.delete(record_id)

    def supersede(self, old_id: str, new_id: str) -> Record:
        """Mark ``old_id`` superseded by ``new_id`` (and add a ``supersedes`` edge); the old record."""
        from lore import capture

        return capture.supersede(self.store, old_id, new_id)

    def link(self, source: str, target: str, relation: str = "relates_to", *, weight: float = 1.0) -> Edge:
        """Add a typed edge (relates_to, depends_on, contradicts, derived_from, ...)."""
        return self.store.link(source, target, relation, weight=weight)

    # -- reads ----------------------------------------------------------------------
    def get(self, record_id: str) -> Record | None:
        """The record with this id (or unique prefix of 6+ characters); None when there is none."""
        try:
            return self.store.load().get(record_id)
        except NotFoundError:
            return None

    def records(self, *, kinds: list[str] | None = None, project: str | None = None, tags: list[str] | None = None,
                since: str | datetime | None = None, until: str | datetime | None = None, include_all: bool = False,
                limit: int | None = None) -> list[Record]:  # fmt: skip
        """Records passing every filter, newest first, as `lore list` (``since``/``until``: ``"30d"``, a date, a datetime)."""
        from datetime import UTC, datetime

        from lore.kinds import normalise_kind
        from lore.timeparse import parse_when

        now = datetime.now(UTC)

        def when(value: str | datetime | None) -> datetime | None:
            return parse_when(value, now) if isinstance(value, str) else value

        store = self.store
        store.require()
        return store.load().select(kinds={normalise_kind(k) for k in kinds} if kinds else None, project=project,
                                   tags=tags or (), since=when(since), until=when(until), include_all=include_all,
                                   limit=limit)  # fmt: skip

    def links(self, record_id: str) -> list[Edge]:
        """The edges touching a record (either end), in the order they were added."""
        store = self.store
        store.require()
        snapshot = store.load()
        return snapshot.edges_of(snapshot.get(record_id).id)

    def stats(self) -> dict[str, Any]:
        """Records by type, status and project, edges and load warnings (as `lore stats --json`)."""
        from lore.store.health import summary

        store = self.store
        store.require()
        return summary(store, store.load())

    def search(self, query: str, **options: Any) -> SearchResponse:
        """Hybrid search, as `lore search` (options: limit, kinds, tags, since, until, include_all, ...).

        The response is the pipeline's own: ``hits`` (``SearchHit``, best first, with
        their text), ``evidence_gap``, ``warnings``, and how it got there. The query may use
        `lore search`'s query language (``type:decision retry -celery``; ``syntax=False`` reads
        it as plain words).
        """
        return self._search(query, {"syntax": True, **options})

    def context(self, query: str, budget_tokens: int = 500, max_items: int = 5) -> ContextBlock:
        """The agent-ready block of the most relevant memories within a token budget (as `lore context`)."""
        from lore.context import TERMINAL, asked

        if budget_tokens < 10 or max_items < 1:
            raise UsageError("budget_tokens must be at least 10 and max_items at least 1")
        # A context block is what an agent is handed: candidates awaiting review never go in it.
        options = self._options(query, {"limit": max_items, "graph_depth": 1, "include_candidates": False})
        return self.run_context(query, options, asked(TERMINAL, budget_tokens, max_items))

    # -- the recipes every surface runs (the CLI, MCP, the warm helper, the UI) ---------------
    def search_options(self, **options: Any) -> SearchOptions:
        """``lore.search.search_options`` for this memory's project (the one searches favour)."""
        from lore.search import search_options

        return search_options(**options, current_project=self.project)

    def run_search(self, query: str, options: SearchOptions, *, log_access: bool = True,
                   progress: Progress | None = None) -> SearchResponse:  # fmt: skip
        """The search recipe: ``options`` (``search_options``) over this memory's session and refresh policy."""
        from lore.search import search

        keywords: dict[str, Any] = {} if progress is None else {"progress": progress}
        return search(self.search_session(), query, options, policy=self.settings.index_refresh,
                      log_access=log_access, **keywords)  # fmt: skip

    def run_context(self, query: str, options: SearchOptions, profile: Profile) -> ContextBlock:
        """The context recipe (``lore.context.context_for``) for a surface's ``profile``, over this memory's session."""
        from lore.context import context_for

        return context_for(self.search_session(), query, options, profile, project=self.project,
                           policy=self.settings.index_refresh)  # fmt: skip

    def _search(self, query: str, options: dict[str, Any], log_access: bool = True) -> SearchResponse:
        return self.run_search(query, self._options(query, options), log_access=log_access)

    def _options(self, query: str, options: dict[str, Any]) -> Any:
        """The search options for ``options`` (``SEARCH_OPTIONS``), checked; the data dir must exist."""
        from lore.paths import require_data_dir

        if not query.strip():
            raise UsageError("the query is empty")
        unknown = sorted(set(options) - SEARCH_OPTIONS)
        if unknown:
            raise UsageError(f"unknown search option {unknown[0]!r}", hint="options: " + ", ".join(sorted(SEARCH_OPTIONS)))
        require_data_dir(self.data_dir)
        opts = self.search_options(**options)
        return opts._replace(retrieval_limit=max(opts.retrieval_limit, opts.limit))

    def _open_session(self) -> Any:
        return self.search_session()

    def search_session(self) -> SearchSession:
        """The search session this memory searches with: its own, or the warm one it was given, with its
        ``llm_cmd`` (the given session's index and encoder shared when only that differs; its access counts read anew)."""
        if self._session is None:
            import dataclasses

            from lore.search import SearchSession

            shared, llm_cmd = self._shared_session, self.settings.llm_cmd
            if shared is None:
                self._session = SearchSession(self.locations, llm_cmd=llm_cmd)
            else:
                # A copy with its own access history, read from disk at its first search: sharing the
                # helper's dict let a copy's logged accesses count in a later copy's search after the log was gone.
                self._session = shared if shared.llm_cmd == llm_cmd else dataclasses.replace(
                    shared, llm_cmd=llm_cmd, access=None, access_stamp=None)
        return self._session

    # -- capture from sessions ------------------------------------------------------------
    def capture_session(self, path: str | Path, *, session_id: str | None = None, method: str | None = None,
                        dry_run: bool = False) -> CaptureReport:  # fmt: skip
        """Propose candidate records from an agent session transcript (as `lore capture-session`).

        Only the lines added since the last capture of that session are read; candidates are
        stored with status ``candidate`` and provenance (review them with the inbox).
        ``method``: ``heuristic`` (default, no model) or ``llm`` (``LORE_LLM_CMD``).
        """
        from lore.sessions.pipeline import capture_session

        return capture_session(self.store, path, project=self.given_project, session_id=session_id, method=method,
                               dry_run=dry_run, settings=self.settings)  # fmt: skip

    # -- lessons (docs/lessons.md) -------------------------------------------------------
    def distill_lesson(self, situation: str, error_pattern: str, oversight: str, fix: str, rule: str,
                       severity: str, scope: str, inverse: str | None = None, confidence: float = 0.7,
                       tags: list[str] | None = None) -> Record:  # fmt: skip
        """Store a lesson; idempotent on ``sha256(error_pattern + scope)[:16]`` (docs/lessons.md).

        The same error pattern and scope again returns the stored lesson unless the new one
        has a higher confidence, which supersedes it (the old one is kept as history).
        """
        from lore.curate.lessons import record_lesson

        result = record_lesson(self.store, situation=situation, error_pattern=error_pattern, oversight=oversight,
                               fix=fix, rule=rule, severity=severity, scope=scope, inverse=inverse,
                               confidence=confidence, tags=tags, project=self.project)  # fmt: skip
        _warn(result.notices, result.record.id)
        return result.record

    def query_lessons(self, query: str, limit: int = 5) -> list[Record]:
        """Active lessons sharing words with ``query``: most severe first, then most relevant (as `lore lessons`)."""
        from lore.curate.lessons import list_lessons

        store = self.store
        store.require()
        return [record for record, _ in list_lessons(store, query, limit=limit)]

    # -- the review inbox (captured candidates) ------------------------------------------
    def inbox(self, kind: str | None = None) -> list[Record]:
        """Candidates waiting for review (of ``kind``), oldest first (as `lore inbox`)."""
        from lore.curate.inbox import list_candidates
        from lore.kinds import normalise_kind

        store = self.store
        store.require()
        return list_candidates(store, frozenset({normalise_kind(kind)}) if kind else None)

    def accept(self, ids: str | list[str]) -> list[Record]:
        """Make candidates active at their type's normal confidence; the accepted records."""
        from lore.curate.inbox import accept

        return accept(self.store, [ids] if isinstance(ids, str) else list(ids))

    def reject(self, ids: str | list[str]) -> list[Record]:
        """Delete candidates (audited) and remember their text so capture does not propose it again."""
        from lore.curate.inbox import reject

        return reject(self.store, [ids] if isinstance(ids, str) else list(ids))

    def edit_candidate(self, record_id: str, **fields: Any) -> Record:
        """Change fields of a candidate before accepting it (text is scrubbed; the result must validate)."""
        from lore.curate.inbox import edit

        return edit(self.store, record_id, fields)

    # -- reflection and reliability (docs/api.md) -----------------------------------------
    def reflect(self, topic: str | None = None, lookback: int = 50) -> Record:
        """Synthesize a belief over recent memories (on ``topic``), stored as a reflection.

        The records considered are the ``lookback`` newest active ones, or with a topic the
        ``lookback`` best search hits for it. The text comes from ``LORE_LLM_CMD`` when set,
        else it is extractive. See ``lore.curate.reflect``.
        """
        from lore.curate.reflect import reflect

        records = None
        if topic is not None and topic.strip():
            if lookback < 1:
                raise UsageError(f"lookback must be at least 1, got {lookback}")
            response = self._search(topic, {"limit": lookback}, log_access=False)
            snapshot = self.store.load()
            found = () if response.gap.gap else response.hits
            records = [snapshot.records[h.id] for h in found if h.id in snapshot.records]
        result = reflect(self.store, project=self.project, topic=topic, records=records, lookback=lookback,
                         llm_cmd=self.settings.llm_cmd)  # fmt: skip
        if result.notice:
            _warn([result.notice], result.record.id)
        return result.record

    def record_outcome(self, pattern_id: str, success: bool) -> Record:
        """Count a success or failure of a pattern or lesson; its confidence follows (Beta mean, docs/api.md)."""
        from lore.curate.reliability import record_outcome

        return record_outcome(self.store, pattern_id, success)

    def prune(self, threshold: float, *, dry_run: bool = False) -> list[Record]:
        """Retract the patterns that recorded failures brought below ``threshold`` (``restore`` undoes it)."""
        from lore.curate.reliability import prune

        return [p.record for p in prune(self.store, threshold, dry_run=dry_run)]

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Release the open index (a later search opens it again); a warm session it was given stays open."""
        if self._session is not None and self._shared_session is None and self._session.reader is not None:
            self._session.reader.close()
        self._session = None

    def __enter__(self) -> Lore:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.close()


def _check_fields(function: Callable[..., Any], fields: dict[str, Any], kind: str, extra: tuple[str, ...]) -> None:
    """Refuse unknown and missing fields with a ``UsageError``; a lone string for a list field becomes a list."""
    parameters = [p for p in inspect.signature(function).parameters.values()
                  if p.name not in ("self", "store", "project", "options")]  # fmt: skip
    names = [p.name for p in parameters]
    label = kind.replace("_", "-")
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise UsageError(f"unknown field {unknown[0]!r} for a {label}", hint="fields: " + ", ".join([*names, *extra]))
    missing = [p.name for p in parameters if p.default is inspect.Parameter.empty and p.name not in fields]
    if missing:
        raise UsageError(f"a {label} needs {', '.join(missing)}")
    for parameter in parameters:
        if isinstance(fields.get(parameter.name), str) and str(parameter.annotation).startswith("list["):
            fields[parameter.name] = [fields[parameter.name]]  # tags="db" means ["db"], not ["d", "b"]


def _warn(notices: list[str], record_id: str) -> None:
    for notice in notices:
        warnings.warn(notice.replace("{new_id}", record_id), LoreWarning, stacklevel=3)

"""Search as a service: scrub, open (and refresh) the index, run the pipeline, log access.

The CLI, the hook, the warm helper and the MCP server all call ``search``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from lore.errors import ModelError, UsageError
from lore.index.manager import IndexManager, IndexReader, Progress, _no_progress
from lore.paths import Locations
from lore.rank import access as access_log
from lore.rank import intent
from lore.rank.pipeline import SearchOptions, SearchResponse, run
from lore.rank.query import redact_query, scrub_query

LLM_TIMEOUT_S = 4.0


@dataclass
class SearchSession:
    """What a search keeps warm between queries (a helper process holds one for its lifetime)."""

    locations: Locations
    reader: IndexReader | None = None
    encoder: Any = None
    encoder_error: str | None = None
    centroids: dict[str, list[float]] | None = None
    access: dict[str, tuple[int, float]] | None = None
    # The access log's stat when ``access`` last matched it: another process's search changes it, and the
    # counts are read again (a long-lived session's own searches keep both in step).
    access_stamp: tuple[int, int, int] | None = None
    warnings: list[str] = field(default_factory=list)
    llm_cmd: str | None = None  # LORE_LLM_CMD (Settings.llm_cmd): a pseudo-answer for the HyDE channel

    def open(self, policy: str = "refresh", progress: Progress = _no_progress) -> IndexReader:
        manager = IndexManager(self.locations)
        if self.reader is not None and policy != "ignore":
            reason = manager.staleness(self.reader.meta)
            if reason is None and manager.current_dir() == self.reader.directory:
                return self.reader
            self.reader.close()
            self.reader = None
        if self.reader is None:
            self.reader, self.warnings = manager.open(policy=policy, progress=progress)
        return self.reader

    def ensure_null(self) -> None:
        """Measure the generation's null evidence if it has none (``lore.rank.null``): `lore index` and the warm
        helper call it, so that the prompt hook reads a store's evidence on its own scale."""
        from lore.rank import null

        null.ensure(self)

    def search(self, raw_query: str, options: SearchOptions, **keywords: Any) -> SearchResponse:
        """``search(self, raw_query, options, ...)``: for code handed a session that does not import this service
        (``lore.rank.null``, in the rank layer below it)."""
        return search(self, raw_query, options, **keywords)

    def get_encoder(self) -> Any:
        if self.encoder is None and self.encoder_error is None:
            from lore.embedder import get_query_encoder

            try:
                self.encoder = get_query_encoder(self.locations.embed_model)
            except ModelError as error:
                self.encoder_error = error.message
        return self.encoder

    def get_centroids(self, reader: IndexReader) -> dict[str, list[float]] | None:
        if self.centroids is None and reader.has_vectors and self.get_encoder() is not None:
            self.centroids = intent.load_centroids(
                reader.directory / "intent-centroids.json", str(reader.meta.model), self.encoder.encode
            )
        return self.centroids


def llm_pseudo_answer(query: str, command: str | None) -> str | None:
    """A two-sentence answer from ``command`` (``LORE_LLM_CMD``; query on stdin); None on any problem."""
    from lore import llm

    if not command:
        return None
    reply = llm.ask(f"In two sentences, answer as a team's engineering notes would: {query}", LLM_TIMEOUT_S, command)
    return reply.text[:1000] if reply.text else None


def search(
    session: SearchSession,
    raw_query: str,
    options: SearchOptions,
    *,
    policy: str = "refresh",
    log_access: bool = True,
    progress: Progress = _no_progress,
    use_llm: bool = True,
) -> SearchResponse:
    """Search for ``raw_query``: the response's hits carry their id, kind, title, content and score (``pipeline.run``).

    ``options`` is never written to; the hits are what every renderer reads.
    """
    started = time.perf_counter()
    scrubbed = scrub_query(raw_query)
    shown = None
    if options.syntax:
        from lore.rank import querylang

        if querylang.uses_syntax(raw_query):
            # Redacted before Whoosh parses it; what ranks is then scrubbed as any query is.
            redacted = redact_query(raw_query)
            parsed = querylang.parse(redacted)
            shown = " ".join(redacted.split())
            scrubbed = scrubbed._replace(text=scrub_query(parsed.text).text)
            options = options._replace(query_tree=parsed.tree)
    t_open = time.perf_counter()
    reader = session.open(policy, progress)
    open_ms = (time.perf_counter() - t_open) * 1000
    encode = None
    if reader.has_vectors and session.encoder_error is None:
        # Loaded on first use: past the hook's soft deadline the pipeline never asks.
        def encode(texts: list[str]) -> Any:
            encoder = session.get_encoder()
            if encoder is None:
                raise ModelError(session.encoder_error or "embedding model unavailable")
            return encoder.encode(texts)
    stamp = access_log.stamp(session.locations.access_log)
    if session.access is None or stamp != session.access_stamp:
        session.access, session.access_stamp = access_log.load_stats(session.locations.access_log), stamp
    if use_llm and session.llm_cmd and options.hyde_text is None and "hyde" in options.channels:
        options = options._replace(hyde_text=llm_pseudo_answer(scrubbed.text, session.llm_cmd))
    response = run(reader, scrubbed.text, options, encode=encode, access=session.access,
                   centroids=(lambda: session.get_centroids(reader)) if options.adaptive else None)  # fmt: skip
    warnings = [*session.warnings, *response.warnings]
    if session.encoder_error and reader.has_vectors:
        warnings.append(f"{session.encoder_error}; lexical results only")
    elif not reader.has_vectors and not any("lexical" in w for w in warnings):
        warnings.append("the index has no embeddings (model unavailable when it was built): lexical results only")
    if scrubbed.redactions:
        warnings.append(f"redacted {len(scrubbed.redactions)} secret(s) from the query")
    response = response._replace(warnings=tuple(warnings))
    if shown is not None:  # the query as written, not only the words that ranked
        response = response._replace(query=shown)
    response.timings_ms["open_index"] = round(open_ms, 3)
    if log_access:
        now = options.now if options.now is not None else time.time()
        access_log.log_response(session.locations.access_log, response, session.access, now)
        session.access_stamp = access_log.stamp(session.locations.access_log)
    response.timings_ms["wall"] = round((time.perf_counter() - started) * 1000, 3)
    return response


def search_options(*, limit: int = 10, kinds: list[str] | None = None, project: str | None = None,
                   tags: list[str] | None = None, since: str | None = None, until: str | None = None,
                   include_all: bool = False, intent: str | None = None, graph_depth: int = 0,
                   include_candidates: bool = True,
                   channels: str | None = None, diversity: bool = False, disable: list[str] | None = None,
                   weights: str | None = None, adaptive: bool = False, fusion: str = "score",
                   current_project: str | None = None, phrases: str = "hint", syntax: bool = False) -> SearchOptions:  # fmt: skip
    """``SearchOptions`` from the options as a person types them (`lore search` and `lore ui` share this).

    ``phrases="filter"``: quoted phrases narrow the results (`lore search`); the default
    treats quotes as a hint (``SearchOptions.phrases``). ``syntax``: the query may be
    written in the query language (``lore.rank.querylang``; `lore search`, MCP's search,
    ``Lore.search``), whose fields combine with these filters.
    """
    from datetime import UTC, datetime

    from lore.rank.pipeline import CHANNELS
    from lore.rank.stages import SWITCHABLE
    from lore.store.records import normalise_kind
    from lore.timeparse import parse_when

    now = datetime.now(UTC)
    chosen = tuple(c.strip() for c in channels.split(",")) if channels else CHANNELS
    unknown = [c for c in chosen if c not in CHANNELS]
    if unknown:
        raise UsageError(f"unknown channel {unknown[0]!r}", hint="channels: " + ", ".join(CHANNELS))
    weight_map = None
    if weights:
        from lore.rank.fusion import DEFAULT_WEIGHTS

        weight_map = dict(DEFAULT_WEIGHTS)
        for part in weights.split(","):
            name, _, value = (p.strip() for p in part.partition("="))
            if name not in CHANNELS:
                raise UsageError(f"unknown channel {name!r} in --weights", hint="channels: " + ", ".join(CHANNELS))
            try:
                weight = float(value)
            except ValueError as exc:
                raise UsageError(f"cannot read weight {part!r}", hint="use --weights vector=1,hyde=0.8,bm25=0.6") from exc
            if not weight >= 0 or weight == float("inf"):
                raise UsageError(f"weight {part!r} must be a finite number >= 0", hint="0 switches a channel off")
            weight_map[name] = weight
    if fusion not in FUSIONS:
        raise UsageError(f"unknown fusion {fusion!r}", hint="fusions: " + ", ".join(FUSIONS))
    unknown_stages = sorted(set(disable or ()) - set(SWITCHABLE))
    if unknown_stages:
        raise UsageError(f"unknown stage {unknown_stages[0]!r} for --disable", hint="stages: " + ", ".join(SWITCHABLE))
    since_at = parse_when(since, now).timestamp() if since else None
    until_at = parse_when(until, now).timestamp() if until else None
    if since_at is not None and until_at is not None and since_at >= until_at:
        raise UsageError(f"--since {since} is not before --until {until}", hint="nothing can match an empty time range")
    return SearchOptions(
        limit=limit,
        types=frozenset(normalise_kind(k) for k in kinds) if kinds else None,
        project_filter=project,
        tags=tuple(tags or ()),
        since=since_at,
        until=until_at,
        include_all=include_all,
        include_candidates=include_candidates,
        intents=tuple(i.strip() for i in intent.split(",") if i.strip()) if intent else (),
        current_project=current_project,
        graph_depth=graph_depth,
        channels=chosen,
        weights=weight_map,
        diversity=diversity,
        adaptive=adaptive,
        fusion=fusion,
        disabled_stages=frozenset(disable or ()),
        now=time.time(),
        phrases=phrases,
        syntax=syntax,
    )


FUSIONS = ("score", "rrf")


@dataclass(frozen=True)
class Neighbour:
    """A record reached from a seed over typed edges: ``steps`` are (relation, "out" | "in", record reached)."""

    id: str
    kind: str
    title: str
    hops: int
    steps: tuple[tuple[str, str, str], ...]


def neighbours(session: SearchSession, record_id: str, depth: int, *, policy: str = "refresh") -> tuple[str, list[Neighbour]]:
    """The seed's full id and the records within ``depth`` hops of it in the index's graph, nearest first."""
    from lore.store.store import resolve_id

    if not record_id:
        raise UsageError("a record id is required")
    reader = session.open(policy)
    table = reader.table
    seed = resolve_id(table.ids, record_id, hint="find ids with the search tool")
    found = []
    for other, (hops, path) in sorted(reader.adjacency.bfs([seed], depth).items(), key=lambda kv: (kv[1][0], kv[0])):
        row = table.row(other)
        if other == seed or row is None:
            continue
        steps = tuple((edge.relation, direction, edge.target if direction == "out" else edge.source)
                      for edge, direction in path)  # fmt: skip
        found.append(Neighbour(other, table.kinds[row], str(table.doc(row)["title"]), hops, steps))
    return seed, found

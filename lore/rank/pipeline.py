"""The search pipeline: channels -> score fusion (or weighted RRF) -> scoring stages -> graph -> MMR -> evidence gap.

``run`` is deterministic given the index, the query, the options (including
``now``) and the access statistics; it does no I/O of its own beyond reading
the index through its reader. It is one pipeline with two retrieval backends
(``lore.rank.retrieval``), chosen by the reader: the full ``IndexReader`` (numpy:
BM25 over every row, phrases, vectors, HyDE) or the prompt hook's numpy-free
``ColdReader`` (BM25's sparse scores and its candidates' cosines, in pure Python). Everything else, from the
row filter to the response, is the same code for both; this module imports no
numpy at its top (only MMR over vectors does, inside ``finish``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from lore import analysis
from lore.rank import fusion, intent, retrieval, traverse
from lore.rank.diversity import mmr
from lore.rank.gap import GapVerdict, assess
from lore.rank.options import CHANNELS, SearchOptions  # noqa: F401  (re-exported: where callers import them)
from lore.rank.retrieval import Laps
from lore.rank.stages import Candidate, QueryContext, candidate_at, rank

if TYPE_CHECKING:
    import numpy as np

    from lore.index.manager import IndexReader

# The hits whose passages are compared with the query (``Candidate.passage_cosine``): the
# five the injection decision reads (``context.decide``).
PASSAGE_HITS = 5


class SearchResponse(NamedTuple):
    """The ranked hits of one search, the evidence-gap verdict, and how it got there: what every search returns.

    ``Lore.search`` (the library's ``lore.SearchResponse``), `lore search`, the MCP
    server, the hooks and the warm helper all get this. Immutable (``_replace``
    makes a changed copy; ``timings_ms`` is the one dict a caller adds to). A
    NamedTuple, as ``SearchOptions``: the prompt hook's cold path imports this module
    on every prompt, and a dataclass costs ~0.4 ms more to define.
    """

    query: str
    hits: tuple[Candidate, ...]  # best first, each with its record's title and content
    gap: GapVerdict  # the evidence-gap verdict, with its reason and figures
    intent: intent.IntentResult
    timings_ms: dict[str, float]
    weights: dict[str, float]  # each channel's fusion weight, as used
    warnings: tuple[str, ...]
    channels_used: tuple[str, ...]
    fusion: str  # "score" or "rrf"
    # The query's BM25 terms with their idf in this store: the injection decision's evidence.
    term_idf: dict[str, float]
    records: int = 0  # the records the index holds (the injection decision reads a young store otherwise)
    # Whether the store holds a record of the current project: where it holds none, no hit is "another
    # project's" in a sense that says anything (a session in a directory lore has no memory of).
    project_known: bool = True

    @property
    def evidence_gap(self) -> bool:
        """Whether lore holds no reliable memory for the query (``gap.gap``)."""
        return self.gap.gap


Encoder = Callable[[list[str]], "np.ndarray"]


def _allowed_rows(reader: IndexReader, opts: SearchOptions) -> Sequence[bool] | None:
    table = reader.table
    if not opts.filtered:
        if opts.include_all:
            return None
        return reader.searchable_rows if opts.include_candidates else reader.active_rows
    tags = {t.lower().lstrip("#") for t in opts.tags}
    allowed = []
    for row in range(len(table)):
        status = table.statuses[row]
        ok = opts.include_all or status == "active" or (opts.include_candidates and status == "candidate")
        if ok and opts.types and table.kinds[row] not in opts.types:
            ok = False
        if ok and opts.project_filter and table.projects[row] != opts.project_filter:
            ok = False
        if ok and tags and not tags <= {t.lower() for t in table.tags_of(row)}:
            ok = False
        moment = table.times[row]
        if ok and opts.since is not None and (moment is None or moment < opts.since):
            ok = False
        if ok and opts.until is not None and (moment is None or moment >= opts.until):
            ok = False
        allowed.append(ok)
    return allowed


def _covered_terms(table: Any, record_id: str, query_terms: Sequence[str]) -> set[str]:
    """The query terms that occur in a record's title or content."""
    row = table.row(record_id)
    if row is None:
        return set()
    doc = table.doc(row)
    return set(query_terms) & set(analysis.terms(doc["title"] + " " + doc["content"]))


# Words of at least this many letters that are one edit from a stored term count as
# typos of it, not as words the store has never seen. Shorter words and terms with
# digits or punctuation have stored neighbours that mean something else ("redux" and
# "reduc", "http/3" and "http/2").
TYPO_MIN_CHARS = 6


def _unknown_share(bm25: Any, query_terms: Sequence[str]) -> float:
    """The share of the query's terms that no record contains, likely typos of stored terms excepted."""
    def typo(term: str) -> bool:
        return len(term) >= TYPO_MIN_CHARS and term.isalpha() and bm25.has_near_term(term)

    unknown = [term for term in query_terms if not bm25.document_frequency(term) and not typo(term)]
    return len(unknown) / len(query_terms)


def bm25_evidence(reader: Any, kept: Sequence[tuple[str, float]],
                  query_terms: Sequence[str]) -> tuple[tuple[str, set[str]] | None, float]:  # fmt: skip
    """BM25's best record with the query terms it holds, and the share of the query's idf mass they carry.

    It feeds the evidence gap. ``reader`` is an ``IndexReader`` or the hook's cold
    reader (``lore.index.cold``): both have a ``table`` and a ``bm25`` with ``idf_of``.
    """
    if not kept or not query_terms:
        return None, 0.0
    idf = reader.bm25.idf_of(query_terms)
    top = (kept[0][0], _covered_terms(reader.table, kept[0][0], query_terms))
    return top, sum(idf[term] for term in top[1]) / (sum(idf.values()) or 1.0)


def fuse(reader: Any, query_terms: Sequence[str], rankings: dict[str, list[str]],
         channel_scores: dict[str, dict[str, float]], full_scores: Mapping[str, Any],
         weights: Mapping[str, float], opts: SearchOptions) -> list[Candidate]:  # fmt: skip
    """The channels' rankings fused into candidates, each with its relevance and idf coverage.

    ``full_scores[channel][row]`` is the channel's score of any row (a numpy array, or a
    mapping that answers 0 for rows it does not hold). ``channel_scores`` is completed
    in place with every candidate's score in each channel.
    """
    table = reader.table
    shares: dict[str, dict[str, float]] = {}
    if opts.fusion == "score":
        union = [row for rid in dict.fromkeys(r for ids in rankings.values() for r in ids) if (row := table.row(rid)) is not None]
        for channel, ids in rankings.items():
            values = full_scores.get(channel)
            if values is None:  # the graph channel ranks without scores: 1 / rank
                channel_scores[channel] = {rid: 1.0 / n for n, rid in enumerate(ids, start=1)}
                continue
            # Every candidate's score in this channel, not only the channel's own top records.
            channel_scores[channel] = {table.ids[row]: float(values[row]) for row in union if values[row] > 0}
        by_score = fusion.score_fusion(rankings, channel_scores, weights)
        fused = {rid: (score, ranks) for rid, (score, ranks, _) in by_score.items()}
        shares = {rid: share for rid, (_, _, share) in by_score.items()}
        best = fusion.max_score_fusion([c for c in rankings if rankings[c]], weights)
    else:
        fused = fusion.rrf(rankings, weights)
        shares = {rid: {ch: weights.get(ch, 0.0) / (fusion.RRF_K + rank) for ch, rank in ranks.items()}
                  for rid, (_, ranks) in fused.items()}  # fmt: skip
        best = fusion.max_rrf([c for c in rankings if rankings[c]], weights)
    candidates = []
    for record_id, (score, ranks) in fused.items():
        row = table.row(record_id)
        if row is None:
            continue
        base = candidate_at(reader, row)
        if opts.intents:
            chain = reader.table.doc(row).get("intent_chain") or []
            base = base.evolve(intent_chain=tuple(str(c) for c in chain if c))
        candidates.append(base.evolve(
            ranks=ranks, fused=score, contributions=shares.get(record_id, {}), relevance=fusion.relevance(score, best, opts.stage_settings.relevance_sharpness),
            channel_scores={ch: channel_scores[ch][record_id] for ch in channel_scores if record_id in channel_scores[ch]},
        ))  # fmt: skip
    if candidates and query_terms and "bm25" in opts.channels and "coverage" not in opts.disabled_stages:
        covered = reader.bm25.coverage(query_terms, [c.row for c in candidates])
        candidates = [c.evolve(coverage=float(share)) for c, share in zip(candidates, covered, strict=True)]
    return candidates


def finish(reader: Any, opts: SearchOptions, candidates: list[Candidate], query_terms: Sequence[str],
           bm25_top: tuple[str, set[str]] | None, idf_coverage: float, query_cosine: float | None,
           classified: intent.IntentResult, allowed: Sequence[bool] | None,
           access: Mapping[str, tuple[int, float]] | None, now: float,
           lap: Callable[[str, float], float], t: float) -> tuple[list[Candidate], GapVerdict]:  # fmt: skip
    """Stages, evidence gap, diversity, graph expansion and contradiction notes: the hits and the verdict.

    Pure Python over the candidates (numpy only for MMR over vectors), whichever
    retrieval backend found them.
    """
    table = reader.table
    ctx = QueryContext(
        now=now, project=opts.current_project, intents=opts.intents, include_all=opts.include_all,
        include_candidates=opts.include_candidates, access=access or {}, type_preferences=intent.TYPE_PREFERENCES.get(classified.intent, {}) if opts.adaptive else {},
        settings=opts.stage_settings, disabled=opts.disabled_stages,
    )  # fmt: skip
    ranked_candidates = rank(candidates, ctx)
    t = lap("stages", t)

    coverage = 0.0
    if ranked_candidates and query_terms:
        top_id = ranked_candidates[0].id
        # Usually BM25's best record is still first: its terms are already known.
        top_terms = bm25_top[1] if bm25_top and bm25_top[0] == top_id else _covered_terms(table, top_id, query_terms)
        coverage = len(top_terms) / len(query_terms)
    gap_settings = opts.gap_settings
    unknown_share = _unknown_share(reader.bm25, query_terms) if query_terms and "bm25" in opts.channels else 0.0
    verdict = assess(ranked_candidates, coverage, query_cosine, gap_settings, idf_coverage=idf_coverage,
                     unknown_share=unknown_share, store_size=len(table))  # fmt: skip
    t = lap("gap", t)

    if opts.diversity and len(ranked_candidates) > 1:
        import numpy as np

        pool = ranked_candidates[:20]
        vecs = None
        if reader.has_vectors:
            vecs = np.asarray(reader.vectors[[c.row for c in pool]], dtype=np.float32)
        picked = mmr(pool, vecs, min(opts.limit, len(pool)), opts.mmr_lambda)
        if opts.limit > len(pool):
            # Diversity re-orders the head; a longer list continues in rank order.
            chosen = {c.id for c in picked}
            rest = [c for c in ranked_candidates[len(pool):] if c.id not in chosen]
            picked = picked + rest[: opts.limit - len(picked)]
    else:
        picked = ranked_candidates[: opts.limit]
    t = lap("mmr", t)

    if opts.graph_depth > 0 and picked:
        picked = traverse.expand(reader, picked, opts.graph_depth, opts.relation_weights, ctx, allowed, opts.limit)
        t = lap("traverse", t)
    picked = traverse.annotate_contradictions(reader, picked)
    return picked, verdict


def run(
    reader: IndexReader,
    query: str,
    opts: SearchOptions,
    *,
    encode: Encoder | None,
    access: Mapping[str, tuple[int, float]] | None = None,
    centroids: dict[str, list[float]] | Callable[[], dict[str, list[float]] | None] | None = None,
) -> SearchResponse:
    """Search the index for ``query`` (already scrubbed): the hits, best first, each with its record's text.

    The channels come from the retrieval backend for what ``reader`` loaded
    (``lore.rank.retrieval``: numpy arrays and vectors, or the cold reader's sparse
    BM25 and the vector channel over its candidates); every other step is this function's, whichever it is. A ``ColdReader``
    may raise ``retrieval.Declined``.
    """
    warnings: list[str] = []
    clock = time.perf_counter
    now = opts.now if opts.now is not None else time.time()
    lap = Laps()
    timings = lap.timings


    t = clock()
    channels = retrieval.backend(reader, opts, encode, centroids)
    allowed = channels.rows(query, _allowed_rows(reader, opts), warnings)
    t = lap("filter", t)

    query_terms = analysis.unique_terms(query)
    if channels.expansion:  # the index terms a query's word* and word~ stand for
        query_terms = list(dict.fromkeys([*query_terms, *channels.expansion]))
    idf_coverage = 0.0
    bm25_top: tuple[str, set[str]] | None = None  # BM25's best record and the query terms it holds
    if "bm25" in opts.channels:
        kept = channels.bm25(query_terms, allowed)
        bm25_top, idf_coverage = bm25_evidence(reader, kept, query_terms)
        t = lap("bm25", t)
    weights = dict(opts.weights) if opts.weights is not None else dict(fusion.DEFAULT_WEIGHTS)
    # A channel fused at weight zero cannot change the ranking: do not compute it.
    active = tuple(c for c in opts.channels if weights.get(c, 0.0) > 0.0)
    t = channels.vectors(query, active, warnings, lap, t)

    classified = intent.classify(channels.query_vector, channels.centroids, query) if opts.adaptive else intent.IntentResult(intent.FALLBACK, 0, 0, True)
    if opts.adaptive:
        for channel, factor in intent.CHANNEL_ADJUST.get(classified.intent, {}).items():
            weights[channel] = weights.get(channel, 0.0) * factor

    if "graph" in active:
        channels.graph(allowed)
        t = lap("graph", t)

    candidates = fuse(reader, query_terms, channels.rankings, channels.scores, channels.every_row, weights, opts)
    t = lap("fusion", t)
    picked, verdict = finish(reader, opts, candidates, query_terms, bm25_top, idf_coverage, channels.query_cosine,
                             classified, allowed, access, now, lap, t)  # fmt: skip
    hits = tuple(with_text(reader, hit) for hit in picked)
    if channels.query_vector is not None:
        t = clock()
        head = hits[:PASSAGE_HITS]
        cosines = channels.passage_cosines([analysis.passages(hit.title, hit.content) for hit in head], [hit.row for hit in head])
        hits = (*(hit.evolve(passage_cosine=c) for hit, c in zip(head, cosines, strict=True)), *hits[PASSAGE_HITS:])
        lap("passages", t)
    lap.total()
    term_idf = reader.bm25.idf_of(query_terms) if query_terms else {}
    known = opts.current_project is not None and reader.table.knows_project(opts.current_project)
    return SearchResponse(query, hits, verdict, classified, timings, weights, tuple(warnings),
                          tuple(channels.rankings), opts.fusion, term_idf, len(reader.table), known)  # fmt: skip


def with_text(reader: IndexReader, hit: Candidate) -> Candidate:
    """``hit`` with its record's title, content and summary, read from the index's docs file (``run``'s last step)."""
    doc = reader.table.doc(hit.row)
    return hit.evolve(title=str(doc.get("title") or ""), content=str(doc.get("content") or ""),
                      summary=str(doc.get("summary") or ""))  # fmt: skip

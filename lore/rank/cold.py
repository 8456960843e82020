"""The prompt hook's cold lexical answer: the pipeline's lexical-only configuration, without numpy.

When no warm helper answers a prompt, loading numpy (about 100 ms here) and the
query encoder's tokenizer (55-105 ms) alone would cost more than the whole cold
hook may take. This path answers from the BM25 channel only, read by
``lore.index.cold`` (pure Python, bit-identical scores), and then runs the very
steps ``pipeline.run`` runs with ``channels=("bm25",)``: the same row filter
(active records only: candidates are never injected), fusion, scoring stages
(decay, reinforcement, project boost, coverage...) and graph expansion; the
injection decision and the block (``context.block_for``, a later layer than this
one) follow in ``lore.agent.prompt.cold_context_for_prompt``. Its top hits are those of ``lore search --channels bm25``
with the hook's options. Quotes are a hint here as on every prompt path; it
declines (and the whole pipeline answers) a phrase filter (``phrases="filter"``,
which needs term positions) and a prompt with fewer than three BM25 candidates:
a young store is judged by the whole pipeline.

``LORE_HOOK_COLD`` chooses what a cold hook does: ``lexical`` (this path, the
default), ``full`` (the whole pipeline in process: vectors too, within the hook's
deadline), ``off`` (inject nothing until the helper runs).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lore import analysis
from lore.rank import fusion, intent
from lore.rank.pipeline import Laps, SearchOptions, SearchResponse, bm25_evidence, finish, fuse
from lore.rank.query import quoted_phrases

if TYPE_CHECKING:
    from lore.index.cold import ColdReader
    from lore.paths import Locations

MODES = ("lexical", "full", "off")
LEXICAL = ("bm25",)
MIN_CANDIDATES = 3  # what gap.lexical_standout needs to measure a lead




class _Sparse(dict[int, float]):
    """Scores of the rows a channel matched; every other row scores 0 (as in the channel's dense array)."""

    def __missing__(self, row: int) -> float:
        return 0.0


class Declined(Exception):
    """The query needs what this path does not read: term positions (a phrase filter), or vectors to judge a gap."""


def lexical_run(reader: ColdReader, query: str, opts: SearchOptions, *,
                access: Mapping[str, tuple[int, float]] | None = None) -> SearchResponse:  # fmt: skip
    """``pipeline.run(reader, query, opts)`` with ``opts.channels == ("bm25",)``, in pure Python.

    Raises ``Declined`` for a query with quoted phrases or fewer than three BM25
    candidates (the whole pipeline answers those), and ``ValueError`` for
    options this path does not serve (another channel, adaptive weights, diversity).
    """
    if tuple(opts.channels) != LEXICAL or opts.adaptive or opts.diversity:
        raise ValueError("the cold path serves the lexical-only configuration")
    if opts.phrases == "filter" and quoted_phrases(query):
        raise Declined("quoted phrases")
    from lore.rank.pipeline import _allowed_rows

    clock = time.perf_counter
    now = opts.now if opts.now is not None else time.time()
    lap = Laps()
    timings = lap.timings


    t = clock()
    allowed = _allowed_rows(reader, opts)
    table = reader.table
    t = lap("filter", t)
    query_terms = analysis.unique_terms(query)
    scores = reader.bm25.scores(query_terms)
    lexical = _Sparse(scores if allowed is None else {row: score for row, score in scores.items() if allowed[row]})
    kept = [(table.ids[row], score) for row, score in best_rows(lexical, opts.retrieval_limit)]
    if len(kept) < MIN_CANDIDATES:
        # The lexical gap rule cannot call a match a standout among fewer than three
        # candidates (gap.lexical_standout): a young store, or a prompt matching almost
        # nothing, would always get a gap. The whole pipeline judges those.
        raise Declined("fewer than three lexical candidates")
    rankings = {"bm25": [rid for rid, _ in kept]}
    channel_scores = {"bm25": dict(kept)}
    bm25_top, idf_coverage = bm25_evidence(reader, kept, query_terms)
    t = lap("bm25", t)
    weights = dict(opts.weights) if opts.weights is not None else dict(fusion.DEFAULT_WEIGHTS)
    candidates = fuse(reader, query_terms, rankings, channel_scores, {"bm25": lexical}, weights, opts)
    t = lap("fusion", t)
    classified = intent.IntentResult(intent.FALLBACK, 0, 0, True)
    picked, verdict = finish(reader, opts, candidates, query_terms, bm25_top, idf_coverage, None, classified, allowed,
                             access, now, lap, t)  # fmt: skip
    lap.total()
    term_idf = reader.bm25.idf_of(query_terms) if query_terms else {}
    return SearchResponse(query, picked, verdict, classified, timings, weights, [], tuple(rankings), opts.fusion,
                          term_idf)  # fmt: skip


def best_rows(scores: Mapping[int, float], limit: int) -> list[tuple[int, float]]:
    """``bm25.best_rows`` over sparse scores: the ``limit`` best positive rows, best first, ties by row."""
    if limit <= 0:
        return []
    import heapq

    # (score, row) pairs are distinct: the ``limit`` smallest keys are exactly a full sort's first ``limit``.
    best = heapq.nsmallest(limit, ((-score, row) for row, score in scores.items() if score > 0))
    return [(row, -negative) for negative, row in best]


def open_reader(locations: Locations) -> ColdReader:
    """The live generation for ``locations``' data dir, every file checked; ``FileNotFoundError`` or ``ValueError``."""
    from lore.index.cold import ColdReader
    from lore.index.layout import DAMAGED, GenerationMeta, current_dir

    if not locations.data_dir.is_dir():
        raise FileNotFoundError(f"data dir {locations.data_dir} does not exist")
    directory = current_dir(locations.index_dir)
    if directory is None:
        raise FileNotFoundError(f"no usable index in {locations.index_dir}; run `lore index`")
    meta = GenerationMeta.read(directory)
    if (directory / DAMAGED).exists():
        raise FileNotFoundError(f"the index in {directory} is marked damaged; run `lore index`")
    if meta.data_dir != str(locations.data_dir.resolve()):
        raise FileNotFoundError(f"the index in {locations.index_dir} was built for another data dir "
                                f"({meta.data_dir}); run `lore index`")  # fmt: skip
    reader = ColdReader(directory, meta)
    reader.load()
    return reader


def hook_options(project: str | None, now: float, *, deadline: float | None = None,
                 channels: tuple[str, ...] = LEXICAL) -> SearchOptions:  # fmt: skip
    """The prompt hook's search options: the cold path's (lexical) and the in-process pipeline's."""
    return SearchOptions(limit=5, current_project=project, graph_depth=1, now=now, deadline=deadline, channels=channels)

"""The pipeline's retrieval step: each channel's candidates and scores, from what the reader loaded.

``pipeline.run`` is one code path (row filter, query analysis, fusion, scoring
stages, evidence gap, graph expansion, response); only this step depends on the
index reader it is given, and ``backend`` picks it by what that reader loaded:

* ``Dense``, over the full ``IndexReader``: BM25 as a numpy array of every row's
  score, quoted phrases (the terms in order), the vector and HyDE channels (the
  query encoder, the record vectors, vector feedback), the graph channel.
* ``Sparse``, over the prompt hook's ``ColdReader`` (``lore.index.cold``, which sets
  ``numpy_free``): BM25 scores of the rows that match, in pure Python and bit for
  bit the dense ones; the vector channel over BM25's candidates only (their cosines
  by ``lore.index.cold_vectors``, the dense channel's to 1e-6; no HyDE); the graph
  channel. No term positions, and neither numpy nor the tokenizer is imported. It
  declines (``Declined``) what it cannot judge as the full reader would: a phrase
  filter, the query language, and fewer than three BM25 candidates; its caller then
  asks the full reader.

Both hand the pipeline the same things: each channel's ranking (ids, best first),
the scores of its candidates, and for score fusion its score of any row (a numpy
array, or a mapping that answers 0 for the rows it does not hold). Their answers
are the same where the channels are (``tests/test_cold_hook.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lore.errors import ModelError
from lore.rank import traverse
from lore.rank.query import hyde_document, quoted_phrases

if TYPE_CHECKING:
    import numpy as np

    from lore.index.cold import ColdReader
    from lore.index.manager import IndexReader
    from lore.rank.options import SearchOptions

    Encoder = Callable[[list[str]], np.ndarray]
    Centroids = dict[str, list[float]] | Callable[[], dict[str, list[float]] | None] | None

GRAPH_SEEDS = 5
MIN_CANDIDATES = 3  # what gap.lexical_standout needs to measure a lead


class Declined(Exception):
    """The sparse backend cannot answer as the full reader would: a phrase filter (term positions), the query language, or too few BM25 candidates to judge a gap."""


class Retrieval:
    """One search's channels over one reader: filled by ``bm25``, ``vectors`` and ``graph`` as the pipeline calls them.

    ``rankings[channel]``: ids, best first; ``scores[channel]``: the scores of those
    ids; ``every_row[channel]``: the channel's score of any row (score fusion reads
    it; the graph channel has none). ``query_vector``/``query_cosine``: the query's
    embedding and its best cosine to a record (None without vectors);
    ``centroids``: the intent centroids, when known.
    """

    def __init__(self, reader: IndexReader, opts: SearchOptions, centroids: Centroids = None) -> None:
        self.reader = reader
        self.opts = opts
        self.rankings: dict[str, list[str]] = {}
        self.scores: dict[str, dict[str, float]] = {}
        self.every_row: dict[str, Any] = {}
        self.query_vector: Any = None
        self.query_cosine: float | None = None
        self.centroids = centroids if isinstance(centroids, dict) else None
        self.expansion: tuple[str, ...] = ()  # BM25 terms a query-language word* or word~ stands for

    def rows(self, query: str, allowed: Sequence[bool] | None, warnings: list[str]) -> Sequence[bool] | None:
        """The rows the search may return: ``allowed`` (the pipeline's row filter), narrowed by quoted phrases."""
        raise NotImplementedError

    def bm25(self, query_terms: Sequence[str], allowed: Sequence[bool] | None) -> list[tuple[str, float]]:
        """The BM25 channel: fills its ranking and scores; its best (id, score) pairs, best first."""
        raise NotImplementedError

    def vectors(self, query: str, active: tuple[str, ...], warnings: list[str], lap: Laps, t: float) -> float:
        """The vector and HyDE channels, for the ``active`` ones the reader can serve; the time of the last lap."""
        return t

    def passage_cosines(self, texts: Sequence[Sequence[str]], rows: Sequence[int] = ()) -> list[float | None]:
        """For each hit's passages, the best cosine to the query's own vector (None: no vectors here).

        ``rows``: the hits' table rows, where a backend has their passages' tokens at hand.
        """
        return [None] * len(texts)

    def graph(self, allowed: Sequence[bool] | None) -> None:
        """The graph channel: the records the BM25 and vector seeds' edges reach, by relation weight."""
        table, opts = self.reader.table, self.opts
        seeds = [*self.rankings.get("bm25", [])[:GRAPH_SEEDS], *self.rankings.get("vector", [])[:GRAPH_SEEDS]]
        ranked = traverse.neighbour_ranking(self.reader.adjacency, seeds, opts.relation_weights)
        if allowed is not None:
            ranked = [rid for rid in ranked if (row := table.row(rid)) is not None and allowed[row]]
        self.rankings["graph"] = [rid for rid in ranked if table.row(rid) is not None][: opts.retrieval_limit]

    def _keep_bm25(self, every_row: Any, best: list[tuple[int, float]]) -> list[tuple[str, float]]:
        id_of = self.reader.table.id_of  # remembered: fusion finds these rows again without a map of every id
        kept = [(id_of(row), score) for row, score in best]
        self.every_row["bm25"] = every_row
        self.rankings["bm25"] = [rid for rid, _ in kept]
        self.scores["bm25"] = dict(kept)
        return kept


class Dense(Retrieval):
    """The full reader's channels: numpy arrays over every row, phrases, vectors, HyDE."""

    def __init__(self, reader: IndexReader, opts: SearchOptions, encode: Encoder | None, centroids: Centroids = None) -> None:
        super().__init__(reader, opts, centroids)
        self.encode = encode
        self.find_centroids = centroids
        self.mask: Any = None

    def rows(self, query: str, allowed: Sequence[bool] | None, warnings: list[str]) -> Sequence[bool] | None:

        table = self.reader.table
        phrases = quoted_phrases(query) if self.opts.phrases == "filter" else []
        if phrases:
            # Quoted phrases need term positions: the BM25 index's term sequence (``IndexReader.phrases``).
            matching = self.reader.phrases.matching(phrases)
            if matching is not None:
                prior = allowed if allowed is not None else [True] * len(table)
                narrowed = [ok and table.ids[row] in matching for row, ok in enumerate(prior)]
                if any(narrowed):
                    allowed = narrowed
                else:
                    quoted = " and ".join(f'"{p}"' for p in phrases)
                    warnings.append(f"no record holds {quoted} as a phrase: ranked by its words instead")
        if self.opts.query_tree is not None:
            allowed = self._narrow(allowed, warnings)
        self.mask = self.reader.row_mask(allowed) if allowed is not None else None
        return allowed

    def _narrow(self, allowed: Sequence[bool] | None, warnings: list[str]) -> Sequence[bool] | None:
        """``allowed`` narrowed by the query language's conditions (fields, NOT, OR, word*, word~)."""

        from lore.rank import querylang

        narrowed = querylang.rows(self.reader, self.opts.query_tree)
        self.expansion = narrowed.terms
        if narrowed.rows is None:
            return allowed
        mask = narrowed.rows if allowed is None else narrowed.rows & self.reader.row_mask(allowed)
        if not mask.any():
            warnings.append("no record matches " + " ".join(querylang.conditions(self.opts.query_tree)))
        return [bool(ok) for ok in mask]

    def bm25(self, query_terms: Sequence[str], allowed: Sequence[bool] | None) -> list[tuple[str, float]]:
        import numpy as np

        from lore.index.bm25 import best_rows

        lexical = self.reader.bm25.scores(query_terms)
        if self.mask is not None:
            lexical = np.where(self.mask, lexical, 0.0)
        return self._keep_bm25(lexical, best_rows(lexical, self.opts.retrieval_limit))

    def vectors(self, query: str, active: tuple[str, ...], warnings: list[str], lap: Laps, t: float) -> float:
        import numpy as np

        reader, opts, table = self.reader, self.opts, self.reader.table
        vector_ok = self.encode is not None and reader.has_vectors
        if opts.deadline is not None and time.monotonic() > opts.deadline:
            vector_ok = False
            warnings.append("deadline reached: lexical results only")
        if not (vector_ok and any(c in active for c in ("vector", "hyde"))):
            return t
        from lore.index import vectors as vector_index

        assert self.encode is not None
        if callable(self.find_centroids):
            self.centroids = self.find_centroids()
        texts = [query]
        if "hyde" in active:
            pseudo = opts.hyde_text or hyde_document(query)
            if opts.hyde_feedback and not opts.hyde_text:
                rows = [table.row(rid) for rid in self.rankings.get("bm25", [])[: opts.hyde_feedback]]
                titles = [table.doc(row)["title"] for row in rows if row is not None]
                pseudo = " ".join([pseudo, *titles])
            texts.append(pseudo)
        try:
            encoded = self.encode(texts)
        except ModelError as error:
            warnings.append(f"{error.message}; lexical results only")
            return t
        self.query_vector = encoded[0]
        if opts.vector_feedback and self.rankings.get("bm25"):
            rows = [table.row(rid) for rid in self.rankings["bm25"][:5]]
            feedback = np.asarray(reader.vectors[[r for r in rows if r is not None]], dtype=np.float32).mean(axis=0)
            boosted = encoded[0] + opts.vector_feedback * feedback
            norm = float(np.linalg.norm(boosted))
            encoded = np.vstack([boosted / norm if norm else encoded[0], *encoded[1:]])
        t = lap("encode", t)
        matrix, mask, limit = reader.vectors, self.mask, opts.retrieval_limit
        wanted = [("query", self.query_vector)] if np.any(self.query_vector) else []
        for channel, vec in (("vector", encoded[0]), ("hyde", encoded[1] if len(encoded) > 1 else None)):
            if channel in active and vec is not None and np.any(vec):
                wanted.append((channel, vec))
        if not wanted:
            return lap("vectors", t)
        if matrix.shape[0]:
            columns = vector_index.cosines_of(matrix, np.vstack([vec for _, vec in wanted]))
        else:
            columns = [np.zeros(0, dtype=np.float32)] * len(wanted)
        for (channel, _), cosines in zip(wanted, columns, strict=True):
            if channel == "query":
                closest = vector_index.best_of(cosines, 1, mask)
                self.query_cosine = closest[0][1] if closest else None
                continue
            self.every_row[channel] = cosines
            top = vector_index.best_of(cosines, limit, mask)
            self.rankings[channel] = [table.id_of(row) for row, _ in top]
            self.scores[channel] = {table.id_of(row): score for row, score in top}
        return lap("vectors", t)

    def passage_cosines(self, texts: Sequence[Sequence[str]], rows: Sequence[int] = ()) -> list[float | None]:
        import numpy as np

        flat = [text for passages in texts for text in passages]
        if self.encode is None or self.query_vector is None or not flat or not np.any(self.query_vector):
            return super().passage_cosines(texts)
        try:
            encoded = np.asarray(self.encode(flat), dtype=np.float32)
        except ModelError:
            return super().passage_cosines(texts)
        query = np.asarray(self.query_vector, dtype=np.float32)
        norms = np.linalg.norm(encoded, axis=1) * float(np.linalg.norm(query))
        cosines = np.divide(encoded @ query, norms, out=np.zeros(len(flat), dtype=np.float32), where=norms > 0)
        out: list[float | None] = []
        start = 0
        for passages in texts:
            out.append(float(cosines[start : start + len(passages)].max()) if passages else None)
            start += len(passages)
        return out


class _Sparse(dict[int, float]):
    """Scores of the rows a channel matched; every other row scores 0 (as in the channel's dense array)."""

    def __missing__(self, row: int) -> float:
        return 0.0


class Sparse(Retrieval):
    """The cold reader's channels, in pure Python: BM25 over the rows that match, the vector channel over its candidates, the graph."""

    reader: ColdReader

    def __init__(self, reader: IndexReader, opts: SearchOptions, centroids: Centroids = None) -> None:
        super().__init__(reader, opts, centroids)
        self.bm25_rows: list[int] = []  # BM25's candidates, best first: the rows the vector channel scores

    def rows(self, query: str, allowed: Sequence[bool] | None, warnings: list[str]) -> Sequence[bool] | None:
        if self.opts.phrases == "filter" and quoted_phrases(query):
            raise Declined("quoted phrases")
        if self.opts.query_tree is not None:
            raise Declined("the query language")
        return allowed

    def bm25(self, query_terms: Sequence[str], allowed: Sequence[bool] | None) -> list[tuple[str, float]]:
        scores = self.reader.bm25.scores(query_terms)
        lexical = _Sparse(scores if allowed is None else {row: score for row, score in scores.items() if allowed[row]})
        best = best_rows(lexical, self.opts.retrieval_limit)
        if len(best) < MIN_CANDIDATES:
            # The lexical gap rule cannot call a match a standout among fewer than three
            # candidates (gap.lexical_standout): a young store, or a prompt matching almost
            # nothing, would always get a gap. The full reader judges those.
            raise Declined("fewer than three BM25 candidates")
        self.bm25_rows = [row for row, _ in best]
        return self._keep_bm25(lexical, best)

    def vectors(self, query: str, active: tuple[str, ...], warnings: list[str], lap: Laps, t: float) -> float:
        """The vector channel over BM25's candidates only: each one's cosine, by ``lore.index.cold_vectors``.

        The same cosine as the full reader's vector channel (the query's vector plus the
        feedback of BM25's five best rows), in pure Python; the channel ranks BM25's
        ``retrieval_limit`` candidates by it (no record BM25 missed), and scores any other
        row fusion asks about (the graph channel's) when asked. No HyDE channel here.
        """
        opts = self.opts
        if "vector" not in active or not self.bm25_rows:
            return t
        if opts.deadline is not None and time.monotonic() > opts.deadline:
            warnings.append("deadline reached: lexical results only")
            return t
        from lore.index.cold_vectors import FEEDBACK_ROWS, RowCosines, channel_vector, for_reader

        cold = for_reader(self.reader)
        if cold is None:
            return t

        encoded = cold.encoder.encode(query)
        if encoded is None or not any(encoded):  # a text PureBpe leaves to tokenizers, or no known token
            return t
        self.query_vector = encoded
        rows = self.bm25_rows
        feedback = [cold.rows.row(row) for row in rows[:FEEDBACK_ROWS]] if opts.vector_feedback else []
        vector = channel_vector(encoded, feedback, opts.vector_feedback)
        t = lap("encode", t)
        if vector is None:
            return t
        cosines = RowCosines(cold.rows, vector)
        ranked = sorted(rows, key=lambda row: (-cosines[row], row))
        id_of = self.reader.table.id_of
        self.every_row["vector"] = cosines
        self.rankings["vector"] = [id_of(row) for row in ranked]
        self.scores["vector"] = {id_of(row): cosines[row] for row in ranked}
        return lap("vectors", t)

    def passage_cosines(self, texts: Sequence[Sequence[str]], rows: Sequence[int] = ()) -> list[float | None]:
        """``Dense.passage_cosines`` in pure Python: each passage encoded as the query is (``cold_vectors``).

        A base row's passages come tokenised from the build (``cold_vectors.PassageTokens``),
        checked against the text; any other passage is tokenised here.
        """
        if self.query_vector is None:
            return super().passage_cosines(texts, rows)
        from lore.index.cold_vectors import cosine, for_reader

        cold = for_reader(self.reader)
        if cold is None:
            return super().passage_cosines(texts, rows)
        table = self.reader.table
        out: list[float | None] = []
        for at, passages in enumerate(texts):
            ids = None
            if cold.passages is not None and at < len(rows) and (table.delta_start < 0 or rows[at] < table.delta_start):
                ids = cold.passages.token_ids(table.offsets[rows[at]], passages)
            if ids is not None:
                vectors: list[list[float] | None] = [cold.encoder.vector_of(tokens) for tokens in ids]
            else:
                vectors = [cold.encoder.encode(text) for text in passages]
            found = [cosine(vector, self.query_vector) for vector in vectors if vector]
            out.append(max(found) if found else None)
        return out


class Laps:
    """Each step's milliseconds by name (``timings``): ``t = lap("bm25", t)`` closes a step and starts the next."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.started = time.perf_counter()

    def __call__(self, name: str, since: float) -> float:
        self.timings[name] = round((time.perf_counter() - since) * 1000, 3)
        return time.perf_counter()

    def total(self) -> None:
        self.timings["total"] = round((time.perf_counter() - self.started) * 1000, 3)


def best_rows(scores: Mapping[int, float], limit: int) -> list[tuple[int, float]]:
    """``bm25.best_rows`` over sparse scores: the ``limit`` best positive rows, best first, ties by row."""
    if limit <= 0:
        return []
    import heapq

    # (score, row) pairs are distinct: the ``limit`` smallest keys are exactly a full sort's first ``limit``.
    best = heapq.nsmallest(limit, ((-score, row) for row, score in scores.items() if score > 0))
    return [(row, -negative) for negative, row in best]


def backend(reader: IndexReader, opts: SearchOptions, encode: Encoder | None, centroids: Centroids = None) -> Retrieval:
    """The retrieval for what ``reader`` loaded: ``Sparse`` for a numpy-free reader (the cold hook's), else ``Dense``."""
    if reader.numpy_free:
        if opts.diversity:
            raise ValueError("diversity (MMR over the record vectors) needs the full reader")
        return Sparse(reader, opts, centroids)
    return Dense(reader, opts, encode, centroids)

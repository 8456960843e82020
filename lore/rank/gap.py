"""The evidence-gap signal: an honest "nothing relevant is stored" when that is the case.

Figures calibrated on the dev splits of the benchmark sets (docs/search.md,
"Evidence gap"):

* a floor on the best cosine between the query and any record (the strongest
  single signal: static embeddings still rank *something* first, but unrelated
  questions top out lower). A floor relative to the corpus (the cosine that
  off-topic "null" queries reach, plus 1.6 standard deviations) flagged 18% of
  the memory set's answerable dev questions; one fixed floor flags at most 5%
  on every set;
* the share of the query's words that no record contains;
* the top candidate's fused score against the candidate distribution (z-score);
* agreement between channels on the top candidate (top-2 in BM25 and vectors).

A candidate below the floor is still trusted when the channels agree on it, it
stands out (z-score) and it covers most query terms: a precise lexical match.
Without embeddings the verdict falls back to lexical evidence alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from lore.rank.stages import Candidate


class GapSettings(NamedTuple):
    # The floor and the unknown-word share together flag the most unanswerable dev questions
    # while flagging at most 5% of the answerable ones on each set (docs/search.md, "Evidence gap").
    min_cosine: float = 0.25
    rescue_z: float = 3.0
    # Among n candidates the best z-score attainable is sqrt(n - 1) (every other one
    # tied), so with fewer than ten the rescue could never fire and a young store
    # flagged its own exact matches. There the leader must reach this share of that bound.
    rescue_small_list_share: float = 0.9

    @property
    def floor(self) -> float:
        return self.min_cosine
    rescue_coverage: float = 0.34
    # A question about something the store has never seen names words no record
    # contains (a likely typo of a stored word does not count: see
    # pipeline._unknown_share). When at least this share of the query's terms is
    # unknown to the store, that is a gap whatever the cosine says: one unknown
    # term in four (fewer flags answerable questions: people describe a change in
    # words its record does not use).
    # Only in stores of at least unknown_min_records: a small store's vocabulary is
    # too narrow for an unseen word to mean anything.
    max_unknown_share: float = 0.25
    unknown_min_records: int = 1000
    # Without embeddings (no model, or the hook past its soft deadline): the top BM25
    # score must stand out from the other BM25 candidates and the top record must hold
    # this share of the query's idf mass.
    lexical_min_idf_coverage: float = 0.2
    lexical_min_z: float = 2.5


class GapVerdict(NamedTuple):
    gap: bool
    z_score: float
    top_relevance: float
    top_cosine: float
    term_coverage: float
    channels_agreeing: int
    reason: str
    idf_coverage: float = 0.0
    lexical_z: float = 0.0
    unknown_share: float = 0.0

    def figures(self) -> dict[str, float | int | str | bool]:
        return {
            "evidence_gap": self.gap, "z_score": round(self.z_score, 3), "top_relevance": round(self.top_relevance, 4),
            "top_cosine": round(self.top_cosine, 4), "term_coverage": round(self.term_coverage, 3),
            "channels_agreeing": self.channels_agreeing, "reason": self.reason,
            # lexical_z is inf when every other candidate ties, and inf is not JSON.
            "idf_coverage": round(self.idf_coverage, 3), "lexical_z": round(min(self.lexical_z, 999.0), 3),
            "unknown_share": round(self.unknown_share, 3),
        }  # fmt: skip


def _mean(values: Sequence[float]) -> float:
    """``statistics.fmean``: importing ``statistics`` (fractions, decimal, random) cost the cold hook ~4 ms."""
    return math.fsum(values) / len(values)


def _pstdev(values: Sequence[float]) -> float:
    """The population standard deviation.

    ``statistics.pstdev`` rounds exactly (through fractions); this two-pass ``fsum`` form
    differs from it in the last bit for about a quarter of inputs (20,000 random lists),
    a relative 1e-16 no gap threshold is set that finely.
    """
    mean = _mean(values)
    return math.sqrt(math.fsum((value - mean) ** 2 for value in values) / len(values))


def lexical_standout(candidates: Sequence[Candidate]) -> float:
    """How far the best BM25 score stands above the other BM25 candidates (z-score)."""
    scores = sorted((c.channel_scores["bm25"] for c in candidates if "bm25" in c.channel_scores), reverse=True)
    if len(scores) < 3:
        return 0.0
    spread = _pstdev(scores[1:])
    lead = scores[0] - _mean(scores[1:])
    if spread == 0:  # every other candidate ties: any lead at all stands out
        return math.inf if lead > 0 else 0.0
    return lead / spread


def assess(candidates: Sequence[Candidate], term_coverage: float, query_cosine: float | None,
           settings: GapSettings | None = None, *, idf_coverage: float = 0.0, unknown_share: float = 0.0,
           store_size: int = 0) -> GapVerdict:  # fmt: skip
    """Decide whether the ranked candidates carry real evidence for the query.

    ``query_cosine`` is the best cosine between the query's own embedding and any
    allowed record (None without embeddings). It is measured apart from the vector
    channel, whose query is pulled toward the top BM25 hits (pseudo-relevance
    feedback) and so comes close to *something* even for off-topic questions.
    ``unknown_share`` is the share of the query's terms that no record of the
    store (``store_size`` records) contains.
    """
    s = settings or GapSettings()
    if not candidates:
        return GapVerdict(True, 0.0, 0.0, 0.0, 0.0, 0, "no candidates")
    top = candidates[0]
    # Over the fused scores: relevance is sharpened for the stages, and a z-score
    # must not depend on that choice.
    values = [c.fused for c in candidates]
    spread = _pstdev(values) if len(values) > 1 else 0.0
    z = (top.fused - _mean(values)) / spread if spread > 0 else 0.0
    agreeing = sum(1 for ch in ("bm25", "vector") if top.ranks.get(ch, 99) <= 2)

    lexical_z = lexical_standout(candidates)

    def verdict(gap: bool, cosine: float, reason: str) -> GapVerdict:
        return GapVerdict(gap, z, top.relevance, cosine, term_coverage, agreeing, reason, idf_coverage, lexical_z,
                          unknown_share)  # fmt: skip

    if store_size >= s.unknown_min_records and unknown_share >= s.max_unknown_share:
        return verdict(True, query_cosine or 0.0, "the query names terms no record contains")
    if query_cosine is None:  # lexical-only: no semantic floor to apply
        if idf_coverage >= s.lexical_min_idf_coverage and lexical_z >= s.lexical_min_z:
            return verdict(False, 0.0, "lexical match stands out")
        return verdict(True, 0.0, "no embeddings and no standout lexical match")
    cosine = query_cosine
    if cosine >= s.floor:
        return verdict(False, cosine, "semantic similarity above the floor")
    needed_z = min(s.rescue_z, s.rescue_small_list_share * math.sqrt(max(len(values) - 1, 0)))
    if agreeing >= 2 and z >= needed_z and term_coverage >= s.rescue_coverage:
        return verdict(False, cosine, "channels agree on a standout lexical match")
    return verdict(True, cosine, "best similarity below the floor")

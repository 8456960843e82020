"""The evidence-gap signal: an honest "nothing relevant is stored" when that is the case.

Three figures, calibrated on the known-item question sets (docs/evaluation.md):

* an absolute floor on the best cosine between the query and any candidate
  (the strongest single signal: static embeddings still rank *something* first,
  but unrelated questions top out lower);
* the top candidate's fused relevance against the candidate distribution (z-score);
* agreement between channels on the top candidate (top-2 in BM25 and vectors).

A candidate below the floor is still trusted when the channels agree on it, it
stands out (z-score) and it covers most query terms: a precise lexical match.
Without embeddings the verdict falls back to lexical evidence alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from lore.rank.stages import Candidate


@dataclass(frozen=True)
class GapSettings:
    # Calibrated on tests/data/known_item_questions.jsonl with the bundled model:
    # the largest floor that flags at most 10% of answerable questions.
    min_cosine: float = 0.655
    rescue_z: float = 3.0
    rescue_coverage: float = 0.5
    lexical_min_coverage: float = 0.5
    lexical_min_z: float = 2.0


@dataclass(frozen=True)
class GapVerdict:
    gap: bool
    z_score: float
    top_relevance: float
    top_cosine: float
    term_coverage: float
    channels_agreeing: int
    reason: str

    def figures(self) -> dict[str, float | int | str | bool]:
        return {
            "evidence_gap": self.gap, "z_score": round(self.z_score, 3), "top_relevance": round(self.top_relevance, 4),
            "top_cosine": round(self.top_cosine, 4), "term_coverage": round(self.term_coverage, 3),
            "channels_agreeing": self.channels_agreeing, "reason": self.reason,
        }  # fmt: skip


def assess(candidates: Sequence[Candidate], term_coverage: float, settings: GapSettings | None = None) -> GapVerdict:
    """Decide whether the ranked candidates carry real evidence for the query."""
    s = settings or GapSettings()
    if not candidates:
        return GapVerdict(True, 0.0, 0.0, 0.0, 0.0, 0, "no candidates")
    top = candidates[0]
    values = [c.relevance for c in candidates]
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    z = (top.relevance - statistics.fmean(values)) / spread if spread > 0 else 0.0
    cosines = [c.channel_scores["vector"] for c in candidates if "vector" in c.channel_scores]
    agreeing = sum(1 for ch in ("bm25", "vector") if top.ranks.get(ch, 99) <= 2)

    def verdict(gap: bool, cosine: float, reason: str) -> GapVerdict:
        return GapVerdict(gap, z, top.relevance, cosine, term_coverage, agreeing, reason)

    if not cosines:  # lexical-only: no semantic floor to apply
        if term_coverage >= s.lexical_min_coverage and z >= s.lexical_min_z:
            return verdict(False, 0.0, "lexical match stands out")
        return verdict(True, 0.0, "no embeddings and no standout lexical match")
    cosine = max(cosines)
    if cosine >= s.min_cosine:
        return verdict(False, cosine, "semantic similarity above the floor")
    if agreeing >= 2 and z >= s.rescue_z and term_coverage >= s.rescue_coverage:
        return verdict(False, cosine, "channels agree on a standout lexical match")
    return verdict(True, cosine, "best similarity below the floor")

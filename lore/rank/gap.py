"""The evidence-gap signal: an honest "nothing relevant is stored" when that is the case.

Three figures, each calibrated on the benchmark question sets (see docs/evaluation.md):
the top candidate's fused relevance against the candidate distribution (z-score),
an absolute floor on the top candidate's best single-channel similarity, and
agreement between channels on the top candidate.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from lore.rank.stages import Candidate


@dataclass(frozen=True)
class GapSettings:
    min_z: float = 2.0
    min_cosine: float = 0.5
    min_bm25_terms: float = 0.5  # share of query content terms the top hit matches lexically
    strong_cosine: float = 0.62
    z_agree: float = 1.2
    agree_coverage: float = 0.34


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
    """Decide whether the fused candidates carry real evidence for the query."""
    s = settings or GapSettings()
    if not candidates:
        return GapVerdict(True, 0.0, 0.0, 0.0, 0.0, 0, "no candidates")
    top = candidates[0]
    values = [c.relevance for c in candidates]
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    z = (top.relevance - statistics.fmean(values)) / spread if spread > 0 else 0.0
    cosine = max(top.channel_scores.get("vector", 0.0), top.channel_scores.get("hyde", 0.0))
    agreeing = sum(1 for ch in ("bm25", "vector", "hyde") if top.ranks.get(ch, 99) <= 2)
    lexical_ok = term_coverage >= s.min_bm25_terms and top.ranks.get("bm25", 99) <= 3
    if cosine >= s.strong_cosine:
        return GapVerdict(False, z, top.relevance, cosine, term_coverage, agreeing, "strong semantic match")
    if lexical_ok and cosine >= s.min_cosine:
        return GapVerdict(False, z, top.relevance, cosine, term_coverage, agreeing, "lexical and semantic agree")
    substance = term_coverage >= s.agree_coverage or cosine >= s.min_cosine
    if agreeing >= 2 and z >= s.z_agree and substance and cosine >= s.min_cosine - 0.1:
        return GapVerdict(False, z, top.relevance, cosine, term_coverage, agreeing, "channels agree on a standout")
    if z >= s.min_z and cosine >= s.min_cosine:
        return GapVerdict(False, z, top.relevance, cosine, term_coverage, agreeing, "standout candidate")
    return GapVerdict(True, z, top.relevance, cosine, term_coverage, agreeing, "no candidate stands out with enough similarity")

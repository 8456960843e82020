"""Weighted Reciprocal Rank Fusion: score = sum over channels of weight / (k + rank)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60
# The seeds specify vector 1.0, HyDE 0.8, BM25 0.6. With the bundled static model
# BM25 is the strongest single channel on both of our benchmarks; these weights beat
# the seeds' on both and keep vectors strong enough to find records that share no
# word with the query (docs/search.md, "Why these fusion weights").
SEED_WEIGHTS: dict[str, float] = {"vector": 1.0, "hyde": 0.8, "bm25": 0.6, "graph": 0.3}
DEFAULT_WEIGHTS: dict[str, float] = {"vector": 0.3, "hyde": 0.3, "bm25": 1.0, "graph": 0.3}
# When BM25's best record already holds a good share of the query's idf mass, the
# static vectors mostly reshuffle what BM25 found and cost precision at the top;
# when it does not (the query uses other words than the records), they are what
# finds the answer. Gating on that evidence ties the best fixed weights on SciFact's
# training queries and beats them on the known-item questions (docs/search.md,
# "Evidence-gated weights").
LEXICAL_EVIDENCE_WEIGHTS: dict[str, float] = {"vector": 0.1, "hyde": 0.0, "bm25": 1.0, "graph": 0.1}
LEXICAL_EVIDENCE_COVERAGE = 0.3


# RRF with k = 60 compresses ranks: a channel's 10th record scores only 13% below its
# first, less than the stages' factors move a record (confidence, decay, importance,
# type: tens of percent together). Used as it is, the metadata would decide the order
# among BM25's top ten. Relevance is therefore the normalised fused score raised to
# this power, so that the stages order records of similar evidence without
# overturning a clear difference in it (docs/search.md, "Relevance sharpness").
RELEVANCE_SHARPNESS = 4.0


def relevance(fused: float, best: float, sharpness: float = RELEVANCE_SHARPNESS) -> float:
    """A fused score as relevance in [0, 1]: its share of the best possible score, sharpened."""
    if best <= 0.0 or fused <= 0.0:
        return 0.0
    return min(1.0, fused / best) ** sharpness


def gated_weights(idf_coverage: float, threshold: float = LEXICAL_EVIDENCE_COVERAGE) -> dict[str, float]:
    """The default weights for a query whose best BM25 record covers ``idf_coverage`` of its idf mass."""
    return dict(LEXICAL_EVIDENCE_WEIGHTS if idf_coverage >= threshold else DEFAULT_WEIGHTS)


def rrf(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float] | None = None,
    k: int = RRF_K,
) -> dict[str, tuple[float, dict[str, int]]]:
    """Fuse ranked id lists; return id -> (fused score, {channel: 1-based rank})."""
    weights = DEFAULT_WEIGHTS if weights is None else weights
    fused: dict[str, tuple[float, dict[str, int]]] = {}
    for channel, ids in rankings.items():
        weight = weights.get(channel, 0.0)
        for position, item in enumerate(ids, start=1):
            score, ranks = fused.get(item, (0.0, {}))
            if channel in ranks:  # a channel counts each item once, at its best rank
                continue
            ranks[channel] = position
            fused[item] = (score + weight / (k + position), ranks)
    return fused


def max_rrf(channels: Sequence[str], weights: Mapping[str, float] | None = None, k: int = RRF_K) -> float:
    """The fused score of an item ranked first by every channel (for normalisation)."""
    weights = DEFAULT_WEIGHTS if weights is None else weights
    return sum(weights.get(c, 0.0) for c in channels) / (k + 1) or 1.0

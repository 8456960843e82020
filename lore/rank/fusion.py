"""Weighted Reciprocal Rank Fusion: score = sum over channels of weight / (k + rank)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60
# The seeds specify vector 1.0, HyDE 0.8, BM25 0.6. With the bundled static model
# BM25 is the strongest single channel on every set; these weights are the best
# on the dev splits of all four `lore bench` sets together (docs/search.md,
# "Fusion"): vectors and HyDE at 0.2 each find what shares no word with the query
# on short records (demo dev MRR@10 0.811 -> 0.841) without costing the long ones.
# The graph channel is off: at 0.3 it pulled the neighbours of the top hits above
# the answer (demo dev MRR@10 0.828 -> 0.480); `--weights graph=0.3` still fuses it,
# and `--depth` follows edges from the results.
SEED_WEIGHTS: dict[str, float] = {"vector": 1.0, "hyde": 0.8, "bm25": 0.6, "graph": 0.3}
DEFAULT_WEIGHTS: dict[str, float] = {"bm25": 1.0, "vector": 0.2, "hyde": 0.2, "graph": 0.0}


# RRF with k = 60 compresses ranks: a channel's 10th record scores only 13% below its
# first, less than the stages' factors move a record (decay alone: up to 30%).
# Used as it is, the metadata would decide the order among BM25's top ten.
# Relevance is therefore the normalised fused score raised to this power, so that
# a stage's factor f moves a record only past others within f ** (1/8) of its fused
# score: the stages break ties between records of similar evidence and never
# overturn a clear difference in it. 8 is where decay helps most on the dev splits
# (demo MRR@10 0.841 -> 0.863); at 4 the old confidence and importance stages cost
# the demo set 11 points (docs/search.md, "Scoring stages").
RELEVANCE_SHARPNESS = 8.0


def relevance(fused: float, best: float, sharpness: float = RELEVANCE_SHARPNESS) -> float:
    """A fused score as relevance in [0, 1]: its share of the best possible score, sharpened."""
    if best <= 0.0 or fused <= 0.0:
        return 0.0
    return min(1.0, fused / best) ** sharpness


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

"""Fusing the channels' rankings into one score per record.

Two methods: score fusion (the default), a convex combination of each channel's
scores divided by that channel's best score for the query, and weighted
Reciprocal Rank Fusion, sum over channels of weight / (k + rank). RRF sees only
ranks: a record far ahead in BM25 and one barely ahead count alike. On the dev
splits of the four benchmark sets score fusion wins on three and ties on the
fourth (docs/search.md, "Fusion").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60
# The seeds specify vector 1.0, HyDE 0.8, BM25 0.6. With the bundled static model
# BM25 is the strongest single channel on every set but the short memories; these
# weights (score fusion) are the best on the dev splits of all four benchmark
# sets together (docs/search.md, "Fusion"): vectors at 0.8 find what shares no word
# with the query on short records (memory dev MRR@10 0.176 -> 0.198, vector alone
# 0.185), HyDE at 0.2 helps or ties on every set. The graph channel is off: at 0.3
# it pulled the neighbours of the top hits above the answer on the demo data;
# `--weights graph=0.3` still fuses it, and `--depth` follows edges from the results.
SEED_WEIGHTS: dict[str, float] = {"vector": 1.0, "hyde": 0.8, "bm25": 0.6, "graph": 0.3}
DEFAULT_WEIGHTS: dict[str, float] = {"bm25": 1.0, "vector": 0.8, "hyde": 0.2, "graph": 0.0}


# RRF with k = 60 compresses ranks: a channel's 10th record scores only 13% below its
# first, less than the stages' factors move a record (decay alone: up to 30%).
# Used as it is, the metadata would decide the order among BM25's top ten.
# (Score fusion spreads scores further; with it every sharpness from 2 to 16 was
# within 0.01 on every dev split, so 8 stays.) Relevance is therefore the normalised fused score raised to this power, so that
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


def score_fusion(
    rankings: Mapping[str, Sequence[str]],
    scores: Mapping[str, Mapping[str, float]],
    weights: Mapping[str, float] | None = None,
) -> dict[str, tuple[float, dict[str, int], dict[str, float]]]:
    """A convex combination of each channel's scores, each divided by the channel's best.

    ``rankings`` holds each channel's top ids (best first; they become the
    candidates and their ranks); ``scores[channel]`` holds the channel's raw score
    for any candidate it can score, not only its own top ids: a record BM25 ranks
    40th still has its BM25 score. A channel scores a candidate it cannot score, or
    scores at or below zero, as 0. Returns id -> (fused score, {channel: 1-based rank},
    {channel: weighted share}); each share is in [0, weight], so the fused score is
    at most the sum of the weights of the channels that returned anything.
    """
    weights = DEFAULT_WEIGHTS if weights is None else weights
    candidates = dict.fromkeys(item for ids in rankings.values() for item in ids)
    fused: dict[str, tuple[float, dict[str, int], dict[str, float]]] = {}
    ranks_of: dict[str, dict[str, int]] = {item: {} for item in candidates}
    for channel, ids in rankings.items():
        for position, item in enumerate(ids, start=1):
            ranks_of[item].setdefault(channel, position)
    best = {channel: max((scores.get(channel, {}).get(i, 0.0) for i in ids), default=0.0) for channel, ids in rankings.items()}
    for item in candidates:
        shares: dict[str, float] = {}
        for channel in rankings:
            weight = weights.get(channel, 0.0)
            top = best[channel]
            value = scores.get(channel, {}).get(item, 0.0)
            if weight > 0.0 and top > 0.0 and value > 0.0:
                # The ratio first: weight * value / top overshoots the weight for subnormal scores
                # (1.5 * 5e-324 rounds to 1e-323), and a share must stay within its weight.
                shares[channel] = weight * (min(value, top) / top)
        fused[item] = (sum(shares.values()), ranks_of[item], shares)
    return fused


def max_score_fusion(channels: Sequence[str], weights: Mapping[str, float] | None = None) -> float:
    """The fused score of an item that is the best of every channel (for normalisation)."""
    weights = DEFAULT_WEIGHTS if weights is None else weights
    return sum(weights.get(c, 0.0) for c in channels) or 1.0

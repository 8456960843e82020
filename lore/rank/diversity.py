"""Maximal Marginal Relevance over the top candidates, collapsing near-identical records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lore.rank.stages import Candidate

if TYPE_CHECKING:
    import numpy as np

NEAR_IDENTICAL = 0.95


def mmr(
    candidates: Sequence[Candidate],
    vectors: np.ndarray | None,
    k: int,
    lam: float = 0.7,
    pool: int = 20,
    collapse_at: float = NEAR_IDENTICAL,
) -> list[Candidate]:
    """Pick ``k`` of the first ``pool`` candidates by lam * relevance - (1 - lam) * max similarity.

    ``vectors[i]`` is candidate i's L2-normalised embedding (None: no diversity,
    plain top-k). Candidates at or above ``collapse_at`` cosine to a picked one
    are folded into it (its ``represents`` count grows) instead of being shown.
    Each pick records its position in ``candidates`` (``score_rank``, as they
    come in score order) and its penalty (``max_similarity``), for ``--explain``.
    """
    import numpy as np

    head = list(candidates[:pool])
    if vectors is None or len(head) <= 1:
        return head[:k]
    vecs = np.asarray(vectors[: len(head)], dtype=np.float32)
    top = max(c.score for c in head) or 1.0
    relevance = np.array([c.score / top for c in head], dtype=np.float32)
    sims = vecs @ vecs.T
    chosen: list[int] = []
    folded: dict[int, int] = {}
    similarity: dict[int, float | None] = {}
    remaining = list(range(len(head)))
    while remaining and len(chosen) < k:
        if not chosen:
            pick = remaining[int(np.argmax(relevance[remaining]))]
            similarity[pick] = None
        else:
            penalty = sims[np.ix_(remaining, chosen)].max(axis=1)
            values = lam * relevance[remaining] - (1 - lam) * penalty
            best = int(np.argmax(values))
            pick = remaining[best]
            similarity[pick] = float(penalty[best])
        remaining.remove(pick)
        chosen.append(pick)
        duplicates = [i for i in remaining if sims[pick, i] >= collapse_at and head[i].kind == head[pick].kind]
        for i in duplicates:
            remaining.remove(i)
        folded[pick] = len(duplicates)
    return [
        head[i].evolve(represents=head[i].represents + folded[i], score_rank=i + 1, max_similarity=similarity[i])
        for i in chosen
    ]

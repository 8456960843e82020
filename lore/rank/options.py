"""What to search for and how: ``SearchOptions``, read by the pipeline (``lore.rank.pipeline``) and its retrieval step.

A module of its own so that both can import it: the pipeline imports its retrieval step,
which must not import the pipeline back (not even for a type).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from lore.rank import traverse
from lore.rank.gap import GapSettings
from lore.rank.stages import StageSettings

CHANNELS = ("bm25", "vector", "hyde", "graph")


class SearchOptions(NamedTuple):
    """What to search for and how (immutable: a search never writes to its options; ``_replace`` makes a copy).

    A NamedTuple rather than a frozen dataclass: the prompt hook's cold path builds this
    class on every prompt, and a dataclass of 30 fields costs ~1.5 ms to create.
    """

    limit: int = 10
    retrieval_limit: int = 30
    types: frozenset[str] | None = None
    project_filter: str | None = None
    tags: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    include_all: bool = False
    # Candidates (captured, awaiting `lore inbox` review) are searchable but never injected:
    # `lore search`, the API's and MCP's search turn this on; the hooks and context blocks do not.
    include_candidates: bool = False
    intents: tuple[str, ...] = ()
    current_project: str | None = None
    graph_depth: int = 0
    channels: tuple[str, ...] = CHANNELS
    weights: Mapping[str, float] | None = None  # None: fusion.DEFAULT_WEIGHTS
    # Both lost on the dev splits (docs/search.md, "Scoring stages"): the intent
    # classifier's channel and type adjustments cost demo MRR@10 0.862 -> 0.847 and
    # known-item 0.625 -> 0.614; MMR cost known-item recall@5 0.771 -> 0.729.
    adaptive: bool = False
    diversity: bool = False
    mmr_lambda: float = 0.7
    disabled_stages: frozenset[str] = frozenset()
    stage_settings: StageSettings = StageSettings()
    gap_settings: GapSettings = GapSettings()
    relation_weights: Mapping[str, float] = MappingProxyType(dict(traverse.RELATION_WEIGHTS))
    now: float | None = None
    deadline: float | None = None  # time.monotonic() by which to stop adding channels
    hyde_text: str | None = None  # a pseudo-answer from LORE_LLM_CMD, replacing the template
    # Pseudo-relevance feedback: the HyDE-lite document also carries the titles of the
    # top BM25 hits, so the expansion is grounded in what is actually stored.
    hyde_feedback: int = 3
    # Vector pseudo-relevance feedback: the mean vector of the top five BM25 hits, at
    # this weight, is added to the query's before the vector channel ranks. 0.25 is
    # the best of 0, 0.25, 0.5 and 1 on the dev splits of the four sets together
    # (docs/search.md, "Fusion"): at 1 the feedback pulls the short memories' vector
    # channel toward BM25's wrong guesses, at 0 the known-item set loses 3 points.
    vector_feedback: float = 0.25
    # "score": a convex combination of each channel's scores, each divided by the
    # channel's best (fusion.score_fusion); "rrf": weighted reciprocal rank fusion.
    # Score fusion won on the dev splits of every set but known-item, where it tied
    # on recall@10 and lost 0.007 MRR@10 (docs/search.md, "Fusion").
    fusion: str = "score"
    # Quoted phrases: "hint" (natural-language surfaces: the hook, MCP, `lore context`,
    # `Lore.search`) ranks by the words and ignores the quotes; "filter" (`lore search`)
    # keeps only records holding every phrase, and ranks without the quotes (with a
    # warning) when no record does. A person who quotes a title in a question
    # ("what did \"Xenoblade Chronicles\" ...") must not get nothing for a spelling
    # the record does not share.
    phrases: str = "hint"
    # The query language (lore.rank.querylang): whether this surface reads it (`lore search`,
    # MCP's search, ``Lore.search``; never the hook nor a context block), and, once the search
    # service has parsed a query written in it, its tree. None: a plain query, ranked as always.
    syntax: bool = False
    query_tree: Any = None

    @property
    def filtered(self) -> bool:
        return bool(self.types or self.project_filter or self.tags or self.since or self.until)

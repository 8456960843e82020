"""Search results as data: the stable ``--json`` shape, shared by CLI, helper and MCP."""

from __future__ import annotations

import time
from typing import Any

from lore.rank.pipeline import SearchResponse
from lore.rank.stages import Candidate

# 2: each hit's ``components.rrf`` became ``components.contributions`` (score fusion is
# the default; the shares are no longer reciprocal ranks) and the response names its ``fusion``.
JSON_SCHEMA_VERSION = 2


def components(candidate: Candidate, weights: dict[str, float]) -> dict[str, Any]:
    parts: dict[str, Any] = {
        "relevance": round(candidate.relevance, 6),
        "fused": round(candidate.fused, 6),
        "ranks": dict(candidate.ranks),
        "contributions": {k: round(v, 6) for k, v in candidate.contributions.items()},
        "channel_scores": {k: round(v, 4) for k, v in candidate.channel_scores.items()},
        "factors": {k: round(v, 4) for k, v in candidate.factors.items()},
    }
    if candidate.score_rank is not None:
        similarity = candidate.max_similarity
        parts["diversity"] = {"score_rank": candidate.score_rank,
                              "max_similarity": None if similarity is None else round(similarity, 4)}  # fmt: skip
    return parts


def iso(epoch: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch is not None else None


def hit_json(reader: Any, candidate: Candidate, weights: dict[str, float]) -> dict[str, Any]:
    doc = reader.table.doc(candidate.row)
    item: dict[str, Any] = {
        "id": candidate.id,
        "type": candidate.kind,
        "title": doc["title"],
        "content": doc["content"],
        "project": candidate.project,
        "timestamp": iso(candidate.time),
        "status": candidate.status,
        "score": round(candidate.score, 6),
        "components": components(candidate, weights),
    }
    if candidate.path:
        item["path"] = list(candidate.path)
    if candidate.notes:
        item["notes"] = list(candidate.notes)
    if candidate.represents > 1:
        item["represents"] = candidate.represents
    return item


def response_json(response: SearchResponse, reader: Any) -> dict[str, Any]:
    return {
        "query": response.query,
        "results": [hit_json(reader, c, response.weights) for c in response.hits],
        "evidence_gap": response.gap.gap,
        "gap": response.gap.figures(),
        "intent": {"name": response.intent.intent, "similarity": round(response.intent.similarity, 4),
                   "fallback": response.intent.fallback},
        "weights": response.weights,
        "fusion": response.fusion,
        "timings_ms": response.timings_ms,
        "warnings": response.warnings,
        "schema_version": JSON_SCHEMA_VERSION,
    }

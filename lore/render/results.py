"""Search results as data: the stable ``--json`` shape, shared by CLI, helper and MCP."""

from __future__ import annotations

import time
from typing import Any

from lore.rank.fusion import RRF_K
from lore.rank.pipeline import SearchResponse
from lore.rank.stages import Candidate

JSON_SCHEMA_VERSION = 1


def components(candidate: Candidate, weights: dict[str, float]) -> dict[str, Any]:
    rrf = {ch: round(weights.get(ch, 0.0) / (RRF_K + rank), 6) for ch, rank in candidate.ranks.items() if ch in weights}
    parts: dict[str, Any] = {
        "relevance": round(candidate.relevance, 6),
        "fused": round(candidate.fused, 6),
        "ranks": dict(candidate.ranks),
        "rrf": rrf,
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
        "timings_ms": response.timings_ms,
        "warnings": response.warnings,
        "schema_version": JSON_SCHEMA_VERSION,
    }

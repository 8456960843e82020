"""Search results as data: the stable ``--json`` shape, shared by CLI, helper and MCP."""

from __future__ import annotations

import time
from typing import Any

from lore.rank.pipeline import SearchResponse
from lore.rank.stages import Candidate, iso

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


def hit_json(candidate: Candidate, weights: dict[str, float]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": candidate.id,
        "type": candidate.kind,
        "title": candidate.title,
        "content": candidate.content,
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


def response_json(response: SearchResponse) -> dict[str, Any]:
    return {
        "query": response.query,
        "results": [hit_json(c, response.weights) for c in response.hits],
        "evidence_gap": response.gap.gap,
        "gap": response.gap.figures(),
        "intent": {"name": response.intent.intent, "similarity": round(response.intent.similarity, 4),
                   "fallback": response.intent.fallback},
        "weights": response.weights,
        "fusion": response.fusion,
        "timings_ms": response.timings_ms,
        "warnings": list(response.warnings),
        "schema_version": JSON_SCHEMA_VERSION,
    }


# What an agent's tool call gets by default (MCP ``search`` without ``verbose``): the
# fields a model uses to pick what to read next, within about 2 KB for 10 hits.
# Claude Code hands a tool's structured content to the model instead of its text, so
# the structured form is what has to be small.
BRIEF_BUDGET_CHARS = 2048
BRIEF_TITLE_CHARS = 56
BRIEF_PROJECT_CHARS = 24
BRIEF_SNIPPET_CHARS = 96
BRIEF_MIN_SNIPPET_CHARS = 16
# {"results":[...],"evidence_gap":false} around the hits
_BRIEF_ENVELOPE = 40


def _cut(text: str, limit: int) -> str:
    """At a word boundary when there is one, else hard: a brief never exceeds its limit."""
    from lore.render.text import shorten

    return shorten(text, limit) or (text[: max(0, limit - 1)] + "…" if len(text) > limit else text)


def _json_len(value: Any) -> int:
    import json

    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def brief_hits(response: SearchResponse, now: float | None = None,
               budget: int = BRIEF_BUDGET_CHARS) -> list[dict[str, Any]]:  # fmt: skip
    """Each hit as id, type, title, project, age, score and a one-line snippet; all of it within ``budget``.

    Every hit gets an equal share of the budget; its snippet (the record's text after
    the title, on one line) takes what the other fields leave of that share, at most
    BRIEF_SNIPPET_CHARS, and is left out when fewer than BRIEF_MIN_SNIPPET_CHARS remain.
    """
    from datetime import UTC, datetime

    from lore.render.text import age, one_line

    moment = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    hits = list(response.hits)
    if not hits:
        return []
    share = (budget - _BRIEF_ENVELOPE - len(hits)) // len(hits)
    items: list[dict[str, Any]] = []
    for candidate in hits:
        title = one_line(candidate.title)
        rest = one_line(candidate.content)
        if rest.startswith(title):  # the content repeats the title first
            rest = rest[len(title):].lstrip(" .:;,-—")
        when = datetime.fromtimestamp(candidate.time, UTC) if candidate.time is not None else None
        item: dict[str, Any] = {"id": candidate.id, "type": candidate.kind, "title": _cut(title, BRIEF_TITLE_CHARS)}
        if candidate.project:
            item["project"] = _cut(one_line(candidate.project), BRIEF_PROJECT_CHARS)
        item["age"] = age(when, moment)
        item["score"] = round(candidate.score, 3)
        if candidate.status != "active":  # a candidate awaiting review (or, with --all, superseded, ...)
            item["status"] = candidate.status
        room = min(BRIEF_SNIPPET_CHARS, share - _json_len(item) - len(',"snippet":""'))
        if room >= BRIEF_MIN_SNIPPET_CHARS:
            snippet = _cut(rest, room)
            if snippet and _json_len(snippet) - 2 <= room:  # escapes count too
                item["snippet"] = snippet
        items.append(item)
    return items


def brief_line(item: dict[str, Any]) -> str:
    """One hit as a text line: ``id  type  score  age  project  title — snippet``."""
    parts = [item["id"], item["type"], f"{item['score']:.3f}", item["age"]]
    if item.get("status"):
        parts.append(f"[{item['status']}]")
    if item.get("project"):
        parts.append(item["project"])
    title = item["title"] + (f" — {item['snippet']}" if item.get("snippet") else "")
    return "  ".join([*parts, title])

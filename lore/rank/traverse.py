"""Typed-edge graph recall: a fusion channel of neighbours, and breadth-first expansion of top hits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from lore.rank.stages import Candidate, QueryContext, apply_stages, candidate_at

if TYPE_CHECKING:
    from lore.index.graph import Adjacency
    from lore.index.manager import IndexReader

HOP_DECAY = 0.7
RELATION_WEIGHTS: dict[str, float] = {
    "supersedes": 0.9, "contradicts": 0.8, "derived_from": 0.8, "learned_from": 0.8, "implements": 0.7,
    "depends_on": 0.6, "part_of": 0.6, "affects": 0.5, "produces": 0.5, "relates_to": 0.5, "summarized_by": 0.5,
}  # fmt: skip
KIND_LABEL = {"anti_pattern": "anti-pattern"}


def neighbour_ranking(adjacency: Adjacency, seeds: Sequence[str], weights: Mapping[str, float]) -> list[str]:
    """Neighbours of the seed hits, ranked by summed (seed rank discount x relation weight)."""
    scores: dict[str, float] = {}
    seed_set = set(seeds)
    for position, seed in enumerate(dict.fromkeys(seeds)):
        discount = 1.0 / (1 + position)
        for edge, other, _ in adjacency.neighbours(seed):
            if other in seed_set:
                continue
            scores[other] = scores.get(other, 0.0) + discount * weights.get(edge.relation, 0.3) * edge.weight
    return sorted(scores, key=lambda rid: (-scores[rid], rid))


def _label(reader: IndexReader, record_id: str) -> str:
    row = reader.table.row(record_id)
    if row is None:
        return record_id
    kind = reader.table.kinds[row]
    return f"[{KIND_LABEL.get(kind, kind)}] {record_id}"


def _short_title(title: str, width: int) -> str:
    # At a word boundary with a marker: a title cut mid-word reads as a different claim.
    import textwrap  # its regexes cost the cold hook ~2 ms at import; few prompts reach here

    return textwrap.shorten(title, width, placeholder="…", break_on_hyphens=False)


def expand(
    reader: IndexReader,
    hits: Sequence[Candidate],
    depth: int,
    weights: Mapping[str, float],
    ctx: QueryContext,
    allowed: Sequence[bool] | None,
    limit: int,
) -> list[Candidate]:
    """Follow typed edges from the hits up to ``depth`` hops; each hop keeps 0.7 of the score.

    ``supersedes`` brings the newer record, ``contradicts`` surfaces the other
    side, ``derived_from``/``learned_from`` bring the origin. Added records show
    the path that reached them.
    """
    table = reader.table
    adjacency = reader.adjacency
    depth = max(0, min(3, depth))
    present = {c.id for c in hits}
    result = list(hits)
    added: list[Candidate] = []
    for hit in hits:
        found = adjacency.bfs([hit.id], depth)
        for record_id, (hops, path) in found.items():
            if hops == 0 or record_id in present:
                continue
            row = table.row(record_id)
            if row is None or (allowed is not None and not allowed[row]):
                continue
            status = table.statuses[row]
            if not ctx.include_all and status != "active" and not (ctx.include_candidates and status == "candidate"):
                continue
            strength = HOP_DECAY**hops
            for edge, _ in path:
                strength *= weights.get(edge.relation, 0.3)
            steps = [f"{_label(reader, hit.id)} {_short_title(table.doc(hit.row)['title'], 60)}"]
            for edge, direction in path:
                # Name every record on the way: a two-hop path must say what it went through.
                arrow, reached = (f"-> {edge.relation} ->", edge.target) if direction == "out" else (f"<- {edge.relation} <-", edge.source)
                steps.append(f"{arrow} {_label(reader, reached)}")
            base = candidate_at(reader, row)
            candidate = base.evolve(relevance=hit.relevance * strength, ranks={"graph_hops": hops},
                                path=(" ".join(steps),))  # fmt: skip
            scored = apply_stages([candidate], ctx)
            if scored:
                added.append(scored[0])
                present.add(record_id)
    added.sort(key=lambda c: -c.score)
    return result + added[: max(0, limit - len(result))] if len(result) < limit else result + added[: max(1, limit // 3)]


def annotate_contradictions(reader: IndexReader, hits: Sequence[Candidate]) -> list[Candidate]:
    """Warn on every hit that an edge says is contradicted by another record."""
    adjacency = reader.adjacency
    result = []
    for hit in hits:
        notes = list(hit.notes)
        for edge, other, _ in adjacency.neighbours(hit.id):
            if edge.relation == "contradicts":
                row = reader.table.row(other)
                title = _short_title(reader.table.doc(row)["title"], 70) if row is not None else ""
                notes.append(f"contradicts {other}: {title}")
        result.append(hit.evolve(notes=tuple(dict.fromkeys(notes))) if notes != list(hit.notes) else hit)
    return result

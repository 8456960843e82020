"""The typed-edge graph, persisted as a compact adjacency list.

Builds write the edge list straight from the records (``ordered_edges``, the order a
NetworkX MultiDiGraph lists them in); ``build`` still gives that graph to whoever
wants NetworkX's algorithms, and is what ``ordered_edges`` is tested against.

Explicit edges come from ``graph.json``; implicit ones from the records
themselves (``superseded_by``, handoff related ids, pattern and lesson origins).
The query path reads the persisted adjacency without importing NetworkX.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from lore.store.records import Record
    from lore.store.store import Edge



class GraphEdge(NamedTuple):
    source: str
    target: str
    relation: str
    weight: float = 1.0
    implicit: bool = False


def explicit_edges(edges: Iterable[Edge]) -> list[GraphEdge]:
    """graph.json's edges (as the store reads them) in the graph's own shape."""
    return [GraphEdge(e.source, e.target, e.relation, e.weight) for e in edges]


def implicit_edges(records: Iterable[Record]) -> list[GraphEdge]:
    edges: list[GraphEdge] = []
    for record in records:
        successor = record.raw.get("superseded_by")
        if isinstance(successor, str) and successor:
            edges.append(GraphEdge(successor, record.id, "supersedes", 1.0, True))
        if record.kind == "handoff":
            edges.extend(GraphEdge(record.id, other, "relates_to", 0.5, True) for other in record.related_ids())
        elif record.kind in ("pattern", "lesson") and record.origin_id:
            relation = "learned_from" if record.kind == "lesson" else "derived_from"
            edges.append(GraphEdge(record.id, record.origin_id, relation, 1.0, True))
        elif record.kind == "decision":
            edges.extend(GraphEdge(record.id, other, "relates_to", 0.5, True) for other in record.related_ids())
    return edges


def valid_edges(records: dict[str, Record], explicit: Iterable[GraphEdge]) -> list[GraphEdge]:
    """Explicit then implicit edges between existing records, first of each (source, target, relation)."""
    seen: set[tuple[str, str, str]] = set()
    edges = []
    for edge in [*explicit, *implicit_edges(records.values())]:
        key = (edge.source, edge.target, edge.relation)
        if edge.source not in records or edge.target not in records or key in seen or edge.source == edge.target:
            continue
        seen.add(key)
        edges.append(edge)
    return edges


def build(records: dict[str, Record], explicit: Iterable[GraphEdge]) -> Any:
    """A NetworkX MultiDiGraph over existing records (edges to missing records are dropped)."""
    import networkx as nx

    graph = nx.MultiDiGraph()
    graph.add_nodes_from(records)
    for edge in valid_edges(records, explicit):
        graph.add_edge(edge.source, edge.target, key=edge.relation, relation=edge.relation,
                       weight=edge.weight, implicit=edge.implicit)  # fmt: skip
    return graph


def same_edges(edges: Iterable[GraphEdge], saved: Adjacency) -> bool:
    """Whether a persisted graph already holds exactly these edges (an incremental refresh reuses it)."""
    ours = {(e.source, e.target, e.relation, float(e.weight), bool(e.implicit)) for e in edges}
    theirs = {(e.source, e.target, e.relation, e.weight, e.implicit) for out in saved.out.values() for e in out}
    return ours == theirs


def dangling_ids(records: dict[str, Record], explicit: Iterable[GraphEdge]) -> list[str]:
    """Ids that an edge names but no record holds: adding one of them would create edges.

    Saved beside the edges so that a refresh appending records can tell, without the
    whole store, that the graph stays as it is (``lore.index.build``).
    """
    named = {end for edge in [*explicit, *implicit_edges(records.values())] for end in (edge.source, edge.target)}
    return sorted(named - records.keys())


def ordered_edges(records: dict[str, Record], explicit: Iterable[GraphEdge]) -> list[GraphEdge]:
    """The valid edges in the order ``build(...)``'s ``edges()`` lists them, without NetworkX.

    A MultiDiGraph lists its edges by source in node order (the records'), then by target
    in the order each pair was first added, then by key in insertion order. Importing
    NetworkX and adding 10k nodes cost ~0.4 s of a 10k build that saves nothing but this list.
    """
    by_source: dict[str, dict[str, list[GraphEdge]]] = {}
    for edge in valid_edges(records, explicit):
        by_source.setdefault(edge.source, {}).setdefault(edge.target, []).append(edge)
    return [edge for source in records if source in by_source
            for targets in by_source[source].values() for edge in targets]  # fmt: skip


def save_edges(path: Path, edges: Iterable[GraphEdge], dangling: Iterable[str] = ()) -> None:
    """Persist edges as ``save_as`` does a graph's."""
    rows = [[e.source, e.target, e.relation, e.weight, e.implicit] for e in edges]
    import orjson  # the build's; readers use the standard library (the cold hook imports no orjson)

    path.write_bytes(orjson.dumps({"edges": rows, "dangling": list(dangling)}))


def save_as(path: Path, graph: Any, dangling: Iterable[str] = ()) -> None:
    edges = [
        [source, target, data["relation"], data["weight"], data["implicit"]]
        for source, target, data in graph.edges(data=True)
    ]
    import orjson

    path.write_bytes(orjson.dumps({"edges": edges, "dangling": list(dangling)}))


def load_dangling(path: Path) -> set[str] | None:
    """The dangling ids saved with a graph, or None if it has none recorded."""
    data = json.loads(path.read_bytes())
    found = data.get("dangling") if isinstance(data, dict) else None
    return set(map(str, found)) if isinstance(found, list) else None


class Adjacency:
    """Out- and in-edges per record id, loaded from the persisted graph."""

    def __init__(self, edges: list[GraphEdge]) -> None:
        self.out: dict[str, list[GraphEdge]] = {}
        self.into: dict[str, list[GraphEdge]] = {}
        for edge in edges:
            self.out.setdefault(edge.source, []).append(edge)
            self.into.setdefault(edge.target, []).append(edge)
        self.edge_count = len(edges)

    @classmethod
    def load_file(cls, path: Path) -> Adjacency:
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return cls([])
        edges = data.get("edges", []) if isinstance(data, dict) else None
        if not isinstance(edges, list):
            raise ValueError(f"{path.name}: not an edge list")
        try:
            return cls([GraphEdge(s, t, r, float(w), bool(i)) for s, t, r, w, i in edges])
        except (TypeError, ValueError) as exc:  # an edge that is not [source, target, relation, weight, implicit]
            raise ValueError(f"{path.name}: malformed edge ({exc})") from exc

    def neighbours(self, record_id: str) -> list[tuple[GraphEdge, str, str]]:
        """(edge, other id, direction 'out'|'in') for every edge touching ``record_id``."""
        result = [(e, e.target, "out") for e in self.out.get(record_id, [])]
        result += [(e, e.source, "in") for e in self.into.get(record_id, [])]
        return result

    def bfs(self, seeds: Iterable[str], depth: int) -> dict[str, tuple[int, list[tuple[GraphEdge, str]]]]:
        """Shortest hop count and path from any seed, up to ``depth`` hops (cycles are safe)."""
        found: dict[str, tuple[int, list[tuple[GraphEdge, str]]]] = {}
        queue: deque[str] = deque()
        for seed in seeds:
            if seed not in found:
                found[seed] = (0, [])
                queue.append(seed)
        while queue:
            node = queue.popleft()
            hops, path = found[node]
            if hops >= depth:
                continue
            for edge, other, direction in self.neighbours(node):
                if other not in found:
                    found[other] = (hops + 1, [*path, (edge, direction)])
                    queue.append(other)
        return found


class Neighbourhood(NamedTuple):
    """A record, the records within some hops of it, and every edge among them."""

    centre: str
    hops: dict[str, int]  # record id -> hops from the centre (0 for the centre), in breadth-first order
    parent: dict[str, tuple[str, str]]  # record id -> (the record it was reached from, "out" | "in")
    edges: list[GraphEdge]
    left_out: int = 0  # records within reach that did not fit under the limit


def neighbourhood(adjacency: Adjacency, centre: str, depth: int, *, limit: int = 40) -> Neighbourhood:
    """The records within ``depth`` hops of ``centre`` (the closest first, at most ``limit``).

    A supersession chain is followed to its ends whatever ``depth`` says: where a
    decision came from and what replaced it are part of reading it.
    """
    found = adjacency.bfs([centre], depth)
    chain = _supersession_chain(adjacency, centre)
    for record_id, step in chain.items():
        if record_id not in found or found[record_id][0] > step[0]:
            found[record_id] = step
    ordered = sorted(found, key=lambda rid: (found[rid][0], rid not in chain))
    kept = [rid for rid in ordered if rid == centre or rid in chain] + [rid for rid in ordered if rid != centre and rid not in chain]
    kept = kept[: max(1, limit)]
    members = set(kept)
    hops = {rid: found[rid][0] for rid in sorted(kept, key=lambda rid: found[rid][0])}
    parent: dict[str, tuple[str, str]] = {}
    for record_id in hops:
        path = found[record_id][1]
        if path:
            edge, direction = path[-1]
            came_from = edge.source if direction == "out" else edge.target
            if came_from in members:
                parent[record_id] = (came_from, direction)
    edges = [e for rid in hops for e in adjacency.out.get(rid, []) if e.target in members]
    return Neighbourhood(centre, hops, parent, edges, left_out=len(found) - len(kept))


def _supersession_chain(adjacency: Adjacency, centre: str) -> dict[str, tuple[int, list[tuple[GraphEdge, str]]]]:
    """Every record reachable from ``centre`` over ``supersedes`` edges, in both directions."""
    found: dict[str, tuple[int, list[tuple[GraphEdge, str]]]] = {centre: (0, [])}
    queue: deque[str] = deque([centre])
    while queue:
        node = queue.popleft()
        hops, path = found[node]
        for edge, other, direction in adjacency.neighbours(node):
            if edge.relation == "supersedes" and other not in found:
                found[other] = (hops + 1, [*path, (edge, direction)])
                queue.append(other)
    return found

"""Typed-edge graph recall: breadth-first expansion (--graph-depth), the graph channel, paths and warnings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from benchmarks import corpora
from lore.index.graph import Adjacency, GraphEdge
from lore.rank.stages import Candidate, QueryContext
from lore.rank.traverse import RELATION_WEIGHTS, expand, neighbour_ranking
from tests.conftest import resolve_locations

T0 = "2026-01-01T00:00:00Z"
NOW = corpora.epoch(T0) + 7 * 86400.0
GRAPH = Path("graph/data/graph.json")

A, B, C, D = "dec-0000000a", "dec-0000000b", "dec-0000000c", "dec-0000000d"
CHAIN = {
    A: "Zeppelin hangar doors open at dawn",
    B: "Mooring masts get steel cables",
    C: "Helium is bought in bulk each spring",
    D: "Pilots log every ascent in the ledger",
}


# -- data: fixed ids, written in the documented file formats (docs/schema.md) ----------------


def write_decisions(data_dir: Path, titles: dict[str, str], tags: dict[str, list[str]] | None = None) -> None:
    raws = [corpora.decision_raw(rid, T0, title, "Noted by the crew.", tags=(tags or {}).get(rid, ()))
            for rid, title in titles.items()]  # fmt: skip
    corpora.write_decisions(data_dir, raws)


def write_edges(data_dir: Path, *edges: tuple[str, str, str]) -> None:
    """graph.json edges may name record ids directly (a node key that is not in ``nodes``)."""
    path = data_dir / GRAPH
    path.parent.mkdir(parents=True, exist_ok=True)
    items = [{"from": s, "to": t, "relation": r, "weight": 1, "bidirectional": False, "status": "active"}
             for s, t, r in edges]  # fmt: skip
    path.write_bytes(orjson.dumps({"nodes": {}, "edges": items}, option=orjson.OPT_INDENT_2))


def write_patterns(data_dir: Path, patterns: list[dict], anti_patterns: list[dict] | None = None) -> None:
    path = data_dir / "patterns/data/patterns.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    items = [{"created_at": T0, "confidence": 0.8, **item} for item in patterns]
    antis = [{"created_at": T0, **item} for item in anti_patterns or []]
    path.write_text(yaml.safe_dump({"patterns": items, "anti_patterns": antis}, sort_keys=False))


def search(cli, query: str, *args: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """`lore search --json` over the BM25 channel only, unless told otherwise: graph-added records are then
    exactly the ones traversal added (the vector channel would return every record of a tiny store)."""
    channels = () if "--channels" in args else ("--channels", "bm25")
    result = cli("search", query, "--json", *channels, *args)
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)["results"]


def ids(results: list[dict]) -> list[str]:
    return [r["id"] for r in results]


def open_reader(data_dir: Path):  # type: ignore[no-untyped-def]
    from lore.index.manager import IndexManager

    reader, warnings = IndexManager(resolve_locations(data_dir)).open(policy="refresh")
    assert warnings == []
    return reader


def hit(reader, record_id: str, relevance: float = 1.0) -> Candidate:  # type: ignore[no-untyped-def]
    from lore.rank.stages import candidate_at

    return candidate_at(reader, reader.table.row(record_id)).evolve(relevance=relevance)


def expanded(reader, seeds: list[str], depth: int, weights=RELATION_WEIGHTS, **ctx) -> list[Candidate]:  # type: ignore[no-untyped-def]
    hits = [hit(reader, rid) for rid in seeds]
    return expand(reader, hits, depth, weights, QueryContext(now=NOW, **ctx), None, 10)


def cut_at_a_word_boundary(short: str, title: str, width: int) -> bool:
    """Shortened to at most ``width`` with a marker, every word kept whole (as lore.render.text.shorten does)."""
    words = short[:-1].split()
    return len(short) <= width and short.endswith("…") and bool(words) and words == title.split()[: len(words)]


# -- depth limits ----------------------------------------------------------------------------


def test_graph_depth_follows_a_chain_one_hop_per_level(data_dir: Path, cli) -> None:
    write_decisions(data_dir, CHAIN)
    write_edges(data_dir, (A, B, "relates_to"), (B, C, "relates_to"), (C, D, "relates_to"))
    for depth, expected in ((0, [A]), (1, [A, B]), (2, [A, B, C]), (3, [A, B, C, D])):
        results = search(cli, "zeppelin hangar", "--graph-depth", str(depth))
        assert ids(results) == expected, depth
        assert [r["components"]["ranks"] for r in results[1:]] == [{"graph_hops": h} for h in range(1, depth + 1)]
        assert "path" not in results[0]  # the hit itself was found, not reached


@pytest.mark.parametrize("command", ["search", "context"])
@pytest.mark.parametrize("depth", ["4", "-1"])
def test_graph_depth_outside_0_to_3_is_a_usage_error(initialised: Path, cli, command: str, depth: str) -> None:
    result = cli(command, "zeppelin", "--graph-depth", depth)
    assert result.exit_code == 2
    assert f"Invalid value for '--graph-depth': {depth} is not in the range 0<=x<=3." in result.stderr


def test_expand_reaches_one_more_hop_per_depth_and_decays_0_7_per_hop(data_dir: Path) -> None:
    write_decisions(data_dir, CHAIN)
    write_edges(data_dir, (A, B, "relates_to"), (B, C, "relates_to"), (C, D, "relates_to"))
    reader = open_reader(data_dir)
    by_depth = {depth: expanded(reader, [A], depth) for depth in range(5)}
    assert [c.id for c in by_depth[0]] == [A]
    assert [c.id for c in by_depth[1]] == [A, B]
    assert [c.id for c in by_depth[2]] == [A, B, C]
    assert [c.id for c in by_depth[3]] == [A, B, C, D]
    assert [c.id for c in by_depth[4]] == [A, B, C, D]  # the pure function clamps to 3 as the CLI does
    w = RELATION_WEIGHTS["relates_to"]
    relevance = [c.relevance for c in by_depth[3][1:]]
    assert relevance == pytest.approx([0.7 * w, 0.7**2 * w**2, 0.7**3 * w**3])
    assert [c.ranks for c in by_depth[3][1:]] == [{"graph_hops": 1}, {"graph_hops": 2}, {"graph_hops": 3}]


# -- cycles ----------------------------------------------------------------------------------


def test_bfs_through_cycles_terminates_with_shortest_hops() -> None:
    edges = [GraphEdge(s, t, "relates_to") for s, t in (("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("b", "a"))]
    adjacency = Adjacency(edges)
    found = adjacency.bfs(["a"], 3)
    assert {rid: hops for rid, (hops, _) in found.items()} == {"a": 0, "b": 1, "d": 1, "c": 2}
    assert found["d"][1] == [(edges[3], "in")]  # d -> a, walked backwards
    assert {rid: hops for rid, (hops, _) in adjacency.bfs(["a"], 50).items()} == {"a": 0, "b": 1, "d": 1, "c": 2}
    assert {rid: hops for rid, (hops, _) in adjacency.bfs(["a", "c", "a"], 3).items()} == {"a": 0, "c": 0, "b": 1, "d": 1}


def test_cycles_terminate_and_list_every_record_once(initialised: Path, cli) -> None:
    two = {"dec-00000001": "Zeppelin envelopes get patched weekly", "dec-00000002": "Patch kits live in the hangar"}
    four = {"dec-00000011": "Ballast tanks drain before landing", "dec-00000012": "Landing crews wear gloves",
            "dec-00000013": "Gloves are ordered in spring", "dec-00000014": "Spring orders need a budget line"}  # fmt: skip
    write_decisions(initialised, {**two, **four})
    for source, target in (("dec-00000001", "dec-00000002"), ("dec-00000002", "dec-00000001"),
                           ("dec-00000011", "dec-00000012"), ("dec-00000012", "dec-00000013"),
                           ("dec-00000013", "dec-00000014"), ("dec-00000014", "dec-00000011")):  # fmt: skip
        assert cli("link", source, target, "relates_to").exit_code == 0

    results = search(cli, "zeppelin envelopes", "--graph-depth", "3")
    assert ids(results) == ["dec-00000001", "dec-00000002"]

    results = search(cli, "ballast tanks", "--graph-depth", "3")
    assert len(ids(results)) == len(set(ids(results))) == 4
    hops = {r["id"]: r["components"]["ranks"] for r in results}
    assert hops == {"dec-00000011": {"bm25": 1}, "dec-00000012": {"graph_hops": 1},
                    "dec-00000014": {"graph_hops": 1}, "dec-00000013": {"graph_hops": 2}}  # fmt: skip


def test_expand_from_several_hits_adds_each_neighbour_once(data_dir: Path) -> None:
    write_decisions(data_dir, CHAIN)
    write_edges(data_dir, (A, B, "relates_to"), (B, C, "relates_to"), (C, D, "relates_to"), (D, A, "relates_to"))
    reader = open_reader(data_dir)
    result = expanded(reader, [A, C], 3)
    assert [c.id for c in result[:2]] == [A, C]
    assert sorted(c.id for c in result[2:]) == [B, D]


# -- decay and relation weights ----------------------------------------------------------------


def test_a_record_two_hops_away_scores_below_the_same_record_one_hop_away(data_dir: Path, cli) -> None:
    near, far, middle, target = "dec-00000001", "dec-00000002", "dec-00000003", "dec-00000004"
    write_decisions(data_dir, {near: "Zeppelin hangar doors open at dawn", far: "Blimp pilots brief at noon",
                               middle: "Weather reports arrive hourly", target: "Mooring masts get steel cables"})  # fmt: skip
    write_edges(data_dir, (near, target, "relates_to"), (far, middle, "relates_to"), (middle, target, "relates_to"))
    reader = open_reader(data_dir)
    flat = {"relates_to": 1.0}
    one_hop = {c.id: c for c in expanded(reader, [near], 1, flat)}[target]
    two_hops = {c.id: c for c in expanded(reader, [far], 2, flat)}[target]
    assert (one_hop.relevance, two_hops.relevance) == pytest.approx((0.7, 0.49))
    assert two_hops.score < one_hop.score
    assert two_hops.score / one_hop.score == pytest.approx(0.7)

    by_query = {}
    for query, depth in (("zeppelin", "1"), ("blimp", "2")):
        by_query[query] = {r["id"]: r for r in search(cli, query, "--graph-depth", depth)}[target]
    w = RELATION_WEIGHTS["relates_to"]
    assert by_query["zeppelin"]["components"]["relevance"] == pytest.approx(0.7 * w, abs=1e-6)
    assert by_query["blimp"]["components"]["relevance"] == pytest.approx(0.49 * w * w, abs=1e-6)


def test_a_heavier_relation_ranks_its_neighbour_first_at_equal_relevance(data_dir: Path, cli) -> None:
    hub, light, heavy = "dec-00000001", "dec-00000002", "dec-00000003"
    write_decisions(data_dir, {hub: "Zeppelin hangar doors open at dawn", light: "Mooring masts get steel cables",
                               heavy: "Helium is bought in bulk each spring"})  # fmt: skip
    assert RELATION_WEIGHTS["derived_from"] > RELATION_WEIGHTS["affects"]
    # The lighter edge comes first in the file: breadth-first order alone would list it first.
    write_edges(data_dir, (hub, light, "affects"), (hub, heavy, "derived_from"))
    reader = open_reader(data_dir)
    default = expanded(reader, [hub], 1)
    assert [c.id for c in default] == [hub, heavy, light]
    assert [c.relevance for c in default[1:]] == pytest.approx([0.7 * 0.8, 0.7 * 0.5])
    swapped = expanded(reader, [hub], 1, {"affects": 0.9, "derived_from": 0.2})
    assert [c.id for c in swapped] == [hub, light, heavy]

    results = search(cli, "zeppelin", "--graph-depth", "1")
    assert ids(results) == [hub, heavy, light]
    assert [r["components"]["relevance"] for r in results] == pytest.approx([1.0, 0.56, 0.35], abs=1e-6)


# -- paths and contradiction warnings ------------------------------------------------------------


def _origins(data_dir: Path) -> None:
    write_decisions(data_dir, {A: "Upstream calls back off exponentially"})
    write_patterns(data_dir, [
        {"id": "pat-1-a1b2", "name": "Retry with jitter", "solution": "Sleep a random share of the delay", "origin": A},
        {"id": "pat-2-c3d4", "kind": "lesson", "name": "Throttle large uploads ahead of time", "origin": "fail-0000000f"},
    ], [{"id": "anti-1-e5f6", "name": "Retry in a tight loop", "symptom": "The CPU spins while a service is down"}])  # fmt: skip
    (data_dir / "failures/data").mkdir(parents=True)
    (data_dir / "failures/data/failures.jsonl").write_bytes(orjson.dumps(
        {"id": "fail-0000000f", "timestamp": T0, "error_type": "ToolError", "error_message": "Bulk import hit the API quota"},
    ) + b"\n")  # fmt: skip
    write_edges(data_dir, ("pat-1-a1b2", "anti-1-e5f6", "contradicts"))


def test_paths_name_the_hit_the_relation_and_the_reached_record(data_dir: Path, cli) -> None:
    _origins(data_dir)
    results = {r["id"]: r for r in search(cli, "jitter", "--graph-depth", "1")}
    assert set(results) == {"pat-1-a1b2", A, "anti-1-e5f6"}
    assert "path" not in results["pat-1-a1b2"]
    # derived_from (implicit, from the pattern's origin) brings the origin.
    assert results[A]["path"] == ["[pattern] pat-1-a1b2 Retry with jitter -> derived_from -> [decision] dec-0000000a"]
    assert results["anti-1-e5f6"]["path"] == [
        "[pattern] pat-1-a1b2 Retry with jitter -> contradicts -> [anti-pattern] anti-1-e5f6"
    ]
    # contradicts: both sides carry a warning naming the other.
    assert results["pat-1-a1b2"]["notes"] == ["contradicts anti-1-e5f6: Retry in a tight loop"]
    assert results["anti-1-e5f6"]["notes"] == ["contradicts pat-1-a1b2: Retry with jitter"]
    assert "notes" not in results[A]

    backwards = search(cli, "upstream", "--graph-depth", "1")
    assert ids(backwards) == [A, "pat-1-a1b2"]
    assert backwards[1]["path"] == ["[decision] dec-0000000a Upstream calls back off exponentially <- derived_from <- [pattern] pat-1-a1b2"]

    lesson = search(cli, "throttle", "--graph-depth", "1")
    assert ids(lesson) == ["pat-2-c3d4", "fail-0000000f"]
    assert lesson[1]["path"] == ["[lesson] pat-2-c3d4 Throttle large uploads ahead of time -> learned_from -> [failure] fail-0000000f"]


def test_terminal_shows_the_path_and_the_contradiction_warning(data_dir: Path, cli) -> None:
    _origins(data_dir)
    result = cli("search", "jitter", "--channels", "bm25", "--graph-depth", "1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "    via [pattern] pat-1-a1b2 Retry with jitter -> derived_from -> [decision] dec-0000000a" in lines
    assert "    via [pattern] pat-1-a1b2 Retry with jitter -> contradicts -> [anti-pattern] anti-1-e5f6" in lines
    assert "    ! contradicts anti-1-e5f6: Retry in a tight loop" in lines
    assert "    ! contradicts pat-1-a1b2: Retry with jitter" in lines
    plain = cli("search", "jitter", "--channels", "bm25").stdout.splitlines()
    assert not [line for line in plain if line.startswith("    via ")]
    assert "    ! contradicts anti-1-e5f6: Retry in a tight loop" in plain  # warned at depth 0 too


def test_multi_hop_path_names_every_record_on_the_way(data_dir: Path, cli) -> None:
    write_decisions(data_dir, CHAIN)
    write_edges(data_dir, (A, B, "relates_to"), (B, C, "relates_to"))
    results = search(cli, "zeppelin hangar", "--graph-depth", "2")
    assert ids(results) == [A, B, C]
    assert results[2]["path"] == [
        "[decision] dec-0000000a Zeppelin hangar doors open at dawn -> relates_to -> [decision] dec-0000000b"
        " -> relates_to -> [decision] dec-0000000c"
    ]


RISKY = "Ship billing releases on Friday afternoons once the canary stage has passed every smoke check"
CAREFUL = "Never ship billing releases late in the week because the weekend rotation is far too thin"


def test_contradiction_warns_on_both_sides_with_titles_cut_at_a_word_boundary(data_dir: Path, cli) -> None:
    write_decisions(data_dir, {A: RISKY, B: CAREFUL})
    write_edges(data_dir, (A, B, "contradicts"))
    risky_60 = "Ship billing releases on Friday afternoons once the canary…"
    risky_70 = "Ship billing releases on Friday afternoons once the canary stage has…"
    careful_70 = "Never ship billing releases late in the week because the weekend…"
    # Plain slicing would end these mid-word: "canary s", "stage has p", "weekend rotat".

    alone = search(cli, "canary smoke", "--graph-depth", "0")
    assert ids(alone) == [A]
    assert alone[0]["notes"] == [f"contradicts {B}: {careful_70}"]

    both = search(cli, "canary smoke", "--graph-depth", "1")
    assert ids(both) == [A, B]
    assert both[0]["notes"] == [f"contradicts {B}: {careful_70}"]
    assert both[1]["notes"] == [f"contradicts {A}: {risky_70}"]
    assert both[1]["path"] == [f"[decision] {A} {risky_60} -> contradicts -> [decision] {B}"]


def test_titles_are_not_cut_inside_a_hyphenated_word(data_dir: Path, cli) -> None:
    hit_title = "Canary releases of the billing service must pass the read-only smoke suite first"
    other_title = "Deploys from the release branch go out behind the flag with non-blocking health checks"
    write_decisions(data_dir, {A: hit_title, B: other_title})
    write_edges(data_dir, (A, B, "contradicts"))
    results = search(cli, "canary smoke", "--graph-depth", "1")
    assert ids(results) == [A, B]
    note, path = results[0]["notes"][0], results[1]["path"][0]
    note_prefix, path_prefix, path_suffix = f"contradicts {B}: ", f"[decision] {A} ", f" -> contradicts -> [decision] {B}"
    assert note.startswith(note_prefix) and path.startswith(path_prefix) and path.endswith(path_suffix)
    shortened = [
        (note.removeprefix(note_prefix), other_title, 70),  # not "... with non-…"
        (path.removeprefix(path_prefix).removesuffix(path_suffix), hit_title, 60),  # not "... the read-…"
    ]
    assert [short for short, title, width in shortened if not cut_at_a_word_boundary(short, title, width)] == []


# -- supersession and status --------------------------------------------------------------------


def test_supersedes_brings_the_newer_record_and_hides_the_older_by_default(initialised: Path, cli) -> None:
    old, new = "dec-00000001", "dec-00000002"
    write_decisions(initialised, {old: "Celery runs the nightly invoice batch", new: "Dramatiq runs the nightly invoice batch"})
    assert cli("supersede", old, new).exit_code == 0

    assert old not in ids(search(cli, "celery", "--graph-depth", "1"))
    assert ids(search(cli, "nightly invoice", "--graph-depth", "1")) == [new]  # reached through the edge, skipped

    marked = search(cli, "celery", "--graph-depth", "1", "--all")
    assert ids(marked) == [old, new]
    assert (marked[0]["status"], marked[0]["components"]["factors"]["status"]) == ("superseded", 0.5)
    assert marked[1]["status"] == "active"
    assert marked[1]["path"] == [f"[decision] {old} Celery runs the nightly invoice batch <- supersedes <- [decision] {new}"]

    both = search(cli, "nightly invoice", "--graph-depth", "1", "--all")
    assert ids(both) == [new, old]  # both found directly: the newer first, nothing added twice
    assert "path" not in both[1]


def test_reached_records_that_are_not_active_are_skipped_unless_all(initialised: Path, cli) -> None:
    hub, gone = "dec-00000001", "dec-00000002"
    write_decisions(initialised, {hub: "Zeppelin hangar doors open at dawn", gone: "Mooring masts get steel cables"})
    assert cli("link", hub, gone, "relates_to").exit_code == 0
    assert cli("retract", gone, "--reason", "masts were removed").exit_code == 0

    assert ids(search(cli, "zeppelin", "--graph-depth", "1")) == [hub]
    shown = search(cli, "zeppelin", "--graph-depth", "1", "--all")
    assert ids(shown) == [hub, gone]
    assert shown[1]["status"] == "retracted"
    assert shown[1]["path"] == [f"[decision] {hub} Zeppelin hangar doors open at dawn -> relates_to -> [decision] {gone}"]

    reader = open_reader(initialised)  # without the pipeline's row mask, expand still skips it
    assert [c.id for c in expanded(reader, [hub], 1)] == [hub]
    assert [c.id for c in expanded(reader, [hub], 1, include_all=True)] == [hub, gone]


# -- filters and the graph channel ----------------------------------------------------------------


def _hub_with_neighbours(data_dir: Path) -> None:
    write_decisions(data_dir, {A: CHAIN[A], B: CHAIN[B]}, tags={A: ["airship"]})
    write_patterns(data_dir, [{"id": "pat-1-a1b2", "name": "Tether drones to the mast", "origin": A}])
    write_edges(data_dir, (A, B, "relates_to"))


def test_filters_apply_to_records_added_through_the_graph(data_dir: Path, cli) -> None:
    _hub_with_neighbours(data_dir)
    assert sorted(ids(search(cli, "zeppelin", "--graph-depth", "1"))) == sorted([A, B, "pat-1-a1b2"])
    assert ids(search(cli, "zeppelin", "--graph-depth", "1", "--type", "decision")) == [A, B]
    assert ids(search(cli, "zeppelin", "--graph-depth", "1", "--tag", "airship")) == [A]
    assert ids(search(cli, "zeppelin", "--graph-depth", "1", "--type", "pattern")) == []


def test_graph_channel_feeds_fusion_with_neighbours_of_the_lexical_hits(data_dir: Path, cli) -> None:
    _hub_with_neighbours(data_dir)
    assert ids(search(cli, "zeppelin")) == [A]
    fused = search(cli, "zeppelin", "--channels", "bm25,graph", "--weights", "graph=0.3")  # graph weighs 0 by default
    # The pattern's edge (derived_from, 0.8) outranks the decision's (relates_to, 0.5) in the channel.
    assert {r["id"]: r["components"]["ranks"] for r in fused} == {A: {"bm25": 1}, "pat-1-a1b2": {"graph": 1},
                                                                  B: {"graph": 2}}  # fmt: skip
    assert not [r for r in fused if "path" in r]  # found by a channel, not by traversal
    filtered = search(cli, "zeppelin", "--channels", "bm25,graph", "--weights", "graph=0.3", "--type", "decision")
    assert ids(filtered) == [A, B]
    assert filtered[1]["components"]["ranks"] == {"graph": 1}


def test_neighbour_ranking_discounts_by_seed_position() -> None:
    adjacency = Adjacency([GraphEdge("s1", "x", "relates_to"), GraphEdge("s2", "y", "relates_to")])
    assert neighbour_ranking(adjacency, ["s1", "s2"], RELATION_WEIGHTS) == ["x", "y"]
    assert neighbour_ranking(adjacency, ["s2", "s1"], RELATION_WEIGHTS) == ["y", "x"]
    # A seed named by two channels counts once, at its first position: x 0.3 against y 0.7 / 2.
    twice = Adjacency([GraphEdge("s1", "x", "mystery"), GraphEdge("s2", "y", "implements")])
    assert neighbour_ranking(twice, ["s1", "s2", "s1"], RELATION_WEIGHTS) == ["y", "x"]


def test_neighbour_ranking_skips_seeds_and_follows_edges_both_ways() -> None:
    adjacency = Adjacency([GraphEdge("s1", "s2", "supersedes"), GraphEdge("x", "s1", "derived_from"),
                           GraphEdge("s2", "y", "relates_to")])  # fmt: skip
    assert neighbour_ranking(adjacency, ["s1", "s2"], RELATION_WEIGHTS) == ["x", "y"]
    assert neighbour_ranking(adjacency, ["s1"], RELATION_WEIGHTS) == ["s2", "x"]
    assert neighbour_ranking(adjacency, [], RELATION_WEIGHTS) == []


def test_neighbour_ranking_weighs_relations_and_sums_over_seeds() -> None:
    adjacency = Adjacency([
        GraphEdge("s1", "light", "affects"), GraphEdge("s1", "heavy", "derived_from"), GraphEdge("s1", "odd", "mystery"),
        GraphEdge("s1", "both", "relates_to"), GraphEdge("s2", "both", "relates_to"),
    ])  # fmt: skip
    # heavy 0.8; both 0.5 + 0.5 / 2; light 0.5; odd 0.3 (a relation without a weight).
    assert neighbour_ranking(adjacency, ["s1", "s2"], RELATION_WEIGHTS) == ["heavy", "both", "light", "odd"]
    custom = {"affects": 1.0, "derived_from": 0.1, "relates_to": 0.1, "mystery": 0.2}
    assert neighbour_ranking(adjacency, ["s1", "s2"], custom) == ["light", "odd", "both", "heavy"]
    heavier_edge = Adjacency([GraphEdge("s1", "a", "affects", weight=2.0), GraphEdge("s1", "b", "derived_from")])
    assert neighbour_ranking(heavier_edge, ["s1"], RELATION_WEIGHTS) == ["a", "b"]


def test_neighbour_ranking_breaks_ties_by_id() -> None:
    edges = [GraphEdge("s1", rid, "relates_to") for rid in ("c", "a", "b")]
    assert neighbour_ranking(Adjacency(edges), ["s1"], RELATION_WEIGHTS) == ["a", "b", "c"]
    assert neighbour_ranking(Adjacency(edges[::-1]), ["s1"], RELATION_WEIGHTS) == ["a", "b", "c"]

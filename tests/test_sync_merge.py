"""The record-aware merge rules behind `lore merge-driver`, on bytes (no git; tests/test_sync.py runs git)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml

from lore.store.store import PATTERNS_HEADER, dump_yaml
from lore.sync import merge

DECISIONS = "journal/data/decisions.jsonl"


def jsonl(*records: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def rows(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def patterns(*items: dict[str, Any], anti: tuple[dict[str, Any], ...] = ()) -> bytes:
    return (PATTERNS_HEADER + dump_yaml({"patterns": list(items), "anti_patterns": list(anti)})).encode()


def both_ways(fn: Any, base: bytes, ours: bytes, theirs: bytes, path: str) -> tuple[bytes, merge.Notes]:
    """Merge in both directions: the bytes must not depend on which side is ours."""
    notes, reverse_notes = merge.Notes(), merge.Notes()
    forward = fn(base, ours, theirs, path, notes)
    assert fn(base, theirs, ours, path, reverse_notes) == forward
    assert len(notes.renames) == len(reverse_notes.renames)
    assert len(notes.conflicts) == len(reverse_notes.conflicts)
    return forward, notes


DEC_A = {"id": "dec-0000000a", "timestamp": "2026-01-01T00:00:00Z", "decision": "Use Postgres"}
DEC_B = {"id": "dec-0000000b", "timestamp": "2026-01-02T00:00:00Z", "decision": "Use Kafka"}


def test_appends_on_both_sides_keep_every_line_once() -> None:
    base = jsonl(DEC_A)
    ours = jsonl(DEC_A, DEC_B)
    theirs = jsonl(DEC_A, {"id": "dec-0000000c", "timestamp": "2026-01-03T00:00:00Z", "decision": "Use Redis"}, DEC_B)
    merged, notes = both_ways(merge.merge_jsonl, base, ours, theirs, DECISIONS)
    assert [r["id"] for r in rows(merged)] == ["dec-0000000a", "dec-0000000b", "dec-0000000c"]
    assert notes.conflicts == [] and notes.renames == []


def test_identical_lines_collapse_to_one() -> None:
    doubled = jsonl(DEC_A, DEC_A, DEC_B)  # what git's union driver leaves after a both-sides append
    merged, _ = both_ways(merge.merge_jsonl, jsonl(DEC_A), doubled, jsonl(DEC_A, DEC_B, DEC_B), DECISIONS)
    assert merged == jsonl(DEC_A, DEC_B)


def test_a_rewritten_last_line_is_not_resurrected_by_an_append() -> None:
    # git's union driver puts both sides of the hunk in the file: the old line after the retracted
    # one, so "the last line wins" would quietly undo the retraction.
    retracted = {**DEC_B, "status": "retracted", "updated_at": "2026-01-05T00:00:00Z"}
    new = {"id": "dec-0000000c", "timestamp": "2026-01-03T00:00:00Z", "decision": "Use Redis"}
    merged, _ = both_ways(merge.merge_jsonl, jsonl(DEC_A, DEC_B), jsonl(DEC_A, retracted), jsonl(DEC_A, DEC_B, new), DECISIONS)
    assert rows(merged) == [DEC_A, retracted, new]


def test_a_delete_loses_to_an_edit_and_wins_over_no_change() -> None:
    edited = {**DEC_B, "outcome": "successful", "updated_at": "2026-01-04T00:00:00Z"}
    merged, _ = both_ways(merge.merge_jsonl, jsonl(DEC_A, DEC_B), jsonl(DEC_A), jsonl(DEC_A, edited), DECISIONS)
    assert rows(merged) == [DEC_A, edited]
    merged, _ = both_ways(merge.merge_jsonl, jsonl(DEC_A, DEC_B), jsonl(DEC_A), jsonl(DEC_A, DEC_B), DECISIONS)
    assert rows(merged) == [DEC_A]


def test_unchanged_lines_keep_their_bytes() -> None:
    spaced = b'{"id": "dec-0000000a", "timestamp": "2026-01-01T00:00:00Z", "decision": "Use Postgres"}\n'
    merged, _ = both_ways(merge.merge_jsonl, spaced, spaced, spaced + jsonl(DEC_B), DECISIONS)
    assert merged.startswith(spaced)
    garbage = b"{not json\n"
    merged, _ = both_ways(merge.merge_jsonl, spaced, spaced + garbage, spaced + jsonl(DEC_B), DECISIONS)
    assert garbage in merged and rows(merged.replace(garbage, b""))[-1] == DEC_B


def test_both_sides_editing_a_record_merge_by_field_and_the_newest_wins_a_shared_field() -> None:
    base = {"id": "pat-1700000000-abcd", "name": "Backoff", "solution": "retry", "confidence": 0.5,
            "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    ours = {**base, "solution": "retry with jitter", "x_ours": 1, "status": "retracted",
            "retracted_reason": "old", "updated_at": "2026-02-01T00:00:00Z"}  # fmt: skip
    theirs = {**base, "confidence": 0.7, "x_theirs": {"a": 1}, "status": "retracted",
              "retracted_reason": "wrong", "updated_at": "2026-03-01T00:00:00Z"}  # fmt: skip
    merged, notes = both_ways(merge.merge_patterns, patterns(base), patterns(ours), patterns(theirs),
                              "patterns/data/patterns.yaml")  # fmt: skip
    assert merged.startswith(PATTERNS_HEADER.encode())
    (item,) = yaml.safe_load(merged)["patterns"]
    assert item["solution"] == "retry with jitter" and item["confidence"] == 0.7  # one side each
    assert item["x_ours"] == 1 and item["x_theirs"] == {"a": 1}  # unknown fields of both sides
    assert item["retracted_reason"] == "wrong" and item["updated_at"] == "2026-03-01T00:00:00Z"  # newest
    (conflict,) = notes.conflicts
    assert conflict.fields == ["retracted_reason"] and conflict.lost["retracted_reason"] == "old"


def test_a_tie_on_updated_at_is_settled_the_same_way_on_every_clone() -> None:
    base = {**DEC_A}
    ours = {**base, "outcome": "successful", "updated_at": "2026-02-01T00:00:00Z"}
    theirs = {**base, "outcome": "abandoned", "updated_at": "2026-02-01T00:00:00Z"}
    merged, notes = both_ways(merge.merge_jsonl, jsonl(base), jsonl(ours), jsonl(theirs), DECISIONS)
    assert rows(merged)[0]["outcome"] in ("successful", "abandoned") and len(notes.conflicts) == 1


def test_an_id_minted_on_two_clones_is_renamed_deterministically() -> None:
    ours_dup = {"id": "dec-12345678", "timestamp": "2026-01-04T00:00:00Z", "decision": "Alice: adopt Kafka"}
    theirs_dup = {"id": "dec-12345678", "timestamp": "2026-01-04T00:00:00Z", "decision": "Bob: adopt NATS"}
    merged, notes = both_ways(merge.merge_jsonl, jsonl(DEC_A), jsonl(DEC_A, ours_dup), jsonl(DEC_A, theirs_dup), DECISIONS)
    records = rows(merged)
    assert sorted(r["decision"] for r in records) == ["Alice: adopt Kafka", "Bob: adopt NATS", "Use Postgres"]
    assert len({r["id"] for r in records}) == 3
    (rename,) = notes.renames
    assert rename.old_id == "dec-12345678" and rename.new_id.startswith("dec-") and len(rename.new_id) == 12
    assert {r["id"] for r in records} == {"dec-0000000a", "dec-12345678", rename.new_id}
    # The same record added on both sides (same creation time and title) is not a duplicate.
    same = {**ours_dup, "tags": ["x"]}
    merged, notes = both_ways(merge.merge_jsonl, b"", jsonl(ours_dup), jsonl(same), DECISIONS)
    assert rows(merged) == [same] and notes.renames == []


def test_a_later_merge_follows_the_rename_to_the_new_id() -> None:
    mine = {"id": "dec-12345678", "timestamp": "2026-01-04T00:00:00Z", "decision": "Alice: adopt Kafka"}
    yours = {"id": "dec-12345678", "timestamp": "2026-01-04T00:00:01Z", "decision": "Bob: adopt NATS"}
    first = merge.merge_jsonl(jsonl(DEC_A), jsonl(DEC_A, mine), jsonl(DEC_A, yours), DECISIONS, merge.Notes())
    loser = next(r for r in rows(first) if r["id"] != "dec-12345678" and r["id"] != DEC_A["id"])
    kept = next(r for r in rows(first) if r["id"] == "dec-12345678")
    # The clone whose record was renamed edited it before it heard of the rename.
    edited = {**(yours if loser["decision"] == yours["decision"] else mine), "outcome": "successful",
              "updated_at": "2026-01-09T00:00:00Z"}  # fmt: skip
    its_base = jsonl(DEC_A, {k: v for k, v in edited.items() if k not in ("outcome", "updated_at")})
    merged, _ = both_ways(merge.merge_jsonl, its_base, jsonl(DEC_A, edited), first, DECISIONS)
    by_id = {r["id"]: r for r in rows(merged)}
    assert by_id["dec-12345678"] == kept
    assert by_id[loser["id"]] == {**edited, "id": loser["id"]}
    assert len(by_id) == 3


def test_graph_merges_nodes_and_edges_by_key() -> None:
    def graph(*edges: tuple[str, str, str], nodes: dict[str, Any] | None = None) -> bytes:
        return merge.dump_json({"nodes": nodes or {}, "edges": [
            {"from": a, "to": b, "relation": r, "weight": 1, "status": "active", "created_at": "2026-01-01T00:00:00Z"}
            for a, b, r in edges]})  # fmt: skip

    node = {"type": "decision", "name": "dec-0000000a", "data": {"journal_id": "dec-0000000a"}}
    base = graph(("n1", "n2", "relates_to"), nodes={"n1": node})
    ours = graph(("n1", "n2", "relates_to"), ("n1", "n3", "depends_on"), nodes={"n1": node, "n3": {"name": "x"}})
    theirs = graph(("n2", "n3", "supersedes"), nodes={"n1": {**node, "x_extra": True}})
    merged, _ = both_ways(merge.merge_graph, base, ours, theirs, "graph/data/graph.json")
    document = orjson.loads(merged)
    # theirs removed n1->n2 (ours did not touch it): removed; both sides' new edges kept
    assert [(e["from"], e["to"], e["relation"]) for e in document["edges"]] == [
        ("n1", "n3", "depends_on"), ("n2", "n3", "supersedes")]  # fmt: skip
    assert document["nodes"]["n1"]["x_extra"] is True and "n3" in document["nodes"]


def test_a_handoff_minted_twice_gets_its_own_file() -> None:
    ours = {"id": "session-20260101-000000-aaaaaaaa", "started_at": "2026-01-01T00:00:00Z", "summary": "Alice's work"}
    theirs = {**ours, "summary": "Bob's work"}
    merged, extra = merge.merge_session(b"", merge.dump_json(ours), merge.dump_json(theirs),
                                        "transfer/data/sessions/session-20260101-000000-aaaaaaaa.json", merge.Notes())  # fmt: skip
    kept = orjson.loads(merged)
    (renamed,) = extra
    assert {kept["summary"], renamed["summary"]} == {"Alice's work", "Bob's work"}
    assert kept["id"] == ours["id"] and renamed["id"] != ours["id"] and renamed["id"].startswith("session-20260101-000000-")


def test_the_driver_falls_back_to_conflict_markers_for_a_file_that_does_not_parse(tmp_path: Path) -> None:
    base, ours, theirs = tmp_path / "base", tmp_path / "ours", tmp_path / "theirs"
    base.write_text("# Pattern Learner Database\npatterns: []\n")
    ours.write_text("# Pattern Learner Database\npatterns: [\n")  # broken YAML
    theirs.write_text("# Pattern Learner Database\npatterns:\n  - id: pat-1\n    name: x\n")
    done = subprocess.run([sys.executable, "-m", "lore", "merge-driver", str(base), str(ours), str(theirs),
                           "patterns/data/patterns.yaml"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1
    assert "falling back to a line merge" in done.stderr
    assert "<<<<<<< ours" in ours.read_text()


def test_the_item_by_item_patterns_merge_writes_what_a_full_rewrite_would() -> None:
    # Large pattern files are merged chunk by chunk (only changed items are parsed and dumped);
    # the bytes must be those of merging the parsed documents and dumping them whole.
    def item(n: int, **extra: Any) -> dict[str, Any]:
        return {"id": f"pat-17000000{n:02d}-abcd", "name": f"Pattern {n}: keep\nit short", "solution": "x " * 70,
                "created_at": f"2026-01-{n % 28 + 1:02d}T00:00:00Z", "examples": [{"bad": "a"}, {"good": "b"}], **extra}  # fmt: skip

    anti = ({"id": "anti-1700000000-ffff", "name": "Catch-all handlers", "severity": "high"},)
    base_items = [item(n) for n in range(8)]
    ours = [item(0, solution="ours", updated_at="2026-02-01T00:00:00Z"), *base_items[1:5], *base_items[6:],
            item(40), {"id": "pat-1700000099-0000", "name": "Alice's", "created_at": "2026-03-01T00:00:00Z"}]  # fmt: skip
    theirs = [item(0, solution="theirs", updated_at="2026-03-01T00:00:00Z"), *base_items[1:3],
              item(3, confidence=0.9), *base_items[4:], item(41),
              {"id": "pat-1700000099-0000", "name": "Bob's", "created_at": "2026-03-02T00:00:00Z"}]  # fmt: skip
    sides = [patterns(*items, anti=anti) for items in (base_items, ours, theirs)]
    chunked_notes, document_notes = merge.Notes(), merge.Notes()
    chunked = merge._merge_patterns_chunked(*sides, "patterns/data/patterns.yaml", chunked_notes)
    whole = merge._merge_pattern_documents(*sides, "patterns/data/patterns.yaml", document_notes)
    assert chunked == whole
    assert [c.record_id for c in chunked_notes.conflicts] == [c.record_id for c in document_notes.conflicts]
    assert [(r.old_id, r.new_id) for r in chunked_notes.renames] == [(r.old_id, r.new_id) for r in document_notes.renames]
    names = [i["name"] for i in yaml.safe_load(chunked)["patterns"]]
    assert "Pattern 5: keep\nit short" not in names  # ours deleted it, theirs left it alone
    assert {"Alice's", "Bob's"} <= set(names) and len(chunked_notes.renames) == 1


def test_a_patterns_file_in_another_layout_is_merged_from_its_parsed_documents() -> None:
    base = b"patterns:\n- id: pat-1700000000-aaaa\n  name: First\nanti_patterns: []\n"  # items at column 0
    ours = base.replace(b"anti_patterns: []", b"- id: pat-1700000001-bbbb\n  name: Second\nanti_patterns: []")
    theirs = base.replace(b"name: First", b"name: First\n  confidence: 0.9")
    merged, _ = both_ways(merge.merge_patterns, base, ours, theirs, "patterns/data/patterns.yaml")
    items = yaml.safe_load(merged)["patterns"]
    assert [(i["name"], i.get("confidence")) for i in items] == [("First", 0.9), ("Second", None)]

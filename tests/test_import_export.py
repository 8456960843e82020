"""lore export and lore import (lore-export, bash-lore, mcp-memory): real files end to end."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from lore.store import Store
from lore.transfer import content_hash, mcp_entity_id
from tests.conftest import BASH_LORE_FIXTURE


def _state(data_dir: Path) -> tuple[dict[str, tuple[str, dict[str, Any]]], set[tuple[str, str, str, float]]]:
    """Records (kind and fields without schema_version) and edges, as lore's store reads them."""
    snapshot = Store(data_dir).load()
    records = {rid: (r.kind, {k: v for k, v in r.raw.items() if k != "schema_version"})
               for rid, r in snapshot.records.items()}  # fmt: skip
    edges = {(e.source, e.target, e.relation, e.weight) for e in snapshot.edges}
    return records, edges


def _file_digests(data_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data_dir.rglob("*")) if p.is_file() and p.name != ".lore.lock"}  # fmt: skip


def _rich_source(bash_lore_copy: Path) -> Path:
    """The bash-Lore fixture, migrated, plus a lesson and a weighted edge with a field lore does not use."""
    from lore.curate.migrate import migrate

    store = Store(bash_lore_copy)
    migrate(store)
    store.add("lesson", {"kind": "lesson", "name": "Pin the resolver", "rule": "pin pip's resolver in CI",
                         "created_at": "2026-01-02T03:04:05Z"})  # fmt: skip
    snapshot = store.load()
    lesson = next(r.id for r in snapshot.records.values() if r.kind == "lesson")
    failure = next(r.id for r in snapshot.records.values() if r.kind == "failure")
    store.link(lesson, failure, "learned_from", weight=0.5, extra={"note": "from CI"})
    return bash_lore_copy


def test_export_then_import_into_an_empty_data_dir_round_trips_every_record_and_edge(
    cli, initialised: Path, bash_lore_copy: Path, tmp_path: Path
) -> None:
    source = _rich_source(bash_lore_copy)
    export_file = tmp_path / "export.jsonl"
    result = cli("--data-dir", str(source), "export", "--out", str(export_file))
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in export_file.read_bytes().splitlines()]
    assert all(line["lore_export"] == 1 and line["type"] in ("record", "edge") for line in lines)
    source_records, source_edges = _state(source)
    assert {line["id"] for line in lines if line["type"] == "record"} == set(source_records)
    kinds = {kind for kind, _ in source_records.values()}
    assert {"decision", "pattern", "anti_pattern", "lesson", "handoff", "failure", "observation"} <= kinds

    result = cli("import", "lore-export", str(export_file))
    assert result.exit_code == 0, result.output
    assert "conflicts (stored under a new id): none" in result.stdout
    assert _state(initialised) == (source_records, source_edges)
    # The edge's own fields and time survive too: the target's export is the source's, byte for byte.
    assert cli("export").stdout_bytes == export_file.read_bytes()
    assert b'"extra":{"note":"from CI"}' in export_file.read_bytes()


def test_export_to_stdout_is_deterministic(cli, bash_lore_copy: Path) -> None:
    first = cli("--data-dir", str(bash_lore_copy), "export")
    second = cli("--data-dir", str(bash_lore_copy), "export")
    assert first.exit_code == 0 and first.stdout_bytes == second.stdout_bytes
    assert first.stdout_bytes.count(b"\n") == len(Store(bash_lore_copy).load().records) + 1  # one edge


def test_importing_twice_adds_nothing_and_dry_run_writes_nothing(cli, initialised: Path, bash_lore_copy: Path,
                                                                 tmp_path: Path) -> None:  # fmt: skip
    source = _rich_source(bash_lore_copy)
    export_file = tmp_path / "export.jsonl"
    cli("--data-dir", str(source), "export", "--out", str(export_file))
    before = _file_digests(initialised)
    dry = cli("import", "lore-export", str(export_file), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith("Dry run: nothing was written.\nwould add: 1 anti_pattern, 2 decision, 2 edge, ")
    assert _file_digests(initialised) == before

    cli("import", "lore-export", str(export_file))
    after_first = _file_digests(initialised)
    again = cli("import", "lore-export", str(export_file))
    assert again.exit_code == 0, again.output
    assert "added: none\n" in again.stdout
    assert "skipped (already present): 1 anti_pattern, 2 decision, 2 edge, 1 failure" in again.stdout
    assert {k: v for k, v in _file_digests(initialised).items() if not k.startswith("audit/")} == {
        k: v for k, v in after_first.items() if not k.startswith("audit/")
    }


def test_the_bash_lore_fixture_imports_with_its_edge(cli, initialised: Path, bash_lore_copy: Path) -> None:
    result = cli("import", "bash-lore", str(BASH_LORE_FIXTURE))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "added: 1 anti_pattern, 2 decision, 1 edge, 1 failure, 1 handoff, 1 observation, 1 pattern\n"
        "skipped (already present): none\n"
        "conflicts (stored under a new id): none\n"
    )
    # A data dir already holding the same records unmigrated (version 0) has nothing to add.
    into_copy = cli("--data-dir", str(bash_lore_copy), "import", "bash-lore", str(BASH_LORE_FIXTURE))
    assert into_copy.stdout.startswith("added: none\n"), into_copy.output
    # What lands is what `lore migrate` makes of the fixture's (version 0) records.
    migrated = cli("--data-dir", str(bash_lore_copy), "migrate")
    assert migrated.exit_code == 0, migrated.output
    assert _state(initialised) == _state(bash_lore_copy)
    assert all(r.schema_version == 1 for r in Store(initialised).load().records.values())
    assert cli("import", "bash-lore", str(BASH_LORE_FIXTURE)).stdout.startswith("added: none\n")


def test_same_id_with_other_content_is_kept_under_a_deterministic_new_id(cli, initialised: Path,
                                                                         tmp_path: Path) -> None:  # fmt: skip
    other = tmp_path / "other"
    assert cli("--data-dir", str(other), "init").exit_code == 0
    Store(other).add("decision", {"id": "dec-00000001", "decision": "Use Postgres", "timestamp": "2026-01-01T00:00:00Z"})
    Store(initialised).add("decision", {"id": "dec-00000001", "decision": "Use MySQL", "timestamp": "2026-01-01T00:00:00Z"})
    result = cli("import", "bash-lore", str(other))
    assert "conflicts (stored under a new id): 1 decision" in result.stdout
    records, _ = _state(initialised)
    incoming = {"id": "dec-00000001", "decision": "Use Postgres", "timestamp": "2026-01-01T00:00:00Z", "schema_version": 1}
    new_id = f"dec-00000001-imp{content_hash(incoming)[:8]}"
    assert records["dec-00000001"][1]["decision"] == "Use MySQL"
    assert records[new_id][1]["decision"] == "Use Postgres"
    again = cli("import", "bash-lore", str(other))
    assert again.stdout.startswith("added: none\nskipped (already present): 1 decision\nconflicts (stored under a new id): none")
    assert len(_state(initialised)[0]) == 2


MCP_LINES = [
    {"type": "entity", "name": "Postgres", "entityType": "database",
     "observations": ["stores the job queue", "admin token ghp_abcdefghijklmnopqrstuvwxyz0123456789"]},
    {"type": "entity", "name": "Worker", "entityType": "service", "observations": ["pulls jobs every second"]},
    {"type": "relation", "from": "Worker", "to": "Postgres", "relationType": "uses"},
    {"type": "relation", "from": "Postgres", "to": "Worker", "relationType": "is polled by"},
]  # fmt: skip


def test_mcp_memory_entities_and_relations_import_with_located_problems(cli, initialised: Path,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    memory = tmp_path / "memory.jsonl"
    lines = [orjson.dumps(item) for item in MCP_LINES]
    lines.insert(2, b'{"type": "entity", "name": ')  # line 3: cut off mid-object
    lines.append(b'{"type": "relation", "from": "Worker", "to": "Nobody", "relationType": "uses"}')  # line 6
    memory.write_bytes(b"\n".join(lines) + b"\n")

    result = cli("import", "mcp-memory", str(memory))
    assert result.exit_code == 0, result.output
    assert f"Warning: {memory}:3: invalid JSON" in result.stderr
    assert f"Warning: {memory}:6: relation names an unknown entity: Nobody" in result.stderr
    # The token is in the content and in the kept observations list: both are scrubbed.
    assert "Redacted 2 secret(s) before storing: github_token" in result.stderr
    assert result.stdout.startswith("added: 2 edge, 2 observation\n")

    snapshot = Store(initialised).load()
    postgres, worker = snapshot.get(mcp_entity_id("Postgres")), snapshot.get(mcp_entity_id("Worker"))
    assert postgres.kind == "observation" and postgres.title == "Postgres (database)"
    assert "stores the job queue" in postgres.content and "ghp_" not in postgres.content
    assert "[REDACTED:github_token]" in postgres.content
    edges = {(e.source, e.target, e.relation, tuple(sorted(e.extra.items()))) for e in snapshot.edges}
    assert edges == {
        (worker.id, postgres.id, "depends_on", (("original_relation", "uses"),)),
        (postgres.id, worker.id, "relates_to", (("original_relation", "is polled by"),)),
    }

    before = _file_digests(initialised)
    again = cli("import", "mcp-memory", str(memory))
    assert again.stdout.startswith("added: none\nskipped (already present): 2 edge, 2 observation\n")
    assert "Redacted" not in again.stderr
    assert {k: v for k, v in _file_digests(initialised).items() if not k.startswith("audit/")} == {
        k: v for k, v in before.items() if not k.startswith("audit/")
    }


def test_a_malformed_export_line_is_reported_and_the_others_import(cli, initialised: Path, tmp_path: Path) -> None:
    export_file = tmp_path / "export.jsonl"
    good = {"lore_export": 1, "type": "record", "kind": "observation", "id": "obs-1",
            "record": {"id": "obs-1", "content": "builds take 4 minutes", "timestamp": "2026-01-01T00:00:00Z"}}  # fmt: skip
    export_file.write_bytes(b"\n".join([b"{broken", orjson.dumps({"lore_export": 1, "type": "record"}), orjson.dumps(good)]))
    result = cli("import", "lore-export", str(export_file))
    assert result.exit_code == 0, result.output
    assert f"Warning: {export_file}:1: invalid JSON" in result.stderr
    assert f"Warning: {export_file}:2: record line needs a known kind and a record with an id" in result.stderr
    assert result.stdout.startswith("added: 1 observation\n")
    assert Store(initialised).load().get("obs-1").content == "builds take 4 minutes"


def test_import_of_a_missing_file_is_a_clean_error(cli, initialised: Path, tmp_path: Path) -> None:
    from lore.cli.app import run

    assert run(["import", "mcp-memory", str(tmp_path / "nope.jsonl")]) == 2

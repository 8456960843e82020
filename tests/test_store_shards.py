"""Month shards of the JSONL record files: read beside the single file, written when sharded, split on request."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from lore import capture
from lore.capture import WriteOptions
from lore.curate import pool
from lore.errors import UnsafeRewriteError, UsageError
from lore.index.manager import IndexManager
from lore.store import Store
from lore.store.layout import DECISIONS, FAILURES, OBSERVATIONS, jsonl_kind, shard_dir, source_files
from lore.store.shard import split
from lore.store.store import _ID_FIELD
from tests.conftest import resolve_locations

PLAIN = WriteOptions(redact=False, check_duplicates=False)
SHARDS = shard_dir(DECISIONS)


def fixed_clock() -> datetime:
    return datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def decision(record_id: str, text: str, when: str = "2026-01-05T10:00:00Z", **extra: Any) -> bytes:
    raw = {"id": record_id, "timestamp": when, "decision": text, "rationale": f"because {text}", "status": "active",
           "schema_version": 1, **extra}  # fmt: skip
    return orjson.dumps(raw) + b"\n"


def loaded(data_dir: Path) -> dict[str, dict[str, Any]]:
    return {rid: record.raw for rid, record in Store(data_dir).load().records.items()}


def lines_of(data_dir: Path) -> list[bytes]:
    """Every non-blank line of every JSONL record file, sorted: what a migration must keep byte for byte."""
    found = []
    for path in source_files(data_dir):
        if jsonl_kind(path.relative_to(data_dir)) is not None:
            found.extend(line for line in path.read_bytes().split(b"\n") if line.strip())
    return sorted(found)


# -- reading and writing ------------------------------------------------------------------------


def test_a_bash_lore_data_dir_reads_unchanged_and_keeps_its_single_files(bash_lore_copy: Path) -> None:
    data_dir = bash_lore_copy
    before = {p: p.read_bytes() for p in data_dir.rglob("*.jsonl")}
    records = loaded(data_dir)
    assert records and not (data_dir / SHARDS).exists()
    store = Store(data_dir, actor="test")
    written = capture.remember(store, "Keep the bash layout", project="p", options=PLAIN).record
    single = data_dir / DECISIONS
    assert single.read_bytes().startswith(before[single]) and written.id.encode() in single.read_bytes()
    assert not (data_dir / SHARDS).exists()  # a single-file store keeps appending to its single file
    assert set(loaded(data_dir)) == set(records) | {written.id}
    # Split on request: the same records, every line kept.
    records, lines = loaded(data_dir), lines_of(data_dir)
    movable = sum(1 for r in (DECISIONS, FAILURES, OBSERVATIONS) for line in (data_dir / r).read_bytes().split(b"\n") if line.strip())
    assert movable and split(Store(data_dir, actor="test")).moved == movable
    assert loaded(data_dir) == records and lines_of(data_dir) == lines


def test_a_sharded_store_writes_each_record_to_its_months_shard_and_edits_it_where_it_is(data_dir: Path) -> None:
    store = Store(data_dir, actor="test", clock=fixed_clock)
    created = store.init(shard=True)
    assert data_dir / SHARDS / "2026-03.jsonl" in created and not (data_dir / DECISIONS).exists()
    now = capture.remember(store, "Shard the journal by month", project="p", options=PLAIN).record
    old = store.add("decision", {"timestamp": "2025-11-30T23:59:59Z", "decision": "Imported from last year"})
    failure = store.add("failure", {"timestamp": "2026-03-01T00:00:00Z", "error_type": "E", "error_message": "boom"})
    assert now.id.encode() in (data_dir / SHARDS / "2026-03.jsonl").read_bytes()
    assert old.id.encode() in (data_dir / SHARDS / "2025-11.jsonl").read_bytes()
    assert failure.id.encode() in (data_dir / shard_dir(FAILURES) / "2026-03.jsonl").read_bytes()
    # A record the single file still holds (written before the store was sharded) is read and edited there.
    (data_dir / DECISIONS).write_bytes(decision("dec-0000aaaa", "Older single-file decision"))
    records = Store(data_dir).load().records
    assert {now.id, old.id, failure.id, "dec-0000aaaa"} <= set(records)
    assert records[old.id].source == data_dir / SHARDS / "2025-11.jsonl"
    capture.retract(store, "dec-0000aaaa", "superseded by the shards")
    capture.retract(store, old.id, "not needed")
    assert b'"retracted"' in (data_dir / DECISIONS).read_bytes()
    assert b'"retracted"' in (data_dir / SHARDS / "2025-11.jsonl").read_bytes()
    assert b'"retracted"' not in (data_dir / SHARDS / "2026-03.jsonl").read_bytes()
    store.delete(now.id)
    assert now.id not in Store(data_dir).load().records
    # Ids are unique across the files of a kind: the single file's and every shard's.
    with pytest.raises(UsageError, match="already exists"):
        store.add("decision", {"id": old.id, "decision": "again"})


def test_init_shard_refuses_a_store_holding_records_in_its_single_files(data_dir: Path) -> None:
    store = Store(data_dir, actor="test")
    store.init()
    capture.remember(store, "Written before sharding", project="p", options=PLAIN)
    with pytest.raises(UsageError, match="single-file layout") as caught:
        store.init(shard=True)
    assert "migrate --shard" in (caught.value.hint or "")


# -- lore migrate --shard ----------------------------------------------------------------------------


def mixed_store(data_dir: Path) -> Store:
    store = Store(data_dir, actor="test", clock=fixed_clock)
    store.init()
    lines = [decision(f"dec-{i:08x}", f"Decision {i}", f"2025-{1 + i % 12:02d}-10T08:00:00Z") for i in range(30)]
    lines.append(decision("dec-undated0", "A decision without a time", when=""))
    # A newer version of a record appended as the original Lore did: its lines stay together, in order.
    lines.append(decision("dec-00000003", "Decision 3, revised", "2025-04-10T08:00:00Z"))
    (data_dir / DECISIONS).write_bytes(b"".join(lines))
    store.add("failure", {"timestamp": "2025-06-01T00:00:00Z", "error_type": "E", "error_message": "one"})
    store.add("observation", {"timestamp": "2025-07-01T00:00:00Z", "content": "an observation"})
    return store


def test_migrate_shard_moves_every_line_and_a_second_run_is_a_no_op(data_dir: Path) -> None:
    store = mixed_store(data_dir)
    records, lines = loaded(data_dir), lines_of(data_dir)
    dry = split(store, dry_run=True)
    assert dry.moved == 34 and not (data_dir / SHARDS).exists()
    report = split(store)
    assert report.moved == 34 and report.backup_dir is not None
    assert (report.backup_dir / DECISIONS).read_bytes().count(b"\n") == 32
    assert (data_dir / DECISIONS).read_bytes() == b""  # emptied, not deleted
    assert loaded(data_dir) == records and lines_of(data_dir) == lines
    shards = sorted(p.name for p in (data_dir / SHARDS).iterdir())
    assert shards == [f"2025-{m:02d}.jsonl" for m in range(1, 13)] + ["undated.jsonl"]
    april = (data_dir / SHARDS / "2025-04.jsonl").read_bytes()
    assert april.index(b"Decision 3\"") < april.index(b"Decision 3, revised")
    assert loaded(data_dir)["dec-00000003"]["decision"] == "Decision 3, revised"
    second = split(store)
    assert not second.changed and second.moved == 0 and loaded(data_dir) == records
    # Writes now go to the shards.
    written = capture.remember(store, "After the split", project="p", options=PLAIN).record
    assert written.id.encode() in (data_dir / SHARDS / "2026-03.jsonl").read_bytes()
    assert (data_dir / DECISIONS).read_bytes() == b""


def test_a_split_cut_off_half_way_is_finished_by_the_next_run(data_dir: Path) -> None:
    store = mixed_store(data_dir)
    records, lines = loaded(data_dir), lines_of(data_dir)
    single = (data_dir / DECISIONS).read_bytes()
    # As if the process died after writing one shard, before emptying the single file.
    (data_dir / SHARDS).mkdir(parents=True)
    january = [line for line in single.split(b"\n") if b"2025-01-" in line]
    (data_dir / SHARDS / "2025-01.jsonl").write_bytes(b"\n".join(january) + b"\n")
    assert loaded(data_dir) == records  # the same lines twice: the later copy wins, equal
    report = split(store)
    assert report.files[0].already_held == len(january)
    assert loaded(data_dir) == records and lines_of(data_dir) == lines
    assert set(Store(data_dir).load().duplicate_ids) == {"dec-00000003"}  # its two versions, as before: no line twice


def test_migrate_shard_refuses_a_file_that_does_not_parse_and_writes_nothing(data_dir: Path) -> None:
    store = mixed_store(data_dir)
    with (data_dir / DECISIONS).open("ab") as handle:
        handle.write(b'{"id": "dec-broken00", "decision": \n')
    before = (data_dir / DECISIONS).read_bytes()
    with pytest.raises(UnsafeRewriteError) as caught:
        split(store)
    assert caught.value.path == data_dir / DECISIONS and caught.value.line == 33
    assert (data_dir / DECISIONS).read_bytes() == before and not (data_dir / SHARDS).exists()


def test_the_cli_shards_on_request(data_dir: Path) -> None:
    mixed_store(data_dir)
    records = loaded(data_dir)
    lore = [sys.executable, "-P", "-m", "lore", "--data-dir", str(data_dir)]
    first = subprocess.run([*lore, "migrate", "--shard"], capture_output=True, text=True, check=True)
    assert "journal/data/decisions.jsonl: 32 line(s) into 13 shard(s)" in first.stdout
    assert "Moved 34 line(s) from 3 file(s)" in first.stdout
    again = subprocess.run([*lore, "migrate", "--shard"], capture_output=True, text=True, check=True)
    assert again.stdout.startswith("Nothing to shard")
    assert loaded(data_dir) == records
    fresh = data_dir.parent / "fresh"
    made = subprocess.run([*lore[:-1], str(fresh), "init", "--shard"], capture_output=True, text=True, check=True)
    assert "journal/data/decisions/" in made.stdout and (fresh / SHARDS).is_dir()
    assert (fresh / shard_dir(OBSERVATIONS)).is_dir() and not (fresh / DECISIONS).exists()


# -- the index and the write check, per shard ------------------------------------------------------


def test_the_index_refreshes_a_shard_append_and_a_new_months_shard_as_a_delta(data_dir: Path) -> None:
    store = mixed_store(data_dir)
    split(store)
    manager = IndexManager(resolve_locations(data_dir))
    assert manager.build().mode == "full"
    capture.remember(store, "Appended to the March shard", project="p", options=PLAIN)  # a new file: 2026-03
    report = manager.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 1)
    capture.remember(store, "Another in March", project="p", options=PLAIN)  # an append to that shard
    report = manager.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 1)
    store.add("decision", {"timestamp": "2025-02-02T00:00:00Z", "decision": "Late import into February"})
    report = manager.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 1)
    assert manager.staleness(manager.read_meta()[1]) is None  # type: ignore[index]
    assert manager.read_meta()[1].records == len(Store(data_dir).load().records)  # type: ignore[index]
    capture.retract(store, "dec-00000005", "gone")  # a rewrite of one shard: the full refresh
    assert manager.build().delta is False
    # An older version of a record appended to an earlier shard than the one holding it: the later file
    # wins in a load, so the delta (which would let the appended line win) is not taken.
    march = next(r for r in Store(data_dir).load().records.values() if r.title == "Another in March")
    with (data_dir / SHARDS / "2025-01.jsonl").open("ab") as handle:
        handle.write(decision(march.id, "An older text of Another in March", "2025-01-30T00:00:00Z"))
    assert manager.build().delta is False
    assert Store(data_dir).load().records[march.id].title == "Another in March"


def pool_truth(data_dir: Path) -> tuple[list[str], list[str]]:
    records = [r for r in Store(data_dir).load().of_kind("decision") if r.active]
    ids: set[str] = set()
    for path in [data_dir / DECISIONS, *sorted((data_dir / SHARDS).glob("*.jsonl"))]:
        if path.exists():
            content = path.read_bytes()
            ids.update(m.decode() for m in _ID_FIELD.findall(content[: content.rfind(b"\n") + 1]))
    return sorted(r.id for r in records), sorted(ids)


def pool_state(p: pool.DecisionPool, data_dir: Path) -> tuple[list[str], list[str]]:
    p.refresh(Store(data_dir))
    return sorted(p.ids[e] for e, alive in enumerate(p.live) if alive), sorted(p.file_ids)


def test_the_write_check_pool_follows_the_shards(data_dir: Path, tmp_path: Path) -> None:
    store = mixed_store(data_dir)
    split(store)
    p = pool.pool_for(data_dir, None)
    assert pool_state(p, data_dir) == pool_truth(data_dir)
    builds = p.builds
    capture.remember(store, "Written to a new month's shard", project="p", options=PLAIN)  # Store.add tells the pool
    capture.remember(store, "Written to the same shard", project="p", options=PLAIN)
    with (data_dir / SHARDS / "2025-05.jsonl").open("ab") as handle:  # another process appends to an older month
        handle.write(decision("dec-feed0001", "Appended by another clone", "2025-05-20T00:00:00Z"))
    assert pool_state(p, data_dir) == pool_truth(data_dir) and p.builds == builds
    assert pool_state(pool.DecisionPool(data_dir), data_dir) == pool_truth(data_dir)
    saved = tmp_path / "pool"
    p.save(saved)
    again = pool.DecisionPool(data_dir)
    assert again.load(saved) and pool_state(again, data_dir) == pool_truth(data_dir)
    found = p.records([p.position["dec-feed0001"], p.position["dec-00000003"]])
    assert found is not None and [r.raw["decision"] for r in found] == ["Appended by another clone", "Decision 3, revised"]
    # The duplicate check finds a record that lives in a shard.
    with pytest.raises(Exception, match="likely duplicate of dec-feed0001"):
        capture.remember(store, "Appended by another clone", project="p", rationale="because Appended by another clone",
                         options=WriteOptions(redact=False))  # fmt: skip

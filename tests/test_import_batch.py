"""Batched writes: `lore import` resumes after a kill, and stays safe beside another writer process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.importing import write_export
from lore.store import audit
from lore.store.store import NewEdge, Store


def lore(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "lore", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def audit_lines(data_dir: Path) -> int:
    path = data_dir / audit.AUDIT_PATH
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_add_many_and_link_many_write_like_add_and_link(initialised: Path) -> None:
    store = Store(initialised)
    records = store.add_many([
        ("decision", {"decision": "Use Redis streams", "project": "p"}),
        ("pattern", {"name": "Retry with jitter", "project": "p"}),
        ("lesson", {"kind": "lesson", "name": "Pin versions", "rule": "Pin versions", "project": "p"}),
        ("failure", {"error_message": "boom", "project": "p"}),
    ], op="import")  # fmt: skip
    ids = [r.id for r in records]
    edges = store.link_many([(ids[0], ids[1], "relates_to"), NewEdge(ids[2], ids[3], "derived_from", weight=0.5)])
    assert [(e.source, e.target, e.relation) for e in edges] == [(ids[0], ids[1], "relates_to"), (ids[2], ids[3], "derived_from")]
    snapshot = Store(initialised).load()
    assert set(ids) <= set(snapshot.records) and snapshot.warnings == []
    assert {(e.source, e.target, e.relation, e.weight) for e in snapshot.edges} == {
        (ids[0], ids[1], "relates_to", 1.0), (ids[2], ids[3], "derived_from", 0.5)}
    assert [e["op"] for e in audit.history(initialised)] == ["import"] * 4 + ["link"] * 2
    assert audit.verify(initialised) == (6, None)
    assert store.link_many([(ids[0], ids[1], "relates_to")]) and audit.verify(initialised)[0] == 6  # no change, no entry
    from lore.errors import UsageError

    with pytest.raises(UsageError):
        store.add_many([("decision", {"id": ids[0], "decision": "again"})])
    with pytest.raises(UsageError):
        store.link_many([(ids[0], ids[1], "relates_to"), (ids[0], ids[0], "relates_to")])
    assert len(Store(initialised).load().edges) == 2  # nothing of a refused batch was written


def test_add_many_refuses_a_patterns_file_that_did_not_parse(initialised: Path) -> None:
    from lore.errors import UnsafeRewriteError

    patterns = initialised / "patterns" / "data" / "patterns.yaml"
    patterns.write_text(patterns.read_text() + "  - {broken: [\n")
    before = patterns.read_bytes()
    with pytest.raises(UnsafeRewriteError):
        Store(initialised).add_many([("pattern", {"name": "x"}), ("decision", {"decision": "y"})])
    assert patterns.read_bytes() == before
    assert (initialised / "journal" / "data" / "decisions.jsonl").read_bytes() == b""


def test_import_killed_midway_resumes_on_rerun(initialised: Path, tmp_path: Path) -> None:
    export = tmp_path / "big.jsonl"
    write_export(export, 2500)
    process = lore("import", "lore-export", str(export))
    deadline = time.monotonic() + 60
    while audit_lines(initialised) == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    written = audit_lines(initialised)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the import finished before it could be interrupted"
    assert 0 < written < 2500
    partial = Store(initialised).load()
    assert partial.warnings == [] and 0 < len(partial.records) < 2500
    rerun = subprocess.run([sys.executable, "-m", "lore", "import", "lore-export", str(export)], capture_output=True)
    assert rerun.returncode == 0, rerun.stderr
    assert b"skipped (already present): " in rerun.stdout and b"skipped (already present): none" not in rerun.stdout
    done = Store(initialised).load()
    assert len(done.records) == 2500 and len(done.edges) == 1250 and done.warnings == []
    again = subprocess.run([sys.executable, "-m", "lore", "import", "lore-export", str(export)], capture_output=True)
    assert again.returncode == 0 and b"added: none" in again.stdout
    assert audit.verify(initialised)[1] is None


def test_batched_import_beside_another_writer_loses_nothing(initialised: Path, tmp_path: Path) -> None:
    export = tmp_path / "mid.jsonl"
    write_export(export, 600)
    writer = (
        "import sys\n"
        "from lore.store import Store\n"
        "store = Store(__import__('pathlib').Path(sys.argv[1]), actor='other')\n"
        "for i in range(40):\n"
        "    store.add('decision', {'decision': f'concurrent decision {i}', 'project': 'x'})\n"
        "    store.add('pattern', {'name': f'concurrent pattern {i}', 'project': 'x'})\n"
    )
    importing = lore("import", "lore-export", str(export))
    other = subprocess.Popen([sys.executable, "-c", writer, str(initialised)], stderr=subprocess.PIPE)
    assert other.wait(timeout=120) == 0, other.stderr.read() if other.stderr else ""
    assert importing.wait(timeout=120) == 0
    snapshot = Store(initialised).load()
    assert snapshot.warnings == [] and snapshot.duplicate_ids == {}
    assert len(snapshot.records) == 600 + 80 and len(snapshot.edges) == 300
    titles = {r.title for r in snapshot.records.values()}
    assert all(f"concurrent decision {i}" in titles and f"concurrent pattern {i}" in titles for i in range(40))
    assert audit.verify(initialised) == (600 + 80 + 300, None)

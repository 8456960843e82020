"""`lore sync` over month shards, and the faults of a team's sync: a refusing remote, a killed sync, a malformed line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from lore.interpreter import lore_argv
from lore.store import Store
from lore.store.layout import DECISIONS, shard_dir
from tests.sync_support import git, sync, teammate

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
SHARDS = shard_dir(DECISIONS)


def titles(clone: Path) -> list[str]:
    return sorted(r.title for r in Store(clone).load().records.values())


def founder(lore, tmp_path: Path, remote: Path) -> Path:  # type: ignore[no-untyped-def]
    """The teammate who starts the team's store: sharded from the start."""
    clone = tmp_path / "alice"
    lore(clone, "init", "--git", "--shard")
    sync(lore, clone, "--setup", str(remote))
    return clone


def add_dated(clone: Path, text: str, when: str) -> str:
    return Store(clone, actor="test").add("decision", {"timestamp": when, "decision": text}).id


def test_a_sharded_team_store_syncs_each_shard_on_its_own(lore, tmp_path: Path, remote: Path) -> None:
    alice = founder(lore, tmp_path, remote)
    bob = teammate(lore, tmp_path, "bob", remote)  # joins with the plain two commands
    assert (bob / SHARDS).is_dir()  # the layout came with the remote: bob's writes go to the shards
    assert git(alice, "check-attr", "merge", "journal/data/decisions/2026-03.jsonl").endswith("merge: lore")
    add_dated(alice, "Alice: March decision", "2026-03-02T10:00:00Z")
    add_dated(alice, "Alice: a month both begin", "2024-01-02T10:00:00Z")
    add_dated(bob, "Bob: March decision", "2026-03-03T10:00:00Z")
    add_dated(bob, "Bob: a month both begin", "2024-01-03T10:00:00Z")
    assert not (bob / DECISIONS).read_bytes()  # nothing went to bob's single file
    sync(lore, alice)
    report = sync(lore, bob)  # appends on both sides of two shards, one both began: no merge needed
    assert report["rebased"] and not report["merged"] and report["received"]["new"] == {"decision": 2}
    sync(lore, alice)
    assert titles(alice) == titles(bob) == ["Alice: March decision", "Alice: a month both begin",
                                            "Bob: March decision", "Bob: a month both begin"]  # fmt: skip
    january = (alice / SHARDS / "2024-01.jsonl").read_bytes()
    assert january == (bob / SHARDS / "2024-01.jsonl").read_bytes() and january.count(b"\n") == 2
    # An edit and an append in one shard go through the merge driver, which parses only that shard.
    march = {r.title: r.id for r in Store(alice).load().records.values()}
    lore(alice, "retract", march["Bob: March decision"], "--reason", "replaced")
    add_dated(bob, "Bob: another in March", "2026-03-20T10:00:00Z")
    sync(lore, alice)
    merged = sync(lore, bob)
    assert merged["merged"] and not merged["conflicts"]
    sync(lore, alice)
    for clone in (alice, bob):
        records = Store(clone).load().records
        assert records[march["Bob: March decision"]].status == "retracted"
        assert "Bob: another in March" in {r.title for r in records.values()}
    assert git(alice, "rev-parse", "HEAD") == git(bob, "rev-parse", "HEAD")


def test_a_clone_that_appended_to_the_single_file_meanwhile_loses_nothing_to_the_split(lore, tmp_path: Path,
                                                                                       remote: Path) -> None:  # fmt: skip
    alice = teammate(lore, tmp_path, "alice", remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    for i in range(3):
        lore(alice, "remember", f"Shared decision {i}")
    sync(lore, alice)
    sync(lore, bob)
    lore(bob, "remember", "Bob: written to the single file before the split arrived")
    lore(alice, "migrate", "--shard")
    sync(lore, alice)
    sync(lore, bob)  # alice emptied the single file, bob appended to it: the driver keeps bob's line
    sync(lore, alice)
    want = sorted([f"Shared decision {i}" for i in range(3)] + ["Bob: written to the single file before the split arrived"])
    assert titles(alice) == titles(bob) == want
    assert not Store(bob).load().duplicate_ids
    lore(bob, "migrate", "--shard")  # moves what the single file still holds
    lore(bob, "remember", "Bob: after the split")
    sync(lore, bob)
    sync(lore, alice)
    assert titles(alice) == titles(bob) == sorted([*want, "Bob: after the split"])
    assert not (alice / DECISIONS).read_bytes() and not (bob / DECISIONS).read_bytes()


# -- faults ------------------------------------------------------------------------------------------


def test_a_remote_that_rejects_pushes_loses_nothing_and_the_next_sync_recovers(lore, tmp_path: Path,
                                                                               remote: Path) -> None:  # fmt: skip
    alice = founder(lore, tmp_path, remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are closed for maintenance' >&2\nexit 1\n")
    hook.chmod(0o755)
    lore(alice, "remember", "Alice: written while the remote refuses")
    error = lore(alice, "sync", code=1).stderr
    assert "was refused" in error and "pushes are closed for maintenance" in error
    assert "remote's rules refused" in error and "check your access" not in error
    assert "Alice: written while the remote refuses" in titles(alice)  # in the files, and committed locally
    assert git(alice, "log", "-1", "--format=%s") == "lore: 1 new decision" and git(alice, "status", "--porcelain") == ""
    lore(bob, "remember", "Bob: written meanwhile")
    lore(bob, "sync", code=1)
    hook.unlink()
    assert sync(lore, alice)["pushed"]
    assert sync(lore, bob)["pushed"]
    sync(lore, alice)
    assert titles(alice) == titles(bob) == ["Alice: written while the remote refuses", "Bob: written meanwhile"]


def wait_for(path: Path, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate()[1].decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.parametrize("hook_name", ["post-commit", "pre-push"])
def test_a_sync_killed_mid_way_is_finished_by_the_next(lore, tmp_path: Path, remote: Path, hook_name: str) -> None:
    """Killed while it commits (holding the data dir's lock) or while it pushes: the next sync carries everything."""
    alice = founder(lore, tmp_path, remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    lore(bob, "remember", "Bob: already on the remote")
    sync(lore, bob)
    lore(alice, "remember", "Alice: written before the sync was killed")
    reached = tmp_path / "reached"
    hook = alice / ".git" / "hooks" / hook_name
    # The hook says it was reached, then waits (bounded) for a file nobody writes: the test kills the sync there.
    hook.write_text(f'#!/bin/sh\ntouch "{reached}"\ni=0\nwhile [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nexit 1\n')
    hook.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    process = subprocess.Popen(lore_argv("--data-dir", str(alice), "sync"), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        wait_for(reached, process)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the sync, its git and the hook, at once
        process.communicate()
    hook.unlink()
    lore(alice, "remember", "Alice: written after the kill")
    report = sync(lore, alice)
    assert report["pushed"]
    sync(lore, bob)
    want = ["Alice: written after the kill", "Alice: written before the sync was killed", "Bob: already on the remote"]
    assert titles(alice) == titles(bob) == want
    assert git(alice, "status", "--porcelain") == ""
    assert git(alice, "rev-parse", "HEAD") == git(remote, "rev-parse", "main")


def test_a_malformed_line_from_another_clone_is_named_and_loses_nothing(lore, tmp_path: Path, remote: Path) -> None:
    alice = founder(lore, tmp_path, remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    shared = add_dated(alice, "Alice: shared before", "2026-03-01T10:00:00Z")
    sync(lore, alice)
    sync(lore, bob)
    # Bob's clone writes two bad lines by hand into the March shard, between two good records.
    add_dated(bob, "Bob: good record one", "2026-03-02T10:00:00Z")
    march = bob / SHARDS / "2026-03.jsonl"
    with march.open("ab") as handle:
        handle.write(b'{"id": "dec-broken01", "decision": "cut off\n')
        handle.write(orjson.dumps({"id": "dec-nodecis1", "timestamp": "2026-03-02T11:00:00Z", "rationale": "no text"}) + b"\n")
    add_dated(bob, "Bob: good record two", "2026-03-03T10:00:00Z")
    lore(alice, "retract", shared, "--reason", "an edit on this side: the merge driver merges the shard")
    sent = sync(lore, bob)["warnings"]
    assert any(w.startswith("journal/data/decisions/2026-03.jsonl:3: invalid JSON") for w in sent), sent
    assert any(w.startswith("journal/data/decisions/2026-03.jsonl:4: field 'decision'") for w in sent), sent
    assert len(sent) == 2
    err = lore(alice, "sync").stderr  # exit 0: the records are merged, the bad lines named
    assert "Warning: journal/data/decisions/2026-03.jsonl:" in err and "invalid JSON" in err and "field 'decision'" in err
    records = Store(alice).load()
    assert {"Bob: good record one", "Bob: good record two", "Alice: shared before"} <= {r.title for r in records.records.values()}
    assert records.records[shared].status == "retracted"
    text = (alice / SHARDS / "2026-03.jsonl").read_bytes()
    assert b'"dec-broken01", "decision": "cut off' in text and b"dec-nodecis1" in text  # kept, not dropped
    warned = {(w.path.name, w.field) for w in records.warnings}
    assert ("2026-03.jsonl", None) in warned and ("2026-03.jsonl", "decision") in warned
    sync(lore, bob)
    assert (bob / SHARDS / "2026-03.jsonl").read_bytes() == text

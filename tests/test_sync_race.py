"""`lore sync` when clones race: a lost push is rebased cheaply and retried with backoff, a refusal says why."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from lore.interpreter import lore_argv
from lore.store import Store
from tests.sync_support import git, sync, teammate

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def titles(clone: Path) -> list[str]:
    return sorted(r.title for r in Store(clone).load().records.values())


def push_first_hook(clone: Path, other: Path, marker: Path, times: int) -> None:
    """Before each of ``clone``'s first ``times`` pushes, ``other`` records a decision and syncs: the push loses."""
    hook = clone / ".git" / "hooks" / "pre-push"
    hook.write_text(
        "#!/bin/sh\n"
        "unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE\n"
        f'n=$(cat "{marker}" 2>/dev/null || echo 0)\n'
        f'[ "$n" -ge {times} ] && exit 0\n'
        f'echo $((n + 1)) > "{marker}"\n'
        f'cd "{other}" || exit 1\n'
        f'"{sys.executable}" -m lore --data-dir "{other}" remember "Bob race $n" >/dev/null || exit 1\n'
        f'exec "{sys.executable}" -m lore --data-dir "{other}" sync >/dev/null\n'
    )
    hook.chmod(0o755)


def test_a_lost_push_puts_the_clones_records_on_top_of_the_remote_without_a_merge(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    lore(bob, "remember", "Bob: feature flags live in Unleash")
    sync(lore, bob)
    lore(alice, "remember", "Alice: dashboards live in Grafana")
    push_first_hook(alice, bob, tmp_path / "count", times=1)
    remote_before = git(remote, "rev-parse", "main")
    report = sync(lore, alice)
    assert report["pushed"] and report["push_attempts"] == 2 and report["rebased"] and not report["merged"]
    assert report["received"]["new"] == {"decision": 2}
    assert report["commit"] == git(alice, "rev-parse", "HEAD")
    # One line of history: Alice's commit sits on Bob's, no merge commit, and it went through the record count.
    assert git(alice, "rev-list", "--merges", f"{remote_before}..HEAD") == ""
    assert git(alice, "rev-list", "--count", f"{remote_before}..HEAD") == "2"  # Bob's race commit, then Alice's
    assert git(alice, "log", "-1", "--format=%s") == "lore: 1 new decision"
    assert git(remote, "rev-parse", "main") == git(alice, "rev-parse", "HEAD")
    sync(lore, bob)
    want = ["Alice: dashboards live in Grafana", "Bob race 0", "Bob: feature flags live in Unleash"]
    assert titles(alice) == titles(bob) == want
    assert git(alice, "status", "--porcelain") == ""


def test_an_edit_on_both_sides_still_goes_through_the_record_merge(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    lore(alice, "remember", "Use Kafka for the event bus")
    sync(lore, alice)
    bob = teammate(lore, tmp_path, "bob", remote)
    record_id = next(iter(Store(bob).load().records))
    Store(bob).update(record_id, lambda raw: raw.update(rationale="ordering per key"))
    sync(lore, bob)
    Store(alice).update(record_id, lambda raw: raw.update(outcome="validated"))
    report = sync(lore, alice)
    assert report["merged"] and not report["rebased"]
    raw = Store(alice).load().records[record_id].raw
    assert (raw["rationale"], raw["outcome"]) == ("ordering per key", "validated")


def test_a_remote_that_keeps_moving_ends_in_a_message_saying_so(lore, cli, tmp_path: Path, remote: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    alice = teammate(lore, tmp_path, "alice", remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    lore(alice, "remember", "Alice: dashboards live in Grafana")
    push_first_hook(alice, bob, tmp_path / "count", times=2)
    monkeypatch.setenv("LORE_SYNC_PUSH_ATTEMPTS", "2")
    error = lore(alice, "sync", code=1).stderr
    assert "lost the race 2 time(s)" in error and "another clone pushed first" in error
    assert "check your access" not in error and "commits are safe" in error
    # Nothing is lost: the next sync pushes the record, and both clones hold everything once.
    monkeypatch.delenv("LORE_SYNC_PUSH_ATTEMPTS")
    report = sync(lore, alice)
    assert report["pushed"]
    sync(lore, bob)
    assert titles(alice) == titles(bob) == ["Alice: dashboards live in Grafana", "Bob race 0", "Bob race 1"]


# A remote that refuses pushes: tests/test_sync_shards.py (named, nothing lost, the next sync recovers).


def test_clones_syncing_all_at_once_all_push_and_converge(lore, tmp_path: Path, remote: Path) -> None:
    # Six at once: a clone may lose five races in a row, which used to exhaust its attempts (git: "failed to update ref").
    clones = [teammate(lore, tmp_path, f"clone-{i}", remote) for i in range(6)]
    for i, clone in enumerate(clones):
        for n in range(2):
            lore(clone, "remember", f"clone {i} decision {n}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    running = [subprocess.Popen(lore_argv("--data-dir", str(c), "sync", "--json"), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in clones]  # fmt: skip
    reports = []
    for process in running:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err.decode()
        reports.append(orjson.loads(out))
    assert all(r["pushed"] for r in reports)
    for clone in clones:
        sync(lore, clone)
    want = sorted(f"clone {i} decision {n}" for i in range(6) for n in range(2))
    for clone in clones:
        assert titles(clone) == want  # none lost, none twice
        assert git(clone, "rev-parse", "HEAD") == git(remote, "rev-parse", "main")


def test_a_teammate_joining_takes_the_teams_record_files_byte_for_byte(lore, tmp_path: Path, remote: Path) -> None:
    alice = tmp_path / "alice"
    lore(alice, "init", "--git")
    # Newest first, as an import of a git log writes them: not the order a record merge would sort them in.
    lines = [orjson.dumps({"id": f"dec-{n:08x}", "timestamp": f"2026-03-{28 - n:02d}T10:00:00Z", "decision": f"choice {n}",
                           "rationale": "", "schema_version": 1}) for n in range(5)]  # fmt: skip
    (alice / "journal" / "data" / "decisions.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    sync(lore, alice, "--setup", str(remote))
    published = git(remote, "rev-parse", "main:journal/data/decisions.jsonl")
    bob = teammate(lore, tmp_path, "bob", remote)
    assert (bob / "journal" / "data" / "decisions.jsonl").read_bytes() == b"\n".join(lines) + b"\n"
    assert git(remote, "rev-parse", "main:journal/data/decisions.jsonl") == published  # no new blob of the whole file

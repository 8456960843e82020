"""`lore sync` end to end: a bare repository on disk as the team's remote, clones as teammates, real git."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lore import capture
from lore.capture import WriteOptions
from lore.store import Store
from lore.store.audit import history
from lore.store.layout import DECISIONS, GRAPH, PATTERNS
from tests.sync_support import git, sync, teammate

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
PLAIN = WriteOptions(check_duplicates=False)


def record_files(clone: Path) -> dict[str, bytes]:
    return {str(p.relative_to(clone)): p.read_bytes() for p in sorted(clone.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(clone).parts and "audit" not in p.relative_to(clone).parts
            and p.name != ".lore.lock"}  # fmt: skip


def at(hour: int) -> datetime:
    return datetime(2026, 3, 1, hour, tzinfo=UTC)


def test_setup_with_an_empty_remote_publishes(lore, tmp_path: Path, remote: Path) -> None:
    alice = tmp_path / "alice"
    lore(alice, "init", "--git")
    lore(alice, "remember", "Use Kafka for the event bus", "-r", "ordering per key")
    lore(alice, "learn", "Backoff with full jitter", "--solution", "sleep(random.uniform(0, cap))")
    # A path typed relative to the shell's directory, not to the data dir.
    report = sync(lore, alice, "--setup", os.path.relpath(remote))
    assert git(alice, "remote", "get-url", "origin") == str(remote.resolve())
    assert report["published"] and report["pushed"]
    assert report["committed"]["new"] == {"decision": 1, "pattern": 1}
    subject = git(alice, "log", "-1", "--format=%s")
    assert subject == "lore: 1 new decision, 1 new pattern"
    shared = git(remote, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert "journal/data/decisions.jsonl" in shared and "patterns/data/patterns.yaml" in shared
    # The audit log stays per clone and the lock is never shared.
    assert (alice / "audit" / "log.jsonl").exists() and (alice / ".lore.lock").exists()
    assert not [p for p in shared if p.startswith("audit/") or p.endswith(".lore.lock")]
    assert git(remote, "show", "main:journal/data/decisions.jsonl") == (alice / DECISIONS).read_text().strip()
    # Running it again is a no-op.
    again = sync(lore, alice)
    assert again["committed"] is None and not again["pushed"] and not again["merged"]


def test_an_index_inside_the_data_dir_is_never_synced(lore, cli, tmp_path: Path, remote: Path) -> None:
    alice = tmp_path / "alice"
    lore(alice, "init", "--git")
    lore(alice, "remember", "Use Kafka for the event bus")
    index = alice / "search-index"
    assert cli("--data-dir", str(alice), "--index-dir", str(index), "search", "kafka").exit_code == 0
    assert any(index.iterdir())
    result = cli("--data-dir", str(alice), "--index-dir", str(index), "sync", "--setup", str(remote))
    assert result.exit_code == 0, result.stderr
    shared = git(remote, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert not [p for p in shared if p.startswith("search-index/")]
    assert git(alice, "status", "--porcelain") == ""


def test_setup_with_a_full_remote_merges_both_histories(lore, tmp_path: Path, remote: Path) -> None:
    alice = tmp_path / "alice"
    lore(alice, "init", "--git")
    lore(alice, "remember", "Use Kafka for the event bus")
    sync(lore, alice, "--setup", str(remote))
    # Bob has kept a memory on his own for a while, without git.
    bob = tmp_path / "bob"
    lore(bob, "init")
    lore(bob, "-P", "billing", "remember", "Charge through Stripe's idempotency keys")
    lore(bob, "-P", "billing", "fail", "Timeout", "stripe sandbox hung")
    lore(bob, "init", "--git")
    report = sync(lore, bob, "--setup", str(remote))
    assert report["merged"] and report["pushed"] and not report["published"]
    assert report["committed"]["new"] == {"decision": 1, "failure": 1}
    assert report["received"]["new"] == {"decision": 1}
    assert report["received"]["new_by_project"] == {"decision": {"acme-api": 1}}
    assert len(git(bob, "rev-list", "--max-parents=0", "HEAD").splitlines()) == 2  # both histories kept
    report = sync(lore, alice)
    assert report["received"]["new"] == {"decision": 1, "failure": 1}
    assert record_files(alice) == record_files(bob)
    titles = sorted(r.title for r in Store(alice).load().records.values())
    assert titles == ["Charge through Stripe's idempotency keys", "Timeout: stripe sandbox hung", "Use Kafka for the event bus"]
    for clone in (alice, bob):
        lore(clone, "doctor")


def test_the_text_report_counts_what_came_in_by_type_and_project(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    lore(alice, "-P", "billing", "remember", "Charge through Stripe's idempotency keys")
    lore(alice, "-P", "billing", "remember", "Invoices render with WeasyPrint")
    lore(alice, "-P", "infra", "remember", "CI runs on self-hosted runners")
    lore(alice, "-P", "infra", "observe", "CI cache misses every Monday")
    assert "Committed 3 new decisions, 1 new observation" in lore(alice, "sync").stdout
    out = lore(bob, "sync").stdout
    assert "Received from origin/main: 3 new decisions (billing 2, infra 1), 1 new observation (infra 1)" in out


def test_concurrent_edits_to_one_pattern_merge_by_field_and_the_newest_wins(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    written = capture.learn(Store(alice), "Backoff with full jitter", project="acme-api",
                            solution="sleep(random.uniform(0, cap))", options=PLAIN)  # fmt: skip
    pattern_id = written.record.id
    sync(lore, alice)
    bob = teammate(lore, tmp_path, "bob", remote)
    assert pattern_id in Store(bob).load().records

    # Alice, at 10:00: a better solution, a field of her own, and a retraction reason.
    def alice_edit(raw: dict[str, Any]) -> None:
        raw["solution"] = "sleep(random.uniform(0, min(cap, base * 2 ** attempt)))"
        raw["x_reviewed_by"] = "alice"
        raw["status"] = "retracted"
        raw["retracted_reason"] = "superseded by the retry library"

    Store(alice, clock=lambda: at(10)).update(pattern_id, alice_edit)
    # Bob, at 11:00 (newer): a validation, his own field, and another retraction reason.
    Store(bob, clock=lambda: at(11)).update(pattern_id, lambda raw: raw.update(
        validations=1, confidence=0.6, x_owner="bob", status="retracted", retracted_reason="wrong for idempotent calls"))
    sync(lore, alice)
    report = sync(lore, bob)
    assert [c["id"] for c in report["conflicts"]] == [pattern_id]
    assert report["conflicts"][0]["fields"] == ["retracted_reason"]
    sync(lore, alice)
    merged = Store(bob).load().records[pattern_id].raw
    assert merged["solution"].startswith("sleep(random.uniform(0, min(cap")  # only Alice changed it
    assert merged["validations"] == 1 and merged["confidence"] == 0.6  # only Bob changed them
    assert merged["x_reviewed_by"] == "alice" and merged["x_owner"] == "bob"  # both sides' own fields
    assert merged["retracted_reason"] == "wrong for idempotent calls"  # both changed it: the newest edit
    assert merged["updated_at"] == "2026-03-01T11:00:00Z"
    assert record_files(alice) == record_files(bob)
    # The losing version is kept in the audit log of the clone that merged.
    (entry,) = [e for e in history(bob, pattern_id) if e["op"] == "sync"]
    assert entry["detail"]["lost"]["retracted_reason"] == "superseded by the retry library"
    assert entry["detail"]["conflict"] == ["retracted_reason"]
    for clone in (alice, bob):
        assert "No problems found" in lore(clone, "doctor").stdout  # the audit chain is intact too


def test_an_id_minted_on_two_clones_is_renamed_with_its_edges(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    shared = capture.remember(Store(alice), "Postgres is the system of record", project="acme-api", options=PLAIN).record
    sync(lore, alice)
    bob = teammate(lore, tmp_path, "bob", remote)
    duplicate = "dec-0badc0de"
    mine: dict[str, str] = {}
    for clone, text in ((alice, "Alice: events go through Kafka"), (bob, "Bob: events go through NATS")):
        store = Store(clone)
        store.add("decision", {"id": duplicate, "timestamp": "2026-03-01T09:00:00Z", "decision": text,
                               "project": "acme-api"})  # fmt: skip
        own = capture.remember(store, f"{text.split(':')[0]}'s follow-up on the event bus", project="acme-api",
                               options=PLAIN).record  # fmt: skip
        mine[text] = own.id
        store.link(own.id, duplicate, "depends_on")  # an edge only this clone drew
        store.link(duplicate, shared.id, "relates_to")  # an edge both clones drew
    sync(lore, alice)
    report = sync(lore, bob)
    (rename,) = report["renames"]
    assert rename["from"] == duplicate and rename["edges_moved"] == 2
    sync(lore, alice)
    assert record_files(alice) == record_files(bob)
    snapshot = Store(alice).load()
    by_title = {r.title: r for r in snapshot.records.values()}
    kafka, nats = by_title["Alice: events go through Kafka"], by_title["Bob: events go through NATS"]
    assert {kafka.id, nats.id} == {duplicate, rename["to"]}
    edges = {(e.source, e.target, e.relation) for e in snapshot.edges}
    assert edges == {
        (mine["Alice: events go through Kafka"], kafka.id, "depends_on"),
        (mine["Bob: events go through NATS"], nats.id, "depends_on"),
        (kafka.id, shared.id, "relates_to"),
        (nats.id, shared.id, "relates_to"),
    }
    assert not snapshot.duplicate_ids
    for clone in (alice, bob):
        assert "No problems found" in lore(clone, "doctor").stdout
    renamed_audit = [e for e in history(bob, rename["to"]) if e["op"] == "sync"]
    assert renamed_audit and renamed_audit[0]["detail"]["renamed_from"] == duplicate


def test_a_rejected_push_is_merged_and_retried(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    lore(bob, "remember", "Bob: feature flags live in Unleash")
    lore(alice, "remember", "Alice: dashboards live in Grafana")
    # Bob pushes while Alice's push is on its way: git's pre-push hook runs after Alice's
    # sync fetched and merged, so her first push is refused by the remote.
    marker = tmp_path / "bob-pushed"
    hook = alice / ".git" / "hooks" / "pre-push"
    hook.write_text(
        "#!/bin/sh\n"
        "unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE\n"
        f'[ -e "{marker}" ] && exit 0\n'
        f'touch "{marker}"\n'
        f'cd "{bob}" && exec "{sys.executable}" -m lore --data-dir "{bob}" sync >/dev/null\n'
    )
    hook.chmod(0o755)
    report = sync(lore, alice)
    assert marker.exists()
    assert report["pushed"] and report["push_attempts"] == 2
    assert report["received"]["new"] == {"decision": 1}
    sync(lore, bob)
    for clone in (alice, bob):
        titles = sorted(r.title for r in Store(clone).load().records.values())
        assert titles == ["Alice: dashboards live in Grafana", "Bob: feature flags live in Unleash"]
    assert git(remote, "rev-parse", "main") == git(alice, "rev-parse", "HEAD") == git(bob, "rev-parse", "HEAD")


def _state(clone: Path, remote: Path) -> tuple[Any, ...]:
    files = {str(p.relative_to(clone)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(clone.rglob("*")) if p.is_file() and ".git" not in p.relative_to(clone).parts}  # fmt: skip
    return (files, git(clone, "for-each-ref"), git(clone, "status", "--porcelain"), git(clone, "rev-parse", "HEAD"),
            git(remote, "for-each-ref"), sorted(os.listdir(clone / ".git")))  # fmt: skip


def test_dry_run_changes_nothing(lore, tmp_path: Path, remote: Path) -> None:
    alice = teammate(lore, tmp_path, "alice", remote)
    bob = teammate(lore, tmp_path, "bob", remote)
    lore(bob, "-P", "billing", "remember", "Bob: invoices render with WeasyPrint")
    sync(lore, bob)
    lore(alice, "remember", "Alice: dashboards live in Grafana")
    before = _state(alice, remote)
    report = sync(lore, alice, "--dry-run")
    assert _state(alice, remote) == before
    assert report["dry_run"] and report["committed"]["new"] == {"decision": 1}
    assert report["received"]["new_by_project"] == {"decision": {"billing": 1}}
    assert report["outgoing_commits"] >= 1 and not report["pushed"]
    out = lore(alice, "sync", "--dry-run").stdout
    assert "Would commit 1 new decision" in out and "Would receive from origin/main: 1 new decision (billing 1)" in out
    assert _state(alice, remote) == before


def test_errors_name_what_is_wrong(lore, cli, tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    lore(plain, "init")
    result = lore(plain, "sync", code=1)
    assert f"Error: {plain} is not a git repository" in result.stderr and "lore sync --setup URL" in result.stderr

    lonely = tmp_path / "lonely"
    lore(lonely, "init", "--git")
    result = lore(lonely, "sync", code=1)
    assert f"Error: {lonely} has no git remote to sync with" in result.stderr and "--setup URL" in result.stderr
    assert "no git remote named 'upstream'" in lore(lonely, "sync", "--remote", "upstream", code=1).stderr

    unreachable = lore(lonely, "sync", "--setup", str(tmp_path / "nowhere.git"), code=1).stderr
    assert "Error: cannot reach the remote 'origin'" in unreachable
    elsewhere = lore(lonely, "sync", "--setup", str(remote), code=1).stderr
    assert "already points at" in elsewhere

    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    inside = project / "memory"
    assert "registered lore's merge driver there" in lore(inside, "init", "--git").stdout
    assert not (inside / ".git").exists()  # no repository nested in the project's
    assert "merge-driver" in git(project, "config", "merge.lore.driver")
    assert "is inside the git repository" in lore(inside, "sync", code=1).stderr

    assert "--dry-run cannot be combined with --setup" in lore(lonely, "sync", "--setup", "x", "--dry-run", code=2).stderr

    empty_path = tmp_path / "no-git-here"
    empty_path.mkdir()
    monkeypatch.setenv("PATH", str(empty_path))
    result = lore(lonely, "sync", code=1)
    assert "Error: git is not installed" in result.stderr
    assert "Traceback" not in result.stderr


def test_init_git_registers_the_driver_and_replaces_the_union_line(lore, tmp_path: Path) -> None:
    clone = tmp_path / "old"
    clone.mkdir()
    (clone / ".gitattributes").write_text("# Appends from two clones merge by keeping both sides' lines (lore init --git).\n"
                                          "*.jsonl merge=union\n*.png binary\n")  # fmt: skip
    out = lore(clone, "init", "--git").stdout
    assert "initialised a git repository" in out
    attributes = (clone / ".gitattributes").read_text().splitlines()
    assert "*.jsonl merge=union" not in attributes and "*.png binary" in attributes
    assert "*.jsonl merge=lore" in attributes and "graph/data/graph.json merge=lore" in attributes
    assert git(clone, "check-attr", "merge", str(PATTERNS)).endswith("merge: lore")
    assert git(clone, "check-attr", "merge", str(GRAPH)).endswith("merge: lore")
    assert "merge-driver %O %A %B %P" in git(clone, "config", "merge.lore.driver")
    assert set((clone / ".gitignore").read_text().split()) >= {".lore.lock", "audit/", "backups/"}

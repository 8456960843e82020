"""`lore sync` keeps the clone's and an on-disk remote's objects packed: a record file's versions are deltas."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def objects(repository: Path) -> dict[str, int]:
    counts = {}
    for line in git(repository, "count-objects", "-v").splitlines():
        key, _, value = line.partition(":")
        counts[key.strip()] = int(value.strip())
    return counts


def object_bytes(git_dir: Path) -> int:
    return sum(p.stat().st_size for p in (git_dir / "objects").rglob("*") if p.is_file())


def test_syncs_of_a_few_records_add_deltas_not_copies_of_the_record_file(lore, tmp_path: Path) -> None:
    remote = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    alice = tmp_path / "alice"
    lore(alice, "init", "--git")
    # Text that compresses about as little as real records' does (digests), so a copy of the file weighs.
    lines = [orjson.dumps({"id": f"dec-{n:08x}", "timestamp": "2026-03-01T10:00:00Z", "decision": f"choice {n}",
                           "rationale": " ".join(hashlib.sha256(f"{n}-{k}".encode()).hexdigest() for k in range(4)),
                           "schema_version": 1}) for n in range(3000)]  # fmt: skip
    (alice / "journal" / "data" / "decisions.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    lore(alice, "sync", "--setup", str(remote))
    assert git(remote, "config", "receive.unpackLimit") == "1" and git(remote, "config", "gc.autoPackLimit") == "1"
    assert git(remote, "config", "gc.pruneExpire") == "1.hour.ago"

    def sync_until_repacked(start: int) -> int:
        """One-record syncs until one repacks; how many it took."""
        for n in range(1, 11):
            lore(alice, "remember", f"Decision number {start + n} of the week")
            report = orjson.loads(lore(alice, "sync", "--json").stdout)
            assert report["pushed"]
            # Loose objects never outweigh the pack more than 4 times (plus the sync that tipped it).
            counts = objects(alice)
            assert counts["size"] <= 4 * max(counts["size-pack"], 256) + 1024 or report["repacked"]
            if report["repacked"]:
                return n
        raise AssertionError("no sync repacked")

    sync_until_repacked(0)
    before = object_bytes(alice / ".git")
    took = sync_until_repacked(100)
    # Each one-record sync left a whole compressed copy of the 1.2 MB file (~0.6 MB); the repack turns
    # them into deltas: a few KB for all of them.
    assert took >= 2
    grown = object_bytes(alice / ".git") - before
    assert grown < 40_000, grown
    assert objects(alice)["count"] == 0 and objects(alice)["packs"] == 1
    # The remote keeps each push as a pack and its `gc --auto` (run by git after a push, in the
    # background) folds them into one.
    deadline = time.monotonic() + 60
    while (objects(remote)["count"], objects(remote)["packs"]) != (0, 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (objects(remote)["count"], objects(remote)["packs"]) == (0, 1)
    assert object_bytes(remote) < 1.2 * object_bytes(alice / ".git")


def test_a_remote_administrators_own_setting_is_kept(lore, tmp_path: Path) -> None:
    remote = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(remote, "config", "receive.unpackLimit", "50")
    alice = tmp_path / "alice"
    lore(alice, "init", "--git")
    lore(alice, "remember", "Use Kafka for the event bus")
    lore(alice, "sync", "--setup", str(remote))
    assert git(remote, "config", "receive.unpackLimit") == "50" and git(remote, "config", "gc.autoPackLimit") == "1"

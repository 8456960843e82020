"""After `lore sync` pulls a few records, the index refresh is a delta segment, not a rebuild."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from lore.index.manager import IndexManager
from tests.conftest import resolve_locations

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def test_a_pull_of_a_few_records_refreshes_the_index_by_a_delta(lore, tmp_path: Path) -> None:
    remote = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for clone in (alice, bob):
        lore(clone, "init", "--git")
        lore(clone, "sync", "--setup", str(remote))
    for n in range(8):
        lore(alice, "remember", f"Team decision {n} about postgres connection pooling", "-r", f"incident {n}")
    lore(alice, "sync")
    lore(bob, "sync")
    index = IndexManager(resolve_locations(bob))
    assert index.build().mode == "full"

    # A fast-forward: bob has nothing of his own.
    for n in range(3):
        lore(alice, "remember", f"Alice decision {n} about kafka consumer lag")
    lore(alice, "sync")
    assert sum(orjson.loads(lore(bob, "sync", "--json").stdout)["received"]["new"].values()) == 3
    report = index.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 3)

    # A rebase: bob's own record, already indexed, ends after the ones he pulls.
    lore(bob, "remember", "Bob decision about redis cache eviction")
    assert index.build().delta
    for n in range(3, 6):
        lore(alice, "remember", f"Alice decision {n} about terraform state locking")
    lore(alice, "sync")
    pulled = orjson.loads(lore(bob, "sync", "--json").stdout)
    assert pulled["rebased"] and sum(pulled["received"]["new"].values()) == 3
    report = index.build()
    assert (report.mode, report.delta, report.added) == ("incremental", True, 3)
    assert "Alice decision 5" in lore(bob, "search", "terraform state locking", "--json").stdout

"""The team harness (`python -m benchmarks --only team`) end to end on a tiny store: it runs and converges.

No threshold on any timing: the figures are the harness's to print. Skipped without the shared corpus.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import shared_dir

SHARED = shared_dir(required=False)
pytestmark = [pytest.mark.skipif(SHARED is None, reason="shared benchmark data (../shared) not available"),
              pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")]  # fmt: skip


def test_the_quick_team_harness_converges_on_a_tiny_store(tmp_path: Path) -> None:
    from benchmarks import team_sync
    from benchmarks.report import team_table

    assert SHARED is not None
    settings = team_sync.TeamSettings(clones=2, records=40, rounds=1, per_round=1)
    result = team_sync.run(SHARED, tmp_path / "team", settings)
    assert result["identical"] and result["same_commit"]
    assert (result["lost"], result["duplicated"], result["gave_up"]) == (0, 0, 0)
    assert result["records_synced"] == 2 * 2
    assert all(c["records"] == 40 + 4 for c in result["per_clone"])
    assert result["racing"]["n"] == 2 and result["alone"]["n"] == 2
    # The searching clone pulled the others' records, and its index took them in by a delta.
    assert result["search"]["pulled"] >= 1 and result["search"]["after_pull"]["delta"]
    assert team_table(result).row_count >= 10
    # The store was split into month shards before it was published; the rounds' records went to this month's.
    assert result["settings"]["sharded"] and result["shards"] >= 2 and result["migrate_seconds"] is not None

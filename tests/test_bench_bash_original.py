"""The bench's stand-in for the original bash Lore's `lore search`: its FTS5 tables and query via the sqlite3 CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import bash_original, corpora

pytestmark = pytest.mark.skipif(shutil.which("sqlite3") is None, reason="sqlite3 CLI not installed (CI installs it)")


def _data_dir(root: Path) -> Path:
    raws = [
        corpora.decision_raw("dec-00000001", "2026-01-01T00:00:00Z", "Use WAL mode for the cache database",
                             "Readers no longer block the writer", tags=["cache/db.py", "sqlite"]),
        corpora.decision_raw("dec-00000002", "2026-01-02T00:00:00Z", "Retry fetches over http with backoff",
                             "The mirror's server drops idle connections", tags=[]),
        corpora.decision_raw("dec-00000003", "2026-01-03T00:00:00Z", "Put the cache database in WAL mode (old)",
                             "Superseded by dec-00000001", tags=["cache/db.py"]),
        corpora.decision_raw("dec-00000004", "2026-01-04T00:00:00Z", "Don't cache the user's token",
                             "It leaked into a backup", tags=["auth"]),
    ]  # fmt: skip
    raws[2]["status"] = "superseded"
    raws[3]["lesson_learned"] = "Secrets stay out of caches"
    corpora.write_decisions(root / "data", raws)
    return root / "data"


def test_builds_the_original_tables_and_finds_the_record(tmp_path: Path) -> None:
    data_dir = _data_dir(tmp_path)
    db = tmp_path / "search.db"
    assert bash_original.build_fts_db(data_dir, db) == 3  # the superseded decision is skipped, as the original does

    rows = bash_original.search(db, "backoff")
    assert [(r[0], r[1]) for r in rows] == [("decision", "dec-00000002")]
    assert rows[0][3] == "lore"  # no tags: the original's default project

    # Every word must match (the original quotes each word: an implicit AND), in any FTS column.
    assert [r[1] for r in bash_original.search(db, "WAL writer")] == ["dec-00000001"]
    assert bash_original.search(db, "WAL backoff") == []
    # Quotes and FTS5 operators in the query are words, not syntax.
    assert [r[1] for r in bash_original.search(db, "user's token")] == ["dec-00000004"]
    assert bash_original.search(db, 'cache AND "NEAR"') == []

    # The row as the original's loader writes it: tags joined, first tag as project, importance 4 with a lesson.
    import subprocess

    stored = subprocess.run(["sqlite3", "-separator", "\t", str(db),
                             "SELECT id, tags, project, importance FROM decisions ORDER BY rowid"],
                            capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    assert stored == ["dec-00000001\tcache/db.py, sqlite\tcache/db.py\t3", "dec-00000002\t\tlore\t3",
                      "dec-00000004\tauth\tauth\t4"]  # fmt: skip


def test_baselines_time_the_sqlite3_query_and_note_a_missing_checkout(tmp_path: Path) -> None:
    from benchmarks import latency

    data_dir = _data_dir(tmp_path)
    got = bash_original.baselines(data_dir, tmp_path / "work", {"PATH": "/usr/bin:/bin"})
    assert got.records == 3
    assert any(bash_original.ENV_CHECKOUT in note and "not set" in note for note in got.notes)
    rows = got.commands("Retry fetches with backoff", "backoff")
    assert set(rows) == {bash_original.SQLITE_ROW, bash_original.SQLITE_WORD_ROW}
    for name, (command, stdin, env) in rows.items():
        sample = latency.run_once(command, env, tmp_path, stdin)
        assert sample.returncode == 0
        assert bash_original.result_lines(name, sample.stdout) == 1 and b"dec-00000002" in sample.stdout

    elsewhere = bash_original.baselines(data_dir, tmp_path / "work2", {bash_original.ENV_CHECKOUT: str(tmp_path)})
    assert any("does not hold lore.sh" in note for note in elsewhere.notes)
    assert set(elsewhere.commands("q", "q")) == {bash_original.SQLITE_ROW, bash_original.SQLITE_WORD_ROW}

"""`lore bench`: the installed lore's measurement of the user's own store (lore.measure).

Structure only, never a timing threshold. Every run checks that the data, index, state
and cache dirs are exactly as they were: the command is read only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from lore.measure import (
    FLOOR,
    HOOK_COLD,
    HOOK_TRIVIAL,
    HOOK_WARM,
    INDEX_FIRST,
    INDEX_NOOP,
    SEARCH,
    sample_queries,
    write_row,
)

FIGURES = {"p50", "p95", "min", "max", "n"}
PROCESS_FIGURES = FIGURES | {"ratio_to_python", "p95_ratio_to_python", "failures", "injected_share"}
KEYS = {"data_dir", "index_dir", "records", "index_bytes", "index", "runs", "queries", "timings", "notes",
        "first_search_ms", "your_helper", "prompts", "writes"}  # fmt: skip
WRITE_FIGURES = FIGURES | {"python -c pass p50", "ratio_to_python_floor", "cpu_ms_p50", "python -c pass cpu_ms_p50",
                           "peak_rss_mib", "exit_codes"}  # fmt: skip
KINDS = ("remember", "learn", "lesson", "handoff")


def tree(*roots: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``roots``: its modification time and a digest of its bytes."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            if path.is_file():
                found[str(path)] = (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary dirs the command makes, in a directory of this test's own (to see it removes them).

    A short path: the helper's socket lies in there, and a Unix socket's path holds at most 107 bytes.
    """
    where = Path(tempfile.mkdtemp(prefix="lb-"))
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def user_dirs() -> list[Path]:
    return [Path(os.environ[name]) for name in ("LORE_DATA_DIR", "LORE_INDEX_DIR", "LORE_STATE_DIR", "LORE_CACHE_DIR")]


def bench_json(cli, *args: str) -> dict:  # type: ignore[no-untyped-def]
    result = cli("bench", "--runs", "2", "--json", *args)
    assert result.exit_code == 0, result.output + result.stderr
    return orjson.loads(result.stdout)


def test_the_figures_of_a_store_with_the_helper_off(indexed: Path, cli, private_tmp: Path) -> None:  # type: ignore[no-untyped-def]
    before = tree(*user_dirs())
    got = bench_json(cli)
    assert tree(*user_dirs()) == before
    assert list(private_tmp.iterdir()) == []
    assert set(got) == KEYS
    assert got["prompts"]["prompts"] == 0 and got["prompts"]["days"] == 7  # what the hook handed lately: nothing here
    assert (got["data_dir"], got["index_dir"]) == (str(indexed.resolve()), os.environ["LORE_INDEX_DIR"])
    assert (got["records"], got["index"], got["runs"]) == (23, "up to date", 2) and got["index_bytes"] > 0
    assert 1 <= len(got["queries"]) <= 5 and all(3 <= len(q.split()) <= 8 for q in got["queries"])
    timings = got["timings"]
    assert set(timings) == {SEARCH, FLOOR, HOOK_COLD, INDEX_FIRST, INDEX_NOOP}  # the hooks start no helper here
    assert set(timings[SEARCH]) == set(timings[FLOOR]) == set(timings[INDEX_NOOP]) == FIGURES
    assert set(timings[HOOK_COLD]) == PROCESS_FIGURES and set(timings[INDEX_FIRST]) == FIGURES | {"mode"}
    assert timings[SEARCH]["n"] == 2 * len(got["queries"])
    assert (timings[FLOOR]["n"], timings[HOOK_COLD]["n"], timings[INDEX_NOOP]["n"], timings[INDEX_FIRST]["n"]) == (2, 2, 2, 1)
    assert timings[HOOK_COLD]["failures"] == 0 and timings[INDEX_FIRST]["mode"] == "up-to-date"
    assert any("warm helper not timed" in note for note in got["notes"])
    assert got["your_helper"] == {"running": False, "pid": None}
    # The writes, on a copy of the data: each kind without a helper (the hooks start none here), each run written.
    writes = got["writes"]["commands"]
    assert list(writes) == [write_row(kind, warm=False) for kind in KINDS], got["writes"]["notes"]
    for figures in writes.values():
        assert set(figures) == WRITE_FIGURES and figures["exit_codes"] == {"0": 2} and figures["n"] == 2


def test_the_table(indexed: Path, cli, private_tmp: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("bench", "--runs", "1")
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"23 records in {indexed.resolve()}; index ") and lines[0].endswith(
        "(up to date), 1 runs over 5 queries from your titles")
    assert lines[1] == "lore on your store (ms)"
    header = next(line for line in lines if "measure" in line)
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == ["measure", "p50", "p95", "x python", "n", "note"]
    rows = [line.split("│")[1].strip() for line in lines if line.startswith("│") and line.split("│")[1].strip()]
    assert rows == [SEARCH, FLOOR, HOOK_COLD, INDEX_FIRST, INDEX_NOOP, *(write_row(kind, warm=False) for kind in KINDS)]
    assert "first search in process (opens the index, loads the model): " in result.stdout
    assert "your warm helper: not running" in result.stdout


def test_a_stale_index_is_refreshed_in_the_copy_only(indexed: Path, cli, private_tmp: Path) -> None:  # type: ignore[no-untyped-def]
    from lore import capture
    from lore.capture import WriteOptions
    from lore.store import Store

    capture.remember(Store(indexed, actor="test"), "Pin the Redis client to 5.x until the cluster upgrade lands",
                     project="acme-api", options=WriteOptions(check_duplicates=False))  # fmt: skip
    before = tree(*user_dirs())
    got = bench_json(cli, "--no-writes")
    assert tree(*user_dirs()) == before
    assert got["records"] == 24 and got["index"] != "up to date" and "writes" not in got
    assert got["timings"][INDEX_FIRST]["mode"] not in ("up-to-date", "full")


def test_without_an_index_the_copy_is_built(indexed: Path, cli, private_tmp: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.rmtree(os.environ["LORE_INDEX_DIR"])
    before = tree(*user_dirs())
    got = bench_json(cli, "--no-writes")
    assert tree(*user_dirs()) == before and not Path(os.environ["LORE_INDEX_DIR"]).exists()
    assert (got["index"], got["index_bytes"], got["timings"][INDEX_FIRST]["mode"]) == ("no usable index", 0, "full")
    assert any("no usable index" in note for note in got["notes"])


def test_with_the_helper_on_the_warm_hook_is_timed_on_a_helper_of_its_own(indexed: Path, cli, private_tmp: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.delenv("LORE_SERVER")  # the hooks' default: they start a helper
    before = tree(*user_dirs())
    got = bench_json(cli)
    assert tree(*user_dirs()) == before
    assert list(private_tmp.iterdir()) == []  # the helper was stopped and its dirs removed
    timings = got["timings"]
    assert set(timings) == {SEARCH, FLOOR, HOOK_COLD, HOOK_WARM, HOOK_TRIVIAL, INDEX_FIRST, INDEX_NOOP}, got["notes"]
    assert set(timings[HOOK_WARM]) == PROCESS_FIGURES and timings[HOOK_WARM]["n"] == 2
    # The trivial prompt is refused before any search: it injects nothing, and fails nothing.
    assert timings[HOOK_TRIVIAL]["n"] == 2 and timings[HOOK_TRIVIAL]["failures"] == 0
    assert timings[HOOK_TRIVIAL]["injected_share"] == 0
    assert timings[HOOK_WARM]["failures"] == 0 and timings[FLOOR]["n"] == 4  # a floor beside each hook round
    assert not any("warm helper" in note for note in got["notes"])
    writes = got["writes"]
    assert list(writes["commands"]) == [write_row(kind, warm) for warm in (False, True) for kind in KINDS], writes["notes"]
    assert all(figures["exit_codes"] == {"0": 2} for figures in writes["commands"].values())
    assert not any("the helper ran" in note for note in writes["notes"])  # every warm write was the helper's


def test_an_empty_store_and_a_missing_one_are_clear_errors(data_dir: Path, cli) -> None:  # type: ignore[no-untyped-def]
    missing = cli("bench")
    assert missing.exit_code != 0 and missing.stderr.startswith("Error: ")
    assert cli("init").exit_code == 0
    empty = cli("bench")
    assert empty.exit_code == 1
    assert empty.stderr.startswith(f"Error: no record in {data_dir} has a title of three words or more to search for")


def test_the_help_names_the_harness_of_the_checkout(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("bench", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "python -m benchmarks" in text and "Read only" in text
    for option in ("--runs", "--json"):
        assert option in text
    for gone in ("--quick", "--only", "--sets", "--sizes", "--keep", "--out"):
        assert gone not in text


def test_the_queries_are_spread_over_the_titles_and_the_same_on_every_run() -> None:
    titles = [f"Decision number {i} about the retry policy of service {i}" for i in range(100)] + ["too short", ""]
    picked = sample_queries(titles)
    assert picked == sample_queries(list(reversed(titles))) and len(picked) == 5
    assert all(len(q.split()) == 8 for q in picked) and len(set(picked)) == 5
    assert sample_queries(["one two three", "one two three", "x y"]) == ["one two three"]


def test_lore_bench_as_a_user_runs_it_a_process_of_its_own(indexed: Path) -> None:
    """`lore bench --json` as a process (python -P, from another directory): the same figures, the store untouched."""
    import subprocess
    import sys

    before = tree(*user_dirs())
    scratch = Path(tempfile.mkdtemp(prefix="lb-"))  # a short path: the helper's socket may lie in there
    done = subprocess.run([sys.executable, "-P", "-m", "lore", "bench", "--runs", "1", "--json"], cwd=scratch,
                          capture_output=True, timeout=600, env={**os.environ, "TMPDIR": str(scratch)})  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    got = orjson.loads(done.stdout)
    assert set(got) == KEYS and got["records"] == 23 and got["timings"][HOOK_COLD]["failures"] == 0
    writes = got["writes"]["commands"]  # real write processes, on the copy of the data
    assert list(writes) == [write_row(kind, warm=False) for kind in KINDS]
    assert all(figures["exit_codes"] == {"0": 1} for figures in writes.values()), writes
    assert tree(*user_dirs()) == before
    assert list(scratch.iterdir()) == []  # its temporary copies are gone
    scratch.rmdir()

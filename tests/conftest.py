"""Every test runs in its own temporary data dir, index dir, state and cache dirs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(os.environ.get("LORE_SHARED_DIR", PROJECT_ROOT.parent / "shared"))
BASH_LORE_FIXTURE = SHARED_DIR / "fixtures" / "bash-lore-datadir"
HAND_FIXTURE = PROJECT_ROOT / "tests" / "data" / "original-lore"

# The `lore sync` tests' fixtures (a bare remote, the CLI on a clone), shared by their four files.
pytest_plugins = ["tests.sync_support"]

# The integration tests: whole files (and single tests) that start lore processes, warm helpers,
# git clones, Node, shells or the benchmark harness. They carry the `integration` mark, so the unit
# suite (`python -m pytest -q -m "not integration"`) stays under 5 minutes on 2 cores; CI runs both.
INTEGRATION_FILES = frozenset({
    "test_agents.py", "test_bench.py", "test_bench_authors.py", "test_bench_locomo.py", "test_bench_own_store.py",
    "test_bench_stream.py", "test_bench_team.py", "test_capture_session.py", "test_completions.py", "test_doctor.py",
    "test_hook.py", "test_hook_fresh.py", "test_hook_tiers.py", "test_import_batch.py", "test_inbox.py", "test_mcp.py",
    "test_mcp_start.py",
    "test_remote_cli.py", "test_remote_parity.py", "test_remote_writes.py", "test_store_safety.py",
    "test_subprocess_isolation.py", "test_sync.py", "test_sync_index.py", "test_sync_packs.py", "test_sync_race.py",
    "test_sync_shards.py", "test_ui.py", "test_warm_default.py", "test_wheel.py", "test_write_vectors.py",
})  # fmt: skip
INTEGRATION_TESTS = frozenset({
    "test_index.py::test_builds_with_embedding_workers_killed_or_racing_never_publish_a_wrong_generation",
    "test_index.py::test_concurrent_builds_do_not_corrupt",
    "test_index.py::test_killing_a_build_at_any_moment_leaves_a_usable_index",
    "test_cli_store.py::test_a_reader_that_stops_early_is_not_a_failure",
})
_named = {name.split("::")[0] for name in INTEGRATION_TESTS} | INTEGRATION_FILES
if _missing := sorted(name for name in _named if not (Path(__file__).parent / name).is_file()):
    raise RuntimeError(f"tests/conftest.py names integration test files that do not exist: {_missing}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = item.nodeid.split("/")[-1]
        if name.split("::")[0] in INTEGRATION_FILES or name.split("[")[0] in INTEGRATION_TESTS:
            item.add_marker(pytest.mark.integration)


def settings() -> Any:
    """lore's settings as a surface reads them, from the test's environment (the ``isolated`` dirs)."""
    from lore.settings import Settings

    return Settings.from_env()


def resolve_locations(data_dir: str | Path | None = None, index_dir: str | Path | None = None) -> Any:
    """``Locations.resolve`` with the test environment's settings, as a surface resolves them."""
    from lore.paths import Locations

    return Locations.resolve(data_dir, index_dir, settings())


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every lore location at tmp_path and work from a project dir named acme-api."""
    data_dir = tmp_path / "data"
    for name, sub in (("LORE_DATA_DIR", "data"), ("LORE_INDEX_DIR", "index"), ("LORE_STATE_DIR", "state"),
                      ("LORE_CACHE_DIR", "cache"), ("HOME", "home"), ("XDG_CONFIG_HOME", "home/.config")):  # fmt: skip
        monkeypatch.setenv(name, str(tmp_path / sub))
    for name in ("LORE_EMBED_MODEL", "LORE_HOOK", "LORE_LLM_CMD", "LORE_HOOK_BUDGET", "LORE_PROJECT",
                 "LORE_SERVER_MAX_RSS_MB"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    # The hooks start a warm helper by default; a test that wants one says so (LORE_SERVER=on
    # or `lore server start`), so no test leaves a helper behind by accident.
    monkeypatch.setenv("LORE_SERVER", "off")
    monkeypatch.setenv("LORE_ACTOR", "test")
    workdir = tmp_path / "work" / "acme-api"
    workdir.mkdir(parents=True)
    monkeypatch.chdir(workdir)
    return data_dir


@pytest.fixture
def data_dir(isolated: Path) -> Path:
    return isolated


@pytest.fixture
def cli() -> Callable[..., object]:
    """Invoke the CLI in-process; returns the click Result (stdout and stderr apart)."""
    from lore.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
        return runner.invoke(app, list(args), input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def initialised(data_dir: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    result = cli("init")
    assert result.exit_code == 0, result.output
    return data_dir


@pytest.fixture
def bash_lore_copy(tmp_path: Path) -> Path:
    """A writable copy of the data dir written by the original bash Lore."""
    if not BASH_LORE_FIXTURE.is_dir():
        pytest.skip(f"shared fixture missing at {BASH_LORE_FIXTURE}")
    target = tmp_path / "bash-lore"
    shutil.copytree(BASH_LORE_FIXTURE, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def read_jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def indexed(data_dir: Path) -> Path:
    """A small store for the hook tests (an ANSI escape included), indexed."""
    from lore import capture
    from lore.capture import WriteOptions
    from lore.index.manager import IndexManager
    from lore.store import Store

    plain = WriteOptions(check_duplicates=False)
    store = Store(data_dir, actor="test")
    store.init()
    capture.remember(store, "Wrap payment-provider calls in exponential backoff with full jitter", project="acme-api",
                     rationale="A Stripe degradation turned synchronized attempts into a thundering herd.\x1b[31m",
                     importance=4, options=plain)  # fmt: skip
    capture.remember(store, "Use PgBouncer transaction pooling for billing Postgres", project="acme-api",
                     rationale="asyncpg exhausted RDS connections during the March spike", options=plain)  # fmt: skip
    capture.learn(store, "Idempotency keys for payment calls", project="acme-api",
                  solution="Send a stable idempotency key with every charge so a second attempt cannot double-charge",
                  options=plain)  # fmt: skip
    for i in range(20):
        capture.observe(store, f"Unrelated note {i} about office plants and lunch menus", project="other", options=plain)
    IndexManager(resolve_locations(data_dir)).build()
    return data_dir


def wait_for_helper(index_dir: Path, timeout: float = 60.0) -> None:
    """Poll until the warm helper for ``index_dir`` answers a ping (it warms up in the background)."""
    import time

    from lore.agent import client

    end = time.monotonic() + timeout
    while client.ask_server({"op": "ping"}, time.monotonic() + 1.0, index_dir, settings()) != "pong":
        if time.monotonic() > end:
            pytest.fail("the helper did not answer a ping")
        time.sleep(0.05)


@pytest.fixture
def demo_indexed(data_dir: Path) -> Any:
    """A copy of the demo data in the test's data dir, indexed: its ``Locations``."""
    from lore.index.manager import IndexManager

    shutil.copytree(PROJECT_ROOT / "data", data_dir)
    locations = resolve_locations(data_dir)
    IndexManager(locations).build()
    return locations


@pytest.fixture
def demo_helper(demo_indexed: Any, data_dir: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A copy of the demo data, indexed, with a real warm helper serving it (stopped afterwards)."""
    import subprocess
    import sys

    def lore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lore", *args], capture_output=True, text=True, timeout=120)

    locations = demo_indexed
    monkeypatch.setenv("LORE_DATA_DIR", str(data_dir))
    monkeypatch.delenv("LORE_SERVER")  # the autouse fixture turns the helper off
    started = lore("server", "start", "--idle", "120")
    assert started.returncode == 0, started.stderr
    try:
        wait_for_helper(locations.index_dir)
        yield locations
    finally:
        lore("server", "stop")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """With ``LORE_TESTS_NO_SKIP=1`` (CI sets it) a skipped test fails: nothing there may skip silently."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("LORE_TESTS_NO_SKIP") == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, and LORE_TESTS_NO_SKIP=1 allows no skip: {reason}"

"""Writes run by a running warm helper: the same checks, output and exit codes as the CLI, never twice.

Real processes: the helper is a real ``lore server`` and each command a real ``python -m lore``
(which asks the helper); the CLI answering itself is the same command through the typer app
in process, on a copy of the store taken before the first write. Waits poll.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lore.agent import client
from lore.agent.remote import WRITE_COMMANDS, locate
from lore.paths import Locations
from lore.store import Store
from lore.store.audit import verify
from tests.conftest import settings, wait_for_helper

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DECISIONS = Path("journal/data/decisions.jsonl")
# Generated ids and times differ between two stores; everything else must be the same bytes.
_ID = re.compile(r"session-\d{8}-\d{6}-[0-9a-f]{8}|\b(pat|anti)-\d+-[0-9a-f]{4}\b|\b(dec|fail|obs)-[0-9a-f]{8}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def same(text: str) -> str:
    return _TIME.sub("<time>", _ID.sub("<id>", text))


@pytest.mark.parametrize(("args", "expected"), [
    (["remember", "x"], (None, None)),
    (["--data-dir", "d", "--index-dir", "i", "-P", "p", "learn", "x"], ("d", "i")),
    (["--data-dir=d", "--project=p", "observe", "x"], ("d", None)),
    (["-Pp", "--index-dir=i", "lesson", "--rule", "r"], (None, "i")),
])  # fmt: skip
def test_a_write_command_finds_its_helper(args: list[str], expected: tuple[str | None, str | None]) -> None:
    assert locate(args) == expected


@pytest.mark.parametrize("args", [
    ["search", "q"], ["list"], [], ["--version", "remember", "x"], ["--bogus", "remember", "x"], ["--debug", "observe", "x"],
    ["remember", "x", "--help"], ["learn", "-h"], ["server", "start"], ["--data-dir"],
])  # fmt: skip
def test_anything_else_is_left_to_the_cli(args: list[str]) -> None:
    assert locate(args) is None


def test_the_write_commands_are_cli_commands() -> None:
    import typer

    from lore.cli.app import app

    assert set(typer.main.get_command(app).commands) >= WRITE_COMMANDS  # type: ignore[attr-defined]


def lore(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "lore", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)  # fmt: skip


def requests_answered(locations: Locations, counter: str = "requests") -> int:
    status = client.read_status(locations.index_dir, settings())
    return int(status.get(counter, 0)) if status else 0


def writes_run(locations: Locations) -> int:
    return requests_answered(locations, "writes")


def helper_log(locations: Locations) -> str:
    path = client.server_paths(locations.index_dir, settings())["log"]
    return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """The helper counts a request in its status file just after answering it: poll."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.02)


@pytest.fixture
def helper(demo_helper: Locations) -> Locations:
    """The demo data served by a real warm helper (tests/conftest.py)."""
    return demo_helper


WRITES = [
    ["remember", "Serve invoices from a read replica", "-r", "the primary was saturated by reports", "-t", "db"],
    ["remember", "Serve invoices from a read replica", "-r", "the primary was saturated by reports"],  # exit 3
    ["remember", "serve invoices from a read replica.", "--merge"],
    ["remember", "Never serve invoices from a read replica", "-r", "replicas lag behind the primary"],
    ["remember", "Rotate the deploy key AKIAIOSFODNN7EXAMPLE every quarter", "--json"],  # redacted, JSON
    ["remember", "x", "--force", "--merge"],  # lore's usage error: exit 2
    ["remember", "x", "--importance", "9"],  # click's: left to the CLI
    ["remember", "x", "--no-such-option"],
    ["learn", "Backoff with full jitter", "--solution", "sleep(random.uniform(0, base * 2**attempt))"],
    ["learn", "Backoff with full jitter", "--solution", "sleep(random.uniform(0, base * 2**attempt))"],
    ["learn", "Cache keys carry the schema version", "--anti", "--symptom", "stale reads after deploys", "--fix", "version the keys"],
    ["lesson", "--situation", "deploy", "--error-pattern", "ImportError: no module named foo", "--oversight", "no lock file",
     "--fix", "pin it", "--rule", "pin dependencies", "--severity", "high", "--scope", "global"],
    ["lesson", "--situation", "deploy"],  # missing options: lore's usage error
    ["handoff", "Moved the invoices to the replica", "--next", "watch the lag", "-b", "none"],
    ["fail", "Timeout", "the replica did not answer in 5s", "--tool", "psql"],
    ["observe", "The replica lags 2s at peak", "-t", "db"],
    ["capture", "Use the replica for reports", "--rationale", "the primary is busy"],
    ["capture", "Reports read from the replica now"],
    ["--project", "billing", "observe", "A note for another project"],
]


def test_writes_through_the_helper_print_what_the_cli_prints(helper: Locations, cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    twin = tmp_path / "twin"
    shutil.copytree(helper.data_dir, twin)
    remote = []
    for args in WRITES:
        before = requests_answered(helper)
        ran = writes_run(helper)
        done = lore(*args)
        remote.append((done.returncode, same(done.stdout), same(done.stderr)))
        wait_until(lambda: requests_answered(helper) >= before + 1, "the helper counted the request")  # noqa: B023
        # The helper ran every write whose arguments parse; click's usage errors were left to the CLI.
        parsed = not any(a in args for a in ("--importance", "--no-such-option"))
        assert (writes_run(helper) == ran + 1) == parsed, (args, done.stderr, client.read_status(helper.index_dir, settings()),
                                                            helper_log(helper))  # fmt: skip
    monkeypatch.setenv("LORE_DATA_DIR", str(twin))
    local = []
    for args in WRITES:
        result = cli(*args)
        local.append((result.exit_code, same(result.stdout), same(result.stderr)))
    for args, got, expected in zip(WRITES, remote, local, strict=True):
        assert got == expected, args
    codes = [code for code, _, _ in remote]
    assert codes.count(3) >= 1 and 2 in codes and codes.count(0) >= 10
    assert "Redacted 1 secret(s)" in remote[4][2] and "contradicts" in remote[3][2]
    # The same records, with the same audit chain, in both stores.
    for store in (Store(helper.data_dir), Store(twin)):
        assert verify(store.data_dir)[1] is None
    titles = sorted(r.title for r in Store(helper.data_dir).load().records.values())
    assert titles == sorted(r.title for r in Store(twin).load().records.values())


def test_a_write_through_the_helper_is_found_by_the_next_search(helper: Locations) -> None:
    done = lore("remember", "Quarantine zanzibar uploads before scanning them", "-r", "the scanner chokes on zanzibar")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: writes_run(helper) == 1, "the helper counted the write")
    before = requests_answered(helper)
    found = lore("search", "zanzibar uploads", "--json")
    assert found.returncode == 0, found.stderr
    assert any("zanzibar" in hit["title"].lower() for hit in json.loads(found.stdout)["results"])
    wait_until(lambda: requests_answered(helper) >= before + 1, "the helper counted the search")
    # Answered by the helper, whose index took the write in first (not declined as behind the files).
    assert requests_answered(helper, "declined") == 0 and requests_answered(helper) == before + 1


def test_the_helper_runs_nothing_a_client_did_not_confirm(helper: Locations) -> None:
    """The two steps: before ``go`` the helper only says it is ready; a client that leaves then runs it itself."""
    import socket

    path = client.server_paths(helper.index_dir, settings())["socket"]
    request = {"op": "run", "argv": ["observe", "never confirmed"], "data_dir": str(helper.data_dir.resolve()),
               "cwd": str(Path.cwd()), "environ": dict(os.environ), "tty": False, "err_tty": False}  # fmt: skip
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(30)
        raw.connect(str(path))
        raw.sendall(json.dumps(request).encode() + b"\n")
        assert json.loads(raw.makefile("rb").readline()) == {"ok": True, "ready": True}
    wait_for_helper(helper.index_dir)  # it served the ping after giving up on the first client
    assert not any(r.title == "never confirmed" for r in Store(helper.data_dir).load().records.values())
    reply = client.run_on_server(request, time.monotonic() + 30, helper.index_dir, settings())
    assert reply is not None and reply["code"] == 0 and "Observed observation" in reply["output"][0][1]
    assert [r.title for r in Store(helper.data_dir).load().records.values()].count("never confirmed") == 1
    # Another environment resolves another data dir: declined, nothing run (the CLI would write there).
    elsewhere = {**request, "environ": {**os.environ, "LORE_DATA_DIR": str(helper.data_dir.parent / "other")}}
    assert client.run_on_server(elsewhere, time.monotonic() + 30, helper.index_dir, settings()) == {"ok": True, "declined": True}


# The client side in a fresh interpreter: what it imports while the helper runs a write.
REMOTE_AND_MODULES = """
import json, sys
from lore.agent.remote import run_remote_command
code = run_remote_command(sys.argv[1:])
sys.stdout.flush()
avoidable = sorted(m for m in ("typing", "socket", "orjson", "numpy", "rich", "typer", "lore.cli", "lore.store",
                               "lore.curate") if m in sys.modules)
sys.stderr.write(json.dumps({"code": code, "avoidable": avoidable}))
"""


def test_the_client_side_of_a_write_imports_only_what_it_needs(helper: Locations) -> None:
    done = subprocess.run([sys.executable, "-c", REMOTE_AND_MODULES, "observe", "imports probe"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Observed observation" in done.stdout
    assert json.loads(done.stderr) == {"code": 0, "avoidable": []}


def test_without_a_helper_the_cli_writes(data_dir: Path) -> None:
    Store(data_dir).init()
    done = lore("remember", "Written without a helper")
    assert done.returncode == 0 and "Remembered decision" in done.stdout, done.stderr


THREADS_AFTER_A_WRITE = """
import os, sys
from lore.__main__ import main
try:
    main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
sys.stderr.write(f"{code} {len(os.listdir('/proc/self/task'))}")
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_write_without_a_helper_starts_no_blas_threads(data_dir: Path) -> None:
    """Its numpy work is a few small arrays: OpenBLAS's thread pool cost ~30 ms of CPU for nothing."""
    store = Store(data_dir)
    store.init()
    for i in range(3):
        store.add("decision", {"decision": f"Adopt queue worker {i}", "status": "active"})
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", THREADS_AFTER_A_WRITE, "remember", "Adopt queue worker 9 instead"],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.stderr.split()[-2:] == ["0", "1"], done.stderr  # exit 0, one thread


def test_the_helper_runs_a_command_as_its_client_without_taking_on_its_environment_or_directory(
        data_dir: Path, tmp_path: Path) -> None:  # fmt: skip
    """The command's settings, project and actor are its client's (from the request); the helper's own
    ``os.environ`` and working directory stay as they are while it runs (no process-wide swap)."""
    from lore.agent.remote import run_command
    from lore.cli.app import run_parsed

    Store(data_dir).init()
    client_dir = tmp_path / "client-project"
    client_dir.mkdir()
    before = (dict(os.environ), os.getcwd())
    during: list[tuple[dict[str, str], str]] = []

    def observed(argv: list[str], host: dict) -> int | None:  # type: ignore[type-arg]
        during.append((dict(os.environ), os.getcwd()))
        return run_parsed(argv, host)

    environ = {**os.environ, "LORE_ACTOR": "the-client"}
    request = {"argv": ["remember", "Retries use jittered backoff", "--json"], "environ": environ,
               "cwd": str(client_dir), "tty": False, "err_tty": False}  # fmt: skip
    reply = run_command(request, str(data_dir.resolve()), observed)
    assert reply["code"] == 0, reply
    assert during == [before] and (dict(os.environ), os.getcwd()) == before
    written = json.loads("".join(text for fd, text in reply["output"] if fd == 1))
    assert written["project"] == "client-project"
    record = Store(data_dir).load().records[written["id"]]
    assert record.project == "client-project"
    assert {entry["actor"] for entry in _audit(data_dir) if entry.get("id") == written["id"]} == {"the-client"}


def _audit(data_dir: Path) -> list[dict]:  # type: ignore[type-arg]
    from lore.store import audit

    return [json.loads(line) for line in (data_dir / audit.AUDIT_PATH).read_text().splitlines() if line.strip()]

"""Warm by default, leak-proof: the hooks start the helper in the background and it goes away on its own.

Real processes throughout: the hooks run as ``python -m lore hook ...`` with JSON on
stdin, the helper they start is a detached ``lore server run``; every wait polls the
helper's status file or /proc with a deadline (nothing asserts on a fixed sleep).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lore.agent import client
from tests.conftest import resolve_locations, settings

PROMPT = "add jittered exponential backoff around the payment provider charge call"
START_TIMEOUT_S = 60.0  # a cold helper imports numpy and the model; on a busy 2-core machine, seconds


def hook(name: str, payload: dict[str, object], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "lore", "hook", name], input=json.dumps(payload).encode(),
                          capture_output=True, timeout=120,
                          env={**os.environ, "LORE_HOOK_DEADLINE_MS": "20000", **(env or {})})  # fmt: skip


def prompt_event(prompt: str = PROMPT) -> dict[str, object]:
    return {"session_id": "sess-w", "cwd": str(Path.cwd()), "hook_event_name": "UserPromptSubmit", "prompt": prompt}


def session_event() -> dict[str, object]:
    return {"session_id": "sess-w", "cwd": str(Path.cwd()), "hook_event_name": "SessionStart", "source": "startup"}


def wait_for(condition: Callable[[], object], timeout: float = START_TIMEOUT_S, what: str = "condition") -> object:
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def helper_pids(index_dir: Path) -> list[int]:
    """Live `lore server run` processes serving index_dir (Linux /proc)."""
    marker = f"LORE_INDEX_DIR={index_dir}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ, cmdline = (proc / "environ").read_bytes(), (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and b"server\0run" in cmdline and client._alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def answered_by_helper(index_dir: Path, requests: int) -> bool:
    """The helper counts a request once it has replied (its status file may lag the reply a moment)."""
    return (client.read_status(index_dir, settings()) or {}).get("requests") == requests


def server_log(index_dir: Path) -> str:
    path = client.server_paths(index_dir, settings())["log"]
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def auto(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The default: LORE_SERVER unset. Whatever helper a test starts is stopped after it."""
    monkeypatch.delenv("LORE_SERVER")
    index_dir = resolve_locations(indexed).index_dir
    try:
        yield index_dir
    finally:
        client.stop(index_dir, settings())
        for pid in helper_pids(index_dir):
            os.kill(pid, 9)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.mark.slow
def test_session_start_starts_the_helper_in_the_background_and_the_first_prompt_is_warm(auto: Path) -> None:
    started = hook("session-start", session_event())
    assert (started.returncode, started.stderr) == (0, b"")
    # The hook returned before the helper was ready (it never waits for it); the helper comes up on its own.
    status = wait_for(lambda: client.read_status(auto, settings()), what="the helper's status")
    assert isinstance(status, dict) and status["requests"] == 0
    answered = hook("prompt", prompt_event())
    context = json.loads(answered.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "exponential backoff" in context
    wait_for(lambda: answered_by_helper(auto, 1), timeout=10, what="the helper to count the request it answered")
    assert helper_pids(auto) == [status["pid"]]


@pytest.mark.slow
def test_an_idle_helper_warms_the_write_pool_null_evidence_and_tokenizer_then_answers(auto: Path) -> None:
    # A tokenizer loaded by a prompt once held that prompt up by ~0.4 s; idle moments load it instead.
    hook("session-start", session_event())
    everything = {"write_pool": True, "null_evidence": True, "tokenizer": True}
    wait_for(lambda: (client.read_status(auto, settings()) or {}).get("warmed") == everything,
             what="the helper's idle warm-up steps")  # fmt: skip
    answered = hook("prompt", prompt_event())
    assert "exponential backoff" in json.loads(answered.stdout)["hookSpecificOutput"]["additionalContext"]
    wait_for(lambda: answered_by_helper(auto, 1), timeout=10, what="the helper to count the request it answered")


@pytest.mark.slow
def test_the_prompt_hook_starts_a_missing_helper_without_waiting_for_it(auto: Path) -> None:
    first = hook("prompt", prompt_event())
    assert "exponential backoff" in json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]  # in-process
    status = wait_for(lambda: client.read_status(auto, settings()), what="the helper the prompt hook started")
    assert isinstance(status, dict)
    hook("prompt", prompt_event())
    wait_for(lambda: answered_by_helper(auto, 1), timeout=10, what="the helper to count the request it answered")


@pytest.mark.slow
def test_racing_hooks_leave_one_helper_per_index(auto: Path) -> None:
    """Four hooks at once (a session start and three prompts): one helper serves, the others left."""
    env = {**os.environ, "LORE_HOOK_DEADLINE_MS": "20000"}
    runs = [subprocess.Popen([sys.executable, "-m", "lore", "hook", name], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            for name in ("session-start", "prompt", "prompt", "prompt")]  # fmt: skip
    for process, payload in zip(runs, (session_event(), prompt_event(), prompt_event(), prompt_event()), strict=True):
        assert process.stdin is not None
        process.stdin.write(json.dumps(payload).encode())
        process.stdin.close()
    for process in runs:
        assert process.wait(timeout=120) == 0
    status = wait_for(lambda: client.read_status(auto, settings()), what="a serving helper")
    assert isinstance(status, dict)
    wait_for(lambda: helper_pids(auto) == [status["pid"]], timeout=30, what="exactly one helper")


def test_disabled_by_command_or_environment_starts_nothing(auto: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("server", "disable").stdout.startswith("lore server auto-start disabled")
    assert hook("session-start", session_event()).returncode == 0
    assert hook("prompt", prompt_event()).returncode == 0
    assert cli("server", "enable").stdout.startswith("lore server auto-start enabled")
    assert hook("prompt", prompt_event(), {"LORE_SERVER": "off"}).returncode == 0
    paths = client.server_paths(auto, settings())
    assert not paths["spawn"].exists() and not paths["status"].exists()
    assert helper_pids(auto) == []


def test_no_data_dir_starts_nothing(auto: Path, indexed: Path) -> None:
    shutil.rmtree(indexed)
    assert hook("session-start", session_event()).returncode == 0
    assert hook("prompt", prompt_event()).returncode == 0
    assert not client.server_paths(auto, settings())["spawn"].exists()
    assert helper_pids(auto) == []


@pytest.mark.slow
@pytest.mark.parametrize("remove", ["data dir", "index dir"])
def test_the_helper_exits_when_its_data_or_index_dir_disappears(auto: Path, indexed: Path, remove: str) -> None:
    pid = client.start_detached(auto, settings(), idle=600, data_dir=indexed)
    wait_for(lambda: client.read_status(auto, settings()), what="the helper's status")
    shutil.rmtree(indexed if remove == "data dir" else auto)
    wait_for(lambda: not client._alive(pid), timeout=30, what=f"the helper to exit after its {remove} went")
    assert f"lore server exiting: {remove} gone" in server_log(auto)
    assert not client.server_paths(auto, settings())["socket"].exists()


@pytest.mark.slow
def test_the_helper_exits_past_its_memory_bound_and_after_its_idle_time(auto: Path, indexed: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("LORE_SERVER_MAX_RSS_MB", "32")  # the floor; a warm helper holds numpy and the model
    pid = client.start_detached(auto, settings(), idle=600, data_dir=indexed)
    wait_for(lambda: not client._alive(pid), what="the helper to exit past its memory bound")
    assert "above the 32 MiB bound" in server_log(auto)
    monkeypatch.delenv("LORE_SERVER_MAX_RSS_MB")
    pid = client.start_detached(auto, settings(), idle=1, data_dir=indexed)
    wait_for(lambda: client.read_status(auto, settings()), what="the helper's status")
    wait_for(lambda: not client._alive(pid), timeout=30, what="the helper to exit when idle")
    assert "lore server exiting: idle" in server_log(auto)
    assert helper_pids(auto) == []


SESSION_START_IMPORTS = """
import io, sys, json
sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps({"cwd": sys.argv[1], "source": "startup"}).encode()))
from lore.agent.hook import run_session_start_hook  # what lore.__main__ runs for `lore hook session-start`
run_session_start_hook([], stdout=io.StringIO())
heavy = sorted(m for m in ("numpy", "whoosh", "model2vec", "tokenizers", "typer", "click", "rich", "networkx",
                           "subprocess", "lore.search", "lore.rank.pipeline") if m in sys.modules)
print("HEAVY", heavy)
"""


def test_session_start_runs_without_the_cli_stack_or_the_search_stack(indexed: Path) -> None:
    """Every session pays this hook: it starts the helper and reads the store, nothing more."""
    out = subprocess.run([sys.executable, "-c", SESSION_START_IMPORTS, str(Path.cwd())], capture_output=True,
                         text=True, check=True, env={**os.environ, "LORE_SERVER": "off"}).stdout  # fmt: skip
    assert out.strip().splitlines()[-1] == "HEAVY []"


SESSION_START_WARM = """
import io, sys, json
sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps({"cwd": sys.argv[1], "source": "startup"}).encode()))
from lore.agent.hook import run_session_start_hook
out = io.StringIO()
run_session_start_hook([], stdout=out)
print(json.dumps({"out": out.getvalue(), "store": "lore.store.store" in sys.modules, "yaml": "yaml" in sys.modules}))
"""


@pytest.mark.slow
def test_session_start_asks_a_warm_helper_and_skips_the_store_imports(auto: Path, indexed: Path) -> None:
    from lore import capture
    from lore.store import Store

    capture.handoff(Store(indexed, actor="test"), "Charge retries wired; alerting left", project="acme-api",
                    next_steps=["Add the retry alert"])  # fmt: skip
    cold = json.loads(subprocess.run([sys.executable, "-c", SESSION_START_WARM, str(Path.cwd())], capture_output=True,
                                     text=True, check=True, env={**os.environ, "LORE_SERVER": "off"}).stdout)  # fmt: skip
    assert "Charge retries wired" in cold["out"] and cold["store"]
    client.start_detached(auto, settings(), idle=600, data_dir=indexed)
    wait_for(lambda: client.read_status(auto, settings()), what="the helper's status")
    warm = json.loads(subprocess.run([sys.executable, "-c", SESSION_START_WARM, str(Path.cwd())], capture_output=True,
                                     text=True, check=True).stdout)  # fmt: skip
    assert warm["out"] == cold["out"]
    assert not warm["store"] and not warm["yaml"]
    wait_for(lambda: answered_by_helper(auto, 1), timeout=10, what="the helper to count the session request")


HOLDING_CALLER = """
import sys
from pathlib import Path
from lore.agent.client import ensure_started
from lore.settings import Settings
print(ensure_started(Path(sys.argv[1]), Path(sys.argv[2]), Settings.from_env()), flush=True)
sys.stdin.readline()  # a hook still working: the helper must not warm up beside it
"""


@pytest.mark.slow
def test_a_helper_spawned_by_a_hook_warms_up_only_once_the_hook_has_exited(auto: Path, indexed: Path) -> None:
    caller = subprocess.Popen([sys.executable, "-c", HOLDING_CALLER, str(auto), str(indexed)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert caller.stdout is not None and caller.stdin is not None
        pid = int(caller.stdout.readline())
        # A helper for this small store is ready in well under a second when it does not wait.
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            assert client.read_status(auto, settings()) is None, "the helper warmed up while its caller was still running"
            assert client._alive(pid)
            time.sleep(0.05)
        caller.stdin.close()
        assert caller.wait(timeout=30) == 0
    finally:
        if caller.poll() is None:
            caller.kill()
    status = wait_for(lambda: client.read_status(auto, settings()), what="the helper once its caller exited")
    assert isinstance(status, dict) and status["pid"] == pid


@pytest.mark.slow
def test_server_run_behind_root_options_serves_the_data_dir_they_name(auto: Path, indexed: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # `lore --data-dir D server run` goes through the CLI, which hands over to the helper's own entry:
    # it used to serve the environment's data dir whatever the command line said.
    monkeypatch.delenv("LORE_DATA_DIR", raising=False)
    run = subprocess.Popen([sys.executable, "-P", "-m", "lore", "--data-dir", str(indexed), "server", "run", "--idle", "2"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        status = wait_for(lambda: client.read_status(auto, settings()), what="the helper's status")
        assert isinstance(status, dict) and status["pid"] == run.pid  # the same process, become the helper
        assert client.ask_server({"op": "ping"}, time.monotonic() + 10, auto, settings()) == "pong"
        assert run.wait(timeout=60) == 0  # idle: it exits on its own
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()

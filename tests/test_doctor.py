"""`lore doctor` on the agent side: each piece that keeps the memory from the agent, broken for real, is named.

Real files in an isolated HOME (the agents' settings as `lore hook install` writes
them, then edited as a user or another install would), real helper processes, a
real hook log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import lore
from lore.agent import client
from lore.agent.hook import AGENTS
from lore.agent.installed import this_lore
from lore.agent.log import log_failure
from lore.index.manager import IndexManager
from lore.interpreter import lore_argv
from tests.conftest import resolve_locations, settings

THIS = this_lore()
pytestmark = pytest.mark.skipif(not os.path.isfile(THIS), reason="no `lore` console script beside this interpreter")
HOME_HINT = "No agent runs lore's hooks: `lore hook install` (Claude Code) or `lore hook install --agent NAME` wires them in (docs/agents.md)"
HELPER_OFF = ("Helper: not running, and auto-start is off (`lore server disable` or LORE_SERVER=off): every prompt "
              "pays a cold search; `lore server enable` turns it back on")  # fmt: skip


@pytest.fixture(autouse=True)
def agent_home(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return Path(os.environ["HOME"])


def as_lore(monkeypatch: pytest.MonkeyPatch, executable: str) -> None:
    """Run the in-process CLI as `executable` would (what `lore hook install` writes into the settings)."""
    monkeypatch.setattr(sys, "argv", [executable])


def doctor(cli, *args: str):  # type: ignore[no-untyped-def]
    return cli("doctor", *args)


def cache_file(name: str) -> Path:
    return Path(os.environ["LORE_CACHE_DIR"]) / name


def index_line(data_dir: Path) -> str:
    found = IndexManager(resolve_locations(data_dir)).read_meta()
    assert found is not None
    return f"Index: up to date ({found[1].records} records, revision {found[1].revision})"


@pytest.fixture
def indexed_store(initialised: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    cli("remember", "Wrap payment-provider calls in exponential backoff with full jitter", "-r", "thundering herd")
    assert cli("index").exit_code == 0
    return initialised


def test_the_report_with_nothing_installed_says_how_to_install_and_is_no_problem(cli, initialised: Path) -> None:  # type: ignore[no-untyped-def]
    cli("observe", "hello world")
    result = doctor(cli)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"No problems found in {initialised} (1 records, 1 audit entries)",
        "Agent side:",
        f"  {HOME_HINT}",
        "  Index: missing (no index yet); the next search or `lore index` builds it",
        f"  {HELPER_OFF}",
        f"  Hook log: no errors ({cache_file('hook.log')})",
        "  Prompt hook, last 7 days: no prompts logged",
        "No problems on the agent side",
    ]


def test_claude_code_and_codex_running_this_lore(cli, indexed_store: Path, agent_home: Path,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    as_lore(monkeypatch, THIS)
    assert cli("hook", "install").exit_code == 0
    assert cli("hook", "install", "--agent", "codex").exit_code == 0
    result = doctor(cli)
    assert result.exit_code == 0, result.stdout
    settings, codex = agent_home / ".claude" / "settings.json", agent_home / ".codex"
    assert result.stdout.splitlines() == [
        f"No problems found in {indexed_store} (1 records, 1 audit entries)",
        "Agent side:",
        f"  Claude Code (user): UserPromptSubmit, SessionStart, PreCompact, Stop in {settings} -> {THIS} (this lore)",
        "  Claude Code: no lore MCP server (optional: `claude mcp add lore -- lore mcp`)",
        f"  Codex CLI (user): UserPromptSubmit, SessionStart, PreCompact, Stop, mcp_servers.lore in "
        f"{codex / 'hooks.json'}, {codex / 'config.toml'} -> {THIS} (this lore)",
        "  lore not installed: Gemini CLI, Cursor, Antigravity CLI, OpenCode",
        f"  {index_line(indexed_store)}",
        f"  {HELPER_OFF}",
        f"  Hook log: no errors ({cache_file('hook.log')})",
        "  Prompt hook, last 7 days: no prompts logged",
        "No problems on the agent side",
    ]


@pytest.mark.parametrize("agent", AGENTS)
def test_every_agent_the_installer_knows_is_checked(cli, indexed_store: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                    agent: str) -> None:  # fmt: skip
    as_lore(monkeypatch, THIS)
    # A project's settings are committed, so they name `lore` on PATH: here, this one.
    monkeypatch.setenv("PATH", f"{Path(THIS).parent}:/usr/bin:/bin")
    assert cli("hook", "install", "--agent", agent, "--scope", "project").exit_code == 0
    report = orjson.loads(doctor(cli, "--json").stdout)
    assert report["ok"] and report["agent_side"]["problems"] == []
    [found] = report["agent_side"]["agents"]
    assert (found["agent"], found["scope"], found["missing"], found["outdated"]) == (agent, "project", [], [])
    assert found["programs"] == [{"shown": "lore", "path": THIS, "points_at": "this lore"}]
    # Off PATH, the same files run nothing.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = orjson.loads(doctor(cli, "--json").stdout)["agent_side"]["agents"][0]
    assert found["programs"] == [{"shown": "lore", "path": None, "points_at": "missing"}]


def test_missing_hooks_are_named(cli, indexed_store: Path, agent_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    as_lore(monkeypatch, THIS)
    cli("hook", "install")
    settings = agent_home / ".claude" / "settings.json"
    parsed = json.loads(settings.read_text())
    del parsed["hooks"]["PreCompact"], parsed["hooks"]["Stop"]
    settings.write_text(json.dumps(parsed))
    result = doctor(cli)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2:] == [
        f"{settings}: agent-hooks: Claude Code (user) lacks lore's PreCompact, Stop: run `lore hook install`",
        "1 problem(s) on the agent side",
    ]


def test_hooks_that_run_another_lore_or_none_are_named(cli, indexed_store: Path, agent_home: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    other = tmp_path / "other-venv" / "bin" / "lore"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\nexit 0\n")
    other.chmod(0o755)
    as_lore(monkeypatch, str(other))
    assert cli("hook", "install").exit_code == 0  # installed by another lore
    gone = tmp_path / "removed-venv" / "bin" / "lore"
    project = Path.cwd() / ".gemini" / "settings.json"
    as_lore(monkeypatch, THIS)
    assert cli("hook", "install", "--agent", "gemini", "--scope", "project").exit_code == 0
    project.write_text(project.read_text().replace('"lore ', f'"{gone} ').replace('"command": "lore"', f'"command": "{gone}"'))
    result = doctor(cli)
    assert result.exit_code == 1
    settings = agent_home / ".claude" / "settings.json"
    assert f"  Claude Code (user): UserPromptSubmit, SessionStart, PreCompact, Stop in {settings} -> {other} (another lore)" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-3:] == [
        f"{settings}: agent-command: Claude Code (user) runs another lore ({other}), not this one ({THIS}): "
        "run `lore hook install` with this lore",
        f"{project}: agent-command: Gemini CLI (project) runs {gone}, which is not there: "
        "run `lore hook install --agent gemini --scope project`",
        "2 problem(s) on the agent side",
    ]
    # Installed again by this lore: nothing left to say.
    assert cli("hook", "install").exit_code == 0
    assert cli("hook", "install", "--agent", "gemini").exit_code == 0
    project.unlink()
    assert doctor(cli).exit_code == 0


def test_a_claude_code_mcp_server_that_runs_no_lore_is_named(cli, indexed_store: Path, agent_home: Path,  # type: ignore[no-untyped-def]
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    as_lore(monkeypatch, THIS)
    cli("hook", "install")
    claude_json = agent_home / ".claude.json"
    claude_json.write_text(json.dumps({"mcpServers": {"lore": {"command": "/gone/bin/lore", "args": ["mcp"]}},
                                       "projects": {str(Path.cwd()): {"mcpServers": {"lore": {"command": THIS, "args": ["mcp"]}}}}}))  # fmt: skip
    result = doctor(cli)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"  Claude Code (user): MCP server lore in {claude_json} -> /gone/bin/lore (missing)" in lines
    assert f"  Claude Code (local): MCP server lore in {claude_json} -> {THIS} (this lore)" in lines
    assert lines[-2:] == [f"{claude_json}: agent-command: Claude Code's MCP server lore (user) runs /gone/bin/lore, "
                          "which is not there: run `claude mcp add lore -- lore mcp`", "1 problem(s) on the agent side"]


def test_recent_hook_log_errors_are_named_and_old_or_routine_lines_are_not(cli, indexed_store: Path) -> None:  # type: ignore[no-untyped-def]
    log = cache_file("hook.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("2020-01-02T03:04:05Z deadline: no result within 400 ms; injected nothing\n")
    log_failure("server", "exiting: idle")  # the helper's routine exit
    log_failure("IndexUnavailableError", "index at /x is unreadable")
    log_failure("server", "exiting: index unreadable")
    result = doctor(cli)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"  Hook log: 2 error(s) in the last 24 hours ({log})" in lines
    stamp = log.read_text().splitlines()[-1].split()[0]
    assert lines[-3:] == [f"{log}: hook-log: {stamp} IndexUnavailableError: index at /x is unreadable",
                          f"{log}: hook-log: {stamp} server: exiting: index unreadable",
                          "2 problem(s) on the agent side"]  # fmt: skip
    hook_log = orjson.loads(doctor(cli, "--json").stdout)["agent_side"]["hook_log"]
    assert (hook_log["errors"], hook_log["recent"], hook_log["last"][0]["kind"]) == (3, 2, "deadline")
    # A day later they are history, not problems.
    log.write_text("".join(line.replace(stamp, "2020-01-03T00:00:00Z") + "\n" for line in log.read_text().splitlines()))
    result = doctor(cli)
    assert result.exit_code == 0
    assert f"  Hook log: no errors in the last 24 hours (3 older, the last at 2020-01-03T00:00:00Z; {log})" in result.stdout


# --------------------------------------------------------------------------- the warm helper, for real


def start_helper(env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(lore_argv("server", "start", "--idle", "60"), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})  # fmt: skip
    assert done.returncode == 0, done.stderr
    status = client.read_status(resolve_locations().index_dir, settings())
    assert status is not None
    return status


@pytest.fixture
def stop_helper() -> Iterator[None]:
    yield
    index_dir = resolve_locations().index_dir
    status = client.read_status(index_dir, settings())
    if status is not None:
        os.kill(int(status["pid"]), signal.SIGCONT)  # a test may have stopped it
    client.stop(index_dir, settings())
    assert client.read_status(index_dir, settings()) is None


@pytest.mark.slow
def test_a_helper_serving_the_current_index_is_reported_and_no_problem(cli, indexed_store: Path, stop_helper) -> None:  # type: ignore[no-untyped-def]
    status = start_helper()
    found = IndexManager(resolve_locations()).read_meta()
    assert found is not None
    result = doctor(cli)
    assert result.exit_code == 0, result.stdout
    assert f"  Helper: pid {status['pid']} serves {found[0].name} revision {found[1].revision}, answers: yes" in result.stdout
    helper = orjson.loads(doctor(cli, "--json").stdout)["agent_side"]["helper"]
    assert helper["answers"] and helper["lore"]["package"] == os.path.dirname(os.path.abspath(lore.__file__))


@pytest.mark.slow
def test_a_helper_running_another_lores_code_is_named(cli, indexed_store: Path, tmp_path: Path, stop_helper) -> None:  # type: ignore[no-untyped-def]
    """The helper outlives an upgrade or a reinstall elsewhere: it keeps serving with the old code."""
    old = tmp_path / "old-install"
    shutil.copytree(Path(lore.__file__).parent, old / "lore", ignore=shutil.ignore_patterns("__pycache__"))
    status = start_helper({"PYTHONPATH": str(old)})
    result = doctor(cli)
    assert result.exit_code == 1
    mine = client.running_lore()
    assert result.stdout.splitlines()[-2:] == [
        f"{client.server_paths(resolve_locations().index_dir, settings())['status']}: helper: the helper (pid {status['pid']}) "
        f"runs lore {lore.__version__} from {old / 'lore'}, not this lore ({mine['version']} from {mine['package']}); "
        "`lore server stop` (the next prompt starts a fresh one)",
        "1 problem(s) on the agent side",
    ]


@pytest.mark.slow
def test_a_helper_that_lags_the_index_and_does_not_answer_is_named(cli, indexed_store: Path, stop_helper) -> None:  # type: ignore[no-untyped-def]
    status = start_helper()
    pid = int(status["pid"])  # type: ignore[call-overload]
    os.kill(pid, signal.SIGSTOP)  # hung: it neither answers nor picks up the refreshed index
    cli("remember", "Use PgBouncer transaction pooling for billing Postgres", "-r", "asyncpg exhausted RDS")
    assert cli("index").stdout.startswith("Refreshed index")
    found = IndexManager(resolve_locations()).read_meta()
    assert found is not None and found[1].revision == int(status["revision"]) + 1  # type: ignore[call-overload]
    started = time.monotonic()
    result = doctor(cli)
    assert result.exit_code == 1
    where = client.server_paths(resolve_locations().index_dir, settings())["status"]
    assert result.stdout.splitlines()[-3:] == [
        f"{where}: helper: the helper (pid {pid}) does not answer on its socket: the hooks fall back to cold searches; "
        "`lore server stop` (the next prompt starts a fresh one)",
        f"{where}: helper: the helper (pid {pid}) serves {status['generation']} revision {status['revision']}, the "
        f"index is at {found[0].name} revision {found[1].revision}; `lore server stop` (the next prompt starts a fresh one)",
        "2 problem(s) on the agent side",
    ]
    assert time.monotonic() - started < 30


def test_the_report_summarises_what_the_prompt_hook_handed(cli, initialised: Path) -> None:  # type: ignore[no-untyped-def]
    from lore.agent.log import log_opened, log_prompt
    from lore.agent.prompt import Handed

    log_prompt("warm", Handed("x" * 600, ("dec-1", "dec-2"), ("dec-2",)))
    log_prompt("cold", Handed("y" * 300, ("dec-3", "dec-4"), ("dec-3", "dec-4")))
    log_prompt("cold", Handed(""))
    log_prompt("trivial", Handed(""))
    log_opened("dec-3", "cli")  # a pointer opened later
    log_opened("dec-9", "mcp")  # a record opened that no prompt pointed to
    (cache_file("hook-prompts.jsonl")).open("a").write("{torn line\n")
    result = doctor(cli)
    assert result.exit_code == 0, result.stdout
    assert ("  Prompt hook, last 7 days: 4 prompts; full items 25%, pointers only 25%, nothing 25%, trivial 25%; "
            "225 characters per prompt; pointers opened later 1 of 3") in result.stdout.splitlines()
    payload = json.loads(doctor(cli, "--json").stdout)
    assert payload["agent_side"]["prompts"]["tiers"] == {"full": 1, "pointer": 1, "none": 1, "trivial": 1}

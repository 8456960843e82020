"""The agent side of ``lore doctor``: the command to run when "the memory isn't showing up".

Four questions, each answered from real files and processes:

* which agents have lore's hooks and MCP server, and whether those run this lore
  (``lore.agent.installed`` asks the installer, so every agent it knows is checked);
* whether a warm helper serves this index, answers, runs this lore's code and has
  caught up with the index on disk;
* the index itself: present, and up to date with the data dir;
* the hook log's recent errors (the hooks never fail at the agent: they log).

A finding that keeps lore from reaching the agent is a ``Problem`` (``lore doctor``
exits 1); the rest is said in the report's lines. Nothing here writes anything.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.store.health import Problem

if TYPE_CHECKING:
    from lore.agent.installed import Installation, McpEntry, Program
    from lore.paths import Locations
    from lore.settings import Settings

# Hook-log entries this recent are problems; older ones are history (the log is never truncated).
RECENT_S = 24 * 3600
HOOK_LOG_SHOWN = 5
HOOK_LOG_TAIL_BYTES = 256 * 1024
# A helper revalidates its index every second (lore.agent.daemon.REVALIDATE_S) and swaps a
# refreshed one in when it is warm: one that lags the index on disk longer than this is stuck.
HELPER_CATCH_UP_S = 5.0
HELPER_ANSWER_S = 2.0
# The helper's own exits, logged for the record: not errors (but an unreadable index is).
_ROUTINE_EXITS = ("exiting: idle", "exiting: index rebuilt", "exiting: data dir gone", "exiting: index dir gone",
                  "exiting: resident memory")  # fmt: skip


@dataclass
class AgentSide:
    agents: list[Installation] = field(default_factory=list)
    claude_mcp: list[McpEntry] = field(default_factory=list)
    helper: dict[str, Any] = field(default_factory=dict)
    index: dict[str, Any] = field(default_factory=dict)
    hook_log: dict[str, Any] = field(default_factory=dict)
    prompts: dict[str, Any] = field(default_factory=dict)  # what the prompt hook handed lately (agent.log.prompt_summary)
    lines: list[str] = field(default_factory=list)  # the human report, problems aside
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "agents": [a.as_dict() for a in self.agents],
                "claude_code_mcp": [{"scope": m.scope, "path": m.path, "command": m.command, **m.program.as_dict()}
                                    for m in self.claude_mcp],
                "helper": self.helper, "index": self.index, "hook_log": self.hook_log,
                "prompts": self.prompts, "problems": [p.as_dict() for p in self.problems]}  # fmt: skip


def _label(agent: str) -> str:
    from lore.agent.agents import REGISTRY

    spec = REGISTRY.get(agent)
    return spec.label if spec is not None else agent


def _reinstall(agent: str, scope: str) -> str:
    flags = ("" if agent == "claude-code" else f" --agent {agent}") + ("" if scope == "user" else f" --scope {scope}")
    return f"`lore hook install{flags}`"


def _program_problem(program: Program, where: str, what: str, fix: str) -> Problem | None:
    from lore.agent.installed import this_lore

    if program.points_at == "missing":
        return Problem("agent-command", where, f"{what} runs {program.shown}, which is not there: run {fix}")
    if program.points_at == "another lore":
        return Problem("agent-command", where, f"{what} runs another lore ({program.path}), not this one "
                                                f"({this_lore()}): run {fix} with this lore")  # fmt: skip
    return None


def _program_words(programs: list[Program]) -> str:
    return ", ".join(f"{p.shown} ({p.points_at})" for p in programs) or "-"


def check_agents(side: AgentSide, cwd: Path | None = None) -> None:
    from lore.agent.hook import AGENTS
    from lore.agent.install import SCOPES
    from lore.agent.installed import claude_code_mcp, installed

    absent: list[str] = []
    for agent in AGENTS:
        label = _label(agent)
        found_any = False
        for scope in SCOPES:
            found = installed(agent, scope, cwd)
            if found.error is not None:
                side.agents.append(found)
                side.lines.append(f"{label} ({scope}): cannot read its configuration")
                side.problems.append(Problem("agent-config", label, found.error))
                found_any = True
                continue
            if not found.installed:
                continue
            found_any = True
            side.agents.append(found)
            keys = [key for key in found.commands if key != "rule"]
            side.lines.append(f"{label} ({scope}): {', '.join(keys)} in {', '.join(found.files)} "
                              f"-> {_program_words(found.programs)}")  # fmt: skip
            where = found.files[0]
            for program in found.programs:
                problem = _program_problem(program, where, f"{label} ({scope})", _reinstall(agent, scope))
                if problem is not None:
                    side.problems.append(problem)
            if found.missing:
                side.problems.append(Problem("agent-hooks", where, f"{label} ({scope}) lacks lore's "
                                             f"{', '.join(found.missing)}: run {_reinstall(agent, scope)}"))  # fmt: skip
            for change in found.outdated:
                side.lines.append(f"  differs from what {_reinstall(agent, scope)} writes: {change}")
            if any(p.python_m and p.points_at == "this lore" for p in found.programs):
                side.lines.append("  runs `python -m lore` from the agent's working directory: a `lore/` package "
                                  "there would be imported instead (`-P` prevents it)")  # fmt: skip
        if agent == "claude-code":
            servers, unreadable = claude_code_mcp(cwd)
            side.claude_mcp = servers
            for path in unreadable:
                side.problems.append(Problem("agent-config", path, "not valid JSON: Claude Code cannot read its MCP servers"))
            for entry in servers:
                side.lines.append(f"Claude Code ({entry.scope}): MCP server lore in {entry.path} "
                                  f"-> {_program_words([entry.program])}")  # fmt: skip
                problem = _program_problem(entry.program, entry.path, f"Claude Code's MCP server lore ({entry.scope})",
                                           "`claude mcp add lore -- lore mcp`")  # fmt: skip
                if problem is not None:
                    side.problems.append(problem)
            if found_any and not servers:
                side.lines.append("Claude Code: no lore MCP server (optional: `claude mcp add lore -- lore mcp`)")
        if not found_any:
            absent.append(label)
    if not side.agents:
        side.lines.append("No agent runs lore's hooks: `lore hook install` (Claude Code) or "
                          "`lore hook install --agent NAME` wires them in (docs/agents.md)")  # fmt: skip
    elif absent:
        side.lines.append(f"lore not installed: {', '.join(absent)}")


def check_index(side: AgentSide, locations: Locations) -> tuple[Path, Any] | None:
    from lore.index.manager import IndexManager

    status = IndexManager(locations).status()
    meta = status.meta
    side.index = {"index_dir": str(status.index_dir), "exists": status.exists, "stale": status.stale,
                  "reason": status.reason, "revision": meta.revision if meta else None,
                  "records": meta.records if meta else 0}  # fmt: skip
    if not status.exists:
        side.lines.append(f"Index: missing ({status.reason}); the next search or `lore index` builds it")
        return None
    state = f"stale ({status.reason}); the next search refreshes it" if status.stale else "up to date"
    side.lines.append(f"Index: {state} ({meta.records if meta else 0} records, revision {side.index['revision']})")
    return IndexManager(locations).read_meta()


def _same_dir(a: object, b: Path) -> bool:
    try:
        return Path(str(a)).resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


def check_helper(side: AgentSide, locations: Locations, settings: Settings, live: tuple[Path, Any] | None) -> None:
    from lore.agent import client

    index_dir = locations.index_dir
    status = client.read_status(index_dir, settings)
    auto = client.auto_start_enabled(settings)
    side.helper = {"running": status is not None, "auto_start": auto}
    if status is None:
        warming = client._warming_pid(index_dir, settings)
        if warming is not None:
            side.helper["pid"] = warming
            side.lines.append(f"Helper: starting (pid {warming})")
        elif auto:
            side.lines.append("Helper: not running (the session-start hook and the next prompt start it)")
        else:
            side.lines.append("Helper: not running, and auto-start is off (`lore server disable` or LORE_SERVER=off): "
                              "every prompt pays a cold search; `lore server enable` turns it back on")  # fmt: skip
        return
    pid = status.get("pid")
    side.helper.update({"pid": pid, "generation": status.get("generation"), "revision": status.get("revision"),
                        "requests": status.get("requests"), "lore": status.get("lore")})  # fmt: skip
    where = str(client.server_paths(index_dir, settings)["status"])
    stop = "`lore server stop` (the next prompt starts a fresh one)"
    reply = client.ask_server_reply({"op": "ping"}, time.monotonic() + HELPER_ANSWER_S, index_dir, settings)
    side.helper["answers"] = reply is not None
    if reply is None:
        side.problems.append(Problem("helper", where, f"the helper (pid {pid}) does not answer on its socket: "
                                                      f"the hooks fall back to cold searches; {stop}"))  # fmt: skip
    mine = client.running_lore()
    theirs = status.get("lore")
    if not isinstance(theirs, dict):
        side.problems.append(Problem("helper", where, f"the helper (pid {pid}) was started by an earlier lore that "
                                                      f"does not say which; {stop}"))  # fmt: skip
    elif (theirs.get("package"), theirs.get("version")) != (mine["package"], mine["version"]):
        side.problems.append(Problem("helper", where, f"the helper (pid {pid}) runs lore {theirs.get('version')} from "
                                                      f"{theirs.get('package')}, not this lore ({mine['version']} from "
                                                      f"{mine['package']}); {stop}"))  # fmt: skip
    if not _same_dir(status.get("data_dir"), locations.data_dir):
        side.problems.append(Problem("helper", where, f"the helper (pid {pid}) serves {status.get('data_dir')}, "
                                                      f"not {locations.data_dir}; {stop}"))  # fmt: skip
    served = f"{status.get('generation')} revision {status.get('revision')}"
    if live is not None:
        directory, meta = live
        # It revalidates every second and swaps in a refreshed index once warm: give it that long.
        end = time.monotonic() + HELPER_CATCH_UP_S
        while (status is not None and (status.get("generation"), status.get("revision")) != (directory.name, meta.revision)
               and time.monotonic() < end):  # fmt: skip
            time.sleep(0.1)
            status = client.read_status(index_dir, settings)
        if status is None:
            side.lines.append(f"Helper: pid {pid} exited while checked")
            return
        served = f"{status.get('generation')} revision {status.get('revision')}"
        if (status.get("generation"), status.get("revision")) != (directory.name, meta.revision):
            side.problems.append(Problem("helper", where, f"the helper (pid {pid}) serves {served}, the index is at "
                                                          f"{directory.name} revision {meta.revision}; {stop}"))  # fmt: skip
    busy = ", refreshing" if status.get("refreshing") else ""
    side.lines.append(f"Helper: pid {pid} serves {served}{busy}, answers: {'yes' if reply is not None else 'no'}")


def read_hook_log(path: Path) -> list[tuple[str, str, str]]:
    """(stamp, kind, message) of each line of the hook log's tail."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - HOOK_LOG_TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if len(data) == HOOK_LOG_TAIL_BYTES and lines:
        lines = lines[1:]  # began mid-line
    entries = []
    for line in lines:
        stamp, _, rest = line.partition(" ")
        kind, _, message = rest.partition(": ")
        if stamp and kind:
            entries.append((stamp, kind, message))
    return entries


def _routine(kind: str, message: str) -> bool:
    return kind == "server" and message.startswith(_ROUTINE_EXITS)


def check_hook_log(side: AgentSide, settings: Settings, now: float | None = None) -> None:
    from calendar import timegm

    from lore.paths import cache_dir

    path = cache_dir(settings) / "hook.log"
    now = time.time() if now is None else now
    errors = [entry for entry in read_hook_log(path) if not _routine(entry[1], entry[2])]

    def recent(stamp: str) -> bool:
        try:
            return now - timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) <= RECENT_S
        except ValueError:
            return False

    fresh = [entry for entry in errors if recent(entry[0])]
    side.hook_log = {"path": str(path), "errors": len(errors), "recent": len(fresh),
                     "last": [{"at": s, "kind": k, "message": m} for s, k, m in errors[-HOOK_LOG_SHOWN:]]}  # fmt: skip
    if not errors:
        side.lines.append(f"Hook log: no errors ({path})")
        return
    if not fresh:
        side.lines.append(f"Hook log: no errors in the last 24 hours ({len(errors)} older, the last at "
                          f"{errors[-1][0]}; {path})")  # fmt: skip
        return
    side.lines.append(f"Hook log: {len(fresh)} error(s) in the last 24 hours ({path})")
    for stamp, kind, message in fresh[-HOOK_LOG_SHOWN:]:
        side.problems.append(Problem("hook-log", str(path), f"{stamp} {kind}: {message}"))


def check_prompts(side: AgentSide, settings: Settings, now: float | None = None) -> None:
    """What the prompt hook handed over the last days: the share of prompts per tier, characters per prompt."""
    from lore.agent.log import prompt_summary, summary_line
    from lore.paths import cache_dir

    side.prompts = prompt_summary(cache_dir(settings), now=now)
    side.lines.append(summary_line(side.prompts))


def check_settings(side: AgentSide, settings: Settings) -> None:
    if not settings.hook:
        side.lines.append("LORE_HOOK is off in this environment: where the agent has it too, the hooks inject nothing")
    elif settings.hook_budget == 0:
        side.lines.append("LORE_HOOK_BUDGET=0 in this environment: the prompt hook injects nothing")


def diagnose_agent_side(locations: Locations, settings: Settings, cwd: Path | None = None) -> AgentSide:
    """Agents, index, helper, hook log: what stands between the memory and the agent."""
    side = AgentSide()
    check_agents(side, cwd)
    check_settings(side, settings)
    live = check_index(side, locations)
    check_helper(side, locations, settings, live)
    check_hook_log(side, settings)
    check_prompts(side, settings)
    return side

"""What of lore an agent's configuration holds, and which lore it runs: the agent half of ``lore doctor``.

Nothing here knows an agent's files. ``installed`` asks the installer itself
(``lore.agent.agents``): a dry-run uninstall lists every entry of lore's it would
remove (hooks, MCP server, rule file), and a dry-run install with the same
command lists what it would add (missing) or change (out of date). So an agent
the installer learns is checked with no change here. Claude Code's MCP server
is the one thing lore does not install (``claude mcp add`` writes it):
``claude_code_mcp`` reads Claude Code's own files for it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lore.errors import LoreError

# What a command's program is: this lore, another one, a path that does not exist, or not checkable.
PointsAt = Literal["this lore", "another lore", "missing", "unchecked"]


@dataclass(frozen=True)
class Program:
    """The executable a hook or MCP command runs, and whether it is the lore running now."""

    shown: str  # as the command names it
    path: str | None  # resolved (PATH looked up, ~ expanded); None when not found
    points_at: PointsAt
    python_m: bool = False  # ``python -m lore``: the interpreter's environment decides which lore

    def as_dict(self) -> dict[str, Any]:
        return {"shown": self.shown, "path": self.path, "points_at": self.points_at}


@dataclass
class Installation:
    """lore's entries in one agent's configuration of one scope."""

    agent: str
    scope: str
    files: list[str] = field(default_factory=list)
    commands: dict[str, str] = field(default_factory=dict)  # event or key -> command, as configured
    programs: list[Program] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what `lore hook install` would add
    outdated: list[str] = field(default_factory=list)  # what it would change, "event: old -> new"
    error: str | None = None  # a file the installer cannot read

    @property
    def installed(self) -> bool:
        return bool(self.commands)

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "scope": self.scope, "installed": self.installed, "files": self.files,
                "commands": self.commands, "programs": [p.as_dict() for p in self.programs],
                "missing": self.missing, "outdated": self.outdated, "error": self.error}  # fmt: skip


def _tokens(command: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        words = words[1:]  # VAR=value before the program
    return words


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _bin_dir(path: str) -> str:
    # The directory, resolved; not the file: a virtualenv's python is a symlink to the base interpreter.
    return os.path.realpath(os.path.dirname(os.path.abspath(path)))


def this_lore() -> str:
    """The ``lore`` executable of the running lore: the console script beside this interpreter, else argv[0]."""
    beside = Path(sys.executable).parent / "lore"
    if beside.is_file():
        return str(beside)
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) in ("lore", "lore.exe") and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    return str(beside)


def program_of(command: str) -> Program:
    """Which executable ``command`` runs and whether it is this lore (``lore``, ``python -m lore``, or a wrapper)."""
    from lore.agent.install import WRAPPER_NAMES

    words = _tokens(command)
    if not words:
        return Program(command, None, "unchecked")
    head = words[0]
    name = os.path.basename(head)
    if name in WRAPPER_NAMES or "$" in head:
        return Program(head, None, "unchecked")  # a wrapper runs $LORE_BIN or `lore` on PATH
    expanded = os.path.expanduser(head)
    path = expanded if os.sep in expanded else shutil.which(expanded)
    if path is None or not os.path.isfile(path):
        return Program(head, None, "missing")
    path = os.path.abspath(path)
    if name.startswith("python"):
        here = _bin_dir(sys.executable) == _bin_dir(path)
        return Program(head, path, "this lore" if here else "another lore", python_m=True)
    mine = this_lore()
    here = _same_file(path, mine) or _same_file(os.path.realpath(path), os.path.realpath(mine))
    return Program(head, path, "this lore" if here else "another lore")


# Entries that are whole files lore writes (Cursor's rule, OpenCode's plugin): their "command" is the file's path.
FILE_EVENTS = frozenset({"rule", "plugin"})


def _prefix(key: str, command: str) -> str | None:
    """The ``<lore>`` part of a command lore's installer wrote (``<lore> hook ...``, ``<lore> mcp``)."""
    if "mcp" in key.lower():
        return command[: -len(" mcp")] if command.endswith(" mcp") else None
    head, sep, _ = command.partition(" hook ")
    return head if sep else None


def installed(agent: str, scope: str, cwd: Path | None = None) -> Installation:
    """lore's entries in ``agent``'s configuration of ``scope``, the lore they run, and what is missing."""
    from lore.agent import agents

    found = Installation(agent, scope)
    try:
        outcomes = agents.uninstall(agent, scope=scope, cwd=cwd, dry_run=True)
    except LoreError as error:
        found.error = error.message
        return found
    prefixes: Counter[str] = Counter()
    for outcome in outcomes:
        removed = [change for change in outcome.changes if change.action == "removed"]
        if removed:
            found.files.append(str(outcome.path))
        for change in removed:
            found.commands[change.event] = change.command
            if change.event not in FILE_EVENTS:  # a generated file: a path, not a command
                prefix = _prefix(change.event, change.command)
                if prefix is not None:
                    prefixes[prefix] += 1
    if not found.commands:
        return found
    shown: dict[str, Program] = {}
    for key, command in found.commands.items():
        if key not in FILE_EVENTS:
            program = program_of(command)
            shown.setdefault(program.shown, program)
    found.programs = list(shown.values())
    if prefixes:
        # What `lore hook install` would write with the command the entries already use: the
        # events it would add are missing, the entries it would change are out of date.
        prefix = prefixes.most_common(1)[0][0]
        capture = agent == "claude-code" and any("--capture" in c for c in found.commands.values())
        try:
            plan = agents.install(agent, scope=scope, command_prefix=prefix, cwd=cwd, dry_run=True, capture=capture)
        except LoreError as error:
            found.error = error.message
            return found
        for outcome in plan:
            for change in outcome.changes:
                if change.action == "added":
                    found.missing.append(change.event)
                elif change.action == "updated":
                    found.outdated.append(change.describe().split(None, 1)[1])
    return found


@dataclass(frozen=True)
class McpEntry:
    scope: str  # user, local (this project, in ~/.claude.json) or project (.mcp.json)
    path: str
    command: str
    program: Program


def claude_code_mcp(cwd: Path | None = None) -> tuple[list[McpEntry], list[str]]:
    """lore's MCP server in Claude Code's own files (``claude mcp add`` writes them); and the files it could not read."""
    from lore.agent.agents import MCP_NAME, is_lore_mcp

    cwd = (cwd or Path.cwd()).absolute()
    user_file = Path.home() / ".claude.json"
    project_file = cwd / ".mcp.json"
    entries: list[McpEntry] = []
    unreadable: list[str] = []

    def load(path: Path) -> dict[str, Any]:
        try:
            parsed = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            unreadable.append(str(path))
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def add(scope: str, path: Path, servers: object) -> None:
        entry = servers.get(MCP_NAME) if isinstance(servers, dict) else None
        if is_lore_mcp(entry):
            assert isinstance(entry, dict)
            command = " ".join([shlex.quote(str(entry["command"])), *map(shlex.quote, map(str, entry.get("args") or []))])
            entries.append(McpEntry(scope, str(path), command, program_of(command)))

    user = load(user_file)
    add("user", user_file, user.get("mcpServers"))
    projects = user.get("projects")
    if isinstance(projects, dict):
        local = projects.get(str(cwd))
        if isinstance(local, dict):
            add("local", user_file, local.get("mcpServers"))
    add("project", project_file, load(project_file).get("mcpServers"))
    return entries, unreadable

"""Wire lore's Claude Code hooks into a ``settings.json``, and unwire them.

``plan_install`` and ``plan_uninstall`` are pure functions over the parsed
settings; ``install`` and ``uninstall`` read the file, back it up, and write the
result atomically. Every setting and hook that is not lore's stays where it was.

The settings shape (Claude Code hooks reference)::

    {"hooks": {"UserPromptSubmit": [{"matcher": "...", "hooks": [{"type": "command", "command": "...", "timeout": 5}]}]}}

A hook entry is lore's when its command runs the ``lore`` executable (any path)
with ``hook`` as the first argument, ``python -m lore hook ...``, or the
``lore-prompt-hook.sh`` wrapper from ``hooks/``.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from lore.errors import DataError, UsageError
from lore.store.fileio import atomic_write

Scope = Literal["user", "project"]
SCOPES: tuple[str, ...] = ("user", "project")


@dataclass(frozen=True)
class LoreHook:
    event: str
    subcommand: str
    timeout: int


# Events without tool matchers: the matcher is omitted, so each fires on every occurrence.
LORE_HOOKS: tuple[LoreHook, ...] = (
    LoreHook("UserPromptSubmit", "prompt", 5),
    LoreHook("SessionStart", "session-start", 10),
    LoreHook("PreCompact", "pre-compact", 30),
    LoreHook("Stop", "stop", 30),
)

# `lore hook install --capture`: the end-of-turn hooks also capture from the transcript, and SessionEnd is added.
CAPTURE_HOOKS: tuple[LoreHook, ...] = (
    LoreHook("UserPromptSubmit", "prompt", 5),
    LoreHook("SessionStart", "session-start", 10),
    LoreHook("PreCompact", "pre-compact --capture", 30),
    LoreHook("Stop", "stop --capture", 30),
    LoreHook("SessionEnd", "session-end --capture", 30),
)

WRAPPER_NAMES = frozenset({"lore-prompt-hook.sh"})


@dataclass(frozen=True)
class Change:
    """What happened to lore's hook for one event."""

    event: str
    action: Literal["added", "updated", "unchanged", "removed"]
    command: str
    old_command: str | None = None

    def describe(self) -> str:
        if self.action == "updated" and self.old_command is not None and self.old_command != self.command:
            return f"{self.action:<9} {self.event}: {self.old_command} -> {self.command}"
        return f"{self.action:<9} {self.event}: {self.command}"


@dataclass
class Outcome:
    """The result of ``install``/``uninstall``: what changed, where, and the backup."""

    path: Path
    scope: str
    changes: list[Change] = field(default_factory=list)
    backup: Path | None = None
    written: bool = False
    dry_run: bool = False
    diff: str = ""

    @property
    def changed(self) -> bool:
        return any(change.action != "unchanged" for change in self.changes)


# --------------------------------------------------------------------------- identification


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def is_lore_command(command: object) -> bool:
    """True when ``command`` runs a lore hook (``<path>/lore hook ...`` and friends)."""
    if not isinstance(command, str):
        return False
    tokens = _tokens(command.strip())
    if not tokens:
        return False
    # Leading VAR=value assignments (e.g. LORE_HOOK_BUDGET=800 lore hook prompt).
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        tokens = tokens[1:]
    if not tokens:
        return False
    head = os.path.basename(tokens[0])
    if head in WRAPPER_NAMES:
        return True
    if head in ("lore", "lore.exe"):
        return len(tokens) >= 2 and tokens[1] == "hook"
    if head.startswith("python"):
        words = python_m_lore_args(tokens[1:])
        return words is not None and words[:1] == ["hook"]
    return False


def python_m_lore_args(words: list[str]) -> list[str] | None:
    """The arguments after ``-m lore`` in a ``python`` command line (flags such as ``-P`` may come first); else None."""
    while words and words[0] != "-m" and re.fullmatch(r"-[A-Za-z]+", words[0]):
        words = words[1:]
    return words[2:] if words[:2] == ["-m", "lore"] else None


def is_lore_entry(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and entry.get("type", "command") == "command"
        and is_lore_command(entry.get("command"))
    )


def lore_command(command_prefix: str, hook: LoreHook, agent: str | None = None) -> str:
    """``<lore> hook <subcommand>``, with ``--agent NAME`` for agents other than Claude Code."""
    suffix = f" --agent {agent}" if agent and agent != "claude-code" else ""
    return f"{command_prefix} hook {hook.subcommand}{suffix}"


def find_lore_executable() -> str:
    """The absolute path of the running (or PATH's) ``lore``, else plain ``lore``."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) in ("lore", "lore.exe") and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    found = shutil.which("lore")
    return os.path.abspath(found) if found else "lore"


def default_command_prefix(scope: str) -> str:
    """Project settings are committed and shared, so they name ``lore`` on PATH, not this machine's path."""
    if scope == "project":
        return "lore"
    return shlex.quote(find_lore_executable())


# --------------------------------------------------------------------------- pure planning


def _check_shape(settings: object, path: Path | str | None = None,
                 events: frozenset[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Check the parts lore edits: ``hooks`` (only ``events`` of it when given) must hold matcher groups."""
    if not isinstance(settings, dict):
        raise DataError("settings must be a JSON object", path=path, hint="lore did not change the file")
    hooks = settings.get("hooks")
    if hooks is None:
        return settings
    if not isinstance(hooks, dict):
        raise DataError(
            "'hooks' must be an object", path=path, field="hooks", hint="lore did not change the file"
        )
    for event, groups in hooks.items():
        if events is not None and event not in events:
            continue  # another tool's key (Gemini keeps e.g. hooks.disabled here): not lore's to judge
        if not isinstance(groups, list):
            raise DataError(f"hooks.{event} must be a list of matcher groups", path=path, field=f"hooks.{event}",
                            hint="lore did not change the file")  # fmt: skip
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                raise DataError(f"hooks.{event} has a matcher group that is not {{matcher?, hooks: [...]}}",
                                path=path, field=f"hooks.{event}", hint="lore did not change the file")  # fmt: skip
    return settings


def _lore_commands_in(groups: list[Any]) -> list[str]:
    return [
        entry.get("command", "")
        for group in groups
        for entry in group.get("hooks", [])
        if is_lore_entry(entry)
    ]


def _install(
    settings: dict[str, Any], scope: str, command_prefix: str, hooks_wanted: tuple[LoreHook, ...] = LORE_HOOKS,
    agent: str | None = None, extra: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], list[Change]]:  # fmt: skip
    """Merge ``hooks_wanted`` (lore's entry per event) into ``settings``; ``extra`` adds keys per subcommand."""
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}", hint="use --scope user or --scope project")
    result = copy.deepcopy(_check_shape(settings, events=frozenset(h.event for h in hooks_wanted)))
    if result.get("hooks") is None:
        result["hooks"] = {}
    hooks = result["hooks"]
    changes: list[Change] = []
    for hook in hooks_wanted:
        command = lore_command(command_prefix, hook, agent)
        wanted = {"type": "command", "command": command, "timeout": hook.timeout,
                  **(extra or {}).get(hook.subcommand, {})}  # fmt: skip
        groups = hooks.setdefault(hook.event, [])
        existing = _lore_commands_in(groups)
        if not existing:
            groups.append({"hooks": [wanted]})
            changes.append(Change(hook.event, "added", command))
            continue
        unchanged = existing == [command] and _entry_matches(groups, wanted)
        kept = False
        new_groups = []
        for group in groups:
            entries = group.get("hooks", [])
            if not any(is_lore_entry(entry) for entry in entries):
                new_groups.append(group)
                continue
            new_entries = []
            for entry in entries:
                if not is_lore_entry(entry):
                    new_entries.append(entry)
                elif not kept:  # update the first lore entry in place, keeping any extra keys
                    new_entries.append({**entry, **wanted})
                    kept = True
                # any further lore entry for this event is a duplicate and is dropped
            if new_entries:
                new_groups.append({**group, "hooks": new_entries})
        hooks[hook.event] = new_groups
        changes.append(Change(hook.event, "unchanged" if unchanged else "updated", command, existing[0]))
    return result, changes


def _entry_matches(groups: list[Any], wanted: dict[str, Any]) -> bool:
    for group in groups:
        for entry in group.get("hooks", []):
            if is_lore_entry(entry):
                return all(entry.get(key) == value for key, value in wanted.items())
    return False


def _uninstall(settings: dict[str, Any], events: frozenset[str] | None = None) -> tuple[dict[str, Any], list[Change]]:
    """Remove lore's entries (from ``events`` only, when given) and the groups and lists left empty."""
    result = copy.deepcopy(_check_shape(settings, events=events))
    hooks = result.get("hooks")
    changes: list[Change] = []
    if not isinstance(hooks, dict):
        return result, changes
    for event in list(hooks):
        if events is not None and event not in events:
            continue
        groups = hooks[event]
        removed = _lore_commands_in(groups)
        if not removed:
            continue
        new_groups = []
        for group in groups:
            entries = group.get("hooks", [])
            kept = [entry for entry in entries if not is_lore_entry(entry)]
            if len(kept) == len(entries):
                new_groups.append(group)
            elif kept:
                new_groups.append({**group, "hooks": kept})
            # a group that held only lore entries goes with them
        if new_groups:
            hooks[event] = new_groups
        else:
            del hooks[event]
        changes.extend(Change(event, "removed", command) for command in removed)
    if changes and not hooks:  # lore's entries were all there was
        del result["hooks"]
    return result, changes


def plan_install(
    settings: dict[str, Any], scope: str = "user", command_prefix: str = "lore"
) -> dict[str, Any]:
    """The settings with lore's hooks added or updated; ``settings`` itself is not modified."""
    return _install(settings, scope, command_prefix)[0]


def plan_uninstall(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings without any lore hook entry; emptied groups and event lists are removed."""
    return _uninstall(settings)[0]


# --------------------------------------------------------------------------- files


def settings_path(scope: str, cwd: Path | None = None) -> Path:
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    if scope == "project":
        return (cwd or Path.cwd()) / ".claude" / "settings.json"
    raise UsageError(f"unknown scope {scope!r}", hint="use --scope user or --scope project")


def read_settings(path: Path, events: frozenset[str] | None = None) -> tuple[dict[str, Any], bytes | None]:
    """Parse ``path``; a missing or blank file is ``{}``. Raises ``DataError`` with the line on bad JSON.

    ``events``: check only these keys of ``hooks`` (another agent's file holds other keys there).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        raise DataError(f"cannot read settings: {exc.strerror}", path=path) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError("settings are not UTF-8", path=path, hint="lore did not change the file") from exc
    if not text.strip():
        return {}, raw
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno,
                        hint="fix the file by hand; lore did not change it") from exc  # fmt: skip
    return _check_shape(parsed, path, events), raw


def _indent_of(raw: bytes | None) -> int | str:
    if raw:
        match = re.search(rb"\n([ \t]+)\S", raw)
        if match:
            indent = match.group(1).decode()
            return indent if "\t" in indent else len(indent)
    return 2


def render_settings(settings: dict[str, Any], indent: int | str = 2) -> str:
    return json.dumps(settings, indent=indent, ensure_ascii=False) + "\n"


def _diff(before: dict[str, Any], after: dict[str, Any], path: Path) -> str:
    lines = difflib.unified_diff(render_settings(before).splitlines(keepends=True),
                                 render_settings(after).splitlines(keepends=True),
                                 fromfile=f"{path} (before)", tofile=f"{path} (after)")  # fmt: skip
    return "".join(lines)


def backup_path(path: Path, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{counter}")
        counter += 1
    return candidate


def _apply(path: Path, scope: str, before: dict[str, Any], raw: bytes | None, after: dict[str, Any],
           changes: list[Change], dry_run: bool, now: datetime | None) -> Outcome:  # fmt: skip
    outcome = Outcome(path=path, scope=scope, changes=changes, dry_run=dry_run)
    if not outcome.changed:
        return outcome
    outcome.diff = _diff(before, after, path)
    if dry_run:
        return outcome
    if raw is not None:
        outcome.backup = backup_path(path, now)
        shutil.copy2(path, outcome.backup)  # keeps the mode: settings may hold secrets in "env"
    atomic_write(path, render_settings(after, _indent_of(raw)).encode("utf-8"))
    outcome.written = True
    return outcome


def install(path: Path | None = None, *, scope: str = "user", command_prefix: str | None = None,
            dry_run: bool = False, now: datetime | None = None, capture: bool = False) -> Outcome:  # fmt: skip
    """Add or update lore's hooks in the settings file of ``scope`` (or ``path``); ``capture``: CAPTURE_HOOKS."""
    path = path or settings_path(scope)
    before, raw = read_settings(path)
    after, changes = _install(before, scope, command_prefix or default_command_prefix(scope),
                              CAPTURE_HOOKS if capture else LORE_HOOKS)  # fmt: skip
    return _apply(path, scope, before, raw, after, changes, dry_run, now)


def uninstall(path: Path | None = None, *, scope: str = "user", dry_run: bool = False,
              now: datetime | None = None) -> Outcome:  # fmt: skip
    """Remove every lore hook entry from the settings file of ``scope`` (or ``path``)."""
    path = path or settings_path(scope)
    before, raw = read_settings(path)
    if raw is None:
        return Outcome(path=path, scope=scope, dry_run=dry_run)
    after, changes = _uninstall(before)
    return _apply(path, scope, before, raw, after, changes, dry_run, now)

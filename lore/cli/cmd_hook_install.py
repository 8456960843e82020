"""`lore hook install` / `lore hook uninstall`: wire lore into an agent's configuration (Claude Code by default)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import typer

from lore.agent.hook import AGENTS
from lore.api import Lore
from lore.cli.base import state
from lore.cli.cmd_hook import hook_app

if TYPE_CHECKING:
    from lore.agent.install import Outcome


SCOPE_HELP = (
    "user: your configuration (~/.claude/settings.json for Claude Code); project: this directory's "
    "(./.claude/settings.json; committed, so it names `lore` on PATH)."
)
AGENT_HELP = "The agent to wire lore into (docs/agents.md says what each one gets)."


class ScopeChoice(StrEnum):
    user = "user"
    project = "project"


# The registered agents (lore.agent.agents.REGISTRY, whose names lore.agent.hook.AGENTS lists).
# (mypy cannot see members made from a variable; the CLI's tests pin the choices.)
AgentChoice = StrEnum("AgentChoice", {name.replace("-", "_"): name for name in AGENTS})  # type: ignore[misc]


def _report(outcome: Outcome, verb: str) -> None:
    if outcome.dry_run and outcome.changed:
        typer.echo(outcome.diff, nl=False)
    if not outcome.changed:
        what = "lore already installed in" if verb == "install" else "nothing of lore's in"
        if outcome.path.name == "settings.json" and outcome.path.parent.name == ".claude":
            what = "lore hooks already installed in" if verb == "install" else "no lore hooks in"
        typer.echo(f"{what} {outcome.path}; nothing changed.")
        return
    heading = "Would change" if outcome.dry_run else "Changed"
    typer.echo(f"{heading} {outcome.path} (scope {outcome.scope}):")
    for change in outcome.changes:
        typer.echo(f"  {change.describe()}")
    if outcome.dry_run:
        typer.echo("Dry run: nothing written.")
    elif outcome.backup is not None:
        typer.echo(f"Backup: {outcome.backup}")
    else:
        typer.echo("Backup: none (the file did not exist)")


@hook_app.command("install")
def install_command(
    ctx: typer.Context,
    scope: ScopeChoice = typer.Option(ScopeChoice.user, "--scope", help=SCOPE_HELP),
    agent: AgentChoice = typer.Option(AgentChoice("claude-code"), "--agent", help=AGENT_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the change as a diff; write nothing."),
    capture: bool = typer.Option(False, "--capture", help="Claude Code: the Stop, PreCompact and SessionEnd hooks also "
                                 "capture candidate records from the session transcript, in the background."),
) -> None:
    """Wire lore into an agent: its hooks (prompt, session start, compaction, stop) and, but for Claude Code, its MCP server.

    Idempotent; other settings and hooks are kept in order; a backup is written first.
    See docs/agents.md for what each agent supports.
    """
    from lore.agent import agents

    outcomes = agents.install(agent.value, scope=scope.value, dry_run=dry_run, capture=capture)
    if not outcomes:
        typer.echo("nothing to change.")
    for outcome in outcomes:
        _report(outcome, "install")
    if not dry_run and any(outcome.changed for outcome in outcomes):
        for note in agents.after_install_notes(agent.value):
            typer.echo(f"Note: {note}", err=True)
    if not dry_run and agents.get(agent.value).mcp is not None:
        _remember_mcp_handshakes(state(ctx))
    from lore.agent import client

    if not dry_run and not client.auto_start_enabled(state(ctx).settings):
        # Cold, the prompt hook rarely fits its 400 ms deadline on a large store
        # (imports and index load alone take ~250 ms on a small machine).
        typer.echo("Note: the warm helper is turned off (`lore server disable` or LORE_SERVER=off): every prompt "
                   "pays a cold search; `lore server enable` lets session start launch it.", err=True)  # fmt: skip


def _remember_mcp_handshakes(st: Lore) -> None:
    """Let the agent's first `lore mcp` answer its handshake at once (see lore.agent.mcp_start)."""
    from lore.agent.mcp_start import remember_handshakes, require_sdk
    from lore.errors import LoreError

    try:
        require_sdk()
    except LoreError:
        typer.echo("Note: the MCP server needs the mcp extra: pip install 'lore[mcp]'", err=True)
        return
    try:
        versions = remember_handshakes(st.locations, settings=st.settings)
    except LoreError as error:
        typer.echo(f"Note: `lore mcp` cannot start: {error.message}", err=True)
        return
    typer.echo(f"Remembered the MCP SDK's handshake answers ({len(versions)} protocol versions): "
               "`lore mcp` answers a client's first requests while the SDK loads.")  # fmt: skip


@hook_app.command("uninstall")
def uninstall_command(
    scope: ScopeChoice = typer.Option(ScopeChoice.user, "--scope", help=SCOPE_HELP),
    agent: AgentChoice = typer.Option(AgentChoice("claude-code"), "--agent", help=AGENT_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the change as a diff; write nothing."),
) -> None:
    """Remove lore from an agent's configuration, leaving every other hook and server alone."""
    from lore.agent import agents

    outcomes = agents.uninstall(agent.value, scope=scope.value, dry_run=dry_run)
    if not outcomes:
        typer.echo(f"no {agent.value} configuration of lore's found; nothing changed.")
    for outcome in outcomes:
        _report(outcome, "uninstall")

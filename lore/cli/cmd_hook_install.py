"""`lore hook install` / `lore hook uninstall`: wire lore's hooks into Claude Code's settings.json."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import typer

from lore.cli.cmd_hook import hook_app

if TYPE_CHECKING:
    from lore.hook_install import Outcome


SCOPE_HELP = (
    "user: ~/.claude/settings.json; project: ./.claude/settings.json (committed, so it names `lore` on PATH)."
)


class ScopeChoice(StrEnum):
    user = "user"
    project = "project"


def _report(outcome: Outcome, verb: str) -> None:
    if outcome.dry_run and outcome.changed:
        typer.echo(outcome.diff, nl=False)
    if not outcome.changed:
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
    scope: ScopeChoice = typer.Option(ScopeChoice.user, "--scope", help=SCOPE_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the change as a diff; write nothing."),
) -> None:
    """Add lore's hooks (prompt, session-start, pre-compact, stop) to Claude Code's settings.json.

    Idempotent; other settings and hooks are kept in order; a backup is written first.
    """
    from lore.hook_install import install

    _report(install(scope=scope.value, dry_run=dry_run), "install")
    from lore import server

    if not dry_run and not server.auto_start_enabled():
        # Cold, the prompt hook rarely fits its 400 ms deadline on a large store
        # (imports and index load alone take ~250 ms on a small machine).
        typer.echo("Note: the warm helper is turned off (`lore server disable` or LORE_SERVER=off): every prompt "
                   "pays a cold search; `lore server enable` lets session start launch it.", err=True)  # fmt: skip


@hook_app.command("uninstall")
def uninstall_command(
    scope: ScopeChoice = typer.Option(ScopeChoice.user, "--scope", help=SCOPE_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the change as a diff; write nothing."),
) -> None:
    """Remove lore's hooks from Claude Code's settings.json, leaving every other hook alone."""
    from lore.hook_install import uninstall

    _report(uninstall(scope=scope.value, dry_run=dry_run), "uninstall")

"""Commands that move memory in and out: export, import lore-export|bash-lore|mcp-memory|claude-code|claude-memory."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from lore.cli.base import app, lazy_module, state

if TYPE_CHECKING:
    from lore import transfer
else:
    transfer = lazy_module("lore.transfer")

import_app = typer.Typer(help="Merge records and edges from another memory (idempotent; --dry-run to preview).",
                         no_args_is_help=True)  # fmt: skip
app.add_typer(import_app, name="import")

DRY_RUN = typer.Option(False, "--dry-run", help="Show what would be imported; change nothing.")
NO_REDACT = typer.Option(False, "--no-redact", help="Import text exactly as given, secrets included.")


@app.command()
def export(
    ctx: typer.Context,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file (default: stdout)."),
) -> None:
    """Write every record and edge as portable JSON Lines (deterministic order)."""
    store = state(ctx).store
    if out is None:
        transfer.write_export(store, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    with out.open("wb") as handle:
        count = transfer.write_export(store, handle)
    typer.echo(f"Exported {count} line(s) to {out}", err=True)


def _merge(ctx: typer.Context, source: transfer.Source, dry_run: bool, no_redact: bool) -> None:
    from lore.cli.cmd_index import terminal_progress

    # A bar on a terminal (stderr) once the import has run for a second; nothing otherwise.
    bar, stop = terminal_progress()
    try:
        summary = transfer.merge(state(ctx).store, source, dry_run=dry_run, redact=not no_redact,
                                 progress=lambda done, total: bar("import", done, total))  # fmt: skip
    finally:
        stop()
    for problem in summary.problems:
        typer.echo(f"Warning: {problem}", err=True)
    if summary.redactions:
        kinds = ", ".join(sorted(set(summary.redactions)))
        typer.echo(f"Redacted {len(summary.redactions)} secret(s) before storing: {kinds}", err=True)
    if dry_run:
        typer.echo("Dry run: nothing was written.")
    for line in summary.lines():
        typer.echo(line)


@import_app.command("lore-export")
def import_lore_export(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="A file written by `lore export`."),
    dry_run: bool = DRY_RUN,
    no_redact: bool = NO_REDACT,
) -> None:
    """Merge a `lore export` file into the data dir."""
    _merge(ctx, transfer.read_lore_export(file), dry_run, no_redact)


@import_app.command("bash-lore")
def import_bash_lore(
    ctx: typer.Context,
    directory: Path = typer.Argument(..., help="Another Lore data directory (the original bash layout)."),
    dry_run: bool = DRY_RUN,
    no_redact: bool = NO_REDACT,
) -> None:
    """Merge the records and edges of another Lore data dir."""
    _merge(ctx, transfer.read_bash_lore(directory), dry_run, no_redact)


@import_app.command("mcp-memory")
def import_mcp_memory(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="The MCP memory server's JSON Lines file (entities and relations)."),
    dry_run: bool = DRY_RUN,
    no_redact: bool = NO_REDACT,
) -> None:
    """Import MCP memory entities (one observation each) and relations (typed edges)."""
    _merge(ctx, transfer.read_mcp_memory(file, project=state(ctx).given_project), dry_run, no_redact)


@import_app.command("claude-code")
def import_claude_code(
    ctx: typer.Context,
    project: str | None = typer.Option(None, "--project", help="Only this project's sessions (its name or directory)."),
    since: str | None = typer.Option(None, "--since", help="Only transcripts written since this date (2026-01-31, 7d, ...)."),
    dry_run: bool = DRY_RUN,
    batch: int = typer.Option(50, "--batch", min=1,  # lore.sessions.claude_code.BATCH_TRANSCRIPTS (a test pins them)
                               help="Transcripts written together (a killed import reads its last batch again)."),
) -> None:
    """Backfill candidates from Claude Code's session transcripts (~/.claude/projects); idempotent, resumable."""
    from datetime import UTC, datetime

    from lore.sessions import claude_code
    from lore.timeparse import parse_when

    st = state(ctx)
    home = claude_code.config_dir(os.environ.get("CLAUDE_CONFIG_DIR"))  # Claude Code's variable, read where it is asked for
    paths = claude_code.transcripts(home / "projects", project, parse_when(since, datetime.now(UTC)) if since else None)
    store = st.store_for("capture")
    step, done = _progress(len(paths))
    try:
        summary = claude_code.import_transcripts(store, paths, project=st.given_project, dry_run=dry_run, step=step,
                                                 settings=st.settings, batch_size=batch)  # fmt: skip
    finally:
        done()
    for warning in summary.warnings:
        typer.echo(f"Warning: {warning}", err=True)
    for notice in summary.notices:
        typer.echo(f"Note: {notice}", err=True)
    if dry_run:
        typer.echo("Dry run: nothing was written.")
    for line in summary.lines():
        typer.echo(line)
    if summary.added and not dry_run:
        typer.echo("Review them with `lore inbox`.")


def _progress(total: int) -> tuple[Callable[[Path], None] | None, Callable[[], None]]:
    """A progress bar on a terminal (stderr), nothing otherwise."""
    if total < 2 or not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import Progress

    bar = Progress(transient=True)
    task = bar.add_task("transcripts", total=total)
    bar.start()
    return (lambda path: bar.advance(task)), bar.stop


@import_app.command("claude-memory")
def import_claude_memory(
    ctx: typer.Context,
    directory: Path | None = typer.Option(None, "--dir", help="The project directory (default: the git work tree here)."),
    dry_run: bool = DRY_RUN,
    no_redact: bool = NO_REDACT,
) -> None:
    """Import CLAUDE.md files (user, project, local, rules) and Claude Code's auto-memory notes, one observation per item."""
    from lore.sessions import claude_code

    st = state(ctx)
    root = claude_code.project_root((directory or Path.cwd()).absolute())
    home = claude_code.config_dir(os.environ.get("CLAUDE_CONFIG_DIR"))  # Claude Code's variable, read where it is asked for
    _merge(ctx, claude_code.read_claude_memory(root, st.current_project(root), home), dry_run, no_redact)

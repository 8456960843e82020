"""Commands that move memory in and out: export, import lore-export|bash-lore|mcp-memory."""

from __future__ import annotations

import sys
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
    store = state(ctx).store()
    if out is None:
        transfer.write_export(store, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    with out.open("wb") as handle:
        count = transfer.write_export(store, handle)
    typer.echo(f"Exported {count} line(s) to {out}", err=True)


def _merge(ctx: typer.Context, source: transfer.Source, dry_run: bool, no_redact: bool) -> None:
    summary = transfer.merge(state(ctx).store(), source, dry_run=dry_run, redact=not no_redact)
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
    _merge(ctx, transfer.read_mcp_memory(file, project=state(ctx).project), dry_run, no_redact)

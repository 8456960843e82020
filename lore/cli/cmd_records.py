"""Commands that act on stored records and their edges: retract, delete, supersede, link, unlink, restore, audit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
import typer

from lore.cli.base import app, lazy_module, state
from lore.errors import UsageError
from lore.render.records import KIND_LABEL

if TYPE_CHECKING:
    from lore import capture
else:
    capture = lazy_module("lore.capture")

audit_app = typer.Typer(help="Inspect and verify the hash-chained audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@app.command()
def retract(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., help="Record to retract."),
    reason: str = typer.Option(..., "--reason", help="Why it no longer holds."),
) -> None:
    """Retract a record: it stays in the file but is hidden from search unless --all."""
    record = capture.retract(state(ctx).store, record_id, reason)
    typer.echo(f"Retracted {KIND_LABEL[record.kind]} {record.id}: {record.title}")


@app.command()
def delete(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., help="Record to delete."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Confirm the deletion."),
) -> None:
    """Delete a record and its edges for good (prefer `retract`, which keeps history)."""
    if not yes:
        raise UsageError("delete removes the record from its file for good", hint="add --yes to confirm, or use `lore retract`")
    record = state(ctx).store.delete(record_id)
    typer.echo(f"Deleted {KIND_LABEL[record.kind]} {record.id}: {record.title}")


@app.command()
def supersede(
    ctx: typer.Context,
    old_id: str = typer.Argument(..., help="The record that no longer holds."),
    new_id: str = typer.Argument(..., help="The record that replaces it."),
) -> None:
    """Mark OLD as superseded by NEW (status, superseded_by, and a supersedes edge)."""
    record = capture.supersede(state(ctx).store, old_id, new_id)
    typer.echo(f"{record.id} is superseded by {record.raw.get('superseded_by')}")


@app.command()
def link(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="From record id."),
    target: str = typer.Argument(..., help="To record id."),
    relation: str = typer.Argument("relates_to", help="Relation (relates_to, depends_on, implements, learned_from, affects, produces, contradicts, supersedes, derived_from, part_of, summarized_by)."),
    weight: float = typer.Option(1.0, "--weight", min=0.0, help="Edge weight."),
) -> None:
    """Add a typed edge between two records."""
    edge = state(ctx).store.link(source, target, relation, weight=weight)
    typer.echo(f"Linked {edge.source} -{edge.relation}-> {edge.target}")


@app.command()
def unlink(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="From record id."),
    target: str = typer.Argument(..., help="To record id."),
    relation: str | None = typer.Option(None, "--relation", help="Only edges with this relation."),
) -> None:
    """Remove the edges from SOURCE to TARGET."""
    removed = state(ctx).store.unlink(source, target, relation)
    typer.echo(f"Removed {removed} edge(s) from {source} to {target}")


@app.command()
def restore(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., help="A retracted (or pruned) record."),
) -> None:
    """Make a retracted record active again."""
    from lore.curate.reliability import restore as run_restore

    record = run_restore(state(ctx).store, record_id)
    typer.echo(f"Restored {KIND_LABEL[record.kind]} {record.id}: {record.title}")


@audit_app.command("verify")
def audit_verify(ctx: typer.Context) -> None:
    """Check the audit chain; names the first edited, removed or reordered entry."""
    from lore.store import audit

    store = state(ctx).store
    store.require()
    checked, problem = audit.verify(store.data_dir)
    if problem is None:
        typer.echo(f"Audit log intact: {checked} entries")
        return
    where = f"{store.data_dir / audit.AUDIT_PATH}:{problem.line}"
    seq = f"seq {problem.seq}" if problem.seq is not None else f"line {problem.line}"
    typer.echo(f"Audit log broken at {seq} ({where}): {problem.message}", err=True)
    raise typer.Exit(1)


@audit_app.command("log")
def audit_log(
    ctx: typer.Context,
    record_id: str | None = typer.Option(None, "--id", help="Only entries about this record."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines."),
) -> None:
    """Show the audit history."""
    from lore.store import audit

    store = state(ctx).store
    store.require()
    for entry in audit.history(store.data_dir, record_id):
        if as_json:
            typer.echo(orjson.dumps(entry).decode())
        else:
            detail = entry.get("detail")
            shown = {k: v for k, v in detail.items() if v is not None} if isinstance(detail, dict) else {}
            extra = "".join(f" {k}={v}" for k, v in shown.items())
            typer.echo(f"{entry.get('seq'):>5} {entry.get('timestamp')} {entry.get('op'):<9} {entry.get('id')} {entry.get('actor')}{extra}")

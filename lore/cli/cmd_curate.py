"""Commands that change records: retract, restore, delete, supersede, link, unlink, outcome (validate), prune, reflect, audit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    record = capture.retract(state(ctx).store(), record_id, reason)
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
    record = state(ctx).store().delete(record_id)
    typer.echo(f"Deleted {KIND_LABEL[record.kind]} {record.id}: {record.title}")


@app.command()
def supersede(
    ctx: typer.Context,
    old_id: str = typer.Argument(..., help="The record that no longer holds."),
    new_id: str = typer.Argument(..., help="The record that replaces it."),
) -> None:
    """Mark OLD as superseded by NEW (status, superseded_by, and a supersedes edge)."""
    record = capture.supersede(state(ctx).store(), old_id, new_id)
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
    edge = state(ctx).store().link(source, target, relation, weight=weight)
    typer.echo(f"Linked {edge.source} -{edge.relation}-> {edge.target}")


@app.command()
def unlink(
    ctx: typer.Context,
    source: str = typer.Argument(..., help="From record id."),
    target: str = typer.Argument(..., help="To record id."),
    relation: str | None = typer.Option(None, "--relation", help="Only edges with this relation."),
) -> None:
    """Remove the edges from SOURCE to TARGET."""
    removed = state(ctx).store().unlink(source, target, relation)
    typer.echo(f"Removed {removed} edge(s) from {source} to {target}")


def _outcome_line(record: Any, success: bool) -> str:
    from lore.curate.reliability import failures, successes

    what = "success" if success else "failure"
    return (f"Recorded {what} of {record.id}: {successes(record)} success(es), {failures(record)} failure(s), "
            f"confidence {record.confidence:.2f}")  # fmt: skip


@app.command()
def outcome(
    ctx: typer.Context,
    pattern_id: str = typer.Argument(..., help="Pattern (or lesson) that was applied."),
    success: bool = typer.Option(..., "--success/--failure", help="Whether applying it worked."),
) -> None:
    """Count one success or failure of a pattern; its confidence follows the counts (docs/api.md)."""
    from lore.curate.reliability import record_outcome

    record = record_outcome(state(ctx).store(), pattern_id, success)
    typer.echo(_outcome_line(record, success))


@app.command()
def validate(
    ctx: typer.Context,
    pattern_id: str = typer.Argument(..., help="Pattern that proved itself again."),
) -> None:
    """Alias of `lore outcome ID --success` (the original Lore's name)."""
    record = capture.validate_pattern(state(ctx).store(), pattern_id)
    typer.echo(f"Validated {record.id}: {record.raw.get('validations')} validation(s), confidence {record.confidence:.2f}")


@app.command()
def prune(
    ctx: typer.Context,
    below: float = typer.Option(..., "--below", min=0.0, max=1.0, help="Retract patterns whose confidence failures brought below this."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be retracted; change nothing."),
) -> None:
    """Retract unreliable patterns (reversible: `lore restore ID`; audited as prune)."""
    from lore.curate.reliability import failures, successes
    from lore.curate.reliability import prune as run_prune

    found = run_prune(state(ctx).store(), below, dry_run=dry_run)
    verb = "Would retract" if dry_run else "Retracted"
    for item in found:
        record = item.record
        typer.echo(f"{verb} {record.id} (confidence {item.reliability:.2f}, {successes(record)} success(es), "
                   f"{failures(record)} failure(s)): {record.title}")  # fmt: skip
    if not found:
        typer.echo(f"No pattern with a recorded failure is below {below:.2f}")


@app.command()
def reflect(
    ctx: typer.Context,
    topic: str | None = typer.Argument(None, help="What to reflect on (default: the newest memories)."),
    lookback: int = typer.Option(50, "--lookback", min=1, max=1000, help="How many records to consider."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored reflection as JSON."),
) -> None:
    """Store a reflection: a summary of recent memories (on TOPIC), linked to what it was drawn from.

    LORE_LLM_CMD writes it when set; otherwise it names the most central records and what links them.
    """
    import warnings

    from lore.api import Lore
    from lore.render.records import record_json
    from lore.store.audit import actor_from_env

    st = state(ctx)
    memory = Lore(st.data_dir, st.index_dir, st.current_project(), actor=actor_from_env("cli"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = memory.reflect(topic, lookback)
    memory.close()
    for warning in caught:
        typer.echo(f"Warning: {warning.message}", err=True)
    if as_json:
        typer.echo(orjson.dumps(record_json(record)).decode())
    else:
        typer.echo(f"Reflected {record.id} ({record.raw.get('method')}, from {', '.join(record.raw.get('derived_from') or [])})")
        typer.echo(record.raw.get("content") or "")


@app.command()
def restore(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., help="A retracted (or pruned) record."),
) -> None:
    """Make a retracted record active again."""
    from lore.curate.reliability import restore as run_restore

    record = run_restore(state(ctx).store(), record_id)
    typer.echo(f"Restored {KIND_LABEL[record.kind]} {record.id}: {record.title}")


@audit_app.command("verify")
def audit_verify(ctx: typer.Context) -> None:
    """Check the audit chain; names the first edited, removed or reordered entry."""
    from lore.store import audit

    store = state(ctx).store()
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

    store = state(ctx).store()
    store.require()
    for entry in audit.history(store.data_dir, record_id):
        if as_json:
            typer.echo(orjson.dumps(entry).decode())
        else:
            detail = entry.get("detail")
            shown = {k: v for k, v in detail.items() if v is not None} if isinstance(detail, dict) else {}
            extra = "".join(f" {k}={v}" for k, v in shown.items())
            typer.echo(f"{entry.get('seq'):>5} {entry.get('timestamp')} {entry.get('op'):<9} {entry.get('id')} {entry.get('actor')}{extra}")

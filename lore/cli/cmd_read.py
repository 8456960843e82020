"""Commands that read the store directly: show, list, resume, stats, doctor."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson
import typer

from lore.cli.base import app, state
from lore.errors import NotFoundError
from lore.render.records import KIND_LABEL, handoff_text, list_line, record_json, show_text
from lore.store.records import normalise_kind

if TYPE_CHECKING:
    from lore.store.store import Snapshot
from lore.timeparse import parse_when


def _now() -> datetime:
    return datetime.now(UTC)


def _warn_load(snapshot: Snapshot, quiet: bool = False) -> None:
    if quiet or not snapshot.warnings:
        return
    for warning in snapshot.warnings[:5]:
        typer.echo(f"Warning: {warning}", err=True)
    if len(snapshot.warnings) > 5:
        typer.echo(f"Warning: {len(snapshot.warnings) - 5} more problem(s); run `lore doctor`", err=True)


@app.command()
def show(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., help="Record id (a unique prefix works)."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as JSON."),
) -> None:
    """Show one record in full, with its links."""
    store = state(ctx).store
    store.require()
    snapshot = store.load()
    record = snapshot.get(record_id)
    from lore.agent.log import log_opened

    log_opened(record.id, "cli")  # a pointer the hook handed may be what brought the reader here
    if as_json:
        payload = record_json(record)
        payload["links"] = snapshot.links_of(record.id)
        typer.echo(orjson.dumps(payload).decode())
        return
    links = [(link.direction, link.relation, link.other_id, link.other) for link in snapshot.links(record.id)]
    typer.echo(show_text(record, _now(), links), nl=False)


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    kind: str | None = typer.Option(None, "--type", help="Only this type (decision, pattern, anti-pattern, lesson, handoff, failure, observation)."),
    project: str | None = typer.Option(None, "--project", help="Only this project."),
    tag: list[str] | None = typer.Option(None, "--tag", help="Only records with this tag (repeatable: all must match)."),
    since: str | None = typer.Option(None, "--since", help="Only records at or after this time (2025-03-01, 30d, 6mo)."),
    until: str | None = typer.Option(None, "--until", help="Only records before this time."),
    include_all: bool = typer.Option(False, "--all", help="Include superseded and retracted records."),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="At most this many (newest first)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List records, newest first."""
    store = state(ctx).store
    store.require()
    snapshot = store.load()
    _warn_load(snapshot)
    now = _now()
    selected = snapshot.select(kinds={normalise_kind(kind)} if kind else None, project=project, tags=tag or (),
                               since=parse_when(since, now) if since else None,
                               until=parse_when(until, now) if until else None,
                               include_all=include_all, limit=limit)  # fmt: skip
    if as_json:
        typer.echo(orjson.dumps([record_json(r) for r in selected]).decode())
        return
    # Columns as wide as this listing needs: session ids are 32 characters, decision ids 12.
    id_width = max((len(r.id) for r in selected), default=0)
    project_width = max((len(r.project or "-") for r in selected), default=1)
    for record in selected:
        typer.echo(list_line(record, id_width=id_width, project_width=project_width))
    if not selected:
        typer.echo("No records match.", err=True)


@app.command()
def resume(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show the latest handoff for the current project."""
    st = state(ctx)
    store = st.store
    store.require()
    project = st.current_project()
    from lore.agent.session import latest_handoff

    latest = latest_handoff(store.load(kinds=("handoff",)), project)
    if latest is None:
        raise NotFoundError(f"no handoff for project {project!r}", hint="leave one with `lore handoff TEXT --next ...`")
    if as_json:
        typer.echo(orjson.dumps(record_json(latest)).decode())
    else:
        typer.echo(handoff_text(latest, _now()), nl=False)


@app.command()
def stats(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Count records by type, status and project."""
    from lore.store.health import summary

    store = state(ctx).store
    store.require()
    snapshot = store.load()
    payload = summary(store, snapshot)
    if as_json:
        typer.echo(orjson.dumps(payload).decode())
        return
    typer.echo(f"{payload['records']} records in {store.data_dir}")
    for kind, count in payload["by_type"].items():
        typer.echo(f"  {KIND_LABEL[kind]:<13} {count}")
    typer.echo("Status: " + ", ".join(f"{k} {v}" for k, v in payload["by_status"].items()))
    typer.echo("Projects: " + ", ".join(f"{k} {v}" for k, v in payload["by_project"].items()))
    typer.echo(f"Edges: {payload['edges']}")
    if snapshot.warnings:
        typer.echo(f"Problems: {len(snapshot.warnings)} (run `lore doctor`)")


@app.command()
def doctor(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check the data dir (malformed lines, duplicate ids, dangling edges, unknown relations, audit chain) and the
    agent side: which agents run lore's hooks and MCP server, and which lore; the index; the warm helper; the hook log;
    what the prompt hook handed over the last 7 days (full items, pointers, nothing; characters per prompt)."""
    from lore.agent.doctor import diagnose_agent_side
    from lore.store.health import diagnose

    st = state(ctx)
    store = st.store
    store.require()
    found = diagnose(store, store.load())
    side = diagnose_agent_side(st.locations, st.settings)
    if as_json:
        typer.echo(orjson.dumps({"ok": found.ok and side.ok, "records": found.records, "audit_entries": found.audit_entries,
                                 "problems": [p.as_dict() for p in found.problems],
                                 "agent_side": side.as_dict()}).decode())  # fmt: skip
    else:
        for p in found.problems:
            typer.echo(f"{p.where}: {p.kind}: {p.message}")
        if found.problems:
            typer.echo(f"{len(found.problems)} problem(s) in {store.data_dir}")
        else:
            typer.echo(f"No problems found in {store.data_dir} ({found.records} records, {found.audit_entries} audit entries)")
        typer.echo("Agent side:")
        for line in side.lines:
            typer.echo(f"  {line}")
        for p in side.problems:
            typer.echo(f"{p.where}: {p.kind}: {p.message}")
        typer.echo(f"{len(side.problems)} problem(s) on the agent side" if side.problems else "No problems on the agent side")
    if found.problems or side.problems:
        raise typer.Exit(1)

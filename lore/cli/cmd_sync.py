"""`lore sync`: share the data dir with a team through a git remote; `lore merge-driver`, which git runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
import typer

from lore.cli.base import app, lazy_module, state

if TYPE_CHECKING:
    from lore.sync import engine
    from lore.sync.engine import SyncReport
else:
    engine = lazy_module("lore.sync.engine")


@app.command()
def sync(
    ctx: typer.Context,
    setup: str | None = typer.Option(None, "--setup", metavar="URL", help="Connect the data dir to this shared git remote first (publishes to an empty remote, merges with a full one)."),
    remote: str | None = typer.Option(None, "--remote", help="The git remote to sync with (default: the branch's upstream, else origin)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be committed, received and pushed; change nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Commit the data dir's changes, fetch, merge record by record, and push (retried if a teammate pushed first)."""
    from lore.store.audit import default_actor

    st = state(ctx)
    locations = st.locations
    report = engine.sync(locations.data_dir, remote=remote, dry_run=dry_run, setup_url=setup,
                         index_dir=locations.index_dir, actor=st.settings.actor or default_actor(),
                         push_attempts=st.settings.sync_push_attempts)  # fmt: skip
    if as_json:
        typer.echo(orjson.dumps(report.as_json()).decode())
    else:
        _render(report)


def _render(report: SyncReport) -> None:
    where = f"{report.remote}/{report.remote_branch}"
    would = "Would commit" if report.dry_run else "Committed"
    if report.initialised:
        typer.echo(f"Initialised a git repository in {report.data_dir}")
    if report.committed is not None:
        sha = f" ({report.commit[:10]})" if report.commit else ""
        typer.echo(f"{would} {engine.describe(report.committed)}{sha}")
    else:
        typer.echo("Nothing to commit")
    received = report.received
    verb = "Would receive" if report.dry_run else "Received"
    if received.empty:
        typer.echo(f"{verb} nothing new from {where}")
    else:
        typer.echo(f"{verb} from {where}: {engine.describe(received, projects=True)}")
    for conflict in report.conflicts:
        typer.echo(f"Edited on two clones: {conflict['id']} ({', '.join(conflict['fields'] or [])}): "
                   "the newest edit won; the other version is in the audit log")  # fmt: skip
    for rename in report.renames:
        typer.echo(f"Duplicate id {rename['from']} (minted on two clones): one record is now {rename['to']}"
                   f" ({rename['edges_moved']} edge(s) moved with it)")  # fmt: skip
    for warning in report.warnings:
        typer.echo(f"Warning: {warning} (kept in the file; `lore doctor` lists every problem)", err=True)
    if report.dry_run:
        typer.echo(f"Would push {report.outgoing_commits} commit(s) to {where}" if report.outgoing_commits
                   else f"Nothing to push to {where}")  # fmt: skip
    elif report.published:
        typer.echo(f"Published to {where} (it was empty)")
    elif report.pushed:
        retried = f" after {report.push_attempts - 1} retry(ies)" if report.push_attempts > 1 else ""
        typer.echo(f"Pushed to {where}{retried}")
    else:
        typer.echo(f"Up to date with {where}")


@app.command("merge-driver", hidden=True, context_settings={"ignore_unknown_options": True})
def merge_driver(
    base: str = typer.Argument(..., help="The common ancestor's version (%O)."),
    ours: str = typer.Argument(..., help="Our version; the result is written here (%A)."),
    theirs: str = typer.Argument(..., help="Their version (%B)."),
    path: str = typer.Argument(..., help="The path being merged (%P)."),
) -> None:
    """The git merge driver for lore's record files (git runs it; see `lore sync`)."""
    from lore.sync.driver import run

    raise typer.Exit(run([base, ours, theirs, path]))

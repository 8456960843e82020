"""`lore index`: bring the derived index up to date, rebuild it, or show its status."""

from __future__ import annotations

import sys
import time
from typing import Any

import orjson
import typer

from lore.cli.base import app, state

index_app = typer.Typer(help="Build and inspect the derived index (disposable: the files stay the truth).",
                        invoke_without_command=True, no_args_is_help=False)  # fmt: skip
app.add_typer(index_app, name="index")


def terminal_progress() -> tuple[Any, Any]:
    """A progress callback that shows a rich bar only on a terminal, after the first second."""
    started = time.monotonic()
    bar: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if not sys.stderr.isatty() or time.monotonic() - started < 1.0:
            return
        if "progress" not in bar:
            from rich.progress import Progress

            bar["progress"] = Progress(transient=True)
            bar["progress"].start()
        tasks = bar.setdefault("tasks", {})
        if stage not in tasks:
            tasks[stage] = bar["progress"].add_task(stage, total=total)
        bar["progress"].update(tasks[stage], completed=done, total=total)

    def stop() -> None:
        if "progress" in bar:
            bar["progress"].stop()

    return progress, stop


@index_app.callback()
def index_main(
    ctx: typer.Context,
    rebuild: bool = typer.Option(False, "--rebuild", help="Start from scratch instead of refreshing."),
    as_json: bool = typer.Option(False, "--json", help="Print the build report as JSON."),
) -> None:
    """Bring the index up to date (incrementally), or --rebuild it."""
    if ctx.invoked_subcommand is not None:
        return
    from lore.index.manager import IndexManager

    st = state(ctx)
    manager = IndexManager(st.locations, st.store)
    progress, stop = terminal_progress()
    try:
        report = manager.build(rebuild=rebuild, progress=progress)
        # What the store gives prompts it cannot answer, beside the index: the prompt hook's decision
        # reads its evidence on this scale from the first prompt (lore.rank.null).
        st.search_session().ensure_null()
    finally:
        stop()
    for warning in report.warnings:
        typer.echo(f"Warning: {warning}", err=True)
    if as_json:
        typer.echo(orjson.dumps(report.__dict__).decode())
        return
    if report.mode == "up-to-date":
        typer.echo(f"Index is up to date ({report.records} records)")
    elif report.mode == "full":
        typer.echo(f"Built index of {report.records} records in {report.seconds:.2f}s")
    else:
        typer.echo(f"Refreshed index: {report.added} added, {report.updated} updated, {report.deleted} deleted "
                   f"({report.records} records, {report.seconds:.2f}s)")  # fmt: skip


@index_app.command("status")
def index_status(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Records per type, staleness, embedding model, size on disk, build time."""
    from lore.index.manager import IndexManager

    st = state(ctx)
    status = IndexManager(st.locations, st.store).status()
    meta = status.meta
    payload: dict[str, Any] = {
        "index_dir": str(status.index_dir),
        "exists": status.exists,
        "stale": status.stale,
        "reason": status.reason,
        "counts": dict(meta.counts) if meta else {},
        "records": meta.records if meta else 0,
        "embeddings": meta.embeddings if meta else False,
        "model": meta.model if meta else None,
        "model_spec": meta.model_spec if meta else None,
        "size_bytes": status.size_bytes,
        "built_at": meta.built_at if meta else None,
        "updated_at": meta.updated_at if meta else None,
        "revision": meta.revision if meta else None,
    }
    if as_json:
        typer.echo(orjson.dumps(payload).decode())
        return
    typer.echo(f"Index: {status.index_dir}")
    if not status.exists:
        typer.echo(f"State: missing ({status.reason}); run `lore index`")
        return
    typer.echo(f"State: {'stale (' + status.reason + ')' if status.stale else 'up to date'}")
    from lore.render.records import KIND_LABEL

    counts = ", ".join(f"{KIND_LABEL.get(k, k)} {v}" for k, v in payload["counts"].items())
    typer.echo(f"Records: {payload['records']} ({counts})")
    typer.echo(f"Embeddings: {payload['model'] if payload['embeddings'] else 'none (lexical only)'}")
    typer.echo(f"Size: {status.size_bytes / 1024 / 1024:.1f} MB")
    typer.echo(f"Built: {payload['built_at']}, updated {payload['updated_at']} (revision {payload['revision']})")

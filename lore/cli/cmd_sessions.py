"""`lore capture-session`: candidate records from an agent session's transcript."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import typer

from lore.cli.base import app, state

if TYPE_CHECKING:
    from lore.sessions.pipeline import CaptureReport


def render_report(report: CaptureReport, as_json: bool) -> None:
    for warning in report.warnings:
        typer.echo(f"Warning: {warning}", err=True)
    if as_json:
        typer.echo(orjson.dumps(report.to_json()).decode())
        return
    for notice in report.notices:
        typer.echo(f"Note: {notice}", err=True)
    if report.redactions:
        typer.echo(f"Redacted {len(report.redactions)} secret(s) before storing: {', '.join(sorted(set(report.redactions)))}",
                   err=True)  # fmt: skip
    if report.lines is None:
        typer.echo(f"{report.transcript}: nothing new since the last capture.")
        return
    first, last = report.lines
    head = "Would capture" if report.dry_run else "Captured"
    count = len(report.proposed) if report.dry_run else len(report.added)
    typer.echo(f"{head} {count} candidate(s) from lines {first}-{last} of {report.transcript} ({report.method}):")
    if report.dry_run:
        for raw in report.proposed:
            typer.echo(f"  {raw['kind']}: {_title(raw)}")
    for record in report.added:
        typer.echo(f"  {record.kind} {record.id}: {record.title}")
    for record in report.updated:
        typer.echo(f"  updated {record.kind} {record.id}: {record.title}")
    if report.skipped:
        typer.echo("Skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(report.skipped.items())))
    if report.added and not report.dry_run:
        typer.echo("Review them with `lore inbox`.")


def _title(raw: dict[str, object]) -> str:
    from lore.store.records import Record

    return Record(kind=str(raw["kind"]), id="-", raw=dict(raw)).title


@app.command("capture-session")
def capture_session(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A Claude Code session transcript (~/.claude/projects/<project>/<session>.jsonl)."),
    session: str | None = typer.Option(None, "--session", help="The session id (default: the file name without .jsonl)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be captured; write nothing, remember nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    method: str | None = typer.Option(None, "--method", help="heuristic (default; no model) or llm (LORE_LLM_CMD); "
                                      "default from LORE_CAPTURE_METHOD."),
) -> None:
    """Propose candidate records (failures, decisions, lessons, what was touched) from a session transcript.

    Only the lines added since the last capture of that session are read. Candidates are
    stored with status `candidate` and provenance; review them with `lore inbox`.
    """
    from lore.sessions.pipeline import capture_session as capture

    st = state(ctx)
    report = capture(st.store_for("capture"), path, project=st.given_project, session_id=session, method=method, dry_run=dry_run,
                     settings=st.settings)  # fmt: skip
    render_report(report, as_json)

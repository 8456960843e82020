"""Lesson commands: lesson (store / show), lessons."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
import typer

from lore.cli.base import app, lazy_module, state
from lore.errors import UsageError
from lore.render.records import KIND_LABEL, record_json, render_lesson
from lore.render.text import one_line

if TYPE_CHECKING:
    from lore import capture
    from lore.curate import lessons as lessons_core
else:
    capture = lazy_module("lore.capture")
    lessons_core = lazy_module("lore.curate.lessons")

# The core's lessons.LIST_MIN_CONFIDENCE (a test keeps them equal): a default shown in
# --help must exist when the command registers, before the core is loaded.
LIST_MIN_CONFIDENCE = 0.7

lesson_app = typer.Typer(
    help="Record a lesson (with options), or show one (`lore lesson show ID`).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(lesson_app, name="lesson")

_REQUIRED = (("situation", "--situation"), ("error_pattern", "--error-pattern"), ("oversight", "--oversight"),
             ("fix", "--fix"), ("rule", "--rule"), ("severity", "--severity"), ("scope", "--scope"))  # fmt: skip


def _notices(notices: list[str], record_id: str, redactions: list[str]) -> None:
    for notice in notices:
        typer.echo("Warning: " + notice.replace("{new_id}", record_id), err=True)
    if redactions:
        typer.echo(
            f"Redacted {len(redactions)} secret(s) before storing: {', '.join(sorted(set(redactions)))}",
            err=True,
        )


@lesson_app.callback()
def lesson(
    ctx: typer.Context,
    situation: str | None = typer.Option(None, "--situation", help="What was going on when it went wrong."),
    error_pattern: str | None = typer.Option(None, "--error-pattern",
                                             help="The error, as it shows (with --scope, the lesson's identity)."),
    oversight: str | None = typer.Option(None, "--oversight", help="What was missed."),
    fix: str | None = typer.Option(None, "--fix", help="What fixed it."),
    rule: str | None = typer.Option(None, "--rule", help="The rule that prevents it next time."),
    severity: str | None = typer.Option(None, "--severity", help="critical, high, medium or low."),
    scope: str | None = typer.Option(
        None, "--scope", help="Where the rule applies (a project, a tool, `global`)."
    ),
    inverse: str | None = typer.Option(None, "--inverse", help="The rule stated as what not to do."),
    confidence: float | None = typer.Option(
        None, "--confidence", "-c", help="Rule confidence 0-1 (default 0.8)."
    ),
    tag: list[str] | None = typer.Option(
        None, "--tag", "-t", help="Extra tag (repeatable; lesson_learned is always set)."
    ),
    no_redact: bool = typer.Option(
        False, "--no-redact", help="Store the text exactly as given, secrets included."
    ),
    force: bool = typer.Option(
        False, "--force", help="Write even if a near-duplicate lesson or pattern exists."
    ),
    merge: bool = typer.Option(
        False, "--merge", help="On a near-duplicate, keep the existing record and raise its confidence."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the lesson as JSON."),
) -> None:
    """Record a lesson: situation, error pattern, oversight, fix and the rule that prevents a repeat.

    Storing the same error pattern and scope again returns the stored lesson unless the new
    one has a higher --confidence, which supersedes it (the old one is kept as history).
    """
    if ctx.invoked_subcommand is not None:
        given = [flag for name, flag in _REQUIRED if ctx.params.get(name) is not None]
        if given:
            raise UsageError(f"{', '.join(given)} cannot be combined with `lesson {ctx.invoked_subcommand}`")
        return
    values: dict[str, Any] = ctx.params
    missing = [flag for name, flag in _REQUIRED if values.get(name) is None]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}",
                         hint="a lesson needs --situation, --error-pattern, --oversight, --fix, --rule, "
                              "--severity and --scope; `lore lesson show ID` shows one")  # fmt: skip
    if force and merge:
        raise UsageError("--force and --merge exclude each other")
    st = state(ctx)
    store = st.store
    result = lessons_core.record_lesson(
        store, situation=str(situation), error_pattern=str(error_pattern), oversight=str(oversight), fix=str(fix),
        rule=str(rule), severity=str(severity), scope=str(scope), inverse=inverse, confidence=confidence,
        tags=tag, project=st.current_project(), options=st.write_options(redact=not no_redact, force=force,
                                                                             merge=merge),
    )  # fmt: skip
    record = result.record
    _notices(result.notices, record.id, [] if result.existing else result.redactions)
    if as_json:
        payload: dict[str, Any] = {**record_json(record), "created": result.created, "existing": result.existing,
                                   "redacted": sorted(set(result.redactions))}  # fmt: skip
        if result.superseded is not None:
            payload["superseded"] = result.superseded.id
        if result.merged_into:
            payload["merged_into"] = result.merged_into
        typer.echo(orjson.dumps(payload).decode())
    elif result.existing:
        typer.echo(f"Lesson already exists: {record.id} (same error pattern and scope, rule confidence "
                   f"{record.confidence:.2f}); nothing written")  # fmt: skip
        typer.echo(render_lesson(record, datetime.now(UTC)), nl=False)
    elif result.merged_into:
        typer.echo(f"Merged into existing {KIND_LABEL[record.kind]} {record.id}: {record.title}")
    else:
        typer.echo(f"Learned lesson {record.id}: {record.title}")
        if result.superseded is not None:
            old = result.superseded
            typer.echo(
                f"Superseded lesson {old.id} (rule confidence {old.confidence:.2f} -> {record.confidence:.2f})"
            )


@lesson_app.command("show")
def lesson_show(
    ctx: typer.Context,
    lesson_id: str = typer.Argument(..., help="Lesson id (a unique prefix works)."),
    output_format: str = typer.Option(
        "text", "--format", "-f", help="yamo (LessonLearned wire format), text or json."
    ),
) -> None:
    """Show one lesson as text, JSON or the yamo LessonLearned block."""
    if output_format not in ("yamo", "text", "json"):
        raise UsageError(f"unknown format {output_format!r}", hint="formats: yamo, text, json")
    store = state(ctx).store
    store.require()
    record = lessons_core.get_lesson(store, lesson_id)
    if output_format == "yamo":
        typer.echo(lessons_core.render_yamo(record), nl=False)
    elif output_format == "json":
        typer.echo(orjson.dumps(record_json(record)).decode())
    else:
        typer.echo(render_lesson(record, datetime.now(UTC)), nl=False)


@lesson_app.command("distill")
def lesson_distill(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the lessons that would be proposed; change nothing."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per lesson."),
) -> None:
    """Propose a lesson for each failure that repeated (same command and error) at least twice in 7 days."""
    from lore.curate.distill import distill_failures

    st = state(ctx)
    store = st.store
    store.require()
    found = distill_failures(store, dry_run=dry_run, auto_accept=st.settings.auto_accept)
    if as_json:
        for record in found:
            typer.echo(orjson.dumps(record_json(record)).decode())
        return
    if not found:
        typer.echo("No new repeated failures to distil.")
        return
    verb = "Would propose" if dry_run else "Proposed"
    for record in found:
        failures = record.raw.get("provenance", {}).get("failures", [])
        typer.echo(f"{verb} lesson {record.id} [{record.status}] from {len(failures)} failures: {one_line(record.title)}")
    if not dry_run and any(r.status == "candidate" for r in found):
        typer.echo("Review with `lore inbox`.")


def _lesson_line(record: Any) -> str:
    severity = str(record.raw.get("severity") or "medium")
    scope = one_line(str(record.raw.get("scope") or "-"))
    return f"{record.id:<22} {severity:<8} {record.confidence:.2f}  {one_line(record.title)}  [{scope}]"


@app.command("lessons")
def lessons_cmd(
    ctx: typer.Context,
    query: str | None = typer.Argument(
        None, help="Only lessons sharing words with this, most relevant first."
    ),
    min_confidence: float = typer.Option(
        LIST_MIN_CONFIDENCE,
        "--min-confidence",
        min=0.0,
        max=1.0,
        help="Lowest rule confidence listed (default 0.7).",
    ),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="At most this many."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """List active lessons, most severe first (then most relevant to QUERY, then most confident)."""
    store = state(ctx).store
    store.require()
    found = lessons_core.list_lessons(store, query, min_confidence=min_confidence, limit=limit)
    if as_json:
        for record, score in found:
            typer.echo(orjson.dumps({**record_json(record), "relevance": score}).decode())
        return
    if not found:
        what = f" matching {query!r}" if query and query.strip() else ""
        typer.echo(f"No lessons{what} with rule confidence >= {min_confidence:.2f}")
        return
    for record, _ in found:
        typer.echo(_lesson_line(record))

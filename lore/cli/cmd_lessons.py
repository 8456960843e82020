"""Curation commands: lesson (store / show), lessons, consolidate, migrate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
import typer

from lore.cli.base import app, lazy_module, state
from lore.errors import UsageError
from lore.render.records import KIND_LABEL, date_of, record_json
from lore.render.text import one_line

if TYPE_CHECKING:
    # consolidate pulls in numpy through dedup: imported where used, not at CLI start.
    from lore import capture
    from lore.curate import consolidate as consolidation
    from lore.curate import lessons as lessons_core
    from lore.curate import migrate as migration
else:
    capture = lazy_module("lore.capture")
    lessons_core = lazy_module("lore.curate.lessons")
    migration = lazy_module("lore.curate.migrate")

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
    error_pattern: str | None = typer.Option(
        None, "--error-pattern", help="The error, as it shows (with --scope, the lesson's identity)."
    ),
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
    store = st.store()
    result = lessons_core.record_lesson(
        store, situation=str(situation), error_pattern=str(error_pattern), oversight=str(oversight), fix=str(fix),
        rule=str(rule), severity=str(severity), scope=str(scope), inverse=inverse, confidence=confidence,
        tags=tag, project=st.current_project(), options=capture.WriteOptions(redact=not no_redact, force=force, merge=merge),
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
        typer.echo(lessons_core.render_text(record, datetime.now(UTC)), nl=False)
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
    store = state(ctx).store()
    store.require()
    record = lessons_core.get_lesson(store, lesson_id)
    if output_format == "yamo":
        typer.echo(lessons_core.render_yamo(record), nl=False)
    elif output_format == "json":
        typer.echo(orjson.dumps(record_json(record)).decode())
    else:
        typer.echo(lessons_core.render_text(record, datetime.now(UTC)), nl=False)


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
    store = state(ctx).store()
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


# -- consolidate -----------------------------------------------------------------------


def _cluster_lines(number: int, cluster: consolidation.Cluster) -> list[str]:
    kinds = {m.record.kind for m in cluster.members}
    label = KIND_LABEL[cluster.members[0].record.kind] if len(kinds) == 1 else "pattern/lesson"
    out = [f"Cluster {number}: {len(cluster.members)} {label} records"]
    for match in cluster.members:
        record = match.record
        keep = "keep" if record.id == cluster.survivor.id else f"{match.similarity:.0%} {match.layer}"
        out.append(
            f"  {record.id:<22} {date_of(record)}  {record.confidence:.2f}  {keep:<14} {one_line(record.title)}"
        )
    return out


def _ask(question: str) -> bool:
    try:
        return typer.confirm(question, default=False)
    except typer.Abort:  # stdin closed (no terminal, nothing piped): click would print a bare "Aborted!"
        raise UsageError("--apply asks before each merge, and nothing answered",
                         hint="review with `lore consolidate`, then run `lore consolidate --apply --yes`") from None


@app.command()
def consolidate(
    ctx: typer.Context,
    apply: bool = typer.Option(False, "--apply", help="Merge clusters (asks per cluster unless --yes)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --apply: merge every cluster without asking."),
    record_type: str | None = typer.Option(
        None, "--type", help="Only decisions, patterns (with lessons) or anti-patterns."
    ),
) -> None:
    """List clusters of near-duplicate records for review; --apply merges them, keeping history.

    The survivor (keep) is the newest record; it takes the cluster's highest confidence, the
    others become superseded by it (status, superseded_by and a supersedes edge).
    """
    if yes and not apply:
        raise UsageError("--yes only makes sense with --apply")
    store = state(ctx).store()
    from lore.curate import consolidate as consolidation

    review = consolidation.find_clusters(store, record_type)
    for notice in review.notices:
        typer.echo(f"Note: {notice}", err=True)
    if not review.clusters:
        typer.echo("No near-duplicates found")
        return
    merged = 0
    for number, cluster in enumerate(review.clusters, start=1):
        if number > 1:
            typer.echo("")
        for line in _cluster_lines(number, cluster):
            typer.echo(line)
        if not apply:
            continue
        count = len(cluster.others)
        if yes or _ask(f"Merge {count} record(s) into {cluster.survivor.id}?"):
            result = consolidation.merge_cluster(store, cluster)
            merged += 1
            typer.echo(f"Merged {', '.join(r.id for r in result.superseded)} into {result.survivor.id} "
                       f"(confidence {result.confidence:.2f})")  # fmt: skip
        else:
            typer.echo(f"Skipped cluster {number}")
    total = len(review.clusters)
    typer.echo("")
    if apply:
        typer.echo(f"Merged {merged} of {total} cluster(s)")
    else:
        typer.echo(f"{total} cluster(s); `lore consolidate --apply` merges them (asks per cluster)")


# -- migrate ---------------------------------------------------------------------------


@app.command()
def migrate(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would change; write nothing."),
) -> None:
    """Upgrade records without schema_version to the current schema (adds fields, never removes).

    Every file touched is first copied to <data-dir>/backups/<timestamp>/.
    """
    store = state(ctx).store()
    report = migration.migrate(store, dry_run=dry_run)
    if not report.files:
        typer.echo(f"Nothing to migrate: every record has schema_version {migration.SCHEMA_VERSION}")
        return
    verb = "Would migrate" if dry_run else "Migrated"
    for change in report.files:
        typer.echo(f"{change.path}: {len(change.records)} record(s)")
        for record in change.records:
            typer.echo(f"  {record.record_id}: + {', '.join(record.added)}")
    typer.echo(f"{verb} {report.record_count} record(s) in {len(report.files)} file(s)")
    if report.backup_dir is not None:
        typer.echo(f"Backups in {report.backup_dir}")

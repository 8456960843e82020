"""Curation commands: outcome (validate), prune, reflect, consolidate, migrate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import typer

from lore.cli.base import app, lazy_module, state
from lore.errors import UsageError
from lore.render.records import KIND_LABEL, date_of
from lore.render.text import one_line

if TYPE_CHECKING:
    # consolidate pulls in numpy through dedup: imported where used, not at CLI start.
    from lore import capture
    from lore.curate import consolidate as consolidation
    from lore.curate import migrate as migration
else:
    capture = lazy_module("lore.capture")
    migration = lazy_module("lore.curate.migrate")


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

    record = record_outcome(state(ctx).store, pattern_id, success)
    typer.echo(_outcome_line(record, success))


@app.command()
def validate(
    ctx: typer.Context,
    pattern_id: str = typer.Argument(..., help="Pattern that proved itself again."),
) -> None:
    """Alias of `lore outcome ID --success` (the original Lore's name)."""
    record = capture.validate_pattern(state(ctx).store, pattern_id)
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

    found = run_prune(state(ctx).store, below, dry_run=dry_run)
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

    from lore.render.records import record_json

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = state(ctx).reflect(topic, lookback)
    for warning in caught:
        typer.echo(f"Warning: {warning.message}", err=True)
    if as_json:
        typer.echo(orjson.dumps(record_json(record)).decode())
    else:
        typer.echo(f"Reflected {record.id} ({record.raw.get('method')}, from {', '.join(record.raw.get('derived_from') or [])})")
        typer.echo(record.raw.get("content") or "")


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
    store = state(ctx).store
    from lore.curate import consolidate as consolidation

    review = consolidation.find_clusters(store, record_type, model=state(ctx).settings.embed_model)
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
    shard: bool = typer.Option(False, "--shard", help="Split decisions, failures and observations into month shards (journal/data/decisions/2026-03.jsonl), so a sync rewrites a small file."),
) -> None:
    """Upgrade records without schema_version to the current schema (adds fields, never removes).

    Every file touched is first copied to <data-dir>/backups/<timestamp>/.
    """
    store = state(ctx).store
    if shard:
        from lore.render.shard import shard_lines
        from lore.store.shard import split

        typer.echo("\n".join(shard_lines(split(store, dry_run=dry_run))))
        return
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

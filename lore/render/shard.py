"""What `lore migrate --shard` prints."""

from __future__ import annotations

from lore.store.shard import ShardReport


def shard_lines(report: ShardReport) -> list[str]:
    """One line per single file split and per shard written, then the totals; one line when there was nothing to do."""
    if not report.changed:
        return ["Nothing to shard: every record file lore writes is already in month shards"]
    verb = "Would move" if report.dry_run else "Moved"
    lines = []
    for relative in report.created_dirs:
        lines.append(f"{relative}/: {'would be created' if report.dry_run else 'created'}")
    for moved in report.files:
        lines.append(f"{moved.path}: {moved.records} line(s) into {len(moved.shards)} shard(s)"
                     + (f" ({moved.already_held} already there)" if moved.already_held else ""))  # fmt: skip
    lines.append(f"{verb} {report.moved} line(s) from {len(report.files)} file(s)")
    if report.backup_dir is not None:
        lines.append(f"Backups in {report.backup_dir}")
    return lines

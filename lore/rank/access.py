"""The access log that search appends to: the reinforcement signal, kept apart from the sources."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

# Every cold prompt and every `lore search` reads the whole log (with the standard library's
# parser: the cold hook imports no orjson), so it is compacted small: a few hundred lines beside
# the one compacted line. The queries in the lines are read by nothing.
MAX_BYTES = 64 * 1024


def record_access(path: Path, query: str, ids: list[str], now: float) -> None:
    """Append one line per search (scrubbed query, returned ids); never raises."""
    if not ids:
        return
    from lore.store.fileio import append_line

    with contextlib.suppress(OSError):
        line = json.dumps({"ts": round(now, 3), "q": query[:300], "ids": ids}, ensure_ascii=False).encode()
        # Not fsynced: losing the last access on a crash is harmless, a glued line is not.
        append_line(path, line, durable=False, mode=0o600)
        if path.stat().st_size > MAX_BYTES:
            compact(path)


# Only the top results count as accessed: logging all ten let records that are
# often returned but rarely wanted reinforce themselves.
ACCESS_TOP = 3


def log_response(path: Path, response: Any, stats: dict[str, tuple[int, float]], now: float) -> None:
    """Log a search's top hits as accessed (unless it found an evidence gap) and count them in ``stats``."""
    if not response.hits or response.gap.gap:
        return
    ids = [h.id for h in response.hits[:ACCESS_TOP]]
    record_access(path, response.query, ids, now)
    for rid in ids:
        count, _ = stats.get(rid, (0, 0.0))
        stats[rid] = (count + 1, now)


def stamp(path: Path) -> tuple[int, int, int] | None:
    """The log's inode, size and modification time (None: no log): what tells a held copy of its counts is behind."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def load_stats(path: Path) -> dict[str, tuple[int, float]]:
    """id -> (times returned, last time returned)."""
    stats: dict[str, tuple[int, float]] = {}
    try:
        data = path.read_bytes()
    except OSError:
        return stats
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut short, or not UTF-8
            continue
        if not isinstance(entry, dict):
            continue
        if "agg" in entry:  # a compacted line: {"agg": {id: [count, last]}}
            for rid, (count, last) in entry["agg"].items():
                old = stats.get(rid, (0, 0.0))
                stats[rid] = (old[0] + int(count), max(old[1], float(last)))
            continue
        ts = float(entry.get("ts", 0.0))
        for rid in entry.get("ids", []):
            count, last = stats.get(rid, (0, 0.0))
            stats[rid] = (count + 1, max(last, ts))
    return stats


def compact(path: Path) -> None:
    """Fold every line into one ``agg`` line (a search appending meanwhile may lose its access: harmless)."""
    from lore.store.fileio import atomic_write  # a temp file of its own: two compactions never mix

    stats = load_stats(path)
    atomic_write(path, json.dumps({"agg": {k: [c, t] for k, (c, t) in stats.items()}}, ensure_ascii=False).encode() + b"\n")

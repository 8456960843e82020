"""Import speed: `lore import lore-export` of a generated export, batched against one write per item.

The export holds ``n`` records (decisions, failures, observations, patterns and lessons,
as a session-capture backfill produces them) and ``n // 2`` edges. "per item" runs the
same merge with chunks of one, which is the shape import had before it was batched:
one lock hold, one file append or patterns.yaml rewrite per record, and one store
reload plus graph.json rewrite per edge. Both run in the same process on fresh data
dirs; a third run re-imports into the batched store and must add nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

Progress = Callable[[str], None]
KIND_CYCLE = ("decision", "failure", "observation", "failure", "pattern", "observation", "lesson", "decision")
PREFIX = {"decision": "dec", "failure": "fail", "observation": "obs", "pattern": "pat", "lesson": "pat"}


def _quiet(message: str) -> None:
    return None


def _record(kind: str, i: int) -> dict[str, Any]:
    stamp = f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
    rid = f"{PREFIX[kind]}-{i:08x}" if kind != "pattern" and kind != "lesson" else f"pat-17{i:08d}-{i % 65536:04x}"
    words = f"service {i % 37} queue {i % 11} retry {i % 7} deploy {i}"
    raw: dict[str, Any] = {"id": rid, "project": f"proj-{i % 5}", "schema_version": 1}
    if kind == "decision":
        raw.update(timestamp=stamp, decision=f"Use backoff for {words}", rationale=f"Because {words} failed",
                   status="active", tags=["bench"], importance=3, confidence=0.8)  # fmt: skip
    elif kind == "failure":
        raw.update(timestamp=stamp, error_type="ToolError", error_message=f"exit 1 in {words}", tool="Bash",
                   command=f"pytest tests/test_{i % 13}.py")  # fmt: skip
    elif kind == "observation":
        raw.update(timestamp=stamp, content=f"Touched src/{i % 17}.py while {words}", tags=["session"])
    elif kind == "pattern":
        raw.update(created_at=stamp, name=f"Pattern for {words}", solution=f"Do {words}", confidence=0.5)
    else:
        raw.update(kind="lesson", created_at=stamp, name=f"Lesson {words}", situation=f"When {words}",
                   error_pattern=f"error {i}", fix="retry", rule=f"Check {words}", severity="medium",
                   scope=f"proj-{i % 5}", rule_confidence=0.8, lesson_pattern_id=f"{i:016x}")  # fmt: skip
    return raw


def write_export(path: Path, n: int) -> int:
    """A `lore export` file of ``n`` records and ``n // 2`` edges; the number of lines."""
    records = [(KIND_CYCLE[i % len(KIND_CYCLE)], _record(KIND_CYCLE[i % len(KIND_CYCLE)], i)) for i in range(n)]
    lines = [orjson.dumps({"lore_export": 1, "type": "record", "kind": kind, "id": raw["id"], "record": raw})
             for kind, raw in records]  # fmt: skip
    for i in range(n // 2):
        source, target = records[i][1]["id"], records[(i * 7 + 3) % n][1]["id"]
        if source != target:
            lines.append(orjson.dumps({"lore_export": 1, "type": "edge", "from": source, "to": target,
                                       "relation": "relates_to", "weight": 1.0}))  # fmt: skip
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def _import(data_dir: Path, export: Path, chunk: int) -> tuple[float, Any]:
    from lore import transfer
    from lore.store import Store

    store = Store(data_dir, actor="bench")
    store.init()
    source = transfer.read_lore_export(export)
    started = time.perf_counter()
    summary = transfer.merge(store, source, chunk=chunk)
    return time.perf_counter() - started, summary


def measure(work: Path, sizes: tuple[int, ...] = (500, 2000), unbatched_limit: int = 500,
            progress: Progress = _quiet) -> dict[str, Any]:  # fmt: skip
    """Per size: lines, seconds and records/s batched, per item (up to ``unbatched_limit``), and a re-import."""
    from lore.transfer import CHUNK

    results: dict[str, Any] = {"chunk": CHUNK, "sizes": {}}
    for n in sizes:
        export = work / f"import-{n}.jsonl"
        lines = write_export(export, n)
        entry: dict[str, Any] = {"records": n, "lines": lines}
        progress(f"import: {n:,} records batched")
        seconds, summary = _import(work / f"import-batched-{n}", export, CHUNK)
        added = sum(summary.added.values())
        entry["batched"] = {"seconds": round(seconds, 3), "records_per_s": round(n / seconds, 1), "added": added}
        again, summary = _import(work / f"import-batched-{n}", export, CHUNK)
        entry["reimport"] = {"seconds": round(again, 3), "added": sum(summary.added.values())}
        if n <= unbatched_limit:
            progress(f"import: {n:,} records one write per item")
            seconds, summary = _import(work / f"import-single-{n}", export, 1)
            entry["per_item"] = {"seconds": round(seconds, 3), "records_per_s": round(n / seconds, 1),
                                 "added": sum(summary.added.values())}  # fmt: skip
            entry["speedup"] = round(entry["per_item"]["seconds"] / entry["batched"]["seconds"], 1)
        results["sizes"][n] = entry
    return results

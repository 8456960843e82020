"""Where each kind of record lives in a data dir (cheap to import: the hook path uses it).

The JSONL record files that grow (decisions, failures, observations) may be sharded by
month of each record's creation: ``journal/data/decisions/2026-03.jsonl`` beside the single
``journal/data/decisions.jsonl``, so that a sync rewrites a month's file, not the whole store.
A kind is sharded when its shard directory exists (``lore init --shard``, ``lore migrate
--shard``); both are read, the single file first, then the shards in name order, so a store
written by the original bash Lore reads unchanged and a sharded one keeps what its single
file still holds.
"""

from __future__ import annotations

from pathlib import Path

DECISIONS = Path("journal/data/decisions.jsonl")
PATTERNS = Path("patterns/data/patterns.yaml")
SESSIONS = Path("transfer/data/sessions")
FAILURES = Path("failures/data/failures.jsonl")
OBSERVATIONS = Path("inbox/data/observations.jsonl")
SIGNALS = Path("inbox/data/signals.jsonl")
GRAPH = Path("graph/data/graph.json")
BACKUPS = Path("backups")  # what `lore migrate` moves aside, one directory per run

# The JSONL files in the order a load reads them, with the kind of their records.
JSONL_SINGLE = (("decision", DECISIONS), ("failure", FAILURES), ("observation", OBSERVATIONS),
                ("observation", SIGNALS))  # fmt: skip
# The ones lore writes, which may be sharded (signals.jsonl is the bash Lore's, never appended to).
SHARDABLE = {"decision": DECISIONS, "failure": FAILURES, "observation": OBSERVATIONS}
# Where a record without a readable creation time goes (after the months in name order).
UNDATED = "undated.jsonl"


def shard_dir(single: Path) -> Path:
    """The directory of a single file's shards: ``journal/data/decisions.jsonl`` -> ``journal/data/decisions``."""
    return single.with_suffix("")


def shard_name(moment: object) -> str:
    """The shard file of a record created at ``moment`` (a datetime, or None): ``2026-03.jsonl``."""
    strftime = getattr(moment, "strftime", None)
    return f"{strftime('%Y-%m')}.jsonl" if strftime is not None else UNDATED


def is_sharded(data_dir: Path, single: Path) -> bool:
    """Whether new records of ``single``'s kind go to month shards (its shard directory exists)."""
    return (data_dir / shard_dir(single)).is_dir()


def shards(data_dir: Path, single: Path) -> list[Path]:
    """The shard files of ``single`` in load order (by name: the months, then the undated)."""
    directory = data_dir / shard_dir(single)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.jsonl") if p.is_file())


def jsonl_files(data_dir: Path, single: Path) -> list[Path]:
    """Every existing file that holds ``single``'s records, in load order: the single file, then its shards."""
    path = data_dir / single
    return ([path] if path.is_file() else []) + shards(data_dir, single)


_SHARD_PARENTS = {shard_dir(single).as_posix(): kind for kind, single in SHARDABLE.items()}
_SINGLE_KINDS = {single.as_posix(): kind for kind, single in JSONL_SINGLE}


def jsonl_kind(relative: str | Path) -> str | None:
    """The kind of the records a JSONL record file holds (path relative to the data dir), or None if it is none."""
    name = Path(relative).as_posix()
    if name in _SINGLE_KINDS:
        return _SINGLE_KINDS[name]
    parent, _, base = name.rpartition("/")
    if base.endswith(".jsonl") and parent in _SHARD_PARENTS:
        return _SHARD_PARENTS[parent]
    return None


def source_files(data_dir: Path) -> list[Path]:
    """Every file that holds records (for change detection by the indexer)."""
    files: list[Path] = []
    for relative in (DECISIONS, PATTERNS, FAILURES, OBSERVATIONS, SIGNALS, GRAPH):
        files.append(data_dir / relative)
        if relative in SHARDABLE.values():
            files.extend(shards(data_dir, relative))
    sessions = data_dir / SESSIONS
    if sessions.is_dir():
        files.extend(sorted(sessions.glob("*.json")))
    return [f for f in files if f.exists()]

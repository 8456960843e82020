"""The data dir as a git work tree: the .gitattributes and .gitignore lines `lore init --git` and `lore sync` keep."""

from __future__ import annotations

from pathlib import Path

from lore.store.fileio import atomic_write

# What `lore init --git` puts in the data dir's .gitattributes: every record file goes through
# `lore merge-driver` (registered in .git/config by `lore init --git` and `lore sync`).
GIT_ATTRIBUTES = (
    "# lore: record files merge by record id and never lose a record (lore init --git, lore sync).",
    "*.jsonl merge=lore",
    "patterns/data/patterns.yaml merge=lore",
    "graph/data/graph.json merge=lore",
    "transfer/data/sessions/*.json merge=lore",
    ".gitattributes merge=union",
    ".gitignore merge=union",
)
GIT_ATTRIBUTES_REPLACED = (
    "# Appends from two clones merge by keeping both sides' lines (lore init --git).",
    "*.jsonl merge=union",
)
# Per clone, never shared: the lock, the audit chain, migration backups, a crashed write's temp file.
GIT_IGNORED = (".lore.lock", "audit/", "backups/", ".*.tmp")


def write_git_files(data_dir: Path) -> list[Path]:
    """Add lore's lines to the data dir's .gitattributes and .gitignore (the files it changed)."""
    created = []
    attributes = data_dir / ".gitattributes"
    existing = attributes.read_text(encoding="utf-8").splitlines() if attributes.exists() else []
    # Earlier versions routed JSONL through git's union driver, which can re-append the old
    # version of a rewritten line after the new one: lore's own driver replaces it.
    kept = [line for line in existing if line not in GIT_ATTRIBUTES_REPLACED]
    missing = [line for line in GIT_ATTRIBUTES if line not in kept]
    if missing or kept != existing:
        atomic_write(attributes, ("\n".join([*kept, *missing]) + "\n").encode())
        created.append(attributes)
    ignore = data_dir / ".gitignore"
    existing = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    # The audit chain is per clone: two clones' chains cannot be merged into one chain.
    missing = [line for line in GIT_IGNORED if line not in existing]
    if missing:
        atomic_write(ignore, ("\n".join([*existing, *missing]) + "\n").encode())
        created.append(ignore)
    return created

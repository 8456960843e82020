"""``lore merge-driver BASE OURS THEIRS PATH``: the git merge driver lore registers for its record files.

git calls it (``merge.lore.driver`` in ``.git/config``, ``merge=lore`` in the
data dir's ``.gitattributes``) with three temporary files and the path being
merged; the result goes into OURS and the exit status says whether it is clean.
What a merge resolved (a field both sides changed, a duplicate id renamed) is
appended to ``<git dir>/lore-merge-notes.jsonl`` for ``lore sync`` to put in
the per-clone audit log and to move the renamed record's edges.

A side that does not parse falls back to git's own line merge (conflict
markers and a non-zero exit), so a broken file is never silently rewritten.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path

import orjson

from lore.store.fileio import atomic_write
from lore.sync import merge

NOTES_ENV = "LORE_MERGE_NOTES"
NOTES_NAME = "lore-merge-notes.jsonl"


def notes_path(work_tree: Path) -> Path | None:
    """Where this merge's notes go: ``$LORE_MERGE_NOTES`` (set by lore sync), else the work tree's git dir."""
    named = os.environ.get(NOTES_ENV)
    if named:
        return Path(named)
    dot_git = work_tree / ".git"
    if dot_git.is_dir():
        return dot_git / NOTES_NAME
    if dot_git.is_file():  # a linked work tree: ".git" holds "gitdir: <path>"
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            git_dir = Path(text[7:].strip())
            return (git_dir if git_dir.is_absolute() else work_tree / git_dir) / NOTES_NAME
    return None


def merge_file(base: bytes, ours: bytes, theirs: bytes, path: str, notes: merge.Notes,
               work_tree: Path) -> bytes | None:  # fmt: skip
    """The merged content of ``path``, or None when lore has no rule for it (git's line merge then)."""
    name = path.rsplit("/", 1)[-1]
    # One side left the file as the ancestor had it: the other side's bytes, as they are. The common case
    # is a teammate joining (`--setup`): an empty file of a new data dir against the team's whole store,
    # which a record merge would rewrite in creation order (a new blob of the whole file for everyone).
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    if name.endswith(".jsonl"):
        return merge.merge_jsonl(base, ours, theirs, path, notes)
    if path.endswith("patterns/data/patterns.yaml"):
        return merge.merge_patterns(base, ours, theirs, path, notes)
    if path.endswith("graph/data/graph.json"):
        return merge.merge_graph(base, ours, theirs, path, notes)
    if "transfer/data/sessions/" in path and name.endswith(".json"):
        merged, extra = merge.merge_session(base, ours, theirs, path, notes)
        for record in extra:  # a duplicate session id: the renamed handoff gets its own file
            target = (work_tree / path).parent / f"{record['id']}.json"
            if not target.exists():
                atomic_write(target, merge.dump_json(record))
        return merged
    return None


def _line_merge(base: Path, ours: Path, theirs: Path, work_tree: Path) -> int:
    from lore.sync.git import Git

    result = Git(work_tree).run("merge-file", "-L", "ours", "-L", "base", "-L", "theirs",
                                str(ours), str(base), str(theirs), check=False)  # fmt: skip
    return 1 if result.returncode else 0


def run(args: list[str], work_tree: Path | None = None) -> int:
    """The driver's whole job; returns the exit status git reads (0 = merged cleanly)."""
    if len(args) != 4 or "--help" in args or "-h" in args:
        sys.stderr.write("usage: lore merge-driver BASE OURS THEIRS PATH  (run by git; see `lore sync --help`)\n")
        return 2
    base_file, ours_file, theirs_file = (Path(a) for a in args[:3])
    path = args[3]
    tree = work_tree or Path.cwd()
    try:
        base, ours, theirs = (f.read_bytes() for f in (base_file, ours_file, theirs_file))
    except OSError as exc:
        sys.stderr.write(f"lore merge-driver: cannot read the merge inputs: {exc}\n")
        return 1
    notes = merge.Notes()
    try:
        merged = merge_file(base, ours, theirs, path, notes, tree)
    except merge.MergeParseError as exc:
        sys.stderr.write(f"lore merge-driver: {path}: {exc}; falling back to a line merge\n")
        merged = None
    if merged is None:
        return _line_merge(base_file, ours_file, theirs_file, tree)
    ours_file.write_bytes(merged)
    _write_notes(notes, tree)
    return 0


def _write_notes(notes: merge.Notes, work_tree: Path) -> None:
    target = notes_path(work_tree)
    if target is None or not (notes.conflicts or notes.renames):
        return
    lines = [orjson.dumps({"type": "conflict", **asdict(c)}) for c in notes.conflicts]
    lines += [orjson.dumps({"type": "rename", **asdict(r)}) for r in notes.renames]
    with target.open("ab") as handle:
        handle.write(b"".join(line + b"\n" for line in lines))


def main(args: list[str]) -> None:
    """Entry from ``lore merge-driver`` before the CLI stack is imported (git runs it once per file)."""
    try:
        code = run(args)
    except Exception as error:  # a bug must leave a conflict for git to report, not a traceback
        sys.stderr.write(f"lore merge-driver: unexpected {type(error).__name__}: {error}\n")
        code = 1
    sys.stdout.flush()
    sys.exit(code)

"""``lore sync``: share a data dir through any git remote.

One sync: commit the data dir's changes (a message counting new and changed
records by type), fetch, merge with lore's record-aware driver, push; a push
rejected because a teammate pushed first is retried after merging again. The
data-dir lock is held while the work tree changes (commit, merge), not while
talking to the remote. The data dir must be the top of its own repository:
sync never commits or reads anything outside it, and never touches the index.
"""

from __future__ import annotations

import contextlib
import random
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lore.errors import LoreError, UsageError, format_location
from lore.interpreter import lore_argv
from lore.settings import DEFAULT_SYNC_PUSH_ATTEMPTS
from lore.store.fileio import atomic_write, data_lock
from lore.store.layout import (
    DECISIONS,
    FAILURES,
    GRAPH,
    OBSERVATIONS,
    PATTERNS,
    SESSIONS,
    SIGNALS,
    jsonl_kind,
)
from lore.sync import driver
from lore.sync.git import Git, GitError

DEFAULT_REMOTE = "origin"
DEFAULT_BRANCH = "main"
PUSH_ATTEMPTS = DEFAULT_SYNC_PUSH_ATTEMPTS  # LORE_SYNC_PUSH_ATTEMPTS; the sleeps between them add up to 56 s at most
BACKOFF_FIRST_S = 0.2
BACKOFF_CAP_S = 5.0
DRY_RUN_REF = "refs/lore/dry-run"
KIND_PLURAL = {
    "decision": "decisions", "pattern": "patterns", "anti_pattern": "anti-patterns", "lesson": "lessons",
    "handoff": "handoffs", "failure": "failures", "observation": "observations",
}  # fmt: skip
KIND_SINGULAR = {"anti_pattern": "anti-pattern"}
# Words of a push refusal that merging and pushing again can fix (another clone pushed first).
_RETRYABLE_PUSH = ("non-fast-forward", "fetch first", "failed to update ref", "cannot lock ref", "stale info")


class SyncError(LoreError):
    """The data dir cannot be synced as it is (not a repository, no remote, a conflict lore cannot resolve)."""


@dataclass
class Changes:
    """Records new, changed and deleted between two states, counted by kind (and project for new ones)."""

    new: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)
    deleted: Counter[str] = field(default_factory=Counter)
    new_by_project: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, other: Changes) -> None:
        self.new.update(other.new)
        self.changed.update(other.changed)
        self.deleted.update(other.deleted)
        for kind, projects in other.new_by_project.items():
            self.new_by_project.setdefault(kind, Counter()).update(projects)

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.deleted)

    def as_json(self) -> dict[str, Any]:
        return {"new": dict(self.new), "changed": dict(self.changed), "deleted": dict(self.deleted),
                "new_by_project": {k: dict(v) for k, v in self.new_by_project.items()}}  # fmt: skip


@dataclass
class SyncReport:
    data_dir: Path
    remote: str
    branch: str
    remote_branch: str
    dry_run: bool = False
    initialised: bool = False  # --setup made the data dir a repository
    published: bool = False  # the remote was empty: this data dir's history is now its start
    committed: Changes | None = None
    commit: str | None = None
    received: Changes = field(default_factory=Changes)
    merged: bool = False
    rebased: bool = False  # this clone's commits were put on top of the remote's (no merge needed)
    pushed: bool = False
    push_attempts: int = 0
    backoff_seconds: float = 0.0  # slept between push attempts
    repacked: bool = False  # the clone's objects were folded into one pack
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    renames: list[dict[str, Any]] = field(default_factory=list)
    outgoing_commits: int = 0
    # Lines of the JSONL record files this sync brought in or sent that a load skips or warns
    # about ("path:line: field 'x': message"): kept in the files, named here.
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir), "remote": self.remote, "branch": self.branch,
            "remote_branch": self.remote_branch, "dry_run": self.dry_run, "initialised": self.initialised,
            "published": self.published, "committed": self.committed.as_json() if self.committed else None,
            "commit": self.commit, "received": self.received.as_json(), "merged": self.merged,
            "rebased": self.rebased, "pushed": self.pushed, "push_attempts": self.push_attempts,
            "backoff_seconds": round(self.backoff_seconds, 3), "repacked": self.repacked, "conflicts": self.conflicts,
            "renames": self.renames, "outgoing_commits": self.outgoing_commits, "warnings": self.warnings,
        }  # fmt: skip


# -- repository set-up ------------------------------------------------------------------


def driver_command() -> str:
    """The command git runs for ``merge=lore``: this interpreter, so it works without lore on PATH.

    Git runs it at the top of the work tree, which may hold a ``lore/`` package (a data dir kept
    in lore's own checkout): ``-P`` keeps that off its import path.
    """
    return shlex.join(lore_argv("merge-driver")) + " %O %A %B %P"


def configure_driver(git: Git) -> None:
    git.config_set("merge.lore.name", "lore records: merge by id, never lose one")
    git.config_set("merge.lore.driver", driver_command())


# Set in a remote that is a bare repository on this machine's disks, when unset there: keep each push
# as a pack (git's default unpacks a push of under 100 objects into loose objects, a whole copy of each
# record file it changed), and fold the packs into one after each push (`receive.autogc` runs
# `git gc --auto`), so that a record file's versions are stored as deltas of each other. A push that
# lost the race left its objects behind (a whole copy of each record file it changed): they are
# pruned after an hour instead of git's two weeks (an hour is far beyond any push in flight).
REMOTE_PACKING = {"receive.unpackLimit": "1", "gc.autoPackLimit": "1", "gc.pruneExpire": "1.hour.ago"}


def _keep_remote_packed(url: str | None) -> bool:
    """Set REMOTE_PACKING in a remote that is a bare repository on disk (a path or ``file://``); True if it is one.

    A remote on a server (ssh, https) keeps its own storage; an administrator's own value is never replaced.
    """
    if not url:
        return False
    path = Path(url.removeprefix("file://")).expanduser()
    if not (path.is_dir() and (path / "objects").is_dir() and (path / "config").is_file() and (path / "HEAD").is_file()):
        return False
    remote = Git(path)
    for key, value in REMOTE_PACKING.items():
        if remote.run("config", "--file", str(path / "config"), "--get", key, check=False).stdout.strip() == "":
            remote.run("config", "--file", str(path / "config"), key, value, check=False)
    return True


LOOSE_SHARE = 4  # repack once the loose objects weigh this many times the packs (amortises the repack)


def _keep_packed(git: Git) -> bool:
    """Fold this clone's loose objects and packs into one pack, so each record file's versions are deltas.

    Each commit of a record file stores the whole file as a loose object (compressed, but whole); a
    repack stores it as a delta of the previous version, a few hundred bytes for a few appended records.
    A repack rewrites the whole pack (docs/sync.md has its cost by store size), so it runs once the
    loose objects outweigh the packs LOOSE_SHARE times (or a fetch left a second pack): the object
    store stays under about LOOSE_SHARE + 1 times its packed size. Run after a sync that moved HEAD;
    True if it repacked.
    """
    counts = git.count_objects()
    loose_kib, packed_kib, packs = counts.get("size", 0), counts.get("size-pack", 0), counts.get("packs", 0)
    if packs <= 1 and (counts.get("count", 0) == 0 or loose_kib < max(1024, LOOSE_SHARE * packed_kib)):
        return False
    return git.run("repack", "-a", "-d", "-q", check=False).ok


def _resolved(path: Path) -> Path:
    return path.expanduser().resolve()


def prepare_repository(data_dir: Path) -> str:
    """For ``lore init --git``: make the data dir a repository (unless it is inside one) and register the driver.

    Returns one line saying what was done, for the CLI to print.
    """
    try:
        git = Git(data_dir)
    except GitError:
        return "git is not installed: wrote .gitattributes and .gitignore only; install git before `lore sync --setup URL`"
    top = git.toplevel()
    if top is None:
        git.init(DEFAULT_BRANCH)
        configure_driver(git)
        return f"initialised a git repository in {data_dir} and registered lore's merge driver"
    configure_driver(git)
    if top == _resolved(data_dir):
        return "registered lore's merge driver in the repository's .git/config"
    # A data dir kept inside a project's repository: its record files merge by id in that repository
    # too (the attributes only match paths under the data dir); lore sync itself needs its own repository.
    return (f"{data_dir} is inside the git repository {top}: registered lore's merge driver there "
            "(lore sync needs a data dir that is a repository of its own)")  # fmt: skip


def _open_repository(data_dir: Path) -> Git:
    git = Git(data_dir)
    top = git.toplevel()
    if top is None:
        raise SyncError(f"{data_dir} is not a git repository",
                        hint="connect it to a shared remote with `lore sync --setup URL` (every teammate runs the same)")  # fmt: skip
    if top != _resolved(data_dir):
        raise SyncError(
            f"{data_dir} is inside the git repository {top}, not a repository of its own; lore sync shares only a "
            "data dir that is the top of its repository",
            hint="give lore its own data dir (`lore --data-dir DIR init --git`) and sync that",
        )
    return git


def _exclude_index(git: Git, data_dir: Path, index_dir: Path | None) -> None:
    """An index dir placed inside the data dir is derived data: keep it out of every commit."""
    if index_dir is None:
        return
    try:
        relative = _resolved(index_dir).relative_to(_resolved(data_dir))
    except ValueError:
        return
    if not relative.parts:
        return
    exclude = git.git_dir() / "info" / "exclude"
    line = "/" + relative.as_posix() + "/"
    existing = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
    if line not in existing:
        atomic_write(exclude, ("\n".join([*existing, line]) + "\n").encode())


def _choose_remote(git: Git, branch: str, wanted: str | None, data_dir: Path) -> str:
    remotes = git.remotes()
    if wanted:
        if wanted not in remotes:
            shown = ", ".join(remotes) if remotes else "none"
            raise SyncError(f"{data_dir} has no git remote named {wanted!r} (remotes: {shown})",
                            hint="connect one with `lore sync --setup URL --remote NAME`")  # fmt: skip
        return wanted
    upstream = git.config_get(f"branch.{branch}.remote")
    if upstream and upstream in remotes:
        return upstream
    if DEFAULT_REMOTE in remotes:
        return DEFAULT_REMOTE
    if len(remotes) == 1:
        return remotes[0]
    if not remotes:
        raise SyncError(f"{data_dir} has no git remote to sync with",
                        hint="connect it to the team's remote with `lore sync --setup URL`")  # fmt: skip
    raise SyncError(f"{data_dir} has several git remotes ({', '.join(remotes)}); say which with --remote")


def _remote_branch(git: Git, remote: str, branch: str) -> str:
    merge_ref = git.config_get(f"branch.{branch}.merge")
    if merge_ref and git.config_get(f"branch.{branch}.remote") == remote:
        return merge_ref.removeprefix("refs/heads/")
    branches, head = git.remote_branches(remote)
    if branch in branches or not branches:
        return branch
    if head:
        return head
    if len(branches) == 1:
        return branches[0]
    raise SyncError(f"the remote {remote!r} has several branches ({', '.join(sorted(branches))}) and none is {branch!r}",
                    hint=f"set the one to follow: git -C DATA_DIR branch --set-upstream-to={remote}/BRANCH")  # fmt: skip


# -- records in a commit ------------------------------------------------------------------


def _is_record_path(path: str) -> bool:
    fixed = {p.as_posix() for p in (DECISIONS, PATTERNS, FAILURES, OBSERVATIONS, SIGNALS, GRAPH)}
    return path in fixed or jsonl_kind(path) is not None or (path.startswith(SESSIONS.as_posix() + "/") and path.endswith(".json") and path.count("/") == 3)


def _record_ids_at(git: Git, rev: str | None) -> set[str]:
    from lore.sync.merge import record_versions

    if rev is None:
        return set()
    paths = [p for p in git.tree_files(rev) if _is_record_path(p)]
    return {record_id for path, data in git.blobs(rev, paths).items() for record_id in record_versions(path, data)}


def compare_files(before: dict[str, bytes | None], after: dict[str, bytes | None]) -> Changes:
    """Records new, changed and deleted between two versions of some record files (path -> content).

    A record that moved between files (none of lore's writes does that) counts as deleted and new.
    """
    from lore.store.records import Record
    from lore.sync.merge import record_versions, same_version, version_raw

    changes = Changes()
    for path in sorted(set(before) | set(after)):
        if not _is_record_path(path) or path == GRAPH.as_posix():
            continue
        if _count_appended(changes, path, before.get(path), after.get(path)):
            continue
        old, new = record_versions(path, before.get(path)), record_versions(path, after.get(path))
        for record_id, (kind, value) in new.items():
            previous = old.get(record_id)
            if previous is None:
                changes.new[kind] += 1
                project = Record(kind, record_id, version_raw(value)).project or "-"
                changes.new_by_project.setdefault(kind, Counter())[project] += 1
            elif not same_version(previous[1], value):
                changes.changed[kind] += 1
        for record_id, (kind, _) in old.items():
            if record_id not in new:
                changes.deleted[kind] += 1
    return changes


def appended_tail(old: bytes | None, new: bytes | None) -> bytes | None:
    """The whole lines ``new`` adds after ``old`` when it only appends to it (lore's writes of new JSONL records); else None."""
    if old is None or new is None or len(new) < len(old) or not new.startswith(old):
        return None
    if old and not old.endswith(b"\n"):
        return None  # a partial last line: an append may have completed it
    return new[len(old):]


def _count_appended(changes: Changes, path: str, old: bytes | None, new: bytes | None) -> bool:
    """Count the new records of a JSONL file that only grew, parsing the appended lines alone; False: parse both whole.

    An appended line whose id the old text names anywhere (an edit appended as a line, a reference) is left
    to the whole-file comparison, which tells a changed record from a new one.
    """
    from lore.store.records import Record
    from lore.sync.merge import record_versions, version_raw

    if not path.endswith(".jsonl"):
        return False
    tail = appended_tail(old, new)
    if tail is None:
        return False
    appended = record_versions(path, tail)
    if any(b'"' + record_id.encode() + b'"' in (old or b"") for record_id in appended):
        return False
    for record_id, (kind, value) in appended.items():
        changes.new[kind] += 1
        project = Record(kind, record_id, version_raw(value)).project or "-"
        changes.new_by_project.setdefault(kind, Counter())[project] += 1
    return True


def _worktree_files(data_dir: Path, paths: list[str]) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for path in paths:
        try:
            found[path] = (data_dir / path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            found[path] = None
    return found


def _commit_files(git: Git, rev: str | None, paths: list[str]) -> dict[str, bytes | None]:
    if rev is None:
        return dict.fromkeys(paths)
    blobs = git.blobs(rev, paths)
    return {path: blobs.get(path) for path in paths}


def bad_lines(git: Git, old: str | None, new: str) -> list[str]:
    """The lines of the JSONL record files commit ``new`` changed since ``old`` that a load skips or warns about.

    A malformed line from another clone is merged as text (nothing is dropped) and ``Store.load``
    reads the other records around it; this names it (file, line, field) for whoever syncs it.
    For a file that only grew, only the appended lines are parsed.
    """
    from lore.store.readers import FileRead, parse_jsonl
    from lore.store.validate import check_record

    changed = git.out("diff", "--name-only", "-z", "--no-renames", old, new).split("\0") if old else git.tree_files(new)
    paths = [p for p in changed if p and jsonl_kind(p) is not None]  # old None: every record file of ``new``
    if not paths:
        return []
    before, after = _commit_files(git, old, paths), _commit_files(git, new, paths)
    found: list[str] = []
    for path in paths:
        data = after.get(path)
        if not data:
            continue
        tail = appended_tail(before.get(path), data)
        offset = 0
        if tail is not None:
            offset, data = (before.get(path) or b"").count(b"\n"), tail
        read = parse_jsonl(FileRead(Path(path)), data)
        kind = jsonl_kind(path) or "observation"
        warnings = [(w.line, w.field, w.message) for w in read.warnings]
        for line, raw in read.items:
            if not isinstance(raw.get("id"), str) or not str(raw.get("id")).strip():
                warnings.append((line, "id", "missing or not text; record skipped"))
                continue
            warnings.extend((line, name, message) for name, message in check_record(kind, raw))
        for line, name, message in sorted(warnings, key=lambda w: (w[0] or 0)):
            found.append(format_location(path, None if line is None else line + offset, name) + message)
    return found


def changes_between(git: Git, old: str | None, new: str) -> Changes:
    """What commit ``new`` changed in the records of commit ``old``."""
    if old is None:
        paths = [p for p in git.tree_files(new) if _is_record_path(p)]
    else:
        paths = [p for p in git.out("diff", "--name-only", "-z", "--no-renames", old, new).split("\0")
                 if p and _is_record_path(p)]  # fmt: skip
    return compare_files(_commit_files(git, old, paths), _commit_files(git, new, paths))


def describe(changes: Changes, *, projects: bool = False) -> str:
    """``3 new decisions (acme 2, billing 1), 1 changed pattern``: the words of commit messages and reports."""
    parts = []
    for label, counter in (("new", changes.new), ("changed", changes.changed), ("deleted", changes.deleted)):
        for kind, count in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
            noun = KIND_PLURAL.get(kind, kind) if count != 1 else KIND_SINGULAR.get(kind, kind)
            text = f"{count} {label} {noun}"
            if projects and label == "new" and changes.new_by_project.get(kind):
                by_project = sorted(changes.new_by_project[kind].items(), key=lambda kv: (-kv[1], kv[0]))
                text += " (" + ", ".join(f"{p} {n}" for p, n in by_project) + ")"
            parts.append(text)
    return ", ".join(parts) if parts else "no record changes"


# -- commit, merge, push --------------------------------------------------------------------


def _ensure_identity(git: Git, actor: str) -> None:
    """Without a git identity here (a fresh machine), commit as the lore actor rather than fail."""
    if git.run("var", "GIT_AUTHOR_IDENT", check=False).ok and git.run("var", "GIT_COMMITTER_IDENT", check=False).ok:
        return
    name = (actor.split(":", 1)[-1].split("@", 1)[0] or "lore") + " (lore sync)"
    for role in ("AUTHOR", "COMMITTER"):
        git.env.setdefault(f"GIT_{role}_NAME", name)
        git.env.setdefault(f"GIT_{role}_EMAIL", "lore-sync@localhost")


def _commit_local(git: Git, data_dir: Path, actor: str, dry_run: bool) -> tuple[Changes | None, str | None]:
    """Commit everything the data dir changed (the caller holds the data lock); the changes and the commit."""
    changed = git.changed_paths()
    if not changed:
        return None, None
    head = git.head()
    paths = [p for p in changed if _is_record_path(p)]
    changes = compare_files(_commit_files(git, head, paths), _worktree_files(data_dir, paths))
    if dry_run:
        return changes, None
    git.run("add", "-A")
    if head is not None and git.run("diff", "--cached", "--quiet", check=False).ok:
        return None, None
    subject = "lore: " + describe(changes) if not changes.empty else "lore: data dir files"
    body = f"Recorded by {actor}; committed by `lore sync`."
    git.run("commit", "-q", "--no-verify", "-m", subject, "-m", body)
    return changes, git.head()


def _resolve_file_conflicts(git: Git) -> list[str]:
    """Settle what git leaves to us: a record file deleted on one side and edited on the other keeps the edit.

    Returns the paths that stay in conflict (both sides changed a file lore has no rule for).
    """
    remaining = []
    for path, stages in sorted(git.unmerged().items()):
        if 2 in stages and 3 in stages:
            remaining.append(path)
        elif 3 in stages:  # deleted here, changed there
            git.run("checkout", "--theirs", "--", path)
            git.run("add", "--", path)
        elif 2 in stages:  # changed here, deleted there
            git.run("add", "--", path)
        else:  # deleted on both sides
            git.run("rm", "-q", "--cached", "--ignore-unmatch", "--", path)
    return remaining


def _read_notes(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    notes = []
    for line in data.splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(line)
            if isinstance(value, dict):
                notes.append(value)
    return notes


def _move_renamed_edges(git: Git, data_dir: Path, rename: dict[str, Any], ours: str, theirs: str, actor: str) -> int:
    """The renamed duplicate takes the edges its own clone gave it; edges both clones drew are copied."""
    from lore.store import Store
    from lore.store.graphfile import ensure_node, node_record_ids
    from lore.store.records import Record
    from lore.sync.merge import edge_key

    old, new = str(rename["old_id"]), str(rename["new_id"])
    side_rev, other_rev = (ours, theirs) if rename.get("side") == "ours" else (theirs, ours)

    def edges_touching(rev: str) -> set[tuple[str, str, str]]:
        blob = git.blobs(rev, [GRAPH.as_posix()]).get(GRAPH.as_posix())
        try:
            document = orjson.loads(blob) if blob else {}
        except orjson.JSONDecodeError:
            return set()
        if not isinstance(document, dict):
            return set()
        ids = node_record_ids(document.get("nodes"))
        found = set()
        for edge in document.get("edges") or []:
            if isinstance(edge, dict):
                a, b = ids.get(str(edge.get("from")), str(edge.get("from"))), ids.get(str(edge.get("to")), str(edge.get("to")))
                if old in (a, b):
                    found.add((a, b, str(edge.get("relation", "relates_to"))))
        return found

    mine, others = edges_touching(side_rev), edges_touching(other_rev)
    if not mine:
        return 0
    store = Store(data_dir, actor=actor)
    snapshot = store.load()
    renamed = snapshot.records.get(new)
    if renamed is None:
        return 0
    moved = [0]

    def edit(document: dict[str, Any], nodes: dict[str, str]) -> None:
        keys = {key: rid for rid, key in nodes.items()}
        new_node = ensure_node(document, nodes, Record(renamed.kind, renamed.id, renamed.raw), store.now_iso())
        old_node = nodes.get(old)
        existing = {edge_key(e) for e in document.get("edges", [])}
        copies = []
        for edge in document.get("edges", []):
            if not isinstance(edge, dict):
                continue
            a, b = keys.get(str(edge.get("from")), str(edge.get("from"))), keys.get(str(edge.get("to")), str(edge.get("to")))
            key = (a, b, str(edge.get("relation", "relates_to")))
            if key not in mine:
                continue
            moved_edge = {**edge, "from": new_node if edge.get("from") == old_node else edge.get("from"),
                          "to": new_node if edge.get("to") == old_node else edge.get("to")}  # fmt: skip
            if key in others:
                if edge_key(moved_edge) not in existing:
                    copies.append(moved_edge)
            else:
                edge.update(moved_edge)
            moved[0] += 1
        document.setdefault("edges", []).extend(copies)

    store._rewrite_graph(edit)
    return moved[0]


def _rename_references(data_dir: Path, rename: dict[str, Any], side_ids: set[str], actor: str) -> None:
    """Records the renamed record's clone added name it by its old id: point them at the new one."""
    from lore.store import Store
    from lore.sync.merge import replace_references

    old, new = str(rename["old_id"]), str(rename["new_id"])
    store = Store(data_dir, actor=actor)
    for record in list(store.load().records.values()):
        if record.id not in side_ids or record.id == new:
            continue
        body = {k: v for k, v in record.raw.items() if k != "id"}
        if replace_references(body, old, new) != body:

            def mutate(raw: dict[str, Any]) -> None:
                fixed = replace_references({k: v for k, v in raw.items() if k != "id"}, old, new)
                raw.update(fixed)

            store.update(record.id, mutate, op="sync", detail={"renamed_reference": {"from": old, "to": new}})


def _apply_notes(git: Git, data_dir: Path, notes: list[dict[str, Any]], actor: str, ours: str | None,
                 theirs: str | None, report: SyncReport) -> None:  # fmt: skip
    """Keep each losing version in the audit log; give each renamed duplicate its edges and references."""
    from lore.store import Store

    store = Store(data_dir, actor=actor)
    side_ids: dict[str, set[str]] = {}
    for note in notes:
        if note.get("type") == "conflict":
            kept = note.get("kept") or {}
            store.record_audit("sync", str(note.get("record_id")), kept.get("project"), kept, {
                "conflict": note.get("fields"), "rule": "edited on two clones: the newest updated_at won",
                "lost": note.get("lost"), "file": note.get("path"),
            })  # fmt: skip
            report.conflicts.append({"id": note.get("record_id"), "fields": note.get("fields"), "file": note.get("path")})
        elif note.get("type") == "rename":
            record = note.get("record") or {}
            edges = 0
            if ours and theirs:
                edges = _move_renamed_edges(git, data_dir, note, ours, theirs, actor)
                side = ours if note.get("side") == "ours" else theirs
                other = theirs if side == ours else ours
                if side not in side_ids:
                    base = git.merge_base(ours, theirs)
                    side_ids[side] = _record_ids_at(git, side) - _record_ids_at(git, other) - _record_ids_at(git, base)
                _rename_references(data_dir, note, side_ids[side], actor)
            store.record_audit("sync", str(note.get("new_id")), record.get("project"), record, {
                "renamed_from": note.get("old_id"), "reason": "the id was minted on two clones", "edges_moved": edges,
            })  # fmt: skip
            report.renames.append({"from": note.get("old_id"), "to": note.get("new_id"), "file": note.get("path"),
                                   "edges_moved": edges})  # fmt: skip


def _merge(git: Git, data_dir: Path, theirs: str | None, label: str, actor: str, report: SyncReport) -> None:
    """Merge ``theirs`` into HEAD (the caller holds the data lock and committed everything)."""
    head = git.head()
    if theirs is None or (head is not None and git.is_ancestor(theirs, head)):
        return
    notes_file = git.git_dir() / driver.NOTES_NAME
    leftover = _read_notes(notes_file)  # from a `git merge` run by hand: their losers still go to the audit log
    notes_file.unlink(missing_ok=True)
    if leftover:
        _apply_notes(git, data_dir, leftover, actor, None, None, report)
    if head is None or git.is_ancestor(head, theirs):
        if head is None:
            git.run("reset", "-q", "--hard", theirs)
        else:
            git.run("merge", "-q", "--ff-only", theirs)
    elif _rebase(git, theirs, actor, report):
        return
    else:
        base = git.merge_base(head, theirs)
        args = ["merge", "-q", "--no-ff", "--no-commit", *(["--allow-unrelated-histories"] if base is None else []), theirs]
        result = git.run(*args, check=False, env={driver.NOTES_ENV: str(notes_file)})
        remaining = _resolve_file_conflicts(git)
        if remaining or (not result.ok and not git.rev("MERGE_HEAD")):
            git.run("merge", "--abort", check=False)
            notes_file.unlink(missing_ok=True)
            if remaining:
                raise SyncError(
                    f"cannot merge {label}: both sides changed {', '.join(remaining)} and lore has no merge rule for it",
                    hint=f"merge by hand in {data_dir} (git merge {label}), commit, then run lore sync again",
                )
            raise SyncError(f"cannot merge {label}: {result.output}")
        _apply_notes(git, data_dir, _read_notes(notes_file), actor, head, theirs, report)
        notes_file.unlink(missing_ok=True)
        git.run("add", "-A")
        paths = [p for p in git.out("diff", "--cached", "--name-only", "-z", "--no-renames", head).split("\0")
                 if p and _is_record_path(p)]  # fmt: skip
        merged = compare_files(_commit_files(git, head, paths), _worktree_files(data_dir, paths))
        git.run("commit", "-q", "--no-verify", "-m", f"lore: merge {label}: " + describe(merged))
    report.merged = True
    new_head = git.head()
    assert new_head is not None
    report.received.add(changes_between(git, head, new_head))


Entry = tuple[str, str]  # (mode, blob id) of a path in a tree


def _rebased_entries(git: Git, base: str, head: str, theirs: str) -> dict[str, Entry | None] | None:
    """What each path this clone changed since ``base`` becomes on top of ``theirs``, or None when a merge is needed.

    A path only this clone changed keeps its blob (None: deleted). A JSONL file both sides only appended to
    becomes theirs followed by this clone's new lines, when no id (or malformed line) was appended on both
    sides. Anything else (an edit, a patterns.yaml or graph.json both changed, a file both added) needs the
    record merge. Only the files both sides changed are read, and of those only the appended lines parsed.
    """
    from lore.sync.merge import jsonl_keys

    def changed(old: str, new: str) -> set[str]:
        return {p for p in git.out("diff", "--name-only", "-z", "--no-renames", old, new).split("\0") if p}

    ours_changed, theirs_changed = changed(base, head), changed(base, theirs)
    both = sorted(ours_changed & theirs_changed)
    if any(not p.endswith(".jsonl") for p in both):
        return None
    entries: dict[str, Entry | None] = dict.fromkeys(ours_changed)
    entries.update(git.tree_entries(head, sorted(ours_changed)))
    if both:
        bases, ours, theirs_blobs = git.blobs(base, both), git.blobs(head, both), git.blobs(theirs, both)
        for path in both:
            their_data = theirs_blobs.get(path)
            base_data = bases.get(path, b"")  # absent at the base: a month's shard both sides began
            our_tail = appended_tail(base_data, ours.get(path))
            their_tail = appended_tail(base_data, their_data)
            if our_tail is None or their_tail is None or their_data is None:
                return None
            if their_data and not their_data.endswith(b"\n"):
                return None
            if set(jsonl_keys(our_tail)) & set(jsonl_keys(their_tail)):
                return None  # an id minted (or a line written) on both sides: the merge's duplicate rule decides
            mode = (entries.get(path) or ("100644", ""))[0]
            entries[path] = (mode, git.hash_object(their_data + our_tail))
    return entries


def _rebase(git: Git, theirs: str, actor: str, report: SyncReport) -> bool:
    """Put this clone's own unpushed commits on top of ``theirs`` as one commit, without the record merge.

    The cheap way to join a remote that moved on while this clone only appended records: no three-way
    parse of the record files. False (nothing changed) when it does not apply: the unpushed commits are
    not all lore's own, the histories are unrelated, or both sides touched one record file other than by
    appending distinct records. The caller holds the data lock and has committed everything.
    """
    head = git.head()
    if head is None:
        return False
    base = git.merge_base(head, theirs)
    if base is None:
        return False
    subjects = git.out("log", "--format=%s", f"{base}..{head}").splitlines()
    if not subjects or not all(subject.startswith("lore: ") for subject in subjects):
        return False
    entries = _rebased_entries(git, base, head, theirs)
    if entries is None:
        return False
    tree = git.tree_with(theirs, entries)
    paths = [p for p in entries if _is_record_path(p)]
    ours = compare_files(_commit_files(git, base, paths), _commit_files(git, head, paths))
    subject = "lore: " + describe(ours) if not ours.empty else "lore: data dir files"
    body = f"Recorded by {actor}; committed by `lore sync` on top of {theirs[:10]} (no merge needed)."
    commit = git.out("commit-tree", tree, "-p", theirs, "-m", subject, "-m", body)
    git.run("reset", "-q", "--keep", commit)
    report.rebased = True
    if report.commit is not None:
        report.commit = commit
    report.received.add(changes_between(git, base, theirs))
    return True


def _push_refused_for_retry(output: str) -> bool:
    return "rejected" in output and any(word in output for word in _RETRYABLE_PUSH)


def _backoff(attempt: int, rng: random.Random) -> float:
    """Sleep before push attempt ``attempt + 1``: exponential with full jitter, so racing clones spread out."""
    seconds = rng.uniform(BACKOFF_FIRST_S / 2, min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** (attempt - 1)))
    time.sleep(seconds)
    return seconds


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip() and line.strip() != "Done"]
    return lines[-1] if lines else "no message"


def _push_error(label: str, output: str) -> SyncError:
    """A push refused for a reason another attempt cannot fix, with a hint that fits git's words."""
    lowered = output.lower()
    if any(word in lowered for word in ("permission denied", "authentication", "could not read username",
                                        "access denied", "403", "401", "not authorized", "read-only")):  # fmt: skip
        hint = "check your access to the remote; your commits are safe in the data dir's repository"
    elif "hook declined" in lowered or "pre-receive" in lowered or "protected branch" in lowered:
        hint = "the remote's rules refused the commits (a server-side hook or branch protection); your commits are safe in the data dir's repository"
    else:
        hint = "your commits are safe in the data dir's repository; run lore sync again once the remote accepts pushes"
    return SyncError(f"git push to {label} was refused: {output}", hint=hint)


def _open_or_set_up(data_dir: Path, setup_url: str | None, remote: str | None) -> tuple[Git, bool]:
    """The data dir's repository, connected first to ``setup_url`` as ``remote`` when given (and made a repository
    if it is none yet: then the second value is True)."""
    if setup_url is None:
        return _open_repository(data_dir), False
    git = Git(data_dir)
    initialised = False
    if git.toplevel() is None:
        git.init(DEFAULT_BRANCH)
        initialised = True
    git = _open_repository(data_dir)
    name = remote or DEFAULT_REMOTE
    existing = git.remote_url(name)
    if existing is None:
        git.run("remote", "add", name, setup_url)
    elif existing != setup_url:
        raise SyncError(f"the remote {name!r} of {data_dir} already points at {existing}",
                        hint="use --remote NAME for another remote, or change it with `git remote set-url`")  # fmt: skip
    return git, initialised


def sync(data_dir: Path, *, remote: str | None = None, dry_run: bool = False, setup_url: str | None = None,
         index_dir: Path | None = None, actor: str = "lore", push_attempts: int = PUSH_ATTEMPTS) -> SyncReport:  # fmt: skip
    """Commit, fetch, merge and push the data dir (``setup_url``: connect it to that remote first)."""
    from lore.store import Store

    data_dir = Path(data_dir)
    if setup_url is not None and dry_run:
        raise UsageError("--dry-run cannot be combined with --setup", hint="run `lore sync --setup URL` on its own")
    if setup_url is not None and not setup_url.strip():
        raise UsageError("--setup needs the URL of the shared remote", hint="e.g. lore sync --setup git@host:team/lore-memory.git")
    if setup_url is not None and Path(setup_url).expanduser().exists():
        # A path on disk: git would read a relative one from the data dir, not from where it was typed.
        setup_url = str(Path(setup_url).expanduser().resolve())
    Store(data_dir).require()
    git, initialised = _open_or_set_up(data_dir, setup_url, remote)
    branch = git.branch()
    if branch is None:
        raise SyncError(f"{data_dir} has no branch checked out (detached HEAD)",
                        hint=f"check out a branch first: git -C {data_dir} checkout {DEFAULT_BRANCH}")  # fmt: skip
    _ensure_identity(git, actor)
    chosen = _choose_remote(git, branch, remote, data_dir)
    target = _remote_branch(git, chosen, branch)
    report = SyncReport(data_dir=data_dir, remote=chosen, branch=branch, remote_branch=target, dry_run=dry_run,
                        initialised=initialised)  # fmt: skip
    label = f"{chosen}/{target}"
    if dry_run:
        return _dry_run(git, data_dir, chosen, target, actor, report)
    Store(data_dir, actor=actor).init(git=True)  # the attributes that route record files to the driver, the ignores
    configure_driver(git)
    _exclude_index(git, data_dir, index_dir)
    _keep_remote_packed(git.remote_url(chosen))
    start_head = git.head()
    with data_lock(data_dir):
        report.committed, report.commit = _commit_local(git, data_dir, actor, dry_run=False)
    tracking = f"refs/remotes/{chosen}/{target}"
    jitter = random.Random()
    for attempt in range(1, push_attempts + 1):
        theirs = git.fetch(chosen, target, tracking)
        with data_lock(data_dir):
            later, commit = _commit_local(git, data_dir, actor, dry_run=False)  # written while we fetched
            if later is not None:
                if report.committed is None:
                    report.committed = later
                else:
                    report.committed.add(later)
                report.commit = commit
            _merge(git, data_dir, theirs, label, actor, report)
        head = git.head()
        if head is None or head == theirs:
            break
        report.push_attempts = attempt
        pushed = git.push(chosen, target)
        if pushed.ok:
            report.pushed = True
            report.published = theirs is None
            git.run("update-ref", tracking, head)
            break
        if not _push_refused_for_retry(pushed.output):
            raise _push_error(label, pushed.output)
        if attempt == push_attempts:
            raise SyncError(
                f"git push to {label} lost the race {attempt} time(s): another clone pushed first each time "
                f"(the remote moved on; git said: {_last_line(pushed.output)})",
                hint="your commits are safe in the data dir's repository; run lore sync again "
                     "(LORE_SYNC_PUSH_ATTEMPTS allows more attempts)",
            )  # fmt: skip
        report.backoff_seconds += _backoff(attempt, jitter)
    if git.head() != start_head:
        report.repacked = _keep_packed(git)
        end_head = git.head()
        if end_head is not None and start_head is not None:  # not a whole store at once (3.4 s at 50k): `lore doctor`'s
            report.warnings = bad_lines(git, start_head, end_head)
    if git.config_get(f"branch.{branch}.remote") is None:
        git.run("config", f"branch.{branch}.remote", chosen)
        git.run("config", f"branch.{branch}.merge", f"refs/heads/{target}")
    return report


def _dry_run(git: Git, data_dir: Path, remote: str, target: str, actor: str, report: SyncReport) -> SyncReport:
    """What a sync would do; it fetches into a scratch ref (deleted again) and changes nothing else."""
    report.committed, _ = _commit_local(git, data_dir, actor, dry_run=True)
    try:
        theirs = git.fetch(remote, target, DRY_RUN_REF)
        head = git.head()
        if theirs is not None and not (head is not None and git.is_ancestor(theirs, head)):
            # New: records the remote has and this data dir (committed or not) does not; changed:
            # records the remote changed since the common ancestor.
            base = git.merge_base(head, theirs) if head else None
            paths = [p for p in git.tree_files(theirs) if _is_record_path(p)]
            arriving = compare_files(_worktree_files(data_dir, paths), _commit_files(git, theirs, paths))
            remote_side = changes_between(git, base, theirs) if base else Changes()
            report.received = Changes(new=arriving.new, changed=remote_side.changed, deleted=remote_side.deleted,
                                      new_by_project=arriving.new_by_project)  # fmt: skip
        if head is not None:
            if theirs is None:
                report.outgoing_commits = int(git.out("rev-list", "--count", head))
            else:
                report.outgoing_commits = int(git.out("rev-list", "--count", f"{theirs}..{head}"))
        if report.committed is not None:
            report.outgoing_commits += 1
    finally:
        git.delete_ref(DRY_RUN_REF)
    return report

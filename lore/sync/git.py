"""The one place lore runs git: a subprocess per call, with errors a person can act on.

Everything else in ``lore.sync`` asks this module; nothing else in lore starts
``git``. Output is read in the C locale so that messages (push rejections) can
be recognised, and git never prompts: a sync run from a hook or an agent must
fail with a message, not wait for a password on a terminal nobody watches.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lore.errors import LoreError


class GitError(LoreError):
    """git is missing, or a git command failed (the message names the command and git's words)."""


@dataclass(frozen=True)
class GitResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return (self.stderr.strip() + "\n" + self.stdout.strip()).strip()


def git_executable() -> str:
    """The path of ``git``, or a clear error when it is not installed."""
    found = shutil.which("git")
    if found is None:
        raise GitError(
            "git is not installed (or not on PATH); lore sync uses git to share the data directory",
            hint="install git (e.g. `apt-get install git`), then run the command again",
        )
    return found


# Set by git for hooks (and by people): they would point git somewhere other than the data dir.
_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                         "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX")  # fmt: skip


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARIABLES}
    env.update({
        "LC_ALL": "C", "LANGUAGE": "C",  # messages we parse (push rejections) stay in English
        "GIT_TERMINAL_PROMPT": "0",  # never wait for a password on a terminal
        "GIT_MERGE_AUTOEDIT": "no", "GIT_EDITOR": "true",  # merges never open an editor
    })  # fmt: skip
    if extra:
        env.update(extra)
    return env


class Git:
    """git commands run in one work tree (the data dir)."""

    def __init__(self, work_tree: Path, env: Mapping[str, str] | None = None) -> None:
        self.work_tree = Path(work_tree)
        self.executable = git_executable()
        self.env = dict(env or {})

    def run(self, *args: str, check: bool = True, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> GitResult:  # fmt: skip
        """Run ``git ARGS`` in the work tree; with ``check`` a failure raises GitError."""
        merged_env = _environment({**self.env, **(env or {})})
        try:
            done = subprocess.run(
                [self.executable, *args], cwd=self.work_tree, env=merged_env, input=input,
                capture_output=True, check=False,
            )  # fmt: skip
        except FileNotFoundError as exc:  # removed between which() and run()
            raise GitError(f"cannot run git: {exc}") from exc
        result = GitResult(tuple(args), done.returncode, done.stdout.decode("utf-8", "replace"),
                           done.stderr.decode("utf-8", "replace"))  # fmt: skip
        if check and not result.ok:
            raise GitError(f"`git {' '.join(args)}` failed in {self.work_tree}: {result.output or 'exit ' + str(result.returncode)}")
        return result

    def out(self, *args: str) -> str:
        return self.run(*args).stdout.strip()

    # -- repository ---------------------------------------------------------------
    def toplevel(self) -> Path | None:
        """The top of the work tree containing ``work_tree``, or None outside any repository."""
        result = self.run("rev-parse", "--show-toplevel", check=False)
        return Path(result.stdout.strip()).resolve() if result.ok and result.stdout.strip() else None

    def git_dir(self) -> Path:
        return Path(self.out("rev-parse", "--absolute-git-dir"))

    def init(self, branch: str) -> None:
        self.run("init", "-q")
        # `git init -b` needs git 2.28; the symbolic ref works everywhere.
        self.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")

    def head(self) -> str | None:
        result = self.run("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
        return result.stdout.strip() if result.ok and result.stdout.strip() else None

    def branch(self) -> str | None:
        result = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return result.stdout.strip() if result.ok and result.stdout.strip() else None

    def rev(self, name: str) -> str | None:
        result = self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False)
        return result.stdout.strip() if result.ok and result.stdout.strip() else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.run("merge-base", "--is-ancestor", older, newer, check=False).ok

    def merge_base(self, a: str, b: str) -> str | None:
        result = self.run("merge-base", a, b, check=False)
        return result.stdout.strip() if result.ok and result.stdout.strip() else None

    def config_get(self, key: str) -> str | None:
        result = self.run("config", "--get", key, check=False)
        return result.stdout.strip() if result.ok else None

    def config_set(self, key: str, value: str) -> None:
        if self.config_get(key) != value:
            self.run("config", key, value)

    # -- remotes -------------------------------------------------------------------
    def remote_url(self, name: str) -> str | None:
        result = self.run("remote", "get-url", name, check=False)
        return result.stdout.strip() if result.ok else None

    def remotes(self) -> list[str]:
        return [line for line in self.out("remote").splitlines() if line]

    def remote_branches(self, remote: str) -> tuple[list[str], str | None]:
        """Branches the remote has and the branch its HEAD names (``ls-remote``; nothing is fetched)."""
        result = self.run("ls-remote", "--symref", remote, check=False)
        if not result.ok:
            raise GitError(f"cannot reach the remote {remote!r}: {result.output}",
                           hint="check the URL (`git -C DATA_DIR remote -v`) and your access to it")  # fmt: skip
        branches, head = [], None
        for line in result.stdout.splitlines():
            if line.startswith("ref: ") and line.endswith("\tHEAD"):
                target = line[5:].split("\t", 1)[0]
                head = target.removeprefix("refs/heads/")
            elif "\trefs/heads/" in line:
                branches.append(line.split("\trefs/heads/", 1)[1])
        return branches, head if head in branches else None

    def fetch(self, remote: str, branch: str, into: str) -> str | None:
        """Fetch ``branch`` of ``remote`` into the local ref ``into``; its commit, or None if it does not exist.

        ``--refmap=`` stops git from also updating the configured remote-tracking
        refs, so a dry run can fetch into a scratch ref and leave everything else alone.
        """
        result = self.run("fetch", "-q", "--no-write-fetch-head", "--refmap=", remote,
                          f"+refs/heads/{branch}:{into}", check=False)  # fmt: skip
        if not result.ok:
            if "couldn't find remote ref" in result.stderr:
                return None
            raise GitError(f"cannot fetch {branch} from {remote!r}: {result.output}",
                           hint="check the URL (`git -C DATA_DIR remote -v`) and your access to it")  # fmt: skip
        return self.rev(into)

    def delete_ref(self, ref: str) -> None:
        self.run("update-ref", "-d", ref, check=False)

    def push(self, remote: str, branch: str) -> GitResult:
        return self.run("push", "--porcelain", remote, f"HEAD:refs/heads/{branch}", check=False)

    # -- trees ---------------------------------------------------------------------
    def tree_files(self, rev: str) -> list[str]:
        return [p for p in self.out("ls-tree", "-r", "-z", "--name-only", rev).split("\0") if p]

    def blobs(self, rev: str, paths: Iterable[str]) -> dict[str, bytes]:
        """The content of each path at ``rev`` (one ``cat-file --batch`` process for all of them)."""
        wanted = list(paths)
        if not wanted:
            return {}
        request = "".join(f"{rev}:{p}\n" for p in wanted).encode()
        done = subprocess.run([self.executable, "cat-file", "--batch"], cwd=self.work_tree, env=_environment(self.env),
                              input=request, capture_output=True, check=False)  # fmt: skip
        if done.returncode != 0:
            raise GitError(f"`git cat-file --batch` failed in {self.work_tree}: {done.stderr.decode(errors='replace').strip()}")
        data, offset, found = done.stdout, 0, {}
        for path in wanted:
            end = data.index(b"\n", offset)
            header = data[offset:end].split()
            offset = end + 1
            if header[-1] == b"missing":
                continue
            size = int(header[2])
            found[path] = data[offset:offset + size]
            offset += size + 1
        return found

    def tree_entries(self, rev: str, paths: list[str]) -> dict[str, tuple[str, str]]:
        """(mode, blob id) of each of ``paths`` that ``rev`` holds (one ``ls-tree`` for all of them)."""
        if not paths:
            return {}
        found = {}
        for entry in self.out("ls-tree", "-z", rev, "--", *paths).split("\0"):
            if "\t" in entry:
                meta, path = entry.split("\t", 1)
                mode, _, oid = meta.split()
                found[path] = (mode, oid)
        return found

    def hash_object(self, data: bytes) -> str:
        """Write ``data`` as a blob into the object store; its id."""
        return self.run("hash-object", "-w", "--stdin", input=data).stdout.strip()

    def tree_with(self, rev: str, entries: Mapping[str, tuple[str, str] | None]) -> str:
        """The id of ``rev``'s tree with ``entries`` put in (None: the path removed), built in a scratch index."""
        index = self.git_dir() / "lore-scratch-index"
        index.unlink(missing_ok=True)
        env = {"GIT_INDEX_FILE": str(index)}
        lines = [f"0 {'0' * 40}\t{path}" if entry is None else f"{entry[0]} {entry[1]}\t{path}"
                 for path, entry in entries.items()]  # fmt: skip
        try:
            self.run("read-tree", rev, env=env)
            if lines:
                self.run("update-index", "-z", "--index-info", input="".join(line + "\0" for line in lines).encode(), env=env)
            return self.run("write-tree", env=env).stdout.strip()
        finally:
            index.unlink(missing_ok=True)

    def count_objects(self) -> dict[str, int]:
        """``git count-objects -v`` as numbers: ``count`` loose objects (``size`` KiB), ``packs`` (``size-pack`` KiB)."""
        found = {}
        for line in self.out("count-objects", "-v").splitlines():
            key, _, value = line.partition(":")
            if value.strip().isdigit():
                found[key.strip()] = int(value.strip())
        return found

    def changed_paths(self) -> list[str]:
        """Paths with uncommitted changes (staged or not, untracked included, ignored excluded)."""
        out = self.run("status", "--porcelain", "-z", "--untracked-files=all").stdout
        return [entry[3:] for entry in out.split("\0") if len(entry) > 3]

    def unmerged(self) -> dict[str, set[int]]:
        """Conflicted paths and the stages present (1 base, 2 ours, 3 theirs)."""
        stages: dict[str, set[int]] = {}
        for line in self.out("ls-files", "-u", "-z").split("\0"):
            if "\t" in line:
                meta, path = line.split("\t", 1)
                stages.setdefault(path, set()).add(int(meta.split()[2]))
        return stages

"""Detect the project a record belongs to from a working directory.

Order (as the original Lore): ``.claude/project.yaml`` ``project.name``, else the
repository name of the git ``origin`` remote, else the directory name. It reads
files directly instead of running git, because the hook calls it on every prompt.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

_NAME_IN_PROJECT_YAML = re.compile(r"^project:\s*\n(?:[ \t]+.*\n)*?[ \t]+name:\s*['\"]?([^'\"\n#]+?)['\"]?\s*(?:#.*)?$", re.M)
_ORIGIN_URL = re.compile(r'\[remote "origin"\][^\[]*?\burl\s*=\s*(\S+)', re.S)


def _project_yaml_name(directory: Path) -> str | None:
    path = directory / ".claude" / "project.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = _NAME_IN_PROJECT_YAML.search(text if text.endswith("\n") else text + "\n")
    return match.group(1).strip() if match else None


def _git_dir(directory: Path) -> Path | None:
    dot_git = directory / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # worktrees and submodules: "gitdir: <path>"
        try:
            content = dot_git.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if content.startswith("gitdir:"):
            target = Path(content[len("gitdir:") :].strip())
            target = target if target.is_absolute() else (directory / target)
            # A worktree's config lives in the common dir.
            common = target / "commondir"
            if common.is_file():
                with contextlib.suppress(OSError):
                    target = (target / common.read_text(encoding="utf-8").strip()).resolve()
            return target
    return None


def repo_name_from_url(url: str) -> str | None:
    """``git@github.com:acme/billing-api.git`` -> ``billing-api``."""
    tail = re.split(r"[/:]", url.rstrip("/"))[-1]
    if tail.endswith(".git"):
        tail = tail[:-4]
    return tail or None


def detect_project(cwd: str | Path | None = None) -> str:
    """The project name for records written or searched from ``cwd``."""
    start = Path(cwd) if cwd is not None else Path.cwd()
    with contextlib.suppress(OSError):
        start = start.resolve()
    git_root: Path | None = None
    for directory in (start, *start.parents):
        name = _project_yaml_name(directory)
        if name:
            return name
        git_dir = _git_dir(directory)
        if git_dir is not None:
            git_root = directory
            try:
                config = (git_dir / "config").read_text(encoding="utf-8", errors="replace")
            except OSError:
                config = ""
            match = _ORIGIN_URL.search(config)
            if match:
                repo = repo_name_from_url(match.group(1))
                if repo:
                    return repo
            break
    return (git_root or start).name or "default"

"""What the `lore sync` tests share: real git on a bare remote, and the CLI on one clone's data dir."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


@pytest.fixture
def lore(cli):  # type: ignore[no-untyped-def]
    """``lore(clone, *args)``: the CLI on one clone's data dir; fails the test on an unexpected exit code."""

    def run(clone: Path, *args: str, code: int = 0) -> Any:
        result = cli("--data-dir", str(clone), *args)
        assert result.exit_code == code, result.stdout + result.stderr
        return result

    return run


def sync(lore, clone: Path, *args: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return orjson.loads(lore(clone, "sync", "--json", *args).stdout)


def teammate(lore, tmp_path: Path, name: str, remote: Path) -> Path:  # type: ignore[no-untyped-def]
    """The two commands every teammate runs."""
    clone = tmp_path / name
    lore(clone, "init", "--git")
    sync(lore, clone, "--setup", str(remote))
    return clone

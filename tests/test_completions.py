"""Shell completions: the checked-in scripts are current, and the CLI answers their callbacks."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = ROOT / "completions"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_completions", ROOT / "scripts" / "gen_completions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lore_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


@pytest.fixture
def lore_on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH starts with a `lore` that runs this checkout."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "lore"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lore "$@"\n')
    shim.chmod(0o755)
    return lore_env(PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


def test_checked_in_completion_scripts_are_current(tmp_path: Path) -> None:
    generator = load_generator()
    written = generator.write_all(tmp_path)
    assert [p.name for p in written] == ["lore.bash", "lore.zsh", "lore.fish"]
    for fresh in written:
        checked_in = COMPLETIONS / fresh.name
        assert checked_in.is_file() and checked_in.read_bytes() == fresh.read_bytes(), (
            f"completions/{fresh.name} is stale: run `python scripts/gen_completions.py` and commit the result"
        )


def test_completion_scripts_hold_no_machine_specifics() -> None:
    generator = load_generator()
    for shell in generator.SHELLS:
        text = generator.render(shell)
        assert text == generator.render(shell)
        for specific in (str(ROOT), str(Path.home()), sys.executable, "/work/", "/home/", "/tmp/"):
            assert specific not in text, (shell, specific)
        assert "_LORE_COMPLETE=complete_" + shell in text
    assert generator.render("zsh").startswith("#compdef lore\n")


def run_callback(env: dict[str, str]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "lore"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_bash_callback_proposes_search_for_lore_se() -> None:
    lines = run_callback(lore_env(COMP_WORDS="lore se", COMP_CWORD="1", _LORE_COMPLETE="complete_bash"))
    assert "search" in lines
    assert all(line.startswith("se") for line in lines), lines


def test_bash_callback_completes_hook_subcommands() -> None:
    lines = run_callback(lore_env(COMP_WORDS="lore hook ins", COMP_CWORD="2", _LORE_COMPLETE="complete_bash"))
    assert lines == ["install"]


def test_zsh_and_fish_callbacks_propose_search() -> None:
    zsh = run_callback(lore_env(_TYPER_COMPLETE_ARGS="lore se", _LORE_COMPLETE="complete_zsh"))
    assert zsh[0].startswith("_arguments '*: :((")
    assert '"search":"Search ' in "\n".join(zsh)
    fish = run_callback(lore_env(_TYPER_COMPLETE_ARGS="lore se", _TYPER_COMPLETE_FISH_ACTION="get-args",
                                 _LORE_COMPLETE="complete_fish"))  # fmt: skip
    assert "search" in [line.split("\t")[0] for line in fish]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_script_end_to_end(lore_on_path: dict[str, str]) -> None:
    script = (f"source {COMPLETIONS / 'lore.bash'}\n"
              'COMP_WORDS=(lore se); COMP_CWORD=1; _lore_completion lore se lore\n'
              'printf "%s\\n" "${COMPREPLY[@]}"\n')  # fmt: skip
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], env=lore_on_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "search" in result.stdout.splitlines()


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish not installed")
def test_fish_script_end_to_end(lore_on_path: dict[str, str]) -> None:
    script = f"source {COMPLETIONS / 'lore.fish'}; complete -C 'lore se'"
    result = subprocess.run(["fish", "--no-config", "-c", script], env=lore_on_path,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "search" in [line.split("\t")[0] for line in result.stdout.splitlines()]

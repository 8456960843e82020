"""`lore hook install` / `uninstall`: merging lore's hooks into Claude Code settings.json files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from lore.agent.install import is_lore_command, plan_install, plan_uninstall
from lore.errors import DataError

FIXTURES = Path(__file__).resolve().parent / "data" / "claude-settings"
EVENTS = ["UserPromptSubmit", "SessionStart", "PreCompact", "Stop"]


@pytest.fixture
def lore_exe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fake `lore` first on PATH, so the installed command is deterministic."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "lore"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", ["pytest"])
    return str(exe)


@pytest.fixture
def user_settings() -> Path:
    return Path.home() / ".claude" / "settings.json"


def place(fixture: str, target: Path) -> bytes:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / fixture, target)
    return target.read_bytes()


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def lore_group(command: str, timeout: int) -> dict:
    return {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}


def fresh_hooks(exe: str) -> dict:
    return {
        "UserPromptSubmit": [lore_group(f"{exe} hook prompt", 5)],
        "SessionStart": [lore_group(f"{exe} hook session-start", 10)],
        "PreCompact": [lore_group(f"{exe} hook pre-compact", 30)],
        "Stop": [lore_group(f"{exe} hook stop", 30)],
    }


def added_lines(exe: str) -> str:
    return (f"  added     UserPromptSubmit: {exe} hook prompt\n"
            f"  added     SessionStart: {exe} hook session-start\n"
            f"  added     PreCompact: {exe} hook pre-compact\n"
            f"  added     Stop: {exe} hook stop\n")  # fmt: skip


def ordered(value: object) -> str:
    """Canonical text that keeps key order, so equal strings mean equal content in equal order."""
    return json.dumps(value, indent=1)


# --------------------------------------------------------------------------- install


def test_install_without_a_settings_file_creates_it(cli, lore_exe: str, user_settings: Path) -> None:
    result = cli("hook", "install")
    assert result.exit_code == 0, result.output
    assert result.stdout == (f"Changed {user_settings} (scope user):\n" + added_lines(lore_exe)
                             + "Backup: none (the file did not exist)\n")  # fmt: skip
    assert json.loads(user_settings.read_text()) == {"hooks": fresh_hooks(lore_exe)}
    assert backups(user_settings) == []


def test_install_twice_changes_nothing(cli, lore_exe: str, user_settings: Path) -> None:
    place("other-settings.json", user_settings)
    assert cli("hook", "install").exit_code == 0
    after_first = user_settings.read_bytes()
    first_backups = backups(user_settings)
    assert len(first_backups) == 1

    result = cli("hook", "install")
    assert result.exit_code == 0
    assert result.stdout == f"lore hooks already installed in {user_settings}; nothing changed.\n"
    assert user_settings.read_bytes() == after_first
    assert backups(user_settings) == first_backups  # no backup when nothing changes


def test_install_on_an_empty_file(cli, lore_exe: str, user_settings: Path) -> None:
    place("empty.json", user_settings)
    result = cli("hook", "install")
    assert result.exit_code == 0, result.output
    [backup] = backups(user_settings)
    assert backup.read_bytes() == b""
    assert result.stdout == (
        f"Changed {user_settings} (scope user):\n" + added_lines(lore_exe) + f"Backup: {backup}\n"
    )
    assert json.loads(user_settings.read_text()) == {"hooks": fresh_hooks(lore_exe)}


def test_install_keeps_other_settings_and_hooks_in_order(cli, lore_exe: str, user_settings: Path) -> None:
    original = place("other-settings.json", user_settings)
    before = json.loads(original)

    result = cli("hook", "install")
    assert result.exit_code == 0, result.output
    [backup] = backups(user_settings)
    assert backup.read_bytes() == original
    assert result.stdout == (
        f"Changed {user_settings} (scope user):\n" + added_lines(lore_exe) + f"Backup: {backup}\n"
    )

    after = json.loads(user_settings.read_text())
    assert list(after) == list(before)  # same top-level keys, same order
    for key in before:
        if key != "hooks":
            assert ordered(after[key]) == ordered(before[key])
    # other events untouched and first; lore's new events appended after them
    assert list(after["hooks"]) == [
        "PreToolUse",
        "UserPromptSubmit",
        "Notification",
        "SessionStart",
        "PreCompact",
        "Stop",
    ]
    for event in ("PreToolUse", "Notification"):
        assert ordered(after["hooks"][event]) == ordered(before["hooks"][event])
    # the other tool's prompt hook stays first; lore's is a group of its own after it
    assert ordered(after["hooks"]["UserPromptSubmit"]) == ordered(
        [*before["hooks"]["UserPromptSubmit"], lore_group(f"{lore_exe} hook prompt", 5)]
    )
    # the file keeps its 2-space indentation
    assert user_settings.read_text().startswith(
        '{\n  "model": "opus",\n  "env": {\n    "BASH_DEFAULT_TIMEOUT_MS"'
    )


def test_install_updates_an_old_lore_entry_instead_of_duplicating(
    cli, lore_exe: str, user_settings: Path
) -> None:
    place("old-lore.json", user_settings)
    result = cli("hook", "install")
    assert result.exit_code == 0, result.output
    [backup] = backups(user_settings)
    assert result.stdout == (
        f"Changed {user_settings} (scope user):\n"
        f"  updated   UserPromptSubmit: /old/venv/bin/lore hook prompt -> {lore_exe} hook prompt\n"
        f"  updated   SessionStart: lore hook session-start -> {lore_exe} hook session-start\n"
        f"  added     PreCompact: {lore_exe} hook pre-compact\n"
        f"  updated   Stop: /old/venv/bin/lore hook stop -> {lore_exe} hook stop\n"
        f"Backup: {backup}\n"
    )
    after = json.loads(user_settings.read_text())
    assert ordered(after) == ordered({
        "hooks": {
            "UserPromptSubmit": [{"hooks": [
                {"type": "command", "command": "other-tool prompt-context"},
                {"type": "command", "command": f"{lore_exe} hook prompt", "timeout": 5},
            ]}],
            "SessionStart": [{"matcher": "startup", "hooks": [
                {"type": "command", "command": f"{lore_exe} hook session-start", "timeout": 10},
            ]}],
            "Stop": [lore_group(f"{lore_exe} hook stop", 30)],  # the duplicate lore group is gone
            "PreCompact": [lore_group(f"{lore_exe} hook pre-compact", 30)],
        },
        "theme": "dark",
    })  # fmt: skip
    assert (
        cli("hook", "install").stdout
        == f"lore hooks already installed in {user_settings}; nothing changed.\n"
    )


def test_project_scope_writes_cwd_settings_with_plain_lore(cli, lore_exe: str, user_settings: Path) -> None:
    result = cli("hook", "install", "--scope", "project")
    assert result.exit_code == 0, result.output
    project_settings = Path.cwd() / ".claude" / "settings.json"
    assert result.stdout == (f"Changed {project_settings} (scope project):\n" + added_lines("lore")
                             + "Backup: none (the file did not exist)\n")  # fmt: skip
    assert json.loads(project_settings.read_text()) == {"hooks": fresh_hooks("lore")}
    assert not user_settings.exists()


def test_unknown_scope_is_a_usage_error(cli, lore_exe: str, user_settings: Path) -> None:
    result = cli("hook", "install", "--scope", "global")
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: lore hook install [OPTIONS]\n")
    assert "Invalid value for '--scope'" in result.stderr
    assert "'global' is not one of 'user', 'project'." in result.stderr
    assert not user_settings.exists()


def test_invalid_json_is_reported_with_its_line_and_never_rewritten(
    cli, lore_exe: str, user_settings: Path
) -> None:
    original = place("invalid.json", user_settings)
    for command in (("hook", "install"), ("hook", "uninstall"), ("hook", "install", "--dry-run")):
        result = cli(*command)
        assert result.exit_code == 1
        assert result.stdout == ""
        assert result.stderr == (
            f"Error: {user_settings}:5: not valid JSON: Expecting property name enclosed in double quotes (column 3)\n"
            "Hint: fix the file by hand; lore did not change it\n"
        )
    assert user_settings.read_bytes() == original
    assert sorted(p.name for p in user_settings.parent.iterdir()) == ["settings.json"]


def test_dry_run_prints_the_diff_and_writes_nothing(cli, lore_exe: str, user_settings: Path) -> None:
    original = place("other-settings.json", user_settings)
    result = cli("hook", "install", "--dry-run")
    assert result.exit_code == 0, result.output
    diff, _, summary = result.stdout.partition(f"Would change {user_settings}")
    assert diff.startswith(f"--- {user_settings} (before)\n+++ {user_settings} (after)\n@@ ")
    assert f'+            "command": "{lore_exe} hook prompt",\n' in diff
    assert '+    "PreCompact": [\n' in diff
    assert not any(line.startswith("-") and not line.startswith("---") for line in diff.splitlines())
    assert summary == " (scope user):\n" + added_lines(lore_exe) + "Dry run: nothing written.\n"
    assert user_settings.read_bytes() == original
    assert sorted(p.name for p in user_settings.parent.iterdir()) == ["settings.json"]


def test_dry_run_without_a_file_creates_nothing(cli, lore_exe: str, user_settings: Path) -> None:
    result = cli("hook", "install", "--dry-run")
    assert result.exit_code == 0
    assert result.stdout.endswith("Dry run: nothing written.\n")
    assert not user_settings.parent.exists()


# --------------------------------------------------------------------------- uninstall


def test_uninstall_removes_only_lores_entries(cli, lore_exe: str, user_settings: Path) -> None:
    place("old-lore.json", user_settings)
    result = cli("hook", "uninstall")
    assert result.exit_code == 0, result.output
    [backup] = backups(user_settings)
    assert result.stdout == (
        f"Changed {user_settings} (scope user):\n"
        "  removed   UserPromptSubmit: /old/venv/bin/lore hook prompt\n"
        "  removed   SessionStart: lore hook session-start\n"
        "  removed   Stop: /old/venv/bin/lore hook stop\n"
        "  removed   Stop: lore hook stop\n"
        f"Backup: {backup}\n"
    )
    # emptied groups and event lists are gone; the other tool's hook and settings stay
    assert ordered(json.loads(user_settings.read_text())) == ordered({
        "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "other-tool prompt-context"}]}]},
        "theme": "dark",
    })  # fmt: skip


def test_install_then_uninstall_restores_the_original(cli, lore_exe: str, user_settings: Path) -> None:
    original = place("other-settings.json", user_settings)
    assert cli("hook", "install").exit_code == 0
    result = cli("hook", "uninstall")
    assert result.exit_code == 0
    assert result.stdout.startswith(
        f"Changed {user_settings} (scope user):\n  removed   UserPromptSubmit: {lore_exe} hook prompt\n"
    )
    assert ordered(json.loads(user_settings.read_text())) == ordered(json.loads(original))
    assert len(backups(user_settings)) == 2
    # and uninstalling again is a no-op
    assert cli("hook", "uninstall").stdout == f"no lore hooks in {user_settings}; nothing changed.\n"


def test_uninstall_without_a_file_creates_nothing(cli, lore_exe: str, user_settings: Path) -> None:
    result = cli("hook", "uninstall")
    assert result.exit_code == 0
    assert result.stdout == f"no lore hooks in {user_settings}; nothing changed.\n"
    assert not user_settings.parent.exists()


def test_uninstall_dry_run_writes_nothing(cli, lore_exe: str, user_settings: Path) -> None:
    original = place("old-lore.json", user_settings)
    result = cli("hook", "uninstall", "--dry-run")
    assert result.exit_code == 0
    assert '-            "command": "/old/venv/bin/lore hook prompt",\n' in result.stdout
    assert result.stdout.endswith("  removed   Stop: lore hook stop\nDry run: nothing written.\n")
    assert user_settings.read_bytes() == original
    assert backups(user_settings) == []


# --------------------------------------------------------------------------- pure functions


def test_plans_do_not_modify_their_input() -> None:
    settings = json.loads((FIXTURES / "old-lore.json").read_text())
    snapshot = ordered(settings)
    installed = plan_install(settings, "user", "/bin/lore")
    assert ordered(settings) == snapshot
    assert plan_install(installed, "user", "/bin/lore") == installed
    removed = plan_uninstall(installed)
    assert ordered(installed) != ordered(removed)
    assert plan_uninstall(removed) == removed
    assert plan_uninstall({}) == {}


def test_plan_install_from_nothing() -> None:
    assert plan_install({}, "project", "lore") == {"hooks": fresh_hooks("lore")}


@pytest.mark.parametrize(
    "settings", [[], {"hooks": []}, {"hooks": {"Stop": {"hooks": []}}}, {"hooks": {"Stop": ["x"]}}]
)
def test_unexpected_shapes_are_refused(settings: object) -> None:
    with pytest.raises(DataError):
        plan_install(settings, "user", "lore")  # type: ignore[arg-type]
    with pytest.raises(DataError):
        plan_uninstall(settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(("command", "expected"), [
    ("lore hook prompt", True),
    ("/home/a/.venv/bin/lore hook stop", True),
    ("'/path with space/lore' hook session-start", True),
    ("LORE_HOOK_BUDGET=800 lore hook prompt", True),
    ("python3 -m lore hook pre-compact", True),
    ("/opt/venv/bin/python -P -m lore hook prompt", True),
    ("python3 -I -m lore hook stop", True),
    ("python3 -m lore.hook prompt", False),
    ("python3 -c 'import lore' hook", False),
    ("$CLAUDE_PROJECT_DIR/hooks/lore-prompt-hook.sh", True),
    ("lore search retry", False),
    ("other-tool prompt-context", False),
    ("explore hook prompt", False),
    ("/opt/lore-tools/run hook prompt", False),
    ("lore", False),
    ("", False),
])  # fmt: skip
def test_lore_entries_are_recognised(command: str, expected: bool) -> None:
    assert is_lore_command(command) is expected


def test_null_or_empty_hooks() -> None:
    assert plan_install({"hooks": None, "a": 1}, "user", "lore") == {"hooks": fresh_hooks("lore"), "a": 1}
    assert plan_uninstall({"hooks": {}, "a": 1}) == {"hooks": {}, "a": 1}
    assert plan_uninstall({"hooks": {"Stop": []}}) == {"hooks": {"Stop": []}}


def test_hand_wiring_snippet_matches_what_install_writes() -> None:
    snippet = Path(__file__).resolve().parent.parent / "hooks" / "claude-settings.json"
    assert json.loads(snippet.read_text()) == plan_install({}, "project", "lore")

"""LORE_* settings: read and checked once (lore.settings), the same verdict on every surface."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lore.errors import UsageError
from lore.settings import Settings


def test_unset_and_empty_variables_mean_the_defaults() -> None:
    assert Settings.from_env({}) == Settings()
    assert Settings.from_env({"LORE_HOOK_BUDGET": "", "LORE_SERVER": "  ", "LORE_LLM_CMD": ""}) == Settings()
    defaults = Settings()
    assert (defaults.index_refresh, defaults.hook, defaults.hook_budget, defaults.hook_deadline_ms) == ("refresh", True, 1500, 400)
    assert (defaults.server, defaults.hook_handoff, defaults.hook_refresh, defaults.hook_gap) == (None, False, "ignore", "nothing")


def test_values_are_parsed_as_the_surfaces_always_read_them() -> None:
    settings = Settings.from_env({
        "LORE_INDEX_REFRESH": "Warn", "LORE_HOOK": "OFF", "LORE_HOOK_BUDGET": "400", "LORE_HOOK_DEADLINE_MS": "1",
        "LORE_HOOK_GAP": "line", "LORE_HOOK_HANDOFF": "on", "LORE_HOOK_REFRESH": "refresh", "LORE_SERVER": "disabled",
        "LORE_SERVER_MAX_RSS_MB": "8", "LORE_ACTOR": "ci", "LORE_LLM_CMD": "ollama run x",
    })  # fmt: skip
    assert settings.index_refresh == "warn" and settings.hook is False and settings.hook_budget == 400
    assert settings.hook_deadline_s == 0.05  # never under 50 ms
    assert settings.hook_gap == "line" and settings.hook_handoff and settings.hook_refresh == "refresh"
    assert settings.server is False and settings.server_max_rss_mb == 32.0  # the floor
    assert (settings.actor, settings.llm_cmd) == ("ci", "ollama run x")
    with pytest.raises(AttributeError):
        settings.hook_budget = 3  # type: ignore[misc]


@pytest.mark.parametrize(("name", "value"), [
    ("LORE_HOOK_BUDGET", "lots"), ("LORE_HOOK_BUDGET", "-1"), ("LORE_HOOK_DEADLINE_MS", "0.4"),
    ("LORE_HOOK_DEADLINE_MS", "0"), ("LORE_HOOK", "maybe"), ("LORE_HOOK_GAP", "loud"), ("LORE_HOOK_HANDOFF", "2"),
    ("LORE_HOOK_REFRESH", "always"), ("LORE_SERVER", "sometimes"), ("LORE_SERVER_MAX_RSS_MB", "big"),
    ("LORE_SERVER_MAX_RSS_MB", "inf"), ("LORE_INDEX_REFRESH", "bogus"), ("LORE_CAPTURE", "sometimes"),
    ("LORE_CAPTURE_METHOD", "magic"), ("LORE_CAPTURE_LLM_BUDGET", "many"), ("LORE_CAPTURE_LLM_TIMEOUT", "0.5"),
])  # fmt: skip
def test_a_bad_value_is_a_usage_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(UsageError) as raised:
        Settings.from_env({name: value})
    assert raised.value.message.startswith(f"{name}={value!r} is not")


def test_capture_settings_are_read_and_checked_once() -> None:
    settings = Settings.from_env({"LORE_CAPTURE": "off", "LORE_CAPTURE_METHOD": "LLM", "LORE_CAPTURE_LLM_BUDGET": "500",
                                  "LORE_CAPTURE_LLM_TIMEOUT": "2.5", "LORE_AUTO_ACCEPT": "failure, observation"})  # fmt: skip
    assert (settings.capture, settings.capture_method, settings.capture_llm_budget) == (False, "llm", 500)
    assert (settings.capture_llm_timeout_s, settings.auto_accept) == (2.5, "failure, observation")
    assert Settings().capture is None  # unset: the hook's --capture decides
    with pytest.raises(UsageError) as raised:
        Settings.from_env({"LORE_AUTO_ACCEPT": "failure,wishes"})
    assert raised.value.message.startswith("LORE_AUTO_ACCEPT:")


def test_the_cli_rejects_a_bad_setting_with_the_variable_named(cli, data_dir: Path, monkeypatch) -> None:
    assert cli("init").exit_code == 0
    monkeypatch.setenv("LORE_HOOK_BUDGET", "lots")
    result = cli("list")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("Error: LORE_HOOK_BUDGET='lots' is not valid: expected a whole number\n"
                             "Hint: fix or unset LORE_HOOK_BUDGET (docs/settings.md)\n")  # fmt: skip


def test_the_mcp_server_rejects_what_the_cli_rejects(data_dir: Path, monkeypatch) -> None:
    pytest.importorskip("mcp")
    from lore.agent.mcp import LoreMCP
    from lore.paths import Locations

    monkeypatch.setenv("LORE_INDEX_REFRESH", "bogus")  # the server used to hand this to the index as a policy
    with pytest.raises(UsageError, match="LORE_INDEX_REFRESH='bogus' is not a policy"):
        LoreMCP(Locations.resolve())
    monkeypatch.setenv("LORE_INDEX_REFRESH", "WARN")
    assert LoreMCP(Locations.resolve()).settings.index_refresh == "warn"


def test_the_library_reads_the_settings_when_constructed(monkeypatch) -> None:
    from lore import Lore

    monkeypatch.setenv("LORE_SERVER_MAX_RSS_MB", "lots")
    with pytest.raises(UsageError, match="LORE_SERVER_MAX_RSS_MB"):
        Lore()
    assert Lore(settings=Settings(actor="me")).settings.actor == "me"


@pytest.mark.parametrize("hook", ["prompt", "session-start"])
def test_a_bad_setting_never_fails_a_hook(monkeypatch, tmp_path: Path, hook: str) -> None:
    from lore.agent.hook import run_prompt_hook, run_session_start_hook

    monkeypatch.setenv("LORE_HOOK_DEADLINE_MS", "soon")
    event = {"prompt": "how do we retry failed stripe charges", "session_id": "s1", "cwd": str(tmp_path)}
    out = io.StringIO()
    run = run_prompt_hook if hook == "prompt" else run_session_start_hook
    assert run([], stdin=io.StringIO(json.dumps(event)), stdout=out) == 0
    assert out.getvalue() == ""
    log = (tmp_path / "cache" / "hook.log").read_text()
    assert "UsageError: LORE_HOOK_DEADLINE_MS='soon' is not valid" in log

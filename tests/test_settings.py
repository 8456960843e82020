"""LORE_* settings: read and checked once (lore.settings), the same verdict on every surface."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lore.errors import UsageError
from lore.settings import Settings
from tests.conftest import resolve_locations


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
    ("LORE_SYNC_PUSH_ATTEMPTS", "0"), ("LORE_SYNC_PUSH_ATTEMPTS", "few"), ("LORE_HOOK_COLD", "bm25"),
])  # fmt: skip
def test_a_bad_value_is_a_usage_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(UsageError) as raised:
        Settings.from_env({name: value})
    assert raised.value.message.startswith(f"{name}={value!r} is not")


def test_the_cold_hook_mode_keeps_its_old_name_as_an_alias() -> None:
    assert Settings().hook_cold == "light"
    assert [Settings.from_env({"LORE_HOOK_COLD": v}).hook_cold for v in ("light", "Lexical", "full", "off")] == [
        "light", "light", "full", "off"]  # fmt: skip
    with pytest.raises(UsageError) as raised:
        Settings.from_env({"LORE_HOOK_COLD": "bm25"})
    assert "light, full, off" in raised.value.message + str(raised.value.hint)


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

    monkeypatch.setenv("LORE_INDEX_REFRESH", "bogus")  # the server used to hand this to the index as a policy
    with pytest.raises(UsageError, match="LORE_INDEX_REFRESH='bogus' is not a policy"):
        LoreMCP(resolve_locations())
    monkeypatch.setenv("LORE_INDEX_REFRESH", "WARN")
    assert LoreMCP(resolve_locations()).settings.index_refresh == "warn"


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


def test_the_directories_are_those_of_the_settings_passed_not_of_the_environment(monkeypatch, tmp_path: Path) -> None:
    # lore.paths read LORE_*_DIR from the environment itself (the warm helper rewrote os.environ so
    # that those reads saw absolute paths); now whoever read the settings passes them down.
    from lore.paths import Locations, cache_dir, state_dir

    for name in ("LORE_DATA_DIR", "LORE_INDEX_DIR", "LORE_STATE_DIR", "LORE_CACHE_DIR", "LORE_EMBED_MODEL"):
        monkeypatch.setenv(name, str(tmp_path / "from-the-environment"))
    given = Settings(data_dir=str(tmp_path / "d"), index_dir=str(tmp_path / "i"), state_dir=str(tmp_path / "s"),
                     cache_dir=str(tmp_path / "c"), embed_model="some/model")  # fmt: skip
    locations = Locations.resolve(None, None, given)
    assert (locations.data_dir, locations.index_dir, locations.state_dir) == (tmp_path / "d", tmp_path / "i", tmp_path / "s")
    assert locations.embed_model == "some/model" and cache_dir(given) == tmp_path / "c" and state_dir(given) == tmp_path / "s"
    assert locations.access_log.parent == tmp_path / "s" / "access"
    # Without lore's own variables: the XDG ones (read with the rest by Settings.from_env), then the home dir.
    xdg = Settings.from_env({"XDG_CACHE_HOME": str(tmp_path / "xc"), "XDG_STATE_HOME": str(tmp_path / "xs"),
                             "XDG_DATA_HOME": str(tmp_path / "xd")})  # fmt: skip
    assert (cache_dir(xdg), state_dir(xdg)) == (tmp_path / "xc" / "lore", tmp_path / "xs" / "lore")
    resolved = Locations.resolve(None, None, xdg)
    assert resolved.data_dir == tmp_path / "xd" / "lore" and resolved.index_dir.parent == tmp_path / "xc" / "lore" / "indexes"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir(Settings()) == tmp_path / "home" / ".cache" / "lore"


def test_the_warm_search_client_reads_the_directories_as_the_settings_do(tmp_path: Path) -> None:
    # lore.agent.remote reads them itself: lore.settings imports typing, ~3 ms on every warm search.
    from lore.agent.remote import EnvironmentDirectories

    environ = {name: f" {tmp_path / name} " for _, name in EnvironmentDirectories.VARIABLES}
    for given in ({}, environ, {name: "" for name in environ}):
        settings, light = Settings.from_env(given), EnvironmentDirectories(given)
        assert {field: getattr(light, field) for field, _ in EnvironmentDirectories.VARIABLES} == {
            field: getattr(settings, field) for field, _ in EnvironmentDirectories.VARIABLES}
    assert set(EnvironmentDirectories.__slots__) == {field for field, _ in EnvironmentDirectories.VARIABLES}

"""Every ``LORE_*`` setting, read and checked in one place: ``Settings.from_env()``.

The surfaces (the CLI's callback, the hooks, the warm helper, the MCP server and the
``Lore`` constructor) read the environment once and pass the result down; a bad value
is a ``UsageError`` naming the variable, whichever surface meets it first. The hooks
keep their own rule: a bad setting is logged and the hook exits 0 with nothing to add.

The table of variables, their values and defaults is docs/settings.md. Variables lore
sets for its own child processes (``LORE_SERVER_AFTER_PID``, ``LORE_SERVER_SETTLE_MS``,
``LORE_MERGE_NOTES``) and the shell-completion protocol (``_LORE_COMPLETE``) are not
settings and are not read here.

A ``NamedTuple``, not a dataclass: it is immutable and typed, and the prompt hook reads
it on every prompt, where importing ``dataclasses`` would cost ~14 ms (typing is loaded
by ``lore`` already).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from lore.errors import UsageError

DEFAULT_HOOK_BUDGET = 1500
DEFAULT_HOOK_DEADLINE_MS = 400
MIN_HOOK_DEADLINE_MS = 50
DEFAULT_SERVER_MAX_RSS_MB = 512.0
MIN_SERVER_MAX_RSS_MB = 32.0
DEFAULT_CAPTURE_LLM_BUDGET = 20000
DEFAULT_CAPTURE_LLM_TIMEOUT_S = 60.0
DEFAULT_SYNC_PUSH_ATTEMPTS = 16
CAPTURE_METHODS = ("heuristic", "llm")
REFRESH_POLICIES = ("refresh", "warn", "ignore")
HOOK_GAPS = ("nothing", "line")
HOOK_COLD_MODES = ("light", "full", "off")
# "lexical" named the light path while it ran BM25 alone; a value users may have set, still read.
HOOK_COLD_ALIASES = {"lexical": "light"}
_ON = ("on", "1", "true", "yes")
_OFF = ("off", "0", "false", "no")
# `lore server disable` speaks of disabling; the variable accepts the words too.
_SERVER_OFF = (*_OFF, "disable", "disabled")
_SERVER_ON = (*_ON, "enable", "enabled")


class Settings(NamedTuple):
    """lore's settings from the environment; every field has the default an unset variable means."""

    data_dir: str | None = None  # LORE_DATA_DIR (else the platform data dir)
    index_dir: str | None = None  # LORE_INDEX_DIR (else a per-data-dir folder in the cache dir)
    state_dir: str | None = None  # LORE_STATE_DIR
    cache_dir: str | None = None  # LORE_CACHE_DIR
    actor: str | None = None  # LORE_ACTOR: who the audit log names (else channel:user@host)
    llm_cmd: str | None = None  # LORE_LLM_CMD
    embed_model: str | None = None  # LORE_EMBED_MODEL (else the bundled model)
    index_refresh: str = "refresh"  # LORE_INDEX_REFRESH: refresh | warn | ignore
    hook: bool = True  # LORE_HOOK
    hook_budget: int = DEFAULT_HOOK_BUDGET  # LORE_HOOK_BUDGET: characters, 0 injects nothing
    hook_deadline_ms: int = DEFAULT_HOOK_DEADLINE_MS  # LORE_HOOK_DEADLINE_MS (at least 50)
    hook_gap: str = "nothing"  # LORE_HOOK_GAP: nothing | line
    hook_handoff: bool = False  # LORE_HOOK_HANDOFF
    hook_refresh: str = "ignore"  # LORE_HOOK_REFRESH: ignore | warn | refresh (answered as warn)
    hook_cold: str = "light"  # LORE_HOOK_COLD: light | full | off (a prompt no warm helper answers)
    server: bool | None = None  # LORE_SERVER; None: unset (`lore server enable/disable` decides)
    server_max_rss_mb: float = DEFAULT_SERVER_MAX_RSS_MB  # LORE_SERVER_MAX_RSS_MB (at least 32)
    capture: bool | None = None  # LORE_CAPTURE; None: unset (the hook's --capture decides), off wins over it
    capture_method: str = "heuristic"  # LORE_CAPTURE_METHOD: heuristic | llm
    capture_llm_budget: int = DEFAULT_CAPTURE_LLM_BUDGET  # LORE_CAPTURE_LLM_BUDGET: tokens per session
    capture_llm_timeout_s: float = DEFAULT_CAPTURE_LLM_TIMEOUT_S  # LORE_CAPTURE_LLM_TIMEOUT (at least 1)
    auto_accept: str = ""  # LORE_AUTO_ACCEPT: comma-separated kinds (or all) stored active, not as candidates
    sync_push_attempts: int = DEFAULT_SYNC_PUSH_ATTEMPTS  # LORE_SYNC_PUSH_ATTEMPTS: pushes one lore sync tries (at least 1)
    # Not lore's, but they place its directories by default (Linux; lore.paths): read here with the rest.
    xdg_data_home: str | None = None  # XDG_DATA_HOME
    xdg_cache_home: str | None = None  # XDG_CACHE_HOME
    xdg_state_home: str | None = None  # XDG_STATE_HOME

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read and check every variable; ``UsageError`` naming the first bad one. An empty value means unset."""
        env = os.environ if environ is None else environ

        def text(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        def choice(name: str, allowed: tuple[str, ...], default: str, aliases: Mapping[str, str] | None = None) -> str:
            value = text(name)
            if value is None:
                return default
            if aliases and value.lower() in aliases:
                return aliases[value.lower()]
            if value.lower() not in allowed:
                if name == "LORE_INDEX_REFRESH":  # worded as it always was (`lore search` tests it)
                    raise UsageError(f"LORE_INDEX_REFRESH={value.lower()!r} is not a policy", hint="use " + ", ".join(allowed))
                raise _bad(name, value, "one of " + ", ".join(allowed))
            return value.lower()

        def switch(name: str, default: bool, on: tuple[str, ...] = _ON, off: tuple[str, ...] = _OFF) -> bool:
            value = text(name)
            if value is None:
                return default
            if value.lower() in on:
                return True
            if value.lower() in off:
                return False
            raise _bad(name, value, "on or off")

        def number(name: str, default: float, minimum: float, integer: bool) -> float:
            value = text(name)
            if value is None:
                return default
            try:
                parsed = float(int(value)) if integer else float(value)
            except ValueError:
                raise _bad(name, value, "a whole number" if integer else "a number") from None
            if not parsed >= minimum or parsed == float("inf"):
                raise _bad(name, value, f"a number of at least {minimum:g}")
            return parsed

        server = text("LORE_SERVER")
        capture = text("LORE_CAPTURE")
        auto_accept = text("LORE_AUTO_ACCEPT") or ""
        if auto_accept:
            auto_accept_kinds(auto_accept)  # a kind that does not exist is an error naming the variable
        return cls(
            data_dir=text("LORE_DATA_DIR"),
            index_dir=text("LORE_INDEX_DIR"),
            state_dir=text("LORE_STATE_DIR"),
            cache_dir=text("LORE_CACHE_DIR"),
            actor=text("LORE_ACTOR"),
            llm_cmd=text("LORE_LLM_CMD"),
            embed_model=text("LORE_EMBED_MODEL"),
            index_refresh=choice("LORE_INDEX_REFRESH", REFRESH_POLICIES, "refresh"),
            hook=switch("LORE_HOOK", True),
            hook_budget=int(number("LORE_HOOK_BUDGET", DEFAULT_HOOK_BUDGET, 0, integer=True)),
            hook_deadline_ms=int(number("LORE_HOOK_DEADLINE_MS", DEFAULT_HOOK_DEADLINE_MS, 1, integer=True)),
            hook_gap=choice("LORE_HOOK_GAP", HOOK_GAPS, "nothing"),
            hook_handoff=switch("LORE_HOOK_HANDOFF", False),
            hook_refresh=choice("LORE_HOOK_REFRESH", REFRESH_POLICIES, "ignore"),
            hook_cold=choice("LORE_HOOK_COLD", HOOK_COLD_MODES, "light", HOOK_COLD_ALIASES),
            server=None if server is None else switch("LORE_SERVER", True, _SERVER_ON, _SERVER_OFF),
            server_max_rss_mb=max(MIN_SERVER_MAX_RSS_MB,
                                  number("LORE_SERVER_MAX_RSS_MB", DEFAULT_SERVER_MAX_RSS_MB, 0, integer=False)),
            capture=None if capture is None else switch("LORE_CAPTURE", False),
            capture_method=choice("LORE_CAPTURE_METHOD", CAPTURE_METHODS, "heuristic"),
            capture_llm_budget=int(number("LORE_CAPTURE_LLM_BUDGET", DEFAULT_CAPTURE_LLM_BUDGET, 0, integer=True)),
            capture_llm_timeout_s=number("LORE_CAPTURE_LLM_TIMEOUT", DEFAULT_CAPTURE_LLM_TIMEOUT_S, 1, integer=False),
            auto_accept=auto_accept,
            sync_push_attempts=int(number("LORE_SYNC_PUSH_ATTEMPTS", DEFAULT_SYNC_PUSH_ATTEMPTS, 1, integer=True)),
            xdg_data_home=text("XDG_DATA_HOME"),
            xdg_cache_home=text("XDG_CACHE_HOME"),
            xdg_state_home=text("XDG_STATE_HOME"),
        )  # fmt: skip

    @property
    def hook_deadline_s(self) -> float:
        """The prompt hook's hard deadline in seconds (never under 50 ms: a smaller value would answer nothing)."""
        return max(MIN_HOOK_DEADLINE_MS, self.hook_deadline_ms) / 1000

    @property
    def server_max_rss_bytes(self) -> int:
        return int(self.server_max_rss_mb * 1024 * 1024)


def auto_accept_kinds(value: str) -> frozenset[str]:
    """The kinds a ``LORE_AUTO_ACCEPT`` value names (comma-separated kinds, or ``all``; ``none``/``off``: none)."""
    from lore.kinds import KINDS, normalise_kind  # only when the variable is set: the hook never pays for it

    kinds: set[str] = set()
    for part in value.split(","):
        name = part.strip().lower()
        if not name or name in ("none", "off"):
            continue
        if name == "all":
            kinds.update(KINDS)
            continue
        try:
            kinds.add(normalise_kind(name))
        except UsageError as error:
            raise UsageError(f"LORE_AUTO_ACCEPT: {error.message}", hint=error.hint) from error
    return frozenset(kinds)


def _bad(name: str, value: str, wanted: str) -> UsageError:
    return UsageError(f"{name}={value!r} is not valid: expected {wanted}", hint=f"fix or unset {name} (docs/settings.md)")

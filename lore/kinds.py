"""The kinds of record, and the names people type for them.

Below the store so that reading the settings (``LORE_AUTO_ACCEPT`` names kinds) needs
nothing of it; ``lore.store.records`` re-exports both names.
"""

from __future__ import annotations

from lore.errors import UsageError

KINDS: tuple[str, ...] = ("decision", "pattern", "anti_pattern", "lesson", "handoff", "failure", "observation")
_KIND_ALIASES = {
    "decision": "decision", "decisions": "decision", "dec": "decision",
    "pattern": "pattern", "patterns": "pattern", "pat": "pattern",
    "anti_pattern": "anti_pattern", "anti-pattern": "anti_pattern", "antipattern": "anti_pattern",
    "anti": "anti_pattern", "anti_patterns": "anti_pattern", "anti-patterns": "anti_pattern",
    "lesson": "lesson", "lessons": "lesson",
    "handoff": "handoff", "handoffs": "handoff", "session": "handoff", "sessions": "handoff",
    "failure": "failure", "failures": "failure", "fail": "failure",
    "observation": "observation", "observations": "observation", "obs": "observation",
    "signal": "observation",
}  # fmt: skip


def normalise_kind(value: str) -> str:
    kind = _KIND_ALIASES.get(value.strip().lower())
    if kind is None:
        # Spelled as users type them (anti-pattern), not as stored (anti_pattern).
        raise UsageError(f"unknown record type {value!r}", hint="types: " + ", ".join(k.replace("_", "-") for k in KINDS))
    return kind

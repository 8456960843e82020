"""Validation of stored records (warnings on read) and of user input (errors on write)."""

from __future__ import annotations

import re
from typing import Any

from lore.errors import UsageError
from lore.store.records import OUTCOMES, SEVERITIES, STATUSES

MAX_TEXT_BYTES = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_REQUIRED_TEXT = {
    "decision": ("decision",),
    "pattern": ("name",),
    "anti_pattern": ("name",),
    "lesson": (),
    "failure": (),
    "observation": ("content",),
    "handoff": (),
}


def check_text(name: str, value: str | None, *, required: bool = True, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """Reject empty, binary, non-UTF-8 and huge input with a message naming the field."""
    if value is None or not value.strip():
        if required:
            raise UsageError(f"{name} is empty", hint=f"give the {name} as text")
        return ""
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{name} is not valid UTF-8 (character {exc.start})") from exc
    if len(encoded) > max_bytes:
        raise UsageError(
            f"{name} is {_size(len(encoded))}; the limit is {_size(max_bytes)}",
            hint="store a summary and keep the full text in a file or a link",
        )
    if "\x00" in value or len(_CONTROL.findall(value)) > 2:
        raise UsageError(f"{name} looks like binary data (control characters)")
    return _CONTROL.sub("", value).strip()


def check_severity(severity: str) -> str:
    """A severity given on the command line or through MCP, refused unless it is a known one."""
    if severity not in SEVERITIES:
        raise UsageError(f"severity must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    return severity


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    return f"{n / 1024:.0f} KB"


def check_record(kind: str, raw: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems with a stored record as ``(field, message)``; empty when it is fine."""
    problems: list[tuple[str, str]] = []
    for name in _REQUIRED_TEXT.get(kind, ()):
        if not isinstance(raw.get(name), str) or not raw.get(name, "").strip():
            problems.append((name, "missing or not text"))
    if kind == "failure" and not (raw.get("error_type") or raw.get("error_message")):
        problems.append(("error_message", "missing"))
    if kind == "handoff" and not (
        isinstance(raw.get("handoff"), dict | str) or raw.get("summary")
    ):
        problems.append(("handoff", "missing"))
    if "importance" in raw and raw["importance"] is not None:
        value = raw["importance"]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            problems.append(("importance", f"expected an integer 1-5, found {value!r}"))
    for name in ("confidence", "rule_confidence"):
        if name in raw and raw[name] is not None:
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                problems.append((name, f"expected a number 0-1, found {value!r}"))
    if "tags" in raw and raw["tags"] is not None and not isinstance(raw["tags"], list):
        problems.append(("tags", f"expected a list, found {type(raw['tags']).__name__}"))
    if kind == "decision":
        if raw.get("outcome") not in (None, *OUTCOMES):
            problems.append(("outcome", f"expected one of {', '.join(OUTCOMES)}, found {raw.get('outcome')!r}"))
        if "alternatives" in raw and raw["alternatives"] is not None and not isinstance(raw["alternatives"], list):
            problems.append(("alternatives", "expected a list"))
    if kind != "observation" and raw.get("status") not in (None, *STATUSES):
        problems.append(("status", f"expected one of {', '.join(STATUSES)}, found {raw.get('status')!r}"))
    if kind in ("anti_pattern", "lesson") and raw.get("severity") not in (None, *SEVERITIES):
        problems.append(("severity", f"expected one of {', '.join(SEVERITIES)}, found {raw.get('severity')!r}"))
    return problems

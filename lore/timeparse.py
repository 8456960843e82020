"""Parse the time filters users type: ISO dates and relative ages (``30d``, ``2w``, ``6mo``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from lore.errors import UsageError
from lore.store.records import parse_time

_RELATIVE = re.compile(r"^\s*(\d+)\s*(m|min|h|d|w|mo|y)\s*$", re.I)
_UNIT_DAYS = {"d": 1.0, "w": 7.0, "mo": 30.0, "y": 365.0}


def parse_when(value: str, now: datetime) -> datetime:
    """``2025-03-01``, ``2025-03-01T10:00:00Z``, or ``30d``/``2w``/``6mo``/``1y``/``12h`` ago."""
    match = _RELATIVE.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2).lower()
        if unit in ("m", "min"):
            return now - timedelta(minutes=amount)
        if unit == "h":
            return now - timedelta(hours=amount)
        return now - timedelta(days=amount * _UNIT_DAYS[unit])
    text = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        except ValueError:
            pass
    parsed = parse_time(text)
    if parsed is None:
        raise UsageError(f"cannot read {value!r} as a time", hint="use a date like 2025-03-01 or an age like 30d, 2w, 6mo, 1y")
    return parsed

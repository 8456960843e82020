"""Plain-text formatting shared by every renderer (no third-party imports)."""

from __future__ import annotations

import re
from datetime import datetime

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def strip_control(text: str) -> str:
    """Remove ANSI escape sequences and control characters (keeps newlines)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def one_line(text: str) -> str:
    return " ".join(strip_control(text).split())


def age(moment: datetime | None, now: datetime) -> str:
    """``12min``, ``5h``, ``3d``, ``2mo``, ``1y``: compact age for listings and agent context.

    Minutes are ``min``, never ``m``: beside ``mo`` a bare ``m`` reads as months.
    """
    if moment is None:
        return "?"
    seconds = max(0.0, (now - moment).total_seconds())
    if seconds < 3600:
        return f"{int(seconds // 60)}min"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h"
    days = seconds / 86400
    if days < 60:
        return f"{int(days)}d"
    if days < 730:
        return f"{int(days // 30)}mo"
    return f"{int(days // 365)}y"


def shorten(text: str, limit: int, marker: str = "…") -> str:
    """Shorten at a word boundary; never cut a word in half. Result length <= limit."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit <= len(marker):
        return ""
    cut = text[: limit - len(marker) + 1]
    space = cut.rfind(" ")
    if space <= 0:
        return ""  # a single word longer than the budget: drop it rather than cut it
    return cut[:space].rstrip(" ,;:.-") + marker

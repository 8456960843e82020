"""Session hooks: what a new session starts with, and handoff stubs when a session ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from lore.context import FENCE_CLOSE, FENCE_NOTE, FENCE_OPEN
from lore.paths import Locations, state_dir
from lore.render.text import age, one_line, shorten, strip_control
from lore.store import Store

SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3}


def session_start_text(locations: Locations, project: str, budget: int) -> str:
    """The latest handoff for ``project`` and its top active lessons, fenced, within ``budget`` characters."""
    store = Store(locations.data_dir)
    if not store.exists():
        return ""
    snapshot = store.load()
    now = datetime.now(UTC)
    epoch = datetime.min.replace(tzinfo=UTC)
    lines: list[str] = []
    handoffs = [r for r in snapshot.of_kind("handoff") if r.project == project and r.active]
    if handoffs:
        latest = max(handoffs, key=lambda r: (r.timestamp or epoch, r.id))
        lines.append(f"Last handoff ({age(latest.timestamp, now)} ago, {latest.id}): {one_line(strip_control(latest.handoff_message))}")
        for label, key in (("Next", "next_steps"), ("Blocker", "blockers"), ("Question", "questions")):
            lines.extend(f"- {label}: {one_line(strip_control(v))}" for v in latest.handoff_list(key))
    lessons = [r for r in snapshot.of_kind("lesson") if r.active and r.confidence >= 0.7 and r.project in (None, project)]
    lessons.sort(key=lambda r: (SEVERITY_ORDER.get(str(r.raw.get("severity")), 9), -r.confidence, r.id))
    for lesson in lessons[:3]:
        rule = lesson.raw.get("rule") or lesson.title
        lines.append(f"- Lesson ({lesson.raw.get('severity', 'medium')}, {lesson.id}): {one_line(strip_control(str(rule)))}")
    if not lines:
        return ""
    head = [FENCE_OPEN, FENCE_NOTE, f"## Session context for {project}"]
    used = len("\n".join([*head, FENCE_CLOSE])) + 1
    kept: list[str] = []
    for line in lines:
        if used + len(line) + 1 <= budget:
            kept.append(line)
            used += len(line) + 1
        else:
            short = shorten(line, budget - used - 1)
            if len(short) > 30:
                kept.append(short)
            break
    if not kept:
        return ""
    return "\n".join([*head, *kept, FENCE_CLOSE])


def record_handoff_stub(locations: Locations, project: str, session_id: str | None, event: str) -> str | None:
    """A minimal handoff so `lore resume` has something to show; returns the new record id."""
    from lore import capture
    from lore.capture import WriteOptions
    from lore.hook import _safe_name

    store = Store(locations.data_dir)
    if not store.exists():
        return None
    topic = ""
    if session_id:
        try:
            topic = json.loads((state_dir() / "sessions" / (_safe_name(session_id) + ".json")).read_text())["prompt"]
        except (OSError, ValueError, KeyError):
            topic = ""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"Session {session_id or '?'} in {project} ({event}, {when})" + (f"; last topic: {topic}" if topic else "")
    result = capture.handoff(store, text, project=project, options=WriteOptions(check_duplicates=False))
    return result.record.id

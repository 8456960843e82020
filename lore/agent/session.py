"""Session hooks: what a new session starts with, and handoff stubs when a session ends."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lore.paths import Locations, safe_name, state_dir
from lore.render.fence import FENCE_CLOSE, FENCE_NOTE, FENCE_OPEN
from lore.render.text import age, one_line, shorten, strip_control
from lore.store import Store

if TYPE_CHECKING:
    from lore.settings import Settings

SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3}
# What record_handoff_stub writes; a person's handoff never reads like this.
_STUB = re.compile(r"^Session \S+ in .+ \((?:stop|pre-compact), \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\)")


def is_stub(record: Any) -> bool:
    """Whether a handoff is an automatic session stub (LORE_HOOK_HANDOFF=on), not a person's."""
    return bool(_STUB.match(record.handoff_message or ""))


def latest_handoff(snapshot: Any, project: str) -> Any | None:
    """The project's latest active handoff; a person's is preferred over newer automatic stubs."""
    epoch = datetime.min.replace(tzinfo=UTC)
    handoffs = [r for r in snapshot.of_kind("handoff") if r.project == project and r.active]
    written = [r for r in handoffs if not is_stub(r)] or handoffs
    return max(written, key=lambda r: (r.timestamp or epoch, r.id)) if written else None


def session_start_text(locations: Locations, project: str, budget: int) -> str:
    """The latest handoff for ``project`` and its top active lessons, fenced, within ``budget`` characters."""
    store = Store(locations.data_dir)
    if not store.exists():
        return ""
    snapshot = store.load(kinds=("handoff", "lesson"))  # not the decisions: ~1 s at 50,000 of them
    now = datetime.now(UTC)
    lines: list[str] = []
    latest = latest_handoff(snapshot, project)
    if latest is not None:
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


def record_handoff_stub(locations: Locations, project: str, session_id: str | None, event: str,
                        settings: Settings) -> str | None:  # fmt: skip
    """A minimal handoff so `lore resume` has something to show; returns its record id.

    One stub per session: Claude Code fires Stop after every reply, so a later call
    updates the session's stub (when the last topic changed) instead of adding one.
    """
    from lore import capture
    from lore.capture import WriteOptions
    from lore.errors import LoreError
    from lore.store.audit import default_actor

    store = Store(locations.data_dir, actor=settings.actor or default_actor())
    if not store.exists():
        return None
    topic = ""
    stub_file = None
    if session_id:
        sessions = state_dir(settings) / "sessions"
        stub_file = sessions / (safe_name(session_id) + ".stub.json")
        try:
            topic = json.loads((sessions / (safe_name(session_id) + ".json")).read_text())["prompt"]
        except (OSError, ValueError, KeyError):
            topic = ""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"Session {session_id or '?'} in {project} ({event}, {when})" + (f"; last topic: {topic}" if topic else "")
    previous = _read_json(stub_file) if stub_file else {}
    if previous.get("id") and previous.get("topic") == topic:
        return str(previous["id"])  # nothing new since the last stub of this session
    if previous.get("id"):
        def mutate(raw: dict[str, Any]) -> None:
            raw["summary"] = text[:200]
            raw["ended_at"] = store.now_iso()
            if isinstance(raw.get("handoff"), dict):
                raw["handoff"]["message"] = text

        try:
            store.update(str(previous["id"]), mutate, op="update", detail={"stub": event})
            record_id = str(previous["id"])
        except LoreError:  # the stub was deleted or retracted meanwhile: start a new one
            record_id = capture.handoff(store, text, project=project, options=WriteOptions(check_duplicates=False)).record.id
    else:
        record_id = capture.handoff(store, text, project=project, options=WriteOptions(check_duplicates=False)).record.id
    if stub_file is not None:
        stub_file.parent.mkdir(parents=True, exist_ok=True)
        stub_file.write_text(json.dumps({"id": record_id, "topic": topic}))
    return record_id


def _read_json(path: Any) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}

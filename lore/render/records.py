"""Plain, stable text renderings of records for show/list/resume (exact-output tested)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lore.render.text import age, one_line, shorten
from lore.store.records import Record

KIND_LABEL = {
    "decision": "decision", "pattern": "pattern", "anti_pattern": "anti-pattern", "lesson": "lesson",
    "handoff": "handoff", "failure": "failure", "observation": "observation",
}  # fmt: skip


LESSON_FIELDS = (
    ("Situation", "situation", "context"), ("Error pattern", "error_pattern", "problem"), ("Oversight", "oversight", None),
    ("Fix", "fix", "solution"), ("Rule", "rule", None), ("Inverse", "inverse", None),
)  # fmt: skip


def date_of(record: Record) -> str:
    moment = record.timestamp
    return moment.strftime("%Y-%m-%d") if moment else "----------"


def list_line(record: Record, width: int = 72, id_width: int = 24, project_width: int = 14) -> str:
    title = one_line(record.title)
    if len(title) > width:
        title = shorten(title, width) or title[: width - 1] + "…"  # a word longer than the width: cut it
    marker = "" if record.active else f" [{record.status}]"
    return (f"{record.id:<{id_width}} {date_of(record)}  {KIND_LABEL[record.kind]:<12} "
            f"{record.project or '-':<{project_width}} {title}{marker}")  # fmt: skip


def _lines(label: str, values: list[str]) -> list[str]:
    if not values:
        return []
    return [f"{label}:"] + [f"  - {one_line(v)}" for v in values]


def show_text(record: Record, now: datetime, links: list[tuple[str, str, str, Record | None]] | None = None) -> str:
    """Full readable record. ``links`` are (direction, relation, other id, other record or None if missing)."""
    raw = record.raw
    head = f"{record.id}  {KIND_LABEL[record.kind]}  {record.project or '-'}  {date_of(record)} ({age(record.timestamp, now)} ago)"
    out = [head, one_line(record.title), ""]

    def add(label: str, value: Any) -> None:
        if isinstance(value, str) and value.strip():
            out.append(f"{label}: {value.strip()}")

    if record.kind == "decision":
        add("Rationale", raw.get("rationale"))
        out.extend(_lines("Alternatives", [str(a) for a in raw.get("alternatives") or []]))
        add("Lesson learned", raw.get("lesson_learned"))
    elif record.kind in ("pattern", "lesson"):
        if record.kind == "lesson":
            # `lore lesson` copies situation, error pattern and fix into the pattern fields
            # (for readers of plain patterns): show each text once, as `lore lesson show` does.
            for label, key, fallback in LESSON_FIELDS:
                add(label, raw.get(key) or (raw.get(fallback) if fallback else None))
        else:
            for key in ("context", "problem", "solution", "situation", "error_pattern", "oversight", "fix", "rule", "inverse"):
                add(key.replace("_", " ").capitalize(), raw.get(key))
        for example in raw.get("examples") or []:
            if isinstance(example, dict):
                for key in ("bad", "good"):
                    if example.get(key):
                        out.append(f"Example ({key}): {example[key]}")
    elif record.kind == "anti_pattern":
        for key in ("symptom", "risk", "fix"):
            add(key.capitalize(), raw.get(key))
    elif record.kind == "handoff":
        message = record.handoff_message
        if message and one_line(message) != one_line(record.title):
            out.append(message.strip())
        out.extend(_lines("Next steps", record.handoff_list("next_steps")))
        out.extend(_lines("Blockers", record.handoff_list("blockers")))
        out.extend(_lines("Open questions", record.handoff_list("questions")))
        related = record.related_ids()
        if related:
            out.append("Related: " + ", ".join(related))
    elif record.kind == "failure":
        add("Tool", raw.get("tool"))
    meta = [f"status {record.status}"]
    if record.kind == "decision":
        meta += [f"outcome {raw.get('outcome', 'pending')}", f"importance {record.importance}"]
    if record.kind in ("anti_pattern", "lesson") and raw.get("severity"):
        meta.append(f"severity {raw['severity']}")
    meta.append(f"confidence {record.confidence:.2f}")
    if record.kind in ("pattern", "lesson") and isinstance(raw.get("validations"), int):
        meta.append(f"validations {raw['validations']}")
    if record.tags:
        meta.append("tags " + ", ".join(record.tags))
    if out[-1] != "":
        out.append("")
    out.append(" · ".join(meta))
    if raw.get("superseded_by"):
        out.append(f"Superseded by: {raw['superseded_by']}")
    if raw.get("retracted_reason"):
        out.append(f"Retracted: {raw['retracted_reason']}")
    if links:
        out.append("Links:")
        for direction, relation, other_id, other in links:
            other_text = f"[{KIND_LABEL[other.kind]}] {one_line(other.title)}" if other else "(missing record)"
            arrow = f"-> {relation} ->" if direction == "out" else f"<- {relation} <-"
            out.append(f"  {arrow} {other_id} {other_text}")
    return "\n".join(out).rstrip() + "\n"


def handoff_text(record: Record, now: datetime) -> str:
    out = [f"Last handoff for {record.project or '-'} ({age(record.timestamp, now)} ago, {record.id})", ""]
    out.append(record.handoff_message.strip() or one_line(record.title))
    for label, key in (("Next steps", "next_steps"), ("Blockers", "blockers"), ("Open questions", "questions")):
        values = record.handoff_list(key)
        if values:
            out.append("")
            out.extend(_lines(label, values))
    related = record.related_ids()
    if related:
        out += ["", "Related: " + ", ".join(related)]
    return "\n".join(out) + "\n"


def record_json(record: Record) -> dict[str, Any]:
    """The stable JSON form: the stored record plus lore's derived fields."""
    return {
        "id": record.id,
        "type": record.kind,
        "title": record.title,
        "project": record.project,
        "timestamp": record.timestamp.strftime("%Y-%m-%dT%H:%M:%SZ") if record.timestamp else None,
        "status": record.status,
        "record": record.raw,
    }


def render_lesson(record: Record, now: datetime) -> str:
    """A lesson for people: its rule, the story behind it, and its standing."""
    raw = record.raw
    head = (
        f"{record.id}  lesson  {record.project or '-'}  {date_of(record)} ({age(record.timestamp, now)} ago)"
    )
    out = [head, one_line(record.title), ""]
    for label, key, fallback in (("Situation", "situation", "context"), ("Error pattern", "error_pattern", "problem"),
                                 ("Oversight", "oversight", None), ("Fix", "fix", "solution"), ("Rule", "rule", None),
                                 ("Inverse", "inverse", None), ("Scope", "scope", None)):  # fmt: skip
        value = raw.get(key) or (raw.get(fallback) if fallback else None)
        if isinstance(value, str) and value.strip():
            out.append(f"{label}: {value.strip()}")
    if out[-1] != "":
        out.append("")
    meta = [f"status {record.status}", f"severity {raw.get('severity') or 'medium'}",
            f"rule confidence {record.confidence:.2f}"]  # fmt: skip
    if record.tags:
        meta.append("tags " + ", ".join(record.tags))
    out.append(" · ".join(meta))
    if raw.get("superseded_by"):
        out.append(f"Superseded by: {raw['superseded_by']}")
    return "\n".join(out) + "\n"

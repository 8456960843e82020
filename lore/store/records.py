"""Record shapes of the original bash Lore, read tolerantly and exposed uniformly.

A ``Record`` keeps the stored mapping untouched in ``raw`` (so unknown fields and
key order survive every rewrite) and derives what search needs from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lore.kinds import KINDS, normalise_kind  # noqa: F401  (re-exported: the kinds are the records')

SCHEMA_VERSION = 1

OUTCOMES = ("pending", "successful", "revised", "abandoned")
# The decision types the original Lore's `remember --type` offered. Stored files may hold
# others (they are read as they are); new decisions get one of these.
DECISION_TYPES = ("architecture", "implementation", "process", "tooling", "other")
# "candidate": captured from a session, waiting in `lore inbox` for review (searchable, never injected).
STATUSES = ("active", "superseded", "retracted", "candidate")
SEVERITIES = ("critical", "high", "medium", "low")
RELATIONS = (
    "relates_to", "depends_on", "implements", "learned_from", "affects", "produces",
    "contradicts", "supersedes", "derived_from", "part_of", "summarized_by",
)  # fmt: skip

DEFAULT_CONFIDENCE = 0.8
DEFAULT_IMPORTANCE = 3
_SEVERITY_IMPORTANCE = {"critical": 5, "high": 4, "medium": 3, "low": 2}

ID_PREFIX_KIND = {
    "dec-": "decision", "pat-": "pattern", "anti-": "anti_pattern", "lesson-": "lesson",
    "session-": "handoff", "fail-": "failure", "obs-": "observation", "sig-": "observation",
}  # fmt: skip


def kind_from_id(record_id: str) -> str | None:
    for prefix, kind in ID_PREFIX_KIND.items():
        if record_id.startswith(prefix):
            return kind
    return None


def parse_time(value: Any) -> datetime | None:
    """Parse the ISO-8601 timestamps the original wrote (``...Z``), tolerantly."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return "\n".join(t for t in (_text(v) for v in value) if t)
    if isinstance(value, dict):
        return "\n".join(t for t in (_text(v) for v in value.values()) if t)
    return str(value)


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _as_float(value: Any, default: float) -> float:
    if isinstance(value, bool) or value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


@dataclass
class Record:
    """One stored record of any kind; ``raw`` is exactly what the file holds."""

    kind: str
    id: str
    raw: dict[str, Any]
    source: Path | None = None
    line: int | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- identity and metadata -------------------------------------------------
    @property
    def timestamp(self) -> datetime | None:
        raw = self.raw
        if self.kind == "handoff":
            handoff = raw.get("handoff")
            nested = handoff.get("created_at") if isinstance(handoff, dict) else None
            return parse_time(nested or raw.get("ended_at") or raw.get("started_at") or raw.get("timestamp"))
        return parse_time(raw.get("timestamp") or raw.get("created_at"))

    @property
    def project(self) -> str | None:
        project = self.raw.get("project")
        if not project and isinstance(self.raw.get("context"), dict):
            project = self.raw["context"].get("project")
        return str(project) if project else None

    @property
    def tags(self) -> list[str]:
        tags = self.raw.get("tags")
        result = [str(t).lstrip("#") for t in tags if t] if isinstance(tags, list) else []
        if self.kind == "lesson" and "lesson_learned" not in result:
            result.append("lesson_learned")
        return result

    @property
    def status(self) -> str:
        status = self.raw.get("status")
        return status if status in STATUSES else "active"

    @property
    def active(self) -> bool:
        return self.status == "active"

    @property
    def confidence(self) -> float:
        if self.kind == "lesson" and "rule_confidence" in self.raw:
            value = _as_float(self.raw.get("rule_confidence"), DEFAULT_CONFIDENCE)
        else:
            value = _as_float(self.raw.get("confidence"), DEFAULT_CONFIDENCE)
        return min(1.0, max(0.0, value))

    @property
    def importance(self) -> int:
        value = self.raw.get("importance")
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5:
            return value
        severity = self.raw.get("severity")
        if isinstance(severity, str) and severity in _SEVERITY_IMPORTANCE:
            return _SEVERITY_IMPORTANCE[severity]
        return DEFAULT_IMPORTANCE

    @property
    def pinned(self) -> bool:
        return bool(self.raw.get("pinned"))

    @property
    def schema_version(self) -> int:
        value = self.raw.get("schema_version")
        return value if isinstance(value, int) else 0

    # -- text ----------------------------------------------------------------
    @property
    def title(self) -> str:
        if "title" not in self._cache:
            self._cache["title"] = _first_line(self._title_source()) or self.id
        return str(self._cache["title"])

    def _title_source(self) -> str:
        raw = self.raw
        if self.kind == "decision":
            return _text(raw.get("decision"))
        if self.kind in ("pattern", "anti_pattern"):
            return _text(raw.get("name"))
        if self.kind == "lesson":
            return _text(raw.get("name") or raw.get("rule"))
        if self.kind == "handoff":
            return _text(self.handoff_message or raw.get("summary"))
        if self.kind == "failure":
            kind, message = _text(raw.get("error_type")), _text(raw.get("error_message"))
            return f"{kind}: {message}" if kind and message else kind or message
        return _text(raw.get("content"))

    @property
    def handoff_message(self) -> str:
        handoff = self.raw.get("handoff")
        if isinstance(handoff, dict):
            return _text(handoff.get("message"))
        return _text(handoff if isinstance(handoff, str) else self.raw.get("summary"))

    def handoff_list(self, name: str) -> list[str]:
        """``next_steps``, ``blockers`` or ``questions`` of a handoff (either layout)."""
        handoff = self.raw.get("handoff")
        aliases = {"questions": ("questions", "open_questions")}.get(name, (name,))
        for alias in aliases:
            for container in (handoff if isinstance(handoff, dict) else {}, self.raw):
                value = container.get(alias)
                if isinstance(value, list):
                    return [_text(v) for v in value if _text(v)]
        return []

    def related_ids(self) -> list[str]:
        """Record ids this record names implicitly (handoff links, lesson origins, ...)."""
        raw = self.raw
        ids: list[str] = []
        related = raw.get("related")
        if isinstance(related, dict):
            for key in ("journal_entries", "patterns"):
                if isinstance(related.get(key), list):
                    ids.extend(str(v) for v in related[key])
        for key in ("related_ids", "related_decisions", "decisions_made", "patterns_learned"):
            if isinstance(raw.get(key), list):
                ids.extend(str(v) for v in raw[key])
        return [i for i in dict.fromkeys(ids) if i and i != self.id]

    @property
    def origin_id(self) -> str | None:
        for key in ("origin", "source_id", "learned_from"):
            value = self.raw.get(key)
            if isinstance(value, str) and kind_from_id(value):
                return value
        return None

    def fields(self) -> dict[str, str]:
        """Searchable text by field: ``title`` outweighs ``body`` in the lexical index."""
        if "fields" in self._cache:
            return dict(self._cache["fields"])
        raw = self.raw
        body_parts: list[Any]
        if self.kind == "decision":
            body_parts = [raw.get("rationale"), raw.get("lesson_learned")]
            extra = _text(raw.get("alternatives"))
        elif self.kind == "pattern":
            body_parts = [raw.get("context"), raw.get("problem"), raw.get("solution"), raw.get("description")]
            extra = _text(raw.get("examples"))
        elif self.kind == "lesson":
            body_parts = [
                raw.get("situation"), raw.get("error_pattern"), raw.get("oversight"), raw.get("fix"),
                raw.get("rule"), raw.get("context"), raw.get("problem"), raw.get("solution"),
            ]  # fmt: skip
            extra = _text(raw.get("inverse"))
        elif self.kind == "anti_pattern":
            body_parts = [raw.get("symptom"), raw.get("risk"), raw.get("fix")]
            extra = ""
        elif self.kind == "handoff":
            body_parts = [
                self.handoff_message if self.handoff_message != self._title_source() else "",
                raw.get("summary") if raw.get("summary") != self._title_source() else "",
                self.handoff_list("next_steps"), self.handoff_list("blockers"), self.handoff_list("questions"),
            ]  # fmt: skip
            extra = ""
        elif self.kind == "failure":
            body_parts = [raw.get("error_message"), raw.get("tool"), raw.get("context")]
            extra = ""
        else:
            content = _text(raw.get("content"))
            body_parts = [content if "\n" in content.strip() else ""]
            extra = ""
        title_source = self._title_source().strip()
        body = "\n".join(t for t in (_text(p).strip() for p in body_parts) if t)
        result = {
            "title": title_source,
            "body": body,
            "extra": extra,
            "tags": " ".join(self.tags + ([str(raw["category"])] if raw.get("category") else [])),
        }
        self._cache["fields"] = result
        return dict(result)

    @property
    def content(self) -> str:
        """The full readable text of the record (title, body and extras)."""
        f = self.fields()
        return "\n".join(t for t in (f["title"], f["body"], f["extra"]) if t)

    @property
    def summary(self) -> str:
        """Title plus the most useful body text, one paragraph: what agents are shown."""
        f = self.fields()
        body = " ".join(f["body"].split())
        title = " ".join(f["title"].split())
        return f"{title}: {body}" if body else title


def record_kind_for_pattern_item(item: dict[str, Any], section: str) -> str:
    if section == "anti_patterns":
        return "anti_pattern"
    if item.get("kind") == "lesson" or item.get("type") == "lesson":
        return "lesson"
    return "pattern"

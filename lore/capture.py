"""Recording knowledge: validate input, redact secrets, build records, store them.

The CLI, the MCP server and the hooks all write through these functions, so
every write path gets the same input checks, scrubber, curation and audit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.errors import UsageError
from lore.store import Record, Store
from lore.store.records import DECISION_TYPES, OUTCOMES
from lore.store.validate import check_severity, check_text

if TYPE_CHECKING:
    from lore.settings import Settings


@dataclass
class WriteResult:
    record: Record
    redactions: list[str] = field(default_factory=list)  # kinds redacted
    notices: list[str] = field(default_factory=list)  # warnings to show (contradictions, ...)
    merged_into: str | None = None
    created: bool = True


class Scrubber:
    """Applies the secret scrubber to each text field and remembers what it found."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.kinds: list[str] = []

    def __call__(self, value: str) -> str:
        if not self.enabled or not value:
            return value
        from lore.scrub import scrub

        result = scrub(value)
        self.kinds.extend(f.kind for f in result.findings)
        return result.text

    def many(self, values: list[str]) -> list[str]:
        return [self(v) for v in values]


def _clean_list(name: str, values: list[str] | None) -> list[str]:
    return [check_text(name, v) for v in (values or []) if v and v.strip()]


def parse_tags(values: list[str] | None) -> list[str]:
    """Tags from repeated and comma-separated options, without '#' and duplicates."""
    tags: list[str] = []
    for value in values or []:
        for part in value.split(","):
            tag = part.strip().lstrip("#")
            if tag and tag not in tags:
                tags.append(check_text("tag", tag, max_bytes=200))
    return tags


def _importance(value: int | None) -> int:
    if value is None:
        return 3
    if not 1 <= value <= 5:
        raise UsageError(f"importance must be 1-5, got {value}")
    return value


def _confidence(value: float | None, default: float = 0.8) -> float:
    if value is None:
        return default
    if not (0.0 <= value <= 1.0) or math.isnan(value):
        raise UsageError(f"confidence must be between 0 and 1, got {value}")
    return value


@dataclass
class WriteOptions:
    redact: bool = True
    force: bool = False
    merge: bool = False
    check_duplicates: bool = True
    embed_model: str | None = None  # the duplicate check's model: Settings.embed_model (None: the bundled one)
    pool_cache: Path | None = None  # where the check's pool is kept between processes (paths.write_check_dir)
    # Whether a decision's write saves the duplicate check's pool (lore.curate.pool) for the next
    # process: a CLI process's does. A long-lived one (the warm helper, the MCP server) keeps its
    # pool in memory and saves it between requests or when it ends (~5 ms at 10,000 decisions,
    # a write's own time otherwise): ``Lore(save_pool=False)``.
    save_pool: bool = True

    @classmethod
    def configured(cls, settings: Settings, **options: Any) -> WriteOptions:
        """The options of a write with ``settings``' model and write-check cache (what every surface passes)."""
        from lore.paths import write_check_dir

        return cls(embed_model=settings.embed_model, pool_cache=write_check_dir(settings), **options)


def store_record(store: Store, kind: str, raw: dict[str, Any], scrubber: Scrubber, options: WriteOptions,
                 op: str = "retain") -> WriteResult:  # fmt: skip
    """Store an already scrubbed record after the duplicate check: every capture path ends here."""
    notices: list[str] = []
    store.prepare_write()
    try:
        if options.check_duplicates and kind in ("decision", "pattern", "anti_pattern", "lesson"):
            from lore.curate.write_check import check_before_write

            outcome = check_before_write(store, kind, raw, force=options.force, merge=options.merge,
                                         model=options.embed_model, pool_cache=options.pool_cache)
            if outcome.merged is not None:
                return WriteResult(record=outcome.merged, redactions=scrubber.kinds, merged_into=outcome.merged.id,
                                   created=False, notices=outcome.notices)  # fmt: skip
            notices.extend(outcome.notices)
        record = store.add(kind, raw, op=op)
    finally:
        if options.check_duplicates and kind == "decision" and options.save_pool:
            # The decisions the check read, with this write: the next process starts from them.
            from lore.curate.pool import save

            save(store.data_dir)  # into the pool's own cache file, if it has one
    if not options.redact:
        notices.append("stored without redaction (--no-redact): secrets in this text are kept as typed")
    return WriteResult(record=record, redactions=scrubber.kinds, notices=notices)


def remember(
    store: Store,
    decision: str,
    *,
    project: str,
    rationale: str | None = None,
    alternatives: list[str] | None = None,
    tags: list[str] | None = None,
    importance: int | None = None,
    confidence: float | None = None,
    outcome: str = "pending",
    decision_type: str = "other",
    session_id: str | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    options = options or WriteOptions()
    if outcome not in OUTCOMES:
        raise UsageError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    if decision_type not in DECISION_TYPES:
        raise UsageError(f"type must be one of {', '.join(DECISION_TYPES)}, got {decision_type!r}")
    scrub = Scrubber(options.redact)
    raw: dict[str, Any] = {
        "timestamp": store.now_iso(),
        "session_id": session_id or "",
        "decision": scrub(check_text("decision", decision)),
        "rationale": scrub(check_text("rationale", rationale, required=False)),
        "alternatives": scrub.many(_clean_list("alternative", alternatives)),
        "outcome": outcome,
        "status": "active",
        "superseded_by": None,
        "retracted_reason": None,
        "status_changed_at": None,
        "tags": parse_tags(tags),
        "project": project,
        "importance": _importance(importance),
        "confidence": _confidence(confidence),
        "type": decision_type,
        "entities": [],
        "lesson_learned": None,
        "related_decisions": [],
        "git_commit": None,
        "valid_at": None,
        "spec_quality": 0.5,
    }
    return store_record(store, "decision", raw, scrub, options)


def learn(
    store: Store,
    name: str,
    *,
    project: str,
    context: str | None = None,
    problem: str | None = None,
    solution: str | None = None,
    category: str | None = None,
    origin: str | None = None,
    confidence: float | None = None,
    example_bad: list[str] | None = None,
    example_good: list[str] | None = None,
    tags: list[str] | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    options = options or WriteOptions()
    scrub = Scrubber(options.redact)
    examples: list[dict[str, str]] = []
    for bad in _clean_list("example-bad", example_bad):
        examples.append({"bad": scrub(bad)})
    for good in _clean_list("example-good", example_good):
        examples.append({"good": scrub(good)})
    raw: dict[str, Any] = {
        "name": scrub(check_text("name", name, max_bytes=2000)),
        "context": scrub(check_text("context", context, required=False)),
        "problem": scrub(check_text("problem", problem, required=False)),
        "solution": scrub(check_text("solution", solution, required=False)),
        "category": (category or "general").strip(),
        "origin": origin or "",
        "confidence": _confidence(confidence, 0.5),
        "validations": 0,
        "created_at": store.now_iso(),
        "examples": examples,
        "project": project,
        "tags": parse_tags(tags),
    }
    return store_record(store, "pattern", raw, scrub, options)


def learn_anti(
    store: Store,
    name: str,
    *,
    project: str,
    symptom: str | None = None,
    risk: str | None = None,
    fix: str | None = None,
    category: str | None = None,
    severity: str = "medium",
    tags: list[str] | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    options = options or WriteOptions()
    check_severity(severity)
    scrub = Scrubber(options.redact)
    raw: dict[str, Any] = {
        "name": scrub(check_text("name", name, max_bytes=2000)),
        "symptom": scrub(check_text("symptom", symptom, required=False)),
        "risk": scrub(check_text("risk", risk, required=False)),
        "fix": scrub(check_text("fix", fix, required=False)),
        "category": (category or "general").strip(),
        "severity": severity,
        "created_at": store.now_iso(),
        "project": project,
        "tags": parse_tags(tags),
    }
    return store_record(store, "anti_pattern", raw, scrub, options)


def handoff(
    store: Store,
    message: str,
    *,
    project: str,
    next_steps: list[str] | None = None,
    blockers: list[str] | None = None,
    questions: list[str] | None = None,
    related_ids: list[str] | None = None,
    session_id: str | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    options = options or WriteOptions(check_duplicates=False)
    scrub = Scrubber(options.redact)
    now = store.now_iso()
    text = scrub(check_text("handoff", message))
    related = [r.strip() for r in related_ids or [] if r.strip()]
    raw: dict[str, Any] = {
        "id": session_id or None,
        "started_at": now,
        "ended_at": now,
        "summary": text.split("\n", 1)[0][:200],
        "goals_addressed": [],
        "decisions_made": [],
        "patterns_learned": [],
        "open_threads": [],
        "handoff": {
            "next_steps": scrub.many(_clean_list("next step", next_steps)),
            "blockers": scrub.many(_clean_list("blocker", blockers)),
            "questions": scrub.many(_clean_list("question", questions)),
            "message": text,
            "created_at": now,
        },
        "git_state": {"branch": "", "commits": [], "uncommitted": []},
        "context": {"project": project, "active_files": [], "recent_commands": [], "environment": {}},
        "related": {
            "journal_entries": [r for r in related if r.startswith("dec-")],
            "patterns": [r for r in related if not r.startswith("dec-")],
            "goals": [],
        },
    }
    if not raw["id"]:
        del raw["id"]
    return store_record(store, "handoff", raw, scrub, options)


def fail(
    store: Store,
    error_type: str,
    message: str,
    *,
    project: str,
    tool: str | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    options = options or WriteOptions(check_duplicates=False)
    scrub = Scrubber(options.redact)
    raw: dict[str, Any] = {
        "timestamp": store.now_iso(),
        "error_type": check_text("error type", error_type, max_bytes=200),
        "error_message": scrub(check_text("error message", message)),
        "tool": (tool or "").strip(),
        "project": project,
    }
    return store_record(store, "failure", raw, scrub, options)


def observe(
    store: Store,
    content: str,
    *,
    project: str,
    tags: list[str] | None = None,
    options: WriteOptions | None = None,
) -> WriteResult:
    options = options or WriteOptions(check_duplicates=False)
    scrub = Scrubber(options.redact)
    raw: dict[str, Any] = {
        "timestamp": store.now_iso(),
        "content": scrub(check_text("observation", content)),
        "tags": parse_tags(tags),
        "project": project,
    }
    return store_record(store, "observation", raw, scrub, options)


# -- lifecycle -------------------------------------------------------------------


def retract(store: Store, record_id: str, reason: str) -> Record:
    reason = Scrubber()(check_text("reason", reason))
    now = store.now_iso()

    def mutate(raw: dict[str, Any]) -> None:
        raw["status"] = "retracted"
        raw["retracted_reason"] = reason
        raw["status_changed_at"] = now

    return store.update(record_id, mutate, op="retract", detail={"reason": reason})


def supersede(store: Store, old_id: str, new_id: str) -> Record:
    """Mark ``old_id`` superseded by ``new_id`` and add a ``supersedes`` edge (new -> old)."""
    snapshot = store.load()
    old, new = snapshot.get(old_id), snapshot.get(new_id)
    if old.id == new.id:
        raise UsageError("a record cannot supersede itself")
    if new.status != "active":
        raise UsageError(f"{new.id} is {new.status}; only an active record can supersede another")
    now = store.now_iso()

    def mutate(raw: dict[str, Any]) -> None:
        raw["status"] = "superseded"
        raw["superseded_by"] = new.id
        raw["status_changed_at"] = now

    updated = store.update(old.id, mutate, op="supersede", detail={"superseded_by": new.id})
    store.link(new.id, old.id, "supersedes")
    return updated


def validate_pattern(store: Store, pattern_id: str) -> Record:
    """One more success of a pattern (``lore validate``): see ``lore.curate.reliability`` for the rule."""
    from lore.curate.reliability import record_outcome

    return record_outcome(store, pattern_id, success=True)

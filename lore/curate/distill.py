"""The lesson distillation cycle: a failure that keeps recurring becomes a lesson candidate.

Rule (docs/lessons.md, "Distilled lessons"): each failure gets an *error pattern*, its
normalised command and error signature. Normalising lowercases the text and replaces
quoted values (``'…'``, ``"…"``, `` `…` ``) with ``<q>``, paths (a token with a ``/`` or
``\\``, or starting with ``~``) with ``<path>``, hex values (``0x…``, or 7+ hex digits with at
least one digit) with ``<hex>`` and other numbers with ``<n>``, then collapses whitespace;
the error signature is the normalised first line of the error (``error_type: message``).
When at least ``MIN_REPEATS`` failures with the same error pattern and scope (their
project, else ``global``) fall within ``WINDOW_DAYS`` days before ``now``, one lesson is
proposed with ``lesson_pattern_id = sha256(error_pattern + scope)[:16]`` and a
``derived_from`` edge to each of those failures. It lands as a candidate (``lore inbox``)
unless ``LORE_AUTO_ACCEPT`` names lessons.

Idempotent: a pattern that already has a lesson (in any status) gets no second one; a
later failure with the same pattern is linked to it (``derived_from``); a lesson rejected
in the inbox is not proposed again.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lore.store import Record, Store

WINDOW_DAYS = 7
MIN_REPEATS = 2
CANDIDATE_CONFIDENCE = 0.5

_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
_PATH = re.compile(r"(?<![\w<])(?:~|\.{1,2})?[\w.@%+=:-]*(?:[/\\][\w.@%+=:~-]*)+")
_HEX = re.compile(r"\b(?:0x[0-9a-f]+|(?=[0-9a-f]*\d)[0-9a-f]{7,})\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def normalise(text: str) -> str:
    """Lowercase; quoted values, paths, hex and numbers replaced by placeholders; one space between words."""
    value = _QUOTED.sub(" <q> ", text.lower())
    value = _PATH.sub(" <path> ", value)
    value = _HEX.sub("<hex>", value)
    value = _NUMBER.sub("<n>", value)
    return " ".join(value.split())


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _scrubbed(text: str) -> str:
    from lore.scrub import scrub

    return scrub(text).text if text else text


def error_signature(record: Record) -> str:
    """The normalised first line of the error (``error_type: message``), secrets redacted first."""
    raw = record.raw
    kind = str(raw.get("error_type") or "").strip()
    message = _first_line(str(raw.get("error_message") or raw.get("error") or ""))
    return normalise(_scrubbed(f"{kind}: {message}" if kind and message else kind or message))


def error_pattern(record: Record) -> str:
    """``normalised command -> error signature`` (just the signature when no command was recorded)."""
    command = _first_line(str(record.raw.get("command") or ""))
    signature = error_signature(record)
    return f"{normalise(_scrubbed(command))} -> {signature}" if command else signature


def scope_of(record: Record) -> str:
    return record.project or "global"


def _fits(record: Record) -> bool:
    return record.kind == "failure" and record.status in ("active", "candidate") and record.timestamp is not None


def distill_failures(store: Store, now: datetime | None = None, *, dry_run: bool = False,
                     auto_accept: str) -> list[Record]:  # fmt: skip
    """Propose a lesson for each error pattern seen ``MIN_REPEATS`` times in the last ``WINDOW_DAYS`` days.

    Returns the lessons created (with ``dry_run``, the ones that would be, unsaved). Capture
    calls it after each capture; it is cheap when nothing repeats and adds nothing when run again.
    """
    from lore.curate.inbox import candidate_text, capture_status, rejected_hashes, text_hash
    from lore.curate.lessons import lesson_pattern_id
    from lore.store.fileio import data_lock
    from lore.store.records import Record

    moment = now or store.clock()
    since = moment - timedelta(days=WINDOW_DAYS)
    store.require()
    created: list[Record] = []
    with data_lock(store.data_dir):
        snapshot = store.load()
        groups: dict[tuple[str, str], list[Record]] = {}
        for record in snapshot.of_kind("failure"):
            if _fits(record):
                pattern = error_pattern(record)
                if pattern:
                    groups.setdefault((pattern, scope_of(record)), []).append(record)
        lessons: dict[str, Record] = {}
        for lesson in snapshot.of_kind("lesson"):
            pid = lesson.raw.get("lesson_pattern_id")
            if isinstance(pid, str) and (pid not in lessons or lesson.active):
                lessons[pid] = lesson
        linked = {(e.source, e.target) for e in snapshot.edges if e.relation == "derived_from"}
        rejected = rejected_hashes(store)
        edges: list[tuple[str, str]] = []
        pending: list[tuple[dict[str, Any], list[Record]]] = []
        status = capture_status("lesson", auto_accept)  # LORE_AUTO_ACCEPT (Settings.auto_accept)
        for (pattern, scope), failures in sorted(groups.items()):
            failures.sort(key=lambda r: (r.timestamp, r.id))
            pid = lesson_pattern_id(pattern, scope)
            existing = lessons.get(pid)
            if existing is not None:
                edges.extend((existing.id, f.id) for f in failures if (existing.id, f.id) not in linked)
                continue
            recent = [f for f in failures if f.timestamp is not None and since < f.timestamp <= moment]
            if len(recent) < MIN_REPEATS:
                continue
            raw = _lesson_raw(store, pattern, scope, pid, failures, status)
            if ("lesson", text_hash(candidate_text("lesson", raw))) in rejected:
                continue
            if dry_run:
                created.append(Record(kind="lesson", id="(new)", raw=raw))
                continue
            pending.append((raw, failures))
        # One write for every new lesson: patterns.yaml is rewritten whole on each add, so a write per
        # lesson made a backfill's time grow with the file.
        for lesson, (_, failures) in zip(store.add_many([("lesson", raw) for raw, _ in pending], op="distill"),
                                         pending, strict=True):  # fmt: skip
            created.append(lesson)
            edges.extend((lesson.id, f.id) for f in failures)
        if edges and not dry_run:
            store.link_many([(source, target, "derived_from") for source, target in edges])
    return created


def _lesson_raw(store: Store, pattern: str, scope: str, pid: str, failures: list[Record], status: str) -> dict[str, Any]:
    from lore.capture import Scrubber
    from lore.curate.inbox import NORMAL_CONFIDENCE
    from lore.curate.lessons import short_name

    scrub = Scrubber()
    first, last = failures[0], failures[-1]
    command = _first_line(str(last.raw.get("command") or ""))
    error = _first_line(last.title)
    tool = str(last.raw.get("tool") or "").strip()
    doing = f"Running `{command}`" if command else f"Using {tool}" if tool else "Working"
    days = max(1, round(((last.timestamp or store.clock()) - (first.timestamp or store.clock())).total_seconds() / 86400))
    fix = next((str(f.raw[k]) for f in reversed(failures) for k in ("fix", "resolution", "what_changed")
                if isinstance(f.raw.get(k), str) and f.raw[k].strip()), "")  # fmt: skip
    rule = f"Before {doing[0].lower() + doing[1:]}, check for the cause of: {error}"
    accepted = status == "active"
    return {
        "kind": "lesson",
        "name": scrub(short_name(f"Recurring failure: {error}")),
        "context": scrub(f"{doing} in {scope}"),
        "problem": scrub(pattern),
        "solution": scrub(fix or "not recorded yet: add it with `lore inbox edit ID --fix ...` before accepting"),
        "category": "lesson",
        "situation": scrub(f"{doing} in {scope}"),
        "error_pattern": pattern,
        "oversight": scrub(f"The same error recurred {len(failures)} times within {days} day(s)"),
        "fix": scrub(fix or "not recorded yet"),
        "rule": scrub(rule),
        "severity": "medium",
        "scope": scope,
        "rule_confidence": NORMAL_CONFIDENCE["lesson"] if accepted else CANDIDATE_CONFIDENCE,
        "lesson_pattern_id": pid,
        "validations": 0,
        "created_at": store.now_iso(),
        "project": None if scope == "global" else scope,
        "tags": ["lesson_learned", "distilled"],
        "status": status,
        "provenance": {"method": "distill", "failures": [f.id for f in failures]},
    }

"""Lessons: distilled "what went wrong and the rule that prevents it", and their wire format.

A lesson is a pattern item (``patterns/data/patterns.yaml``) with ``kind: lesson``.
Its identity is ``lesson_pattern_id = sha256(error_pattern + scope)[:16]``: storing a
lesson whose identity is already held by an active lesson of equal or higher
``rule_confidence`` returns that lesson; a higher-confidence one supersedes it
(history kept). ``render_yamo``/``parse_yamo`` are the LessonLearned wire format
documented in ``docs/lessons.md``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from lore.capture import Scrubber, WriteOptions
from lore.curate.similarity import Bm25Stats, tokens
from lore.errors import DataError, UsageError
from lore.store import Record, Store
from lore.store.records import SEVERITIES
from lore.store.validate import check_severity, check_text

DEFAULT_RULE_CONFIDENCE = 0.8
LIST_MIN_CONFIDENCE = 0.7
SEVERITY_RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}  # critical first
NAME_LIMIT = 80


def lesson_pattern_id(error_pattern: str, scope: str) -> str:
    """The identity of a lesson: the same error in the same scope is the same lesson."""
    return hashlib.sha256((error_pattern + scope).encode("utf-8")).hexdigest()[:16]


def short_name(rule: str, limit: int = NAME_LIMIT) -> str:
    """The rule's first line, cut at a word boundary to ``limit`` characters (with an ellipsis)."""
    line = " ".join(rule.strip().split("\n", 1)[0].split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-") + "…"


@dataclass
class LessonResult:
    record: Record
    created: bool = True
    superseded: Record | None = None  # the lower-confidence lesson this one replaced
    existing: bool = False  # an equal or stronger lesson with the same identity was returned
    merged_into: str | None = None  # the write-time duplicate check merged it into this record
    redactions: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def _rule_confidence(value: float | None) -> float:
    if value is None:
        return DEFAULT_RULE_CONFIDENCE
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise UsageError(f"confidence must be between 0 and 1, got {value}")
    return value


def same_identity(store: Store, pattern_id: str) -> Record | None:
    """The strongest active lesson with this ``lesson_pattern_id`` (newest on a tie), if any.

    Only the files from the first that holds lessons on (``Store.load(kinds=...)``: the same
    lessons as a whole load); a whole load read 10,000 decisions for it (~0.2 s a `lore lesson`)."""
    found = [
        r for r in store.load(kinds=("lesson",)).of_kind("lesson")
        if r.active and r.raw.get("lesson_pattern_id") == pattern_id
    ]
    if not found:
        return None
    return max(found, key=lambda r: (r.confidence, r.raw.get("created_at") or "", r.id))


def record_lesson(
    store: Store,
    *,
    situation: str,
    error_pattern: str,
    oversight: str,
    fix: str,
    rule: str,
    severity: str,
    scope: str,
    project: str,
    inverse: str | None = None,
    confidence: float | None = None,
    tags: list[str] | None = None,
    options: WriteOptions | None = None,
) -> LessonResult:
    """Store a lesson, return the equal-or-stronger one already stored, or supersede a weaker one."""
    from lore.capture import parse_tags, store_record

    options = options or WriteOptions()
    check_severity(severity)
    rule_confidence = _rule_confidence(confidence)
    scrub = Scrubber(options.redact)
    text = {
        "situation": scrub(check_text("situation", situation)),
        "error_pattern": scrub(check_text("error pattern", error_pattern)),
        "oversight": scrub(check_text("oversight", oversight)),
        "fix": scrub(check_text("fix", fix)),
        "rule": scrub(check_text("rule", rule)),
        "scope": scrub(check_text("scope", scope, max_bytes=2000)),
    }
    inverse_text = scrub(check_text("inverse", inverse, required=False)) or None
    identity = lesson_pattern_id(text["error_pattern"], text["scope"])
    store.require()
    current = same_identity(store, identity)
    if current is not None and current.confidence >= rule_confidence:
        return LessonResult(record=current, created=False, existing=True, redactions=scrub.kinds)
    tag_list = parse_tags(tags)
    if "lesson_learned" not in tag_list:
        tag_list.insert(0, "lesson_learned")
    raw: dict[str, Any] = {
        "kind": "lesson",
        "name": short_name(text["rule"]),
        "context": text["situation"],
        "problem": text["error_pattern"],
        "solution": text["fix"],
        "category": "lesson",
        "situation": text["situation"],
        "error_pattern": text["error_pattern"],
        "oversight": text["oversight"],
        "fix": text["fix"],
        "rule": text["rule"],
        **({"inverse": inverse_text} if inverse_text else {}),
        "severity": severity,
        "scope": text["scope"],
        "rule_confidence": rule_confidence,
        "lesson_pattern_id": identity,
        "validations": 0,
        "created_at": store.now_iso(),
        "project": project,
        "tags": tag_list,
    }
    if current is not None:
        # The same lesson, held more strongly: replace it, keeping the old one as history.
        options = WriteOptions(redact=options.redact, check_duplicates=False)
    written = store_record(store, "lesson", raw, scrub, options, op="lesson")
    result = LessonResult(record=written.record, created=written.created, merged_into=written.merged_into,
                          redactions=written.redactions, notices=written.notices)  # fmt: skip
    if current is not None and written.created:
        from lore.capture import supersede

        result.superseded = supersede(store, current.id, written.record.id)
    return result


def get_lesson(store: Store, lesson_id: str) -> Record:
    record = store.load().get(lesson_id)
    if record.kind != "lesson":
        raise UsageError(
            f"{record.id} is a {record.kind}, not a lesson", hint="list lessons with `lore lessons`"
        )
    return record


# -- listing ---------------------------------------------------------------------------


def lesson_text(record: Record) -> str:
    """Everything a query is matched against: the lesson's text fields and its scope."""
    return "\n".join(t for t in (record.content, str(record.raw.get("scope") or "")) if t)


def list_lessons(store: Store, query: str | None = None, *, min_confidence: float = LIST_MIN_CONFIDENCE,
                 limit: int | None = None) -> list[tuple[Record, float]]:  # fmt: skip
    """Active lessons with rule confidence >= ``min_confidence``, most severe first, then most relevant.

    With a query, lessons sharing no word with it are left out and the rest are ordered, within a
    severity, by BM25 over the lesson text (title, body, inverse and scope). Remaining ties: higher
    rule confidence, then newer, then id. Returns (lesson, relevance) pairs.
    """
    lessons = [r for r in store.load().of_kind("lesson") if r.active and r.confidence >= min_confidence]
    docs = [tokens(lesson_text(r)) for r in lessons]
    scores = [0.0] * len(lessons)
    if query and query.strip():
        wanted = tokens(query)
        if not wanted:
            raise UsageError(f"the query {query!r} has no searchable words")
        stats = Bm25Stats.build(docs)
        scores = [stats.score(wanted, doc) for doc in docs]
        kept = [i for i, score in enumerate(scores) if score > 0]
    else:
        kept = list(range(len(lessons)))

    # Stable sorts, least significant key first: id, then newest, then severity/relevance/confidence.
    kept.sort(key=lambda i: lessons[i].id)
    kept.sort(key=lambda i: str(lessons[i].raw.get("created_at") or ""), reverse=True)
    kept.sort(key=lambda i: (severity_rank(lessons[i]), -scores[i], -lessons[i].confidence))
    if limit is not None:
        kept = kept[:limit]
    return [(lessons[i], round(scores[i], 4)) for i in kept]


def severity_rank(record: Record) -> int:
    severity = record.raw.get("severity")
    return SEVERITY_RANK.get(severity if isinstance(severity, str) else "medium", SEVERITY_RANK["medium"])


# -- the LessonLearned wire format ("yamo") ----------------------------------------------

YAMO_SECTIONS = ("agent", "intent", "context", "constraints", "priority", "output", "meta", "log", "handoff")
YAMO_AGENT = "lore"
YAMO_INTENT = "LessonLearned"
_ESCAPES = {"\\": "\\\\", ";": "\\;", ",": "\\,", "=": "\\=", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"\\": "\\", ";": ";", ",": ",", "=": "=", "n": "\n", "r": "\r", "t": "\t"}


def yamo_escape(value: str) -> str:
    """Escape the delimiters (``;`` ``,`` ``=``), the backslash and line breaks with a backslash."""
    return "".join(_ESCAPES.get(c, c) for c in value)


def _split_unescaped(text: str, separator: str) -> list[str]:
    """Split at ``separator`` characters not preceded by an escaping backslash (escapes kept)."""
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if escaped:
        raise DataError("yamo: a value ends with a lone backslash")
    parts.append("".join(current))
    return parts


def yamo_unescape(value: str) -> str:
    out, chars = [], iter(value)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, None)
        if following is None or following not in _UNESCAPES:
            raise DataError(f"yamo: unknown escape \\{following or ''} in {value!r}")
        out.append(_UNESCAPES[following])
    return "".join(out)


def _fields(*pairs: tuple[str, Any]) -> str:
    return ", ".join(
        f"{key}={yamo_escape(_scalar(value))}" for key, value in pairs if value not in (None, "")
    )


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):  # tags: never hold a comma (they are split on commas when written)
        return ",".join(str(v) for v in value)
    return str(value)


def yamo_sections(record: Record) -> dict[str, str]:
    """Section -> rendered body (values escaped) for one lesson."""
    raw = record.raw
    tags = list(record.tags)
    return {
        "agent": YAMO_AGENT,
        "intent": YAMO_INTENT,
        "context": _fields(
            ("situation", raw.get("situation") or raw.get("context")),
            ("error_pattern", raw.get("error_pattern") or raw.get("problem")),
            ("oversight", raw.get("oversight")),
        ),
        "constraints": _fields(
            ("rule", raw.get("rule") or raw.get("name")),
            ("inverse", raw.get("inverse")),
            ("scope", raw.get("scope")),
        ),
        "priority": yamo_escape(str(raw.get("severity") or "medium")),
        "output": _fields(("fix", raw.get("fix") or raw.get("solution"))),
        "meta": _fields(
            ("id", record.id),
            ("lesson_pattern_id", raw.get("lesson_pattern_id")),
            ("rule_confidence", round(record.confidence, 4)),
            ("project", record.project),
            ("tags", tags),
            ("schema_version", record.schema_version),
        ),
        "log": _fields(
            ("created_at", raw.get("created_at")),
            ("status", record.status),
            ("superseded_by", raw.get("superseded_by")),
            ("validations", raw.get("validations")),
        ),
        "handoff": _fields(("action", "apply_rule"), ("scope", raw.get("scope"))),
    }


def render_yamo(record: Record) -> str:
    """One ``section: body;`` line per section, in ``YAMO_SECTIONS`` order (see docs/lessons.md)."""
    sections = yamo_sections(record)
    return "".join(f"{name}: {sections[name]};\n" for name in YAMO_SECTIONS)


def parse_yamo(text: str) -> dict[str, str | dict[str, str]]:
    """Parse one LessonLearned block: a scalar section gives a string, a key=value section a dict.

    A statement ends at an unescaped ``;``; a body holding an unescaped ``=`` is a list of
    ``key=value`` fields separated by unescaped ``,``. Whitespace around statements, keys and
    values is not significant.
    """
    result: dict[str, str | dict[str, str]] = {}
    for statement in _split_unescaped(text, ";"):
        if not statement.strip():
            continue
        name, colon, body = statement.strip().partition(":")
        if not colon or not name.strip().isidentifier():
            raise DataError(f"yamo: expected `section: value;`, found {statement.strip()[:60]!r}")
        name, body = name.strip(), body.strip()
        if name in result:
            raise DataError(f"yamo: section {name!r} appears twice")
        if _has_unescaped(body, "="):
            fields: dict[str, str] = {}
            for item in _split_unescaped(body, ","):
                if not item.strip():
                    continue
                key, equals, value = item.partition("=")
                if not equals or not key.strip().isidentifier():
                    raise DataError(
                        f"yamo: expected `key=value` in section {name!r}, found {item.strip()[:60]!r}"
                    )
                fields[key.strip()] = yamo_unescape(value.strip())
            result[name] = fields
        else:
            result[name] = yamo_unescape(body)
    return result


def _has_unescaped(text: str, char: str) -> bool:
    return len(_split_unescaped(text, char)) > 1

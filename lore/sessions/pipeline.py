"""Capture one session: read what is new, propose candidates, scrub, de-duplicate, store with provenance.

Every candidate is stored with ``status: candidate`` and ``CANDIDATE_CONFIDENCE`` (a kind
named in ``LORE_AUTO_ACCEPT`` is stored active at its normal confidence instead),
through the same write path as ``lore remember`` (secret scrubber, duplicate and
contradiction check, audit), and carries ``provenance``: the session id, the
transcript path, the line range ``[first, last]``, the method and a content hash.
The hash (session id, kind and scrubbed text) makes capture idempotent even when
the per-session state is lost: re-reading a transcript adds nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lore.capture import Scrubber, WriteOptions, store_record
from lore.errors import DuplicateError, LoreError, NotFoundError, UsageError
from lore.sessions import heuristics, state
from lore.sessions.heuristics import Candidate, Touched
from lore.sessions.transcript import Chunk, read_new
from lore.store import Record, Store
from lore.store.records import format_time, parse_time
from lore.store.store import Snapshot

if TYPE_CHECKING:
    from lore.settings import Settings

CANDIDATE_CONFIDENCE = 0.4
METHODS = ("heuristic", "llm")
MAX_PENDING = 200


@dataclass
class CaptureReport:
    """What one capture read and did (or, with ``dry_run``, would do)."""

    session_id: str
    transcript: str
    method: str
    dry_run: bool = False
    lines: tuple[int, int] | None = None  # the lines read this time, None when nothing was new
    added: list[Record] = field(default_factory=list)
    updated: list[Record] = field(default_factory=list)
    proposed: list[dict[str, Any]] = field(default_factory=list)  # dry run: the records that would be stored
    skipped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    redactions: list[str] = field(default_factory=list)
    llm_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id, "transcript": self.transcript, "method": self.method,
            "dry_run": self.dry_run, "lines": list(self.lines) if self.lines else None,
            "added": [{"id": r.id, "kind": r.kind, "title": r.title} for r in self.added],
            "updated": [{"id": r.id, "kind": r.kind, "title": r.title} for r in self.updated],
            "proposed": self.proposed, "skipped": dict(self.skipped), "warnings": self.warnings,
            "notices": self.notices, "redactions": sorted(set(self.redactions)), "llm_tokens": self.llm_tokens,
        }  # fmt: skip


def capture_method(method: str | None, settings: Settings) -> str:
    """``method``, else ``LORE_CAPTURE_METHOD``, else ``heuristic``; ``llm`` needs ``LORE_LLM_CMD``."""
    chosen = (method or settings.capture_method).strip().lower()
    if chosen not in METHODS:
        raise UsageError(f"unknown capture method {chosen!r}", hint="methods: heuristic, llm")
    if chosen == "llm" and not settings.llm_cmd:
        raise UsageError("--method llm needs LORE_LLM_CMD (the command that runs your model)")
    return chosen


def candidate_hash(session_id: str, kind: str, text: str) -> str:
    normal = " ".join(text.lower().split())
    return hashlib.sha256(f"{session_id}\0{kind}\0{normal}".encode()).hexdigest()[:24]


def rejected_before(store: Store, kind: str, raw: dict[str, Any]) -> bool:
    """Whether the inbox rejected a record with this text before (it is never proposed again)."""
    from lore.curate.inbox import candidate_text
    from lore.curate.inbox import rejected_before as rejected

    return rejected(store, kind, candidate_text(kind, raw))


def capture_session(store: Store, path: str | Path, *, project: str | None = None, session_id: str | None = None,
                    method: str | None = None, dry_run: bool = False, distill: bool = True,
                    settings: Settings, batch: CaptureBatch | None = None) -> CaptureReport:  # fmt: skip
    """Capture what is new in the transcript at ``path`` (see the module docstring).

    ``settings``: the caller's (the CLI, the hooks and ``Lore`` read them once).
    ``batch``: a ``CaptureBatch`` shared by the captures of one import (its caller holds the
    capture lock and flushes it); the records and the session's state are written at its flush.
    """
    transcript = Path(path).expanduser().absolute()
    if not transcript.is_file():
        raise NotFoundError(f"transcript {transcript} does not exist" if not transcript.exists() else f"{transcript} is not a file")
    chosen = capture_method(method, settings)
    key = session_id or transcript.stem
    report = CaptureReport(session_id=key, transcript=str(transcript), method=chosen, dry_run=dry_run)
    if batch is not None and dry_run:
        raise UsageError("a dry run cannot be batched")  # pragma: no cover - import_transcripts never does
    if not dry_run:
        store.prepare_write()
    base = state.root(store.data_dir, settings)
    with state.locked(base) if not dry_run and batch is None else contextlib.nullcontext():
        saved = batch.load_state(key) if batch is not None else state.load(base, key)
        if saved.get("transcript") not in (None, str(transcript)):
            saved = {}  # the same session id in another file: read it on its own
        marker = state.store_marker(store.data_dir)
        if saved.get("store") not in (None, marker):
            saved = {}  # another store at this path (recreated): read the session again; the hashes keep what is there
        chunk = read_new(transcript, start_line=_int(saved.get("line")), start_offset=_int(saved.get("offset")),
                         pending=saved.get("pending") if isinstance(saved.get("pending"), dict) else None,
                         session_id=key)  # fmt: skip
        report.warnings.extend(chunk.warnings)
        if chunk.empty:
            return report
        report.lines = (chunk.first_line, chunk.last_line)
        from lore.project import detect_project

        project = project or saved.get("project") or detect_project(chunk.cwd)
        candidates = heuristics.failures([c for c in chunk.calls if c.result is not None], chunk.cwd or saved.get("cwd"))
        if chosen == "llm":
            from lore.sessions import llm_extract

            found, used, logs = llm_extract.extract(chunk, settings, spent=_int(saved.get("llm_tokens")))
            candidates += found
            report.llm_tokens = used
            report.warnings.extend(logs)
        else:
            candidates += heuristics.statements(chunk.utterances)
        writer = _Writer(store, report, key, transcript, project, dry_run, settings, batch)
        for candidate in candidates:
            writer.write(candidate, chunk)
        touched = Touched.from_state(saved.get("touched"))
        observation_id = saved.get("observation_id") if isinstance(saved.get("observation_id"), str) else None
        if touched.add([c for c in chunk.calls if c.result is not None], chunk.cwd or saved.get("cwd")) and touched.worth_keeping:
            observation_id = writer.observation(touched, observation_id, chunk)
        if not dry_run:
            (batch.save_state if batch is not None else partial(state.save, base))(key, {
                "session_id": key, "transcript": str(transcript), "line": chunk.last_line, "offset": chunk.end_offset,
                "pending": dict(list({c.id: c.to_state() for c in chunk.calls if c.result is None}.items())[-MAX_PENDING:]),
                "touched": touched.to_state(), "observation_id": observation_id, "project": project,
                "cwd": chunk.cwd or saved.get("cwd"), "llm_tokens": _int(saved.get("llm_tokens")) + report.llm_tokens,
                "updated_at": store.now_iso(),
                "store": batch.marker() if batch is not None else state.store_marker(store.data_dir),
            })  # fmt: skip
    if distill and not dry_run and any(r.kind == "failure" for r in report.added):
        report.notices.extend(distill_after_capture(store, settings))
    return report


def distill_after_capture(store: Store, settings: Settings) -> list[str]:
    """The lesson distillation cycle after a capture (repeated failures -> lesson candidates), as notices."""
    from lore.curate.distill import distill_failures

    try:
        lessons = distill_failures(store, auto_accept=settings.auto_accept)
    except LoreError as error:
        return [f"distillation skipped: {error.message}"]
    return [f"distilled lesson candidate {r.id}: {r.title}" for r in lessons]


def _provenance_hash(raw: dict[str, Any]) -> str | None:
    """The content hash a captured record carries (what "already captured" compares), or None."""
    provenance = raw.get("provenance")
    found = provenance.get("hash") if isinstance(provenance, dict) else None
    return found if isinstance(found, str) else None


def _provenance_hashes(snapshot: Snapshot | None) -> set[str]:
    found = (_provenance_hash(record.raw) for record in snapshot.records.values()) if snapshot else ()
    return {digest for digest in found if digest is not None}


_MARKER_AFTER_FLUSH = "\0after-flush"


class CaptureBatch:
    """The captures of one import, written together: what ``capture_session`` does per transcript, in batches.

    One store snapshot serves every capture of a batch (and the next batches, while no other
    process changed the data files) and is kept current: each record a capture stores is
    added to it at once, so the duplicate, contradiction and "already captured" checks of a
    later transcript see it exactly as they would see it on disk. ``flush`` then writes the
    batch's records with one ``Store.add_many`` (one append per JSONL file, one patterns.yaml
    rewrite, one chained audit append) and only then the batch's capture state: a kill loses
    at most the batch, and the next import reads its transcripts again (the content hashes
    skip what was written). The caller holds the capture lock from ``begin`` to ``flush``.
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.embed_model = settings.embed_model  # the duplicate check's model
        self.base = state.root(store.data_dir, settings)
        self.snapshot = Snapshot()
        self.hashes: set[str] = set()
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.states: dict[str, dict[str, Any]] = {}
        self.transcripts = 0
        self.started = 0.0
        self._rejected: set[tuple[str, str]] = set()
        self._ids: set[str] = set()
        self._marker: str | None = None
        self._written = False
        self._signature: list[tuple[str, int, int, int]] | None = None

    def _files_signature(self) -> list[tuple[str, int, int, int]]:
        from lore.curate.inbox import REJECTED

        found = []
        for path in [*self.store.source_files(), self.store.path(REJECTED)]:
            try:
                info = path.stat()
            except OSError:
                continue
            found.append((str(path), info.st_ino, info.st_size, info.st_mtime_ns))
        return found

    def begin(self) -> None:
        """Start a batch: reload the store unless the data files are as the last flush left them."""
        from lore.curate.inbox import rejected_hashes
        from lore.store.fileio import data_lock

        self.transcripts, self.started = 0, time.monotonic()
        self._written = False
        self._marker = state.store_marker(self.store.data_dir)
        if self._signature is not None and self._signature == self._files_signature():
            return
        if not self.store.exists():
            self.snapshot, self._rejected, self._signature = Snapshot(), set(), None
        else:
            with data_lock(self.store.data_dir):  # the signature is that of the files loaded
                self.snapshot = self.store.load()
                self._rejected = rejected_hashes(self.store)
                self._signature = self._files_signature()
        self.hashes.clear()
        self.hashes.update(_provenance_hashes(self.snapshot))
        self._ids = set(self.snapshot.records)

    def full(self, size: int, seconds: float) -> bool:
        return self.transcripts >= size or time.monotonic() - self.started >= seconds

    def load_state(self, key: str) -> dict[str, Any]:
        self.transcripts += 1
        return dict(self.states[key]) if key in self.states else state.load(self.base, key)

    def save_state(self, key: str, value: dict[str, Any]) -> None:
        self.states[key] = value

    def marker(self) -> str | None:
        """The store marker the state would get if written now: none before the store's first write."""
        return self._marker if self._marker is not None or not (self._written or self.pending) else _MARKER_AFTER_FLUSH

    def rejected_before(self, kind: str, raw: dict[str, Any]) -> bool:
        from lore.curate.inbox import candidate_text, text_hash

        text = candidate_text(kind, raw)
        return bool(text.strip()) and (kind, text_hash(text)) in self._rejected

    def add(self, kind: str, raw: dict[str, Any], check: bool) -> tuple[Record, list[str]]:
        """Check ``raw`` against the snapshot (``DuplicateError`` for a duplicate), then queue it."""
        from lore.store.records import SCHEMA_VERSION

        notices: list[str] = []
        if check:
            from lore.curate.write_check import check_before_write

            notices = check_before_write(self.store, kind, raw, force=False, merge=False, snapshot=self.snapshot,
                                         model=self.embed_model).notices  # fmt: skip
        raw = {"id": self.store.new_id(kind, self._ids), **raw}
        raw.setdefault("schema_version", SCHEMA_VERSION)
        record = Record(kind=kind, id=raw["id"], raw=raw)
        self._ids.add(record.id)
        self.snapshot.records[record.id] = record
        if (digest := _provenance_hash(raw)) is not None:
            self.hashes.add(digest)
        self.pending.append((kind, raw))
        return record, notices

    def update(self, record_id: str, mutate: Any, detail: dict[str, Any]) -> Record:
        """``Store.update`` after writing what is queued (the audit keeps the one-at-a-time order)."""
        from lore.store.fileio import data_lock

        with data_lock(self.store.data_dir):
            self._check_foreign()
            self._write_pending()
            updated = self.store.update(record_id, mutate, op="capture", detail=detail)
            self._own_write()
        self._written = True
        if self._marker is None:
            self._marker = state.store_marker(self.store.data_dir)
        self.snapshot.records[record_id] = updated  # in place: the snapshot keeps the file order
        if (digest := _provenance_hash(updated.raw)) is not None:
            self.hashes.add(digest)
        return updated

    def _write_pending(self) -> None:
        """Write the queued records (the caller holds the data lock)."""
        if self.pending:
            self.store.add_many(self.pending, op="capture")
            self.pending = []
            self._written = True

    def _check_foreign(self) -> None:
        """Before a write of ours (data lock held): has another process written since the snapshot?"""
        if self._signature is not None and self._signature != self._files_signature():
            self._signature = None  # then the next batch loads the store again

    def _own_write(self) -> None:
        """After a write of ours: the files are what the snapshot holds, unless another process wrote too."""
        self._signature = self._files_signature() if self._signature is not None else None

    def flush(self) -> None:
        """Write the queued records, then the capture state of the batch's sessions."""
        from lore.store.fileio import data_lock

        with data_lock(self.store.data_dir):
            self._check_foreign()
            self._write_pending()
            self._own_write()
            marker = state.store_marker(self.store.data_dir)
            for key, value in self.states.items():
                if value.get("store") == _MARKER_AFTER_FLUSH:
                    value["store"] = marker
                state.save(self.base, key, value)
            self.states = {}

def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class _Writer:
    """Turns candidates into stored records, skipping what was captured or rejected before."""

    def __init__(self, store: Store, report: CaptureReport, session_id: str, transcript: Path, project: str,
                 dry_run: bool, settings: Settings, batch: CaptureBatch | None = None) -> None:  # fmt: skip
        self.store, self.report, self.session_id, self.auto_accept = store, report, session_id, settings.auto_accept
        self.settings = settings  # the duplicate check's model and write-check cache
        self.transcript, self.project, self.dry_run, self.batch = transcript, project, dry_run, batch
        # The hashes of what is stored (the batch's, kept current), and those this capture has seen.
        self.stored: set[str] = set()
        self.hashes: set[str] = set()
        if batch is not None:
            self.snapshot: Snapshot | None = batch.snapshot
            self.stored = batch.hashes
            return
        snapshot = store.load() if store.exists() else None
        self.snapshot = snapshot
        self.hashes = _provenance_hashes(snapshot)

    def _provenance(self, candidate: Candidate, digest: str) -> dict[str, Any]:
        return {"session_id": self.session_id, "transcript": str(self.transcript), "lines": list(candidate.lines),
                "method": candidate.method, "hash": digest}  # fmt: skip

    def _time(self, chunk: Chunk, line: int) -> str:
        moment = parse_time(chunk.time_at(line))
        return format_time(moment) if moment else self.store.now_iso()

    def write(self, candidate: Candidate, chunk: Chunk) -> None:
        report = self.report
        scrub = Scrubber(True)
        fields = {k: scrub(v) if isinstance(v, str) else v for k, v in candidate.fields.items()}
        text = scrub(candidate.text)
        digest = candidate_hash(self.session_id, candidate.kind, text)
        if digest in self.hashes or digest in self.stored:
            report.skipped["already captured"] += 1
            return
        try:
            raw = self._raw(candidate.kind, fields, self._time(chunk, candidate.lines[0]))
        except LoreError as error:
            report.skipped["invalid"] += 1
            report.warnings.append(f"{self.transcript}:{candidate.lines[0]}: {candidate.kind} skipped: {error.message}")
            return
        if self.batch is not None and self.batch.rejected_before(candidate.kind, raw):
            report.skipped["rejected before"] += 1
            return
        if self.batch is None and self.store.exists() and rejected_before(self.store, candidate.kind, raw):
            report.skipped["rejected before"] += 1
            return
        raw["provenance"] = self._provenance(candidate, digest)
        self.hashes.add(digest)
        check = candidate.kind in ("decision", "lesson", "pattern")
        try:
            if self.dry_run:
                if check and self.store.exists():
                    from lore.curate.write_check import check_before_write
                    from lore.paths import write_check_dir

                    check_before_write(self.store, candidate.kind, raw, force=False, merge=False,
                                       model=self.settings.embed_model, pool_cache=write_check_dir(self.settings))
                report.proposed.append({"kind": candidate.kind, **raw})
                report.redactions.extend(scrub.kinds)
                return
            if self.batch is not None:
                record, notices = self.batch.add(candidate.kind, raw, check)
                report.added.append(record)
                report.redactions.extend(scrub.kinds)
                report.notices.extend(n.replace("{new_id}", record.id) for n in notices)
                return
            options = WriteOptions.configured(self.settings, check_duplicates=check)
            result = store_record(self.store, candidate.kind, raw, scrub, options, op="capture")
        except DuplicateError as error:
            report.skipped["duplicate"] += 1
            report.notices.append(f"{candidate.kind} not stored: it duplicates {error.existing_id}")
            return
        report.added.append(result.record)
        report.redactions.extend(result.redactions)
        report.notices.extend(n.replace("{new_id}", result.record.id) for n in result.notices)

    def _raw(self, kind: str, f: dict[str, Any], when: str) -> dict[str, Any]:
        from lore.curate.inbox import NORMAL_CONFIDENCE, capture_status
        from lore.store.validate import check_text

        status = capture_status(kind, self.auto_accept)  # LORE_AUTO_ACCEPT: that kind is stored active at its normal confidence
        confidence = CANDIDATE_CONFIDENCE if status == "candidate" else NORMAL_CONFIDENCE[kind]
        base: dict[str, Any] = {"status": status, "session_id": self.session_id, "project": self.project}
        if kind == "failure":
            raw = {"timestamp": when, "error_type": check_text("error type", f["error_type"], max_bytes=200),
                   "error_message": check_text("error message", f["error_message"]), "tool": f.get("tool") or "",
                   "command": f.get("command") or "", **({"fix": f["fix"]} if f.get("fix") else {})}  # fmt: skip
        elif kind == "decision":
            raw = {"timestamp": when, "decision": check_text("decision", f["decision"]),
                   "rationale": check_text("rationale", f.get("rationale"), required=False),
                   "alternatives": [str(a) for a in f.get("alternatives") or []], "outcome": "pending",
                   "superseded_by": None, "retracted_reason": None, "status_changed_at": None,
                   "tags": ["captured"], "importance": 3, "type": "other", "entities": [], "lesson_learned": None,
                   "related_decisions": [], "git_commit": None, "valid_at": None, "spec_quality": 0.5}  # fmt: skip
        elif kind == "lesson":
            from lore.curate.lessons import lesson_pattern_id, short_name

            rule = check_text("rule", f["rule"])
            situation = check_text("situation", f.get("situation") or "stated in a session")
            error_pattern = check_text("error pattern", f.get("error_pattern") or rule)
            fix = f.get("fix") or ""
            raw = {"kind": "lesson", "name": short_name(rule), "context": situation, "problem": error_pattern,
                   "solution": fix, "category": "lesson", "situation": situation, "error_pattern": error_pattern,
                   "oversight": f.get("oversight") or "", "fix": fix, "rule": rule, "severity": f.get("severity") or "medium",
                   "scope": self.project, "rule_confidence": confidence,
                   "lesson_pattern_id": lesson_pattern_id(error_pattern, self.project), "validations": 0,
                   "created_at": when, "tags": ["lesson_learned", "captured"]}  # fmt: skip
        elif kind == "pattern":
            raw = {"name": check_text("name", f["name"], max_bytes=2000), "context": f.get("context") or "",
                   "problem": f.get("problem") or "", "solution": f.get("solution") or "", "category": "general",
                   "origin": "capture", "validations": 0, "created_at": when, "examples": [], "tags": ["captured"]}  # fmt: skip
        elif kind == "observation":
            raw = {"timestamp": when, "content": check_text("observation", f["content"]), "tags": ["captured", "session"]}
        else:  # pragma: no cover - candidates are built by lore
            raise UsageError(f"cannot capture a {kind}")
        if kind != "lesson":
            raw["confidence"] = confidence
        return {**raw, **base}

    def observation(self, touched: Touched, record_id: str | None, chunk: Chunk) -> str | None:
        """The session's one observation: updated in place while it is still a candidate, else a new one."""
        scrub = Scrubber(True)
        text = scrub(touched.text(self.session_id, self.project))
        candidate = Candidate("observation", {"content": text}, text, (touched.first_line, touched.last_line))
        digest = candidate_hash(self.session_id, "observation", text)
        if digest in self.hashes or digest in self.stored:
            self.report.skipped["already captured"] += 1
            return record_id
        current = self.snapshot.records.get(record_id) if self.snapshot and record_id else None
        if current is not None and current.raw.get("status") == "candidate" and not self.dry_run:
            provenance = self._provenance(candidate, digest)

            def mutate(raw: dict[str, Any]) -> None:
                raw["content"] = text
                raw["provenance"] = provenance

            if self.batch is not None:
                updated = self.batch.update(current.id, mutate, detail={"session": self.session_id})
            else:
                updated = self.store.update(current.id, mutate, op="capture", detail={"session": self.session_id})
            self.report.updated.append(updated)
            self.report.redactions.extend(scrub.kinds)
            self.hashes.add(digest)
            return current.id
        before = len(self.report.added)
        self.write(candidate, chunk)
        return self.report.added[-1].id if len(self.report.added) > before else record_id

"""`lore import claude-code` in batches stores exactly what capturing one transcript at a time stores.

The same transcripts go into two fresh data dirs: one through ``import_transcripts`` (batches of
two, one store snapshot kept current), one through ``capture_session`` per transcript (a store
load and a write per record). Record ids are random, so records are compared by their content
hash (provenance) and everything that names an id (audit entries, edges, capture state) through
that key; the files must otherwise hold the same fields, the audit the same operations in the
same order, and the capture state the same values.
"""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from lore.sessions import state
from lore.sessions.claude_code import import_transcripts
from lore.sessions.pipeline import capture_session, distill_after_capture
from lore.settings import Settings
from lore.store import Store, audit

LABELLED = Path(__file__).parent / "data" / "transcripts"
# Decisions, lessons, failures (two of them alike, for the distillation) and a secret.
SOURCES = ("08-decision-switch-httpx", "12-lesson-idempotent-migration", "15-from-now-on-pin-versions",
           "04-make-version-mismatch-twice", "16-secret-aws-keys-upload", "28-mixed-stripe-webhook")  # fmt: skip


def _transcripts(folder: Path) -> list[Path]:
    """Each source twice under another session id: one copy next to it (same batch), one later (another batch)."""
    folder.mkdir(parents=True)
    order = [(SOURCES[0], 1), (SOURCES[0], 2)] + [(s, 1) for s in SOURCES[1:]] + [(s, 2) for s in SOURCES[1:]]
    paths = []
    for name, copy in order:
        path = folder / f"{name}-copy{copy}.jsonl"
        shutil.copy(LABELLED / f"{name}.jsonl", path)
        paths.append(path)
    return paths


def _grow(path: Path) -> None:
    """A later part of the session: one more edit (its observation changes) and a stated lesson."""
    first = orjson.loads(path.read_bytes().splitlines()[0])
    base = {"sessionId": first.get("sessionId"), "cwd": first.get("cwd") or "/home/dev/projects/acme-api",
            "timestamp": "2026-11-21T09:00:00.000Z"}  # fmt: skip
    lines = [
        {**base, "type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_grow", "name": "Edit",
             "input": {"file_path": f"{base['cwd']}/src/grown_module.py", "old_string": "a", "new_string": "b"}}]}},
        {**base, "type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_grow", "content": "ok", "is_error": False}]}},
        {**base, "type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Lesson: always rebuild the wheel cache after bumping the lockfile."}]}},
    ]  # fmt: skip
    with path.open("ab") as handle:
        handle.write(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def _clock() -> datetime:
    return datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _one_at_a_time(store: Store, paths: list[Path], settings: Settings) -> Counter[str]:
    skipped: Counter[str] = Counter()
    failures = False
    for path in paths:
        report = capture_session(store, path, distill=False, settings=settings)
        skipped.update(report.skipped)
        failures |= any(r.kind == "failure" for r in report.added)
    if failures:
        distill_after_capture(store, settings)
    return skipped


def _key(raw: dict[str, Any], kind: str, title: str) -> str:
    provenance = raw.get("provenance")
    if isinstance(provenance, dict) and provenance.get("hash"):
        return f"{kind}:{provenance['hash']}"
    return f"{kind}:{title}"


def _stored(data_dir: Path) -> dict[str, Any]:
    """The data dir and capture state with every id replaced by its record's content key."""
    snapshot = Store(data_dir).load()
    assert snapshot.warnings == [] and snapshot.duplicate_ids == {}
    keys = {r.id: _key(r.raw, r.kind, r.title) for r in snapshot.records.values()}
    assert len(set(keys.values())) == len(keys)

    def named(value: Any) -> Any:  # ids (a distilled lesson's failures, a link's target) by their key
        if isinstance(value, dict):
            return {k: named(v) for k, v in value.items()}
        if isinstance(value, list):
            return [named(v) for v in value]
        return keys.get(value, value) if isinstance(value, str) else value

    records = {keys[r.id]: named({k: v for k, v in r.raw.items() if k not in ("id", "updated_at")})
               for r in snapshot.records.values()}  # fmt: skip
    edges = sorted((keys[e.source], keys[e.target], e.relation) for e in snapshot.edges)
    for record in records.values():  # the distillation lists a lesson's failures in id order (ids are random)
        if isinstance(record.get("provenance"), dict) and "failures" in record["provenance"]:
            record["provenance"]["failures"].sort()
    trail = [(e["op"], keys.get(e["id"], e["id"]), e["project"], named(e.get("detail")))
             for _, e, _ in audit.iter_entries(data_dir) if e is not None]  # fmt: skip
    # and links them in that order: a lesson's links are compared as a set
    trail = [e for e in trail if e[0] != "link"] + sorted((e for e in trail if e[0] == "link"), key=repr)
    assert audit.verify(data_dir)[1] is None
    states = {}
    for path in sorted(state.root(data_dir, Settings.from_env()).glob("*.json")):
        value = orjson.loads(path.read_bytes())
        value.pop("updated_at")
        value["store"] = value["store"] is not None
        value["observation_id"] = keys.get(value["observation_id"], value["observation_id"])
        states[path.name] = value
    return {"records": records, "edges": edges, "audit": trail, "state": states}


@pytest.mark.parametrize("auto_accept", ["", "all"])
def test_batched_import_stores_what_one_at_a_time_capture_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 auto_accept: str) -> None:  # fmt: skip
    # auto_accept "all": captured records are active, so the duplicate check compares them (a copy is a
    # duplicate of its original, captured earlier in the same batch or in an earlier one); "": candidates,
    # whose session observation a later import updates in place while it is still a candidate.
    monkeypatch.setenv("LORE_AUTO_ACCEPT", auto_accept)
    settings = Settings.from_env()
    paths = _transcripts(tmp_path / "transcripts")
    batched, single = Store(tmp_path / "batched", clock=_clock), Store(tmp_path / "single", clock=_clock)
    batched.init()
    single.init()
    summary = import_transcripts(batched, paths, settings=settings, batch_size=2)
    skipped = _one_at_a_time(single, paths, settings)
    assert summary.skipped == skipped
    if auto_accept:
        assert skipped["duplicate"] >= 3  # the decision of 08 in its own batch, lessons across batches
    assert _stored(batched.data_dir) == _stored(single.data_dir)
    # The sessions go on: a second import reads only the new lines (and updates each observation).
    for path in paths[::3]:
        _grow(path)
    again = import_transcripts(batched, paths, settings=settings, batch_size=2)
    assert again.skipped == _one_at_a_time(single, paths, settings)
    assert again.with_new_lines == len(paths[::3])
    if not auto_accept:
        assert again.added["updated observation"] == len(paths[::3])
    assert _stored(batched.data_dir) == _stored(single.data_dir)
    # And a third adds nothing.
    assert sum(import_transcripts(batched, paths, settings=settings, batch_size=2).added.values()) == 0


def test_an_import_sees_what_another_process_wrote_between_its_batches(tmp_path: Path) -> None:
    # The snapshot is kept across batches only while the data files are as the last batch left them:
    # a rejection written by `lore inbox reject` during the import applies to the transcripts after it.
    from lore.curate.inbox import candidate_text, remember_rejection

    paths = _transcripts(tmp_path / "transcripts")
    store = Store(tmp_path / "data")
    store.init()
    lesson = paths[2]
    assert lesson.name.startswith("12-lesson")
    proposed = [raw for raw in capture_session(store, lesson, dry_run=True, settings=Settings.from_env()).proposed if raw["kind"] == "lesson"]
    assert len(proposed) == 1
    seen: list[Path] = []

    def step(path: Path) -> None:
        seen.append(path)
        if len(seen) == 2:  # the first batch is done but not written yet
            remember_rejection(Store(tmp_path / "data"), "lesson", candidate_text("lesson", proposed[0]), "pat-1")

    summary = import_transcripts(store, paths, batch_size=2, step=step, settings=Settings.from_env())
    assert summary.skipped["rejected before"] == 2  # both copies of the lesson's transcript
    lessons = [r.raw["rule"] for r in store.load().records.values() if r.kind == "lesson"]
    assert proposed[0]["rule"] not in lessons and lessons
    assert audit.verify(store.data_dir)[1] is None


def test_the_cli_batch_default_is_the_library_default() -> None:
    # Written twice: the CLI module must not import the capture code to register its options.
    import inspect

    from lore.cli.cmd_import import import_claude_code
    from lore.sessions.claude_code import BATCH_TRANSCRIPTS

    assert inspect.signature(import_claude_code).parameters["batch"].default.default == BATCH_TRANSCRIPTS

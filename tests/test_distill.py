"""The lesson distillation cycle: repeated failures become one lesson candidate, idempotently."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from lore.curate.distill import distill_failures, error_pattern, normalise
from lore.curate.inbox import accept, reject
from lore.settings import Settings
from lore.store.store import Store

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def add_failure(store: Store, when: datetime, command: str, message: str, project: str = "acme-api") -> str:
    raw = {"timestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "error_type": "ToolError", "error_message": message,
           "tool": "Bash", "command": command, "project": project, "status": "candidate"}  # fmt: skip
    return store.add("failure", raw).id


def test_normalise_strips_paths_numbers_hex_and_quotes() -> None:
    assert normalise("pytest /home/a/x/tests/test_1.py -k 'slow one'") == "pytest <path> -k <q>"
    assert normalise('KeyError: "user_id" at 0x7f3a2b1c line 42') == "keyerror: <q> at <hex> line <n>"
    assert normalise("commit deadbeef12 failed  after 3.5s") == "commit <hex> failed after <n>s"
    assert normalise("ENOENT: no such file ./src/app.ts") == "enoent: no such file <path>"


def test_two_repeats_within_7_days_make_one_lesson_idempotently(initialised: Path) -> None:
    store = Store(initialised)
    a = add_failure(store, NOW - timedelta(days=3), "pytest /tmp/w1/tests/test_a.py", "ImportError: no module 'foo' (line 12)")
    b = add_failure(store, NOW - timedelta(days=1), "pytest /tmp/w2/tests/test_b.py", "ImportError: no module 'bar' (line 40)")
    add_failure(store, NOW - timedelta(days=2), "npm run build", "tsc exited with 2")  # seen once: no lesson
    add_failure(store, NOW - timedelta(days=30), "make deploy", "timeout after 30s")
    add_failure(store, NOW - timedelta(days=20), "make deploy", "timeout after 45s")  # twice, but long ago
    found = distill_failures(store, now=NOW, auto_accept=Settings.from_env().auto_accept)
    assert len(found) == 1
    lesson = found[0]
    snapshot = Store(initialised).load()
    stored = snapshot.get(lesson.id)
    assert stored.kind == "lesson" and stored.status == "candidate" and stored.confidence == 0.5
    pattern = "pytest <path> -> toolerror: importerror: no module <q> (line <n>)"
    assert stored.raw["error_pattern"] == pattern
    from lore.curate.lessons import lesson_pattern_id

    assert stored.raw["lesson_pattern_id"] == lesson_pattern_id(pattern, "acme-api")
    derived = {(e.source, e.target) for e in snapshot.edges if e.relation == "derived_from"}
    assert derived == {(lesson.id, a), (lesson.id, b)}
    # Again: nothing new. A third failure of the same pattern is linked to the existing lesson.
    assert distill_failures(store, now=NOW, auto_accept=Settings.from_env().auto_accept) == []
    c = add_failure(store, NOW, "pytest tests/test_c.py", "ImportError: no module 'baz' (line 7)")
    assert distill_failures(store, now=NOW + timedelta(hours=1), auto_accept=Settings.from_env().auto_accept) == []
    snapshot = Store(initialised).load()
    assert len(snapshot.of_kind("lesson")) == 1
    assert {(e.source, e.target) for e in snapshot.edges if e.relation == "derived_from"} == {
        (lesson.id, a), (lesson.id, b), (lesson.id, c)}
    assert distill_failures(store, now=NOW + timedelta(hours=2), auto_accept=Settings.from_env().auto_accept) == []
    assert len(Store(initialised).load().edges) == 3


def test_rejected_lesson_is_not_proposed_again(initialised: Path) -> None:
    store = Store(initialised)
    for days in (2, 1):
        add_failure(store, NOW - timedelta(days=days), "cargo build", "error[E0432]: unresolved import")
    first = distill_failures(store, now=NOW, auto_accept=Settings.from_env().auto_accept)
    assert len(first) == 1
    reject(store, [first[0].id])
    assert distill_failures(store, now=NOW, auto_accept=Settings.from_env().auto_accept) == []
    assert Store(initialised).load().of_kind("lesson") == []


def test_auto_accepted_lessons_are_active(initialised: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LORE_AUTO_ACCEPT", "lesson")
    store = Store(initialised)
    for days in (2, 1):
        add_failure(store, NOW - timedelta(days=days), "go test ./...", "panic: nil map")
    [lesson] = distill_failures(store, now=NOW, auto_accept=Settings.from_env().auto_accept)
    assert lesson.status == "active" and lesson.confidence == 0.8


def test_cli_and_accepted_lesson_reaches_session_start(initialised: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store = Store(initialised)
    now = datetime.now(UTC)
    for hours in (30, 2):
        add_failure(store, now - timedelta(hours=hours), "alembic upgrade head", "relation \"users\" already exists")
    dry = cli("lesson", "distill", "--dry-run")
    assert dry.exit_code == 0 and dry.stdout.startswith("Would propose lesson (new) [candidate] from 2 failures: ")
    assert Store(initialised).load().of_kind("lesson") == []
    result = cli("lesson", "distill", "--json")
    assert result.exit_code == 0, result.output
    [row] = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert row["status"] == "candidate" and row["type"] == "lesson"
    assert cli("lesson", "distill").stdout == "No new repeated failures to distil.\n"

    def session_start() -> str:
        out = subprocess.run([sys.executable, "-m", "lore", "hook", "session-start"], capture_output=True,
                             input=json.dumps({"session_id": "s", "cwd": str(Path.cwd()),
                                               "hook_event_name": "SessionStart"}).encode())  # fmt: skip
        assert out.returncode == 0
        return out.stdout.decode()

    assert row["id"] not in session_start()  # a candidate is never injected
    accept(store, [row["id"]])
    text = json.loads(session_start())["hookSpecificOutput"]["additionalContext"]
    assert f"Lesson (medium, {row['id']})" in text and "already exists" in text


def test_error_pattern_without_a_command_is_the_signature(initialised: Path) -> None:
    store = Store(initialised)
    rid = store.add("failure", {"timestamp": "2026-11-20T00:00:00Z", "error_type": "ToolError",
                                "error_message": "Permission denied writing /var/cache/x1\nmore", "project": "p"}).id  # fmt: skip
    assert error_pattern(Store(initialised).load().get(rid)) == "toolerror: permission denied writing <path>"

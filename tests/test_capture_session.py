"""Session capture from Claude Code transcripts: real files, the real CLI, real background processes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from lore.sessions.pipeline import capture_session
from lore.store import Store
from tests.conftest import settings

DEV = Path(__file__).parent / "data" / "transcripts-dev" / "01-import-fix.jsonl"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.fixture(autouse=True)
def _no_capture_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LORE_CAPTURE", "LORE_CAPTURE_METHOD", "LORE_AUTO_ACCEPT", "LORE_CAPTURE_LLM_BUDGET", "LORE_HOOK_HANDOFF"):
        monkeypatch.delenv(name, raising=False)


class Transcript:
    """Writes lines the way Claude Code does (shape taken from a real 2.1 transcript)."""

    def __init__(self, path: Path, session: str = "sess-1", cwd: str = "/home/dev/projects/acme-api") -> None:
        self.path, self.session, self.cwd, self.n = path, session, cwd, 0

    def _line(self, item: dict) -> None:
        item = {"sessionId": self.session, "cwd": self.cwd, "timestamp": "2026-11-20T10:00:00.000Z", **item}
        with self.path.open("ab") as handle:
            handle.write(orjson.dumps(item) + b"\n")

    def user(self, text: str) -> None:
        self._line({"type": "user", "message": {"role": "user", "content": text}})

    def say(self, text: str) -> None:
        self._line({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})

    def tool(self, name: str, tool_input: dict, result: str, is_error: bool = False) -> None:
        self.n += 1
        tid = f"toolu_{self.n}"
        self._line({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": name, "input": tool_input}]}})
        self._line({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": result, "is_error": is_error}]}})

    def raw(self, text: str) -> None:
        with self.path.open("a") as handle:
            handle.write(text + "\n")


def records(store: Store) -> list:
    return sorted(store.load().records.values(), key=lambda r: r.id)


def session_with_everything(path: Path) -> Transcript:
    t = Transcript(path)
    t.user("The billing tests fail, please fix them. Our deploy token is " + SECRET)
    t.tool("Bash", {"command": "python -m pytest tests/test_billing.py"},
           "Exit code 1\nE   ModuleNotFoundError: No module named 'stripe_v2'\nFAILED tests/test_billing.py", True)
    t.tool("Edit", {"file_path": "/home/dev/projects/acme-api/billing.py", "old_string": "stripe_v2", "new_string": "stripe"}, "ok")
    t.tool("Bash", {"command": "python -m pytest tests/test_billing.py"}, "3 passed")
    t.say("Fixed. We decided to pin stripe to 7.x because the v2 shim was removed upstream.")
    t.say("Lesson: always run the billing tests after upgrading the SDK.")
    return t


def test_capture_from_a_real_transcript_file(initialised: Path, cli) -> None:
    result = cli("capture-session", str(DEV), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["lines"] == [1, 43]
    kinds = sorted(item["kind"] for item in report["added"])
    assert kinds == ["decision", "failure", "failure", "lesson", "observation"]
    store = Store(initialised)
    found = records(store)
    assert all(r.raw["status"] == "candidate" for r in found)
    failure = next(r for r in found if r.kind == "failure" and "yamlx" in r.content)
    assert failure.raw["error_type"] == "ModuleNotFoundError"
    assert failure.raw["command"] == "python3 -c 'import yamlx'"
    assert failure.raw["fix"].startswith("`python3 -c 'import json; print(1)'` succeeded")
    assert failure.raw["confidence"] == 0.4
    assert failure.raw["provenance"]["lines"] == [22, 31]
    assert failure.raw["provenance"]["method"] == "heuristic"
    assert failure.raw["provenance"]["transcript"] == str(DEV)
    decision = next(r for r in found if r.kind == "decision")
    assert decision.raw["decision"] == "We decided to use json instead of yamlx"
    assert decision.raw["rationale"] == "it is in the standard library"


def test_rerun_adds_nothing_and_reads_only_new_lines(initialised: Path, tmp_path: Path) -> None:
    store = Store(initialised)
    path = tmp_path / "sess-1.jsonl"
    t = session_with_everything(path)
    first = capture_session(store, path, settings=settings())
    assert len(first.added) == 4
    count = len(records(store))
    again = capture_session(store, path, settings=settings())
    assert again.lines is None and again.added == []
    assert len(records(store)) == count
    # New lines: only they are read, and the session's observation is updated, not duplicated.
    t.tool("Bash", {"command": "git push origin main"}, "fatal: could not read Username", True)
    third = capture_session(store, path, settings=settings())
    assert third.lines is not None and third.lines[0] == first.lines[1] + 1
    assert [r.kind for r in third.added] == ["failure"]
    assert [r.kind for r in third.updated] == ["observation"]
    assert "git push origin main" in third.updated[0].content
    # The state lost (or another machine): the content hashes still add nothing.
    from lore.sessions import state

    for file in state.root(initialised, settings()).glob("*.json"):
        file.unlink()
    assert capture_session(store, path, settings=settings()).added == []


def test_secrets_are_never_stored(initialised: Path, tmp_path: Path) -> None:
    path = tmp_path / "sess-1.jsonl"
    t = Transcript(path)
    t.user("Decision: we decided to deploy with the token " + SECRET + " because CI needs it")
    t.tool("Bash", {"command": f"curl -H 'Authorization: token {SECRET}' https://api.example.com"}, "Exit code 22\ncurl: (22) 401", True)
    t.tool("Bash", {"command": f"GITHUB_TOKEN={SECRET} ./deploy.sh"}, "deployed")
    pending = orjson.dumps({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "toolu_open", "name": "Bash", "input": {"command": f"echo {SECRET}"}}]}})
    t.raw(pending.decode())  # a call whose result has not arrived: kept in the state for the next read
    report = capture_session(Store(initialised), path, settings=settings())
    assert report.added and report.redactions
    state_dir = Path(os.environ["LORE_STATE_DIR"])
    assert list(state_dir.rglob("*.json"))
    for file in [*initialised.rglob("*"), *state_dir.rglob("*")]:
        if file.is_file():
            assert SECRET not in file.read_text(errors="replace"), file


def test_malformed_lines_are_skipped_with_file_and_line(initialised: Path, tmp_path: Path, cli) -> None:
    path = tmp_path / "sess-1.jsonl"
    t = Transcript(path)
    t.raw("{not json")
    t.say("We decided to switch to uv because pip-tools was too slow.")
    t.raw("[1, 2]")
    result = cli("capture-session", str(path))
    assert result.exit_code == 0
    assert f"{path}:1: skipped, not valid JSON" in result.stderr
    assert f"{path}:3: skipped, not a JSON object" in result.stderr
    assert "decision" in result.stdout and "switch to uv" in result.stdout


def test_partial_last_line_waits_for_the_next_read(initialised: Path, tmp_path: Path) -> None:
    path = tmp_path / "sess-1.jsonl"
    Transcript(path).say("We decided to switch to ruff because flake8 was slow.")
    line = orjson.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "Lesson: never edit generated files by hand."}]}})
    with path.open("ab") as handle:
        handle.write(line[:20])
    store = Store(initialised)
    assert [r.kind for r in capture_session(store, path, settings=settings()).added] == ["decision"]
    with path.open("ab") as handle:
        handle.write(line[20:] + b"\n")
    assert [r.kind for r in capture_session(store, path, settings=settings()).added] == ["lesson"]


def test_dry_run_writes_nothing(initialised: Path, tmp_path: Path, cli) -> None:
    path = tmp_path / "sess-1.jsonl"
    session_with_everything(path)
    before = sorted(p.read_bytes() for p in initialised.rglob("*") if p.is_file())
    result = cli("capture-session", str(path), "--dry-run")
    assert result.exit_code == 0 and "Would capture 4 candidate(s)" in result.stdout
    assert sorted(p.read_bytes() for p in initialised.rglob("*") if p.is_file()) == before
    assert capture_session(Store(initialised), path, settings=settings()).added  # and the state did not move


def test_rejected_text_is_not_proposed_again(initialised: Path, tmp_path: Path) -> None:
    from lore.curate.inbox import reject

    store = Store(initialised)
    path = tmp_path / "sess-1.jsonl"
    Transcript(path).say("We decided to switch to uv because pip-tools was too slow.")
    added = capture_session(store, path, settings=settings()).added
    reject(store, [added[0].id])
    again = capture_session(store, path, session_id="sess-1", settings=settings())
    other = tmp_path / "other.jsonl"
    Transcript(other, session="sess-1").say("We decided to switch to uv because pip-tools was too slow.")
    report = capture_session(store, other, session_id="sess-1", settings=settings())
    assert again.added == [] and report.added == [] and report.skipped["rejected before"] == 1


def test_auto_accept_stores_active(initialised: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LORE_AUTO_ACCEPT", "decision")
    path = tmp_path / "sess-1.jsonl"
    session_with_everything(path)
    added = capture_session(Store(initialised), path, settings=settings()).added
    status = {r.kind: (r.raw["status"], r.confidence) for r in added}
    assert status["decision"] == ("active", 0.8)
    assert status["failure"] == ("candidate", 0.4)


def _llm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    script = tmp_path / "llm.py"
    script.write_text(f"#!{sys.executable}\nimport sys\nprompt = sys.stdin.read()\nopen({str(tmp_path / 'calls')!r}, 'a').write('x')\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("LORE_LLM_CMD", shlex.quote(str(script)))
    return tmp_path / "calls"


def test_llm_mode_one_call_per_chunk_validated(initialised: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer = {"records": [
        {"kind": "decision", "decision": "Pin stripe to 7.x", "rationale": "the v2 shim is gone"},
        {"kind": "lesson", "rule": "Run the billing tests after an SDK upgrade"},
        {"kind": "decision", "decision": 42},
        {"kind": "wish", "text": "a pony"},
    ]}  # fmt: skip
    calls = _llm(tmp_path, monkeypatch, f"print({json.dumps(answer)!r})")
    path = tmp_path / "sess-1.jsonl"
    session_with_everything(path)
    report = capture_session(Store(initialised), path, method="llm", settings=settings())
    assert calls.read_text() == "x"  # one chunk, one call (not one per tool call)
    kinds = sorted(r.kind for r in report.added)
    assert kinds == ["decision", "failure", "lesson", "observation"]
    assert all(r.raw["provenance"]["method"] == "llm" for r in report.added if r.kind in ("decision", "lesson"))
    assert any("record 3 skipped: decision field 'decision' is not a string" in w for w in report.warnings)
    assert any("record 4 skipped: unknown kind 'wish'" in w for w in report.warnings)
    assert report.llm_tokens > 0


@pytest.mark.parametrize("body, expected", [
    ("print('Sure! Here are the records: none')", "answer skipped: the answer is not JSON"),
    ("sys.exit(3)", "the model gave no answer: LORE_LLM_CMD exited 3"),
])  # fmt: skip
def test_llm_mode_bad_answers_store_nothing(initialised: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           body: str, expected: str) -> None:  # fmt: skip
    _llm(tmp_path, monkeypatch, body)
    path = tmp_path / "sess-1.jsonl"
    Transcript(path).say("We decided to switch to uv because pip-tools was too slow.")
    report = capture_session(Store(initialised), path, method="llm", settings=settings())
    assert report.added == []
    assert any(expected in w for w in report.warnings), report.warnings


def test_llm_budget_caps_tokens(initialised: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _llm(tmp_path, monkeypatch, "print('{\"records\": []}')")
    monkeypatch.setenv("LORE_CAPTURE_LLM_BUDGET", "10")
    path = tmp_path / "sess-1.jsonl"
    Transcript(path).say("We decided to switch to uv because pip-tools was too slow.")
    report = capture_session(Store(initialised), path, method="llm", settings=settings())
    assert not calls.exists()
    assert any("budget of 10 tokens" in w for w in report.warnings)


def test_llm_method_needs_the_command(initialised: Path, tmp_path: Path, cli) -> None:
    path = tmp_path / "sess-1.jsonl"
    Transcript(path).say("hello")
    result = cli("capture-session", str(path), "--method", "llm")
    assert result.exit_code == 2 and "LORE_LLM_CMD" in result.stderr


def test_hook_returns_at_once_and_the_background_capture_lands(initialised: Path, tmp_path: Path) -> None:
    path = tmp_path / "sess-1.jsonl"
    session_with_everything(path)
    event = json.dumps({"session_id": "sess-1", "transcript_path": str(path), "cwd": str(tmp_path)})
    env = {**os.environ, "LORE_CAPTURE": "on"}
    done = subprocess.run([sys.executable, "-m", "lore", "hook", "stop"], input=event, capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stdout == ""
    store = Store(initialised)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(records(store)) < 4:
        time.sleep(0.1)
    assert sorted(r.kind for r in records(store)) == ["decision", "failure", "lesson", "observation"]


def test_hook_without_capture_or_with_a_broken_event_exits_0(initialised: Path, tmp_path: Path, cli) -> None:
    path = tmp_path / "sess-1.jsonl"
    session_with_everything(path)
    assert cli("hook", "stop", input=json.dumps({"transcript_path": str(path)})).exit_code == 0
    assert cli("hook", "session-end", "--capture", input="not json").exit_code == 0
    assert cli("hook", "pre-compact", "--capture", input=json.dumps({"transcript_path": 3})).exit_code == 0
    assert records(Store(initialised)) == []


def test_hook_install_capture(tmp_path: Path, cli) -> None:
    settings = tmp_path / "home" / ".claude" / "settings.json"
    assert cli("hook", "install", "--capture").exit_code == 0
    hooks = json.loads(settings.read_text())["hooks"]
    commands = {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}
    assert commands["Stop"].endswith("hook stop --capture")
    assert commands["PreCompact"].endswith("hook pre-compact --capture")
    assert commands["SessionEnd"].endswith("hook session-end --capture")
    assert cli("hook", "install").exit_code == 0
    assert json.loads(settings.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"].endswith("hook stop")


def test_import_claude_code_is_idempotent(initialised: Path, tmp_path: Path, cli) -> None:
    folder = tmp_path / "home" / ".claude" / "projects" / "-home-dev-projects-acme-api"
    folder.mkdir(parents=True)
    session_with_everything(folder / "sess-1.jsonl")
    (folder / "sess-2.jsonl").write_bytes(DEV.read_bytes())
    dry = cli("import", "claude-code", "--dry-run")
    assert "would add (as candidates): 2 decision, 3 failure, 2 lesson, 2 observation" in dry.stdout
    assert records(Store(initialised)) == []
    first = cli("import", "claude-code", "--project", "acme-api")
    assert "added (as candidates): 2 decision, 3 failure, 2 lesson, 2 observation" in first.stdout, first.output
    assert "transcripts: 2 (0 with new lines)" in cli("import", "claude-code").stdout
    assert "transcripts: 0" in cli("import", "claude-code", "--project", "other").stdout
    assert len(records(Store(initialised))) == 9


def test_import_claude_memory(initialised: Path, tmp_path: Path, cli) -> None:
    project = Path.cwd()
    (project / ".git").mkdir()
    (project / "CLAUDE.md").write_text("# Conventions\n- Use pnpm, never npm, in this repo.\n- Run `make check` before\n  pushing to main.\n\n```\ncode is skipped\n```\n")
    (project / "CLAUDE.local.md").write_text("My sandbox database is at localhost:5433 for local runs.\n")
    (tmp_path / "home" / ".claude").mkdir(parents=True, exist_ok=True)
    (tmp_path / "home" / ".claude" / "CLAUDE.md").write_text("- Prefer small commits with clear messages.\n")
    result = cli("import", "claude-memory")
    assert "added: 4 observation" in result.stdout, result.output
    contents = sorted(r.content for r in records(Store(initialised)))
    assert "Run `make check` before pushing to main. (Conventions)" in contents
    assert all("code is skipped" not in c for c in contents)
    assert "skipped (already present): 4 observation" in cli("import", "claude-memory").stdout


def test_front_door(initialised: Path, tmp_path: Path) -> None:
    from lore import Lore

    path = tmp_path / "sess-1.jsonl"
    session_with_everything(path)
    report = Lore(project="acme-api").capture_session(path)
    assert len(report.added) == 4 and all(r.project == "acme-api" for r in report.added)


def test_capture_runs_the_distillation_cycle(initialised: Path, tmp_path: Path) -> None:
    # The store's clock a day after the transcripts' fixed timestamps: with the real clock this
    # test failed from 2026-11-27 on, once the failures fell out of the distillation window.
    from datetime import UTC, datetime

    store = Store(initialised, clock=lambda: datetime(2026, 11, 21, 10, 0, tzinfo=UTC))
    for number in (1, 2):
        path = tmp_path / f"sess-{number}.jsonl"
        t = Transcript(path, session=f"sess-{number}")
        t.tool("Bash", {"command": "make release"}, "Exit code 2\nmake: *** No rule to make target 'release'.  Stop.", True)
        report = capture_session(store, path, settings=settings())
    lessons = [r for r in store.load().records.values() if r.kind == "lesson"]
    assert len(lessons) == 1 and lessons[0].raw["status"] == "candidate"
    assert any(n.startswith(f"distilled lesson candidate {lessons[0].id}") for n in report.notices)
    failures = {r.id for r in store.load().records.values() if r.kind == "failure"}
    linked = {link.target for link in store.load().edges if link.source == lessons[0].id and link.relation == "derived_from"}
    assert linked == failures


def test_a_lesson_starts_at_its_cue_not_at_the_words_before_it(initialised: Path, tmp_path: Path) -> None:
    # Found by hand on a real transcript: "Great. remember that ..." was stored with "Great." as its rule's start
    # (the sentence splitter only splits before a capital letter).
    store = Store(initialised)
    path = tmp_path / "sess-cue.jsonl"
    t = Transcript(path, session="sess-cue")
    t.user("Great. remember that Money(0) is used as the sum start everywhere, so a default currency is required.")
    t.say("Understood.")
    result = capture_session(store, path, settings=settings())
    lessons = [r for r in result.added if r.kind == "lesson"]
    assert len(lessons) == 1
    assert lessons[0].raw["rule"].startswith("Remember that Money(0) is used as the sum start everywhere")


def _claude_projects(root: Path, count: int) -> Path:
    """``count`` transcripts in a Claude Code config dir: copies of the labelled set under new session ids."""
    import shutil
    import uuid

    sources = sorted((Path(__file__).parent / "data" / "transcripts").glob("*.jsonl"))
    for i in range(count):
        folder = root / "projects" / f"-home-dev-projects-p{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(sources[i % len(sources)], folder / f"{uuid.UUID(int=i + 1)}.jsonl")
    return root


def _contents(data_dir: Path) -> tuple[list[tuple[str, str, str]], int]:
    snapshot = Store(data_dir).load()
    assert snapshot.warnings == [] and snapshot.duplicate_ids == {}
    return sorted((r.kind, r.title, r.status) for r in snapshot.records.values()), len(snapshot.edges)


def test_a_killed_claude_code_import_resumes_to_what_one_run_stores(initialised: Path, tmp_path: Path) -> None:
    from lore.store import audit

    config = _claude_projects(tmp_path / "claude", 24)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
    command = [sys.executable, "-m", "lore", "import", "claude-code", "--batch", "4"]
    # One uninterrupted run, into its own data dir and capture state.
    clean_env = {**env, "LORE_DATA_DIR": str(tmp_path / "clean"), "LORE_STATE_DIR": str(tmp_path / "clean-state")}
    assert subprocess.run([sys.executable, "-m", "lore", "init"], env=clean_env, capture_output=True).returncode == 0
    assert subprocess.run(command, env=clean_env, capture_output=True).returncode == 0
    expected = _contents(tmp_path / "clean")
    assert len(expected[0]) > 24
    # The same import, killed once it has written something, then run again.
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    audit_log = initialised / audit.AUDIT_PATH
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline and not (audit_log.exists() and audit_log.stat().st_size):
        time.sleep(0.005)
    os.kill(process.pid, 9)
    process.wait()
    assert process.returncode == -9, "the import finished before it could be interrupted"
    assert 0 < len(Store(initialised).load().records) < len(expected[0])
    rerun = subprocess.run(command, env=env, capture_output=True)
    assert rerun.returncode == 0, rerun.stderr
    assert _contents(initialised) == expected
    again = subprocess.run(command, env=env, capture_output=True)
    assert again.returncode == 0 and b"added (as candidates): none" in again.stdout
    assert audit.verify(initialised)[1] is None


def test_a_data_dir_created_again_at_the_same_path_is_captured_again(initialised: Path, tmp_path: Path) -> None:
    # The capture state is kept per data dir path: a store deleted and created anew there inherited
    # "already read" and a backfill added nothing to it.
    import shutil

    path = tmp_path / "sess-again.jsonl"
    session_with_everything(path)
    first = capture_session(Store(initialised), path, settings=settings())
    assert first.added
    shutil.rmtree(initialised)
    Store(initialised).init()
    again = capture_session(Store(initialised), path, settings=settings())
    assert sorted(r.title for r in again.added) == sorted(r.title for r in first.added)
    assert capture_session(Store(initialised), path, settings=settings()).added == []  # and then it is read, as before


def test_the_new_commands_as_a_user_runs_them(initialised: Path, tmp_path: Path) -> None:
    """capture-session, inbox, inbox accept/reject, lesson distill and import claude-memory, each a real `lore` process."""

    def lore(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "lore", *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    transcript = Path(__file__).parent / "data" / "transcripts" / "04-make-version-mismatch-twice.jsonl"
    captured = json.loads(lore("capture-session", str(transcript), "--json").stdout)
    assert captured["added"] and captured["lines"] and not captured["dry_run"]
    ids = [item["id"] for item in captured["added"]]
    listing = lore("inbox").stdout
    assert all(rid in listing for rid in ids)
    lore("inbox", "accept", ids[0])
    lore("inbox", "reject", *ids[1:])
    assert lore("inbox").stdout.strip() in ("", "No candidates waiting for review.")
    assert lore("lesson", "distill", "--dry-run").returncode == 0
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("- Run `make check` before pushing to main.\n")
    done = subprocess.run([sys.executable, "-m", "lore", "import", "claude-memory", "--dir", str(project)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "added: 1 observation" in done.stdout, done.stdout + done.stderr
    kinds = {r.id: r.status for r in records(Store(initialised))}
    assert kinds[ids[0]] == "active" and not any(rid in kinds for rid in ids[1:])

"""The review inbox: candidates, accept/reject/edit, rejections remembered, never injected."""

from __future__ import annotations

from pathlib import Path

from lore.curate.inbox import REJECTED, candidate_text, normalise_text, rejected_before, remember_rejection
from lore.store.store import Store
from lore.store.validate import check_record


def test_candidate_is_a_valid_status() -> None:
    assert check_record("decision", {"id": "dec-1", "decision": "x", "status": "candidate"}) == []
    assert check_record("decision", {"id": "dec-1", "decision": "x", "status": "pending-ish"}) != []


def test_rejected_before_matches_normalised_text_and_kind(initialised: Path) -> None:
    store = Store(initialised)
    assert not rejected_before(store, "decision", "Use  Postgres\nfor jobs")
    remember_rejection(store, "decision", "Use  Postgres\nfor jobs", "dec-abc")
    assert normalise_text("  Use  Postgres\nfor JOBS ") == "use postgres for jobs"
    assert rejected_before(store, "decision", "use postgres for JOBS")
    assert not rejected_before(store, "lesson", "use postgres for jobs")
    assert not rejected_before(store, "decision", "use postgres for queues")
    # Append-only, one line per rejection, only the hash kept; a malformed line hides nothing.
    path = initialised / REJECTED
    with path.open("ab") as handle:
        handle.write(b"{not json\n")
    remember_rejection(store, "failure", candidate_text("failure", {"error_message": "boom"}), "fail-1")
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and "postgres" not in path.read_text().lower()
    assert rejected_before(store, "decision", "Use postgres for jobs")
    assert rejected_before(store, "failure", candidate_text("failure", {"id": "fail-2", "error_message": "boom"}))
    # Store.load never reads the rejection file as records.
    assert Store(initialised).load().records == {}


# -- review ------------------------------------------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import orjson  # noqa: E402

from lore import capture  # noqa: E402
from lore.capture import WriteOptions  # noqa: E402
from lore.store import audit  # noqa: E402

PLAIN = WriteOptions(check_duplicates=False)
PROVENANCE = {"session_id": "sess-42", "transcript": "/home/u/.claude/projects/x/sess-42.jsonl",
              "lines": [120, 131], "method": "heuristic"}  # fmt: skip


def add_candidate(store: Store, text: str, *, kind: str = "decision", **extra: object) -> str:
    """A captured candidate as the capture path stores it: status candidate, lower confidence, provenance."""
    if kind == "decision":
        result = capture.remember(store, text, project="acme-api", rationale="stated in the session",
                                  confidence=0.4, options=PLAIN)  # fmt: skip
    else:
        result = capture.observe(store, text, project="acme-api", options=PLAIN)
    raw_id = result.record.id

    def mutate(raw: dict) -> None:
        raw.update(status="candidate", provenance=PROVENANCE, **extra)

    store.update(raw_id, mutate)
    return raw_id


def test_inbox_lists_candidates_with_provenance(initialised: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store = Store(initialised)
    capture.remember(store, "Use Postgres advisory locks for the scheduler", project="acme-api", options=PLAIN)
    first = add_candidate(store, "Switch the job queue to Redis streams")
    second = add_candidate(store, "The staging deploy needs VPN access", kind="observation")
    result = cli("inbox")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{first:<22} decision ") and lines[0].endswith("Switch the job queue to Redis streams")
    assert lines[1].strip() == "from session sess-42 sess-42.jsonl:120-131 (heuristic)"
    assert lines[2].startswith(f"{second:<22} observation") and "VPN" in lines[2]
    assert lines[-1].startswith("2 candidate(s): ")
    rows = [orjson.loads(line) for line in cli("inbox", "--json").stdout.splitlines()]
    assert [r["id"] for r in rows] == [first, second]
    assert rows[0]["status"] == "candidate" and rows[0]["provenance"] == PROVENANCE and rows[0]["confidence"] == 0.4
    only = cli("inbox", "--type", "observation", "--json").stdout.splitlines()
    assert [orjson.loads(line)["id"] for line in only] == [second]


def test_accept_raises_confidence_and_audits(initialised: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store = Store(initialised)
    first = add_candidate(store, "Switch the job queue to Redis streams")
    second = add_candidate(store, "Pin the Node version in .nvmrc")
    result = cli("inbox", "accept", first[:8])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Accepted decision {first}: Switch the job queue to Redis streams\n"
    record = Store(initialised).load().get(first)
    assert record.status == "active" and record.confidence == 0.8 and record.raw["provenance"] == PROVENANCE
    assert audit.history(initialised, first)[-1]["op"] == "accept"
    again = cli("inbox", "accept", first)
    assert again.exit_code == 2 and f"{first} is active, not a candidate" in again.stderr
    assert cli("inbox", "accept").exit_code == 2  # no ids, no --all
    rows = [orjson.loads(line) for line in cli("inbox", "accept", "--all", "--json").stdout.splitlines()]
    assert [r["id"] for r in rows] == [second] and rows[0]["status"] == "active"
    assert cli("inbox").stdout == "No candidates waiting for review.\n"


def test_reject_deletes_audits_and_is_remembered(initialised: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store = Store(initialised)
    keep = capture.remember(store, "Use Postgres advisory locks", project="acme-api", options=PLAIN).record.id
    gone = add_candidate(store, "Switch the job queue to Redis   streams")
    store.link(gone, keep, "relates_to")
    raw = dict(Store(initialised).load().get(gone).raw)
    result = cli("inbox", "reject", gone)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Rejected decision {gone}: Switch the job queue to Redis streams\n"
    snapshot = Store(initialised).load()
    assert gone not in snapshot.records and keep in snapshot.records and snapshot.edges == []
    assert audit.history(initialised, gone)[-1]["op"] == "reject"
    assert audit.verify(initialised)[1] is None
    # The same text, proposed again by a later capture (another id, other whitespace and case), is known.
    again = {**raw, "id": "dec-00000001", "decision": "switch the job queue to redis streams"}
    assert rejected_before(store, "decision", candidate_text("decision", again))
    assert not rejected_before(store, "decision", candidate_text("decision", {**again, "decision": "Use Kafka"}))
    refused = cli("inbox", "reject", keep)
    assert refused.exit_code == 2 and "is active, not a candidate" in refused.stderr
    assert keep in Store(initialised).load().records


def test_edit_sets_fields_scrubbed_and_validated(initialised: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = Store(initialised)
    rid = add_candidate(store, "Switch the job queue to Redis streams")
    result = cli("inbox", "edit", rid, "--rationale", "token ghp_" + "a" * 36 + " leaked", "--tags", "queue,redis")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Edited decision {rid}: rationale, tags\n"
    record = Store(initialised).load().get(rid)
    assert "ghp_" not in record.raw["rationale"] and record.raw["tags"] == ["queue", "redis"]
    assert record.status == "candidate"
    bad = cli("inbox", "edit", rid, "--importance=9")
    assert bad.exit_code == 2
    assert cli("inbox", "edit", rid, "--status", "active").exit_code == 2
    assert Store(initialised).load().get(rid).status == "candidate"
    # No field given: $EDITOR edits the record's fields as YAML.
    editor = initialised.parent / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\nt = open(p).read().replace('Redis streams', 'NATS')\nopen(p, 'w').write(t)\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    result = cli("inbox", "edit", rid)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Edited decision {rid}: decision\n"
    assert Store(initialised).load().get(rid).raw["decision"] == "Switch the job queue to NATS"


def test_auto_accept_setting(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from lore.curate.inbox import auto_accept_kinds, capture_status
    from lore.errors import UsageError
    from lore.settings import Settings

    monkeypatch.delenv("LORE_AUTO_ACCEPT", raising=False)
    value = Settings.from_env().auto_accept
    assert auto_accept_kinds(value) == frozenset() and capture_status("failure", value) == "candidate"
    monkeypatch.setenv("LORE_AUTO_ACCEPT", "failure, obs")
    value = Settings.from_env().auto_accept
    assert auto_accept_kinds(value) == {"failure", "observation"}
    assert capture_status("observation", value) == "active" and capture_status("decision", value) == "candidate"
    assert "lesson" in auto_accept_kinds("all")
    try:
        auto_accept_kinds("failure,spaceship")
    except UsageError as error:
        assert "LORE_AUTO_ACCEPT" in error.message and "spaceship" in error.message
    else:
        raise AssertionError("an unknown kind must be refused")


def test_candidates_are_searchable_marked_but_never_injected(indexed: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Search shows a candidate marked; the prompt hook and `lore context` leave it out until accepted."""
    store = Store(indexed)
    rid = add_candidate(store, "Route Kafka consumer retries through a dead letter topic named zebrafish")
    assert cli("index").exit_code == 0
    query = "kafka consumer retries dead letter topic zebrafish"
    found = cli("search", query)
    assert found.exit_code == 0 and rid in found.stdout and "[candidate]" in found.stdout
    hits = orjson.loads(cli("search", query, "--json").stdout)["results"]
    assert hits[0]["id"] == rid and hits[0]["status"] == "candidate"
    assert rid not in cli("context", query).stdout
    env = {**os.environ, "LORE_HOOK_DEADLINE_MS": "20000"}
    stdin = json.dumps({"session_id": "s1", "cwd": str(Path.cwd()), "hook_event_name": "UserPromptSubmit",
                        "prompt": "how should " + query + " work"}).encode()  # fmt: skip
    before = subprocess.run([sys.executable, "-m", "lore", "hook", "prompt"], input=stdin, capture_output=True, env=env)
    assert before.returncode == 0 and "zebrafish" not in before.stdout.decode()
    assert cli("inbox", "accept", rid).exit_code == 0
    assert cli("index").exit_code == 0
    after = subprocess.run([sys.executable, "-m", "lore", "hook", "prompt"], input=stdin, capture_output=True, env=env)
    assert after.returncode == 0 and "zebrafish" in json.loads(after.stdout)["hookSpecificOutput"]["additionalContext"]


def test_a_session_captured_by_the_stop_hook_reaches_the_prompt_hook_only_once_accepted(indexed: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The whole loop with real processes: Stop hook -> background capture -> inbox -> accept -> prompt hook."""
    import time

    transcript = Path(__file__).parent / "data" / "transcripts" / "08-decision-switch-httpx.jsonl"
    env = {**os.environ, "LORE_HOOK_DEADLINE_MS": "20000"}
    stop = json.dumps({"session_id": "sess-httpx", "transcript_path": str(transcript), "hook_event_name": "Stop"})
    done = subprocess.run([sys.executable, "-m", "lore", "hook", "stop", "--capture"], input=stop.encode(),
                          capture_output=True, env=env, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, b"")
    deadline = time.monotonic() + 60
    decisions: list = []
    while time.monotonic() < deadline and not decisions:
        decisions = [r for r in Store(indexed).load().records.values() if r.kind == "decision" and "httpx" in r.title]
        time.sleep(0.05)
    assert len(decisions) == 1, "the background capture stored no decision"
    (decision,) = decisions
    assert decision.status == "candidate" and decision.raw["provenance"]["session_id"] == "sess-httpx"
    assert decision.id in cli("inbox").stdout
    # Specific enough for the hook's injection decision in this six-record store (the shorter
    # "should the weather bot keep using requests or move to httpx" has a gate of 0.23, under 0.28).
    query = "should the weather bot keep using requests or move to httpx for async calls in the forecast fan-out"
    found = cli("search", query)
    assert found.exit_code == 0 and decision.id in found.stdout and "[candidate]" in found.stdout
    prompt = json.dumps({"session_id": "s2", "cwd": str(Path.cwd()), "hook_event_name": "UserPromptSubmit",
                         "prompt": query}).encode()  # fmt: skip
    before = subprocess.run([sys.executable, "-m", "lore", "hook", "prompt"], input=prompt, capture_output=True, env=env)
    assert before.returncode == 0 and "httpx" not in before.stdout.decode()
    assert cli("inbox", "accept", decision.id).exit_code == 0
    assert cli("index").exit_code == 0
    after = subprocess.run([sys.executable, "-m", "lore", "hook", "prompt"], input=prompt, capture_output=True, env=env)
    assert after.returncode == 0
    assert "switch from requests to httpx" in json.loads(after.stdout)["hookSpecificOutput"]["additionalContext"]

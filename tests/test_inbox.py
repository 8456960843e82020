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

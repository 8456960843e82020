"""``Store.load(kinds=...)``: what the hooks read when they need a few kinds, not the whole store."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import orjson
import pytest

from lore.errors import UsageError
from lore.store import Store
from lore.store.records import KINDS

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DECISIONS = Path("journal/data/decisions.jsonl")
SESSIONS = Path("transfer/data/sessions")


@pytest.fixture
def demo_with_collisions(tmp_path: Path) -> Path:
    """The demo store, plus ids that stand in two files (a later file wins) and a malformed decisions line."""
    data = tmp_path / "data"
    shutil.copytree(PROJECT_ROOT / "data", data)
    whole = Store(data).load()
    lesson = next(r for r in whole.of_kind("lesson"))
    pattern = next(r for r in whole.of_kind("pattern"))
    with (data / DECISIONS).open("ab") as decisions:
        decisions.write(orjson.dumps({"id": lesson.id, "decision": "a decision under a lesson's id"}) + b"\n")
        decisions.write(b"{not json\n")
    (data / SESSIONS / f"{pattern.id}.json").write_bytes(orjson.dumps(
        {"id": pattern.id, "handoff": {"message": "a handoff under a pattern's id"}, "project": "billing-api"}))  # fmt: skip
    return data


def shown(records: dict) -> list[tuple]:  # type: ignore[type-arg]
    return [(r.kind, r.id, r.raw, r.source, r.line) for r in records.values()]


def test_every_choice_of_kinds_gives_what_a_whole_load_has_of_them(demo_with_collisions: Path) -> None:
    store = Store(demo_with_collisions)
    whole = store.load()
    assert {r.kind for r in whole.records.values()} == set(KINDS)  # the demo store holds every kind
    for size in range(1, len(KINDS) + 1):
        for kinds in itertools.combinations(KINDS, size):
            partial = store.load(kinds=kinds)
            expected = {key: r for key, r in whole.records.items() if r.kind in kinds}
            assert shown(partial.records) == shown(expected), kinds
            assert partial.edges == []


def test_the_collisions_resolve_as_in_a_whole_load(demo_with_collisions: Path) -> None:
    store = Store(demo_with_collisions)
    whole = store.load()
    lessons = store.load(kinds=("lesson",)).records
    handoffs = store.load(kinds=("handoff",)).records
    # The decision appended under a lesson's id comes before patterns.yaml: the lesson wins.
    assert whole.duplicate_ids and all(whole.records[key].kind == "lesson" for key in lessons)
    assert any(key in whole.duplicate_ids for key in lessons)
    # The session file under a pattern's id comes last: the handoff wins, and no pattern is left under it.
    taken = [key for key, r in handoffs.items() if r.raw.get("handoff", {}).get("message") == "a handoff under a pattern's id"]
    assert len(taken) == 1 and whole.records[taken[0]].kind == "handoff"
    assert taken[0] not in store.load(kinds=("pattern",)).records


def test_the_files_before_the_first_wanted_one_are_not_read(demo_with_collisions: Path) -> None:
    store = Store(demo_with_collisions)
    assert any(w.path.name == "decisions.jsonl" for w in store.load().warnings)  # the malformed line
    partial = store.load(kinds=("handoff", "lesson"))
    assert not any(w.path.name == "decisions.jsonl" for w in partial.warnings)
    assert partial.of_kind("handoff") and partial.of_kind("lesson")


def test_an_unknown_kind_is_a_usage_error(demo_with_collisions: Path) -> None:
    with pytest.raises(UsageError, match="unknown record types"):
        Store(demo_with_collisions).load(kinds=("decision", "memo"))

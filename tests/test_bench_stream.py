"""The prompt stream section of the benchmark harness: its data, its replay and its measures."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benchmarks import stream
from benchmarks.stream import Observed, Outcome, Turn


def test_every_author_group_holds_sessions_of_ten_prompts_whose_relevant_ids_exist(tmp_path: Path) -> None:
    turns = stream.load_groups()
    groups = Counter(t.author for t in turns)
    assert len(groups) >= 5 and all(count >= 200 for count in groups.values())
    assert {t.store for t in turns} >= {"demo", "git", "cpython"}
    for group in groups:  # each independent group is one store's, in sessions of ten turns in order
        rows = [t for t in turns if t.author == group]
        sessions = Counter(t.session for t in rows)
        assert set(sessions.values()) == {10}, group
        assert 0.25 < sum(1 for t in rows if t.relevant) / len(rows) < 0.45, group
        assert all((t.kind == "answerable") == bool(t.relevant) for t in rows), group
    from lore import Lore

    demo_ids = {r.id for r in Lore(data_dir=Path(__file__).resolve().parent.parent / "data",
                                   index_dir=tmp_path / "index").records()}  # fmt: skip
    assert all(set(t.relevant) <= demo_ids for t in turns if t.store == "demo")


def test_the_stream_holds_80_sessions_of_10_prompts_split_by_session() -> None:
    turns = stream.load_turns()
    assert len(turns) == 800
    sessions = Counter(t.session for t in turns)
    assert len(sessions) == 80 and set(sessions.values()) == {10}
    assert Counter(t.split for t in turns) == {"dev": 400, "test": 400}
    assert {t.store for t in turns} == {"demo", "git"}
    for session in sessions:  # a session is wholly dev or wholly test, its project one
        assert len({(t.split, t.project) for t in turns if t.session == session}) == 1
    answerable = sum(1 for t in turns if t.relevant)
    assert 0.25 < answerable / len(turns) < 0.45  # most prompts have no relevant memory
    assert all((t.kind == "answerable") == bool(t.relevant) for t in turns)


def outcome(session: str, relevant: tuple[str, ...], injected: tuple[str, ...], chars: int, earlier: bool = False) -> Outcome:
    turn = Turn("demo", session, 1, "p", "a prompt", "answerable" if relevant else "task", relevant, "dev")
    return Outcome(turn, injected, chars, earlier)


def test_measures_count_hits_in_context_empties_and_characters() -> None:
    figures = stream.measures([
        outcome("s", ("a",), ("a", "b"), 300),            # hit, strict
        outcome("s", ("a",), (), 0, earlier=True),         # hit in context only
        outcome("s", ("c",), ("d",), 200),                 # miss
        outcome("s", (), (), 0),                           # unanswerable, left empty
        outcome("s", (), ("e",), 100),                     # unanswerable, injected
    ])  # fmt: skip
    assert (figures["hit"], figures["hit_strict"], figures["left_empty"]) == (0.667, 0.333, 0.5)
    assert figures["precision"] == 0.25 and figures["chars_per_prompt"] == 120.0
    assert figures["items_per_block"] == 1.33 and figures["blocks"] == 3


def test_a_quick_run_replays_the_demo_sessions_through_the_hooks_own_steps(tmp_path: Path) -> None:
    turns = [t for t in stream.load_turns() if t.session in ("demo-s01", "demo-s02")]
    stores = stream.observe(Path("/nonexistent"), tmp_path, turns=turns)  # the demo store needs no shared data
    observed: list[Observed] = stores.observed["demo"]
    assert [o.turn.session for o in observed] == [t.session for t in turns]
    for path in stream.PATHS:
        lore, always = (stream.measures(stream.replay(observed, path, p)) for p in ("lore", "always"))
        assert lore["left_empty"] >= always["left_empty"]  # the decision only ever removes blocks
        assert lore["chars_per_prompt"] <= always["chars_per_prompt"]
        assert always["items_per_block"] <= 5
    # Within a session no memory is handed in full twice unless it is again a sure first hit, and none
    # is pointed to twice (a pointer may come again in full).
    replayed = stream.replay(observed, "warm", "lore")
    handed: dict[str, tuple[set[str], set[str]]] = {}
    for item in replayed:
        full, pointed = handed.setdefault(item.turn.session, (set(), set()))
        assert [i for i in item.full if i in full] in ([], list(item.full[:1]))
        assert not [i for i in item.pointers if i in full or i in pointed]
        full.update(item.full)
        pointed.update(item.pointers)


def test_the_hit_margin_pairs_each_prompt_of_one_policy_with_the_others() -> None:
    from benchmarks.matrix import paired_margin

    lore = [outcome("s", ("a",), ("a",), 1), outcome("s", ("b",), (), 0), outcome("s", (), (), 0)]
    always = [outcome("s", ("a",), ("a",), 1), outcome("s", ("b",), ("b",), 1), outcome("s", (), ("x",), 1)]
    assert stream.hits_of(lore) == [1.0, 0.0] and stream.hits_of(always) == [1.0, 1.0]
    margin = paired_margin(stream.hits_of(lore), stream.hits_of(always))
    assert margin["diff"] == -0.5 and margin["lo"] <= -0.5 <= margin["hi"] <= 0.0

"""The prompt stream section of the benchmark harness: its data, its replay and its measures."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benchmarks import stream
from benchmarks.stream import Observed, Outcome, Turn
from lore.rank import inject


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
    # Within a session no memory is handed twice unless it is again a sure first hit.
    replayed = stream.replay(observed, "warm", "lore")
    seen: dict[str, set[str]] = {}
    for item in replayed:
        earlier = seen.setdefault(item.turn.session, set())
        repeats = [i for i in item.injected if i in earlier]
        assert repeats in ([], list(item.injected[:1]))
        earlier.update(item.injected)
    # A single-input baseline's gate opens exactly where that input reaches its threshold.
    from lore.context import decide

    for seen in observed:
        if seen.warm is None or not seen.warm.hits:
            continue
        for threshold in (-1.0, 0.5, 2.0):
            settings = stream.single_evidence(inject.DEFAULT_SETTINGS, "top_cosine", "warm", threshold)
            decision = decide(seen.warm, project=seen.turn.project, null=seen.null, settings=settings)
            assert decision.inject == (decision.gate_inputs["top_cosine"] >= threshold) or decision.reason.startswith("only")
    baselines = stream.single_evidence_baselines(stores)
    for path in (*stream.PATHS, "cold_lexical"):
        rows = baselines[path]["rows"]
        assert "shipped" in rows and "log_terms" in rows
        for name, row in rows.items():  # each input's dev operating point keeps the hit within 5 points
            assert name == "shipped" or row["dev"]["hit"] + 1e-9 >= baselines[path]["always"]["dev"] - stream.MAX_HIT_DROP


def test_the_hit_margin_pairs_each_prompt_of_one_policy_with_the_others() -> None:
    from benchmarks.matrix import paired_margin

    lore = [outcome("s", ("a",), ("a",), 1), outcome("s", ("b",), (), 0), outcome("s", (), (), 0)]
    always = [outcome("s", ("a",), ("a",), 1), outcome("s", ("b",), ("b",), 1), outcome("s", (), ("x",), 1)]
    assert stream.hits_of(lore) == [1.0, 0.0] and stream.hits_of(always) == [1.0, 1.0]
    margin = paired_margin(stream.hits_of(lore), stream.hits_of(always))
    assert margin["diff"] == -0.5 and margin["lo"] <= -0.5 <= margin["hi"] <= 0.0

"""The injection decision (lore.rank.inject): what reaches an agent's prompt, and when nothing does."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from lore import Lore, analysis, capture, context
from lore.agent.hook import injected_before, run_prompt_hook
from lore.agent.prompt import NOTHING, Handed, cold_context_for_prompt, context_for_prompt
from lore.capture import WriteOptions
from lore.index.manager import IndexManager
from lore.paths import Locations
from lore.rank import inject, null
from lore.search import SearchSession
from lore.store import Store
from tests.conftest import resolve_locations, settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PLAIN = WriteOptions(check_duplicates=False)

# Written for these tests (none comes from an evaluation set): two prompts no demo memory
# answers, and two the demo store's payment decisions answer.
OFF_TOPIC = ["in SwiftUI how do I animate a sheet presentation with a spring curve?",
             "write a limerick about kubernetes"]  # fmt: skip
ON_TOPIC = {
    "we keep getting duplicate charges when the stripe call times out and the client retries, what did we decide?":
        "dec-d0a58788",
    "what's our policy for exponential backoff with jitter when calling payment providers": "dec-d0a58788",
}  # fmt: skip


@pytest.fixture
def demo(demo_indexed: Locations) -> Locations:
    return demo_indexed


@pytest.fixture
def billing_cwd(tmp_path: Path) -> str:
    path = tmp_path / "work" / "billing-api"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


# -- the decision, as a pure function ---------------------------------------------------------

hit_ids = st.lists(st.sampled_from([f"dec-{i:08x}" for i in range(12)]), min_size=0, max_size=6, unique=True)
words = st.lists(st.sampled_from(["retry", "backoff", "jitter", "payment", "charge", "stripe", "webhook", "queue", "postgres", "swift", "css"]),
                 min_size=0, max_size=8)  # fmt: skip


def make_hits(ids: list[str], texts: list[list[str]], cosine: bool) -> list[inject.Hit]:
    return [inject.Hit(rid, "billing-api" if n % 2 else "infra", " ".join(texts[n % len(texts)]) if texts else "",
                       " ".join(reversed(texts[n % len(texts)])) if texts else "", 0.1 * n if cosine else None)
            for n, rid in enumerate(ids)]  # fmt: skip


@hypothesis_settings(max_examples=150, deadline=None)
@given(ids=hit_ids, texts=st.lists(words, min_size=1, max_size=4), query=words, seen=hit_ids, cosine=st.booleans())
def test_the_decision_chooses_hits_in_rank_order_and_never_a_seen_one_unless_first_and_sure(
        ids: list[str], texts: list[list[str]], query: list[str], seen: list[str], cosine: bool) -> None:  # fmt: skip
    hits = make_hits(ids, texts, cosine)
    idf = {w: 1.0 + len(w) / 3 for w in ["retri", "backoff", "jitter", "payment", "charg", "stripe", "webhook", "queue", "postgr", "swift", "css"]}
    pointed = [i for i in ids[::2] if i not in seen]
    decision = inject.decide(hits, " ".join(query), idf, project="billing-api", seen=seen, pointed=pointed)
    assert 0.0 <= decision.gate <= 1.0
    assert all(0.0 <= j.probability <= 1.0 for j in decision.judged)
    order = [h.id for h in hits]
    assert list(decision.chosen) == [i for i in order if i in decision.chosen]  # rank order, no repeats
    assert decision.inject == bool(decision.chosen)
    for position, rid in enumerate(decision.chosen):
        if rid in seen:
            assert rid == order[0] and position == 0 and decision.gate >= inject.DEFAULT_SETTINGS.repeat_threshold
    # Pointers: the other first hits in rank order, never a full item, a seen one or one pointed to before.
    assert list(decision.pointers) == [i for i in order if i in decision.pointers]
    assert len(decision.pointers) <= inject.DEFAULT_SETTINGS.max_pointers
    assert not set(decision.pointers) & (set(decision.chosen) | set(seen) | set(pointed))
    assert len(decision.chosen) <= inject.DEFAULT_SETTINGS.max_full
    assert decision.tier == ("full" if decision.chosen else "pointer" if decision.pointers else "none")
    # Raising the full threshold can only take full items away; raising the pointer one empties the block.
    stricter = inject.DEFAULT_SETTINGS._replace(warm_gate_threshold=0.99, cold_gate_threshold=0.99)
    assert set(inject.decide(hits, " ".join(query), idf, project="billing-api", seen=seen, pointed=pointed,
                             settings=stricter).chosen) <= set(decision.chosen)  # fmt: skip
    closed = inject.DEFAULT_SETTINGS._replace(warm_pointer_threshold=1.01, cold_pointer_threshold=1.01)
    assert inject.decide(hits, " ".join(query), idf, project="billing-api", settings=closed).tier == "none"
    # Switched off, the decision passes every hit through.
    off = inject.decide(hits, " ".join(query), idf, settings=inject.DEFAULT_SETTINGS._replace(enabled=False))
    assert list(off.chosen) == order


@given(st.dictionaries(st.sampled_from(inject.WARM_EVIDENCE), st.tuples(st.floats(-5, 5), st.floats(0.01, 5)), min_size=1))
def test_null_evidence_round_trips_through_json(part: dict[str, tuple[float, float]]) -> None:
    evidence = inject.NullEvidence({**inject.DEFAULT_NULL.warm, **part}, {**inject.DEFAULT_NULL.cold, **part})
    assert inject.NullEvidence.from_json(json.loads(json.dumps(evidence.to_json()))) == evidence


def test_an_evidence_a_null_file_lacks_keeps_the_defaults_scale() -> None:
    # A file measured before the passage evidence existed: read on (0, 1) its z-scores were the raw cosines.
    older = inject.NullEvidence.from_json({"warm": {"cosine": [0.5, 0.1]}, "cold": {}})
    assert older.warm["cosine"] == (0.5, 0.1) and older.warm["passage"] == inject.DEFAULT_NULL.warm["passage"]
    assert older.cold == inject.DEFAULT_NULL.cold


sentences = st.lists(st.text(st.sampled_from("abc xyz.!?;\n"), max_size=40), max_size=12)


@given(title=st.text(st.sampled_from("ab cd"), max_size=20), body=sentences, limit=st.integers(0, 10))
def test_a_records_passages_are_its_title_then_its_sentences_of_three_words(title: str, body: list[str], limit: int) -> None:
    content = "\n".join([title, *body])
    found = analysis.passages(title, content, limit)
    clean_title = " ".join(title.split())
    assert found[:1] == ([clean_title] if clean_title else found[:1])
    rest = found[1:] if clean_title else found
    assert len(rest) <= limit and all(len(p.split()) >= analysis.MIN_PASSAGE_WORDS for p in rest)
    assert all(p == " ".join(p.split()) and p in " ".join(content.split()) for p in rest)


def test_passages_split_at_sentence_ends_and_drop_fragments() -> None:
    content = "Use Redis for locks\nWe tried advisory locks. They deadlocked; twice. It held under load!\nok"
    assert analysis.passages("Use Redis for locks", content) == [
        "Use Redis for locks", "We tried advisory locks.", "It held under load!"]


def test_the_fitted_weights_match_the_features() -> None:
    s = inject.DEFAULT_SETTINGS
    for vectors, gate, item in ((True, s.warm_gate, s.warm_item), (False, s.cold_gate, s.cold_item)):
        assert len(gate) == len(inject.gate_features(vectors)) and len(item) == len(inject.item_features(vectors))


def test_a_store_without_null_evidence_uses_the_default_and_a_damaged_file_is_ignored(demo: Locations) -> None:
    directory = IndexManager(demo).current_dir()
    assert directory is not None and null.load(directory) == inject.DEFAULT_NULL
    session = SearchSession(demo)
    assert null.ensure(session) is True and null.ensure(session) is False  # measured once per generation
    fresh = SearchSession(demo)
    assert null.ensure(fresh) is False and fresh.reader is None  # known from the file: the index is not even opened
    measured = null.load(directory)
    assert measured != inject.DEFAULT_NULL and set(measured.warm) == set(inject.WARM_EVIDENCE)
    (directory / null.FILE).write_text("{not json")
    assert null.load(directory) == inject.DEFAULT_NULL


def test_the_null_evidence_is_read_once_per_file_version(demo: Locations) -> None:
    """The warm helper asks for it on every prompt: a stat, not a read, while the file is the one it read."""
    import os

    from lore.store.fileio import atomic_write

    directory = IndexManager(demo).current_dir()
    assert directory is not None
    path = directory / null.FILE
    atomic_write(path, json.dumps(inject.DEFAULT_NULL.to_json()).encode())
    first = null.load(directory)
    stat = path.stat()
    path.write_bytes(b"x" * stat.st_size)  # the same file, size and time: not read again
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert null.load(directory) == first
    other = inject.NullEvidence(first.warm, {name: (mean + 1.0, spread) for name, (mean, spread) in first.cold.items()})
    atomic_write(path, json.dumps(other.to_json()).encode())  # a new version: read
    assert null.load(directory) == other != first


# -- end to end on the demo store ----------------------------------------------------------------


def test_prompts_no_memory_answers_get_nothing_on_either_path(demo: Locations, billing_cwd: str) -> None:
    session = SearchSession(demo)
    null.ensure(session)
    for prompt in OFF_TOPIC:
        assert context_for_prompt(session, prompt, billing_cwd, 1500, None) == NOTHING
        assert cold_context_for_prompt(prompt, billing_cwd, 1500, demo) in (NOTHING, None)


def test_asked_a_young_store_answers_unless_the_search_sees_a_gap(data_dir: Path) -> None:
    # One record: "sessions" is the store's commonest word, and the gate scored 0.005 for the first question.
    memory = Lore(project="billing-api")
    memory.init()
    memory.add("decision", "Use Postgres for sessions", rationale="Transactions with the orders")
    for question in ("where do sessions live?", "postgres"):
        assert "Use Postgres for sessions" in memory.context(question, budget_tokens=300).text, question
    for question in ("how do I center a div with flexbox", "write a haiku about code review"):
        block = memory.context(question, budget_tokens=300)  # the best candidate, as a pointer under the gap line
        assert block.evidence_gap and (not block.items or block.text.startswith(context.GAP_LINE)), question
        assert all(item.tier == "pointer" for item in block.items), question
    response = memory.search("where do sessions live?")
    assert response.records == 1
    # The hook, which nobody asked, keeps the gate: a young store's idf is no evidence of a match.
    hook_decision = context.decide(response, project="billing-api")
    asked_decision = context.decide(response, project="billing-api", asked=True)
    assert not hook_decision.inject and asked_decision.inject


def test_a_store_too_small_for_a_null_keeps_the_default_and_answers_on_topic_prompts(data_dir: Path) -> None:
    # 23 records: the null prompts match almost no word, so a measured null had a spread near 0,
    # z-scores of 15 and more, and the gate of an on-topic prompt fell to 0.01.
    store = Store(data_dir, actor="test")
    store.init()
    plain = WriteOptions(check_duplicates=False)
    capture.remember(store, "Wrap payment-provider calls in exponential backoff with full jitter", project="acme-api",
                     rationale="A Stripe degradation turned synchronized attempts into a thundering herd.",
                     options=plain)  # fmt: skip
    capture.learn(store, "Idempotency keys for payment calls", project="acme-api",
                  solution="Send a stable idempotency key with every charge so a second attempt cannot double-charge",
                  options=plain)  # fmt: skip
    for i in range(21):
        capture.observe(store, f"Unrelated note {i} about office plants and lunch menus", project="other", options=plain)
    locations = resolve_locations(data_dir)
    IndexManager(locations).build()
    session = SearchSession(locations)
    assert null.MIN_RECORDS > 23
    assert null.measure(session) == inject.DEFAULT_NULL
    null.ensure(session)
    handed = context_for_prompt(session, "how do we keep charges idempotent when payment calls are retried", None, 1500,
                                None)  # fmt: skip
    assert handed.ids and "Idempotency keys" in handed.text
    assert context_for_prompt(session, "how do I center a div with flexbox", None, 1500, None) == NOTHING


@given(st.floats(-1e6, 1e6), st.floats(-10, 10), st.floats(0, 10))
def test_the_evidence_stays_within_the_range_the_scores_were_fitted_on(value: float, mean: float, spread: float) -> None:
    z = inject.normalise({"coverage": value}, {"coverage": (mean, spread)})["coverage"]
    assert inject.Z_RANGE[0] <= z <= inject.Z_RANGE[1]
    if spread > 0 and inject.Z_RANGE[0] < (value - mean) / spread < inject.Z_RANGE[1]:
        assert z == pytest.approx((value - mean) / spread)


def test_prompts_a_memory_answers_get_it_on_both_paths(demo: Locations, billing_cwd: str) -> None:
    session = SearchSession(demo)
    null.ensure(session)
    for prompt, target in ON_TOPIC.items():
        handed = context_for_prompt(session, prompt, billing_cwd, 1500, None)
        assert target in handed.ids and target in handed.text and len(handed.text) <= 1500
        answer = cold_context_for_prompt(prompt, billing_cwd, 1500, demo)
        assert answer is not None and target in answer.ids
        assert 1 <= len(handed.ids) <= 6 and len(handed.pointers) <= 3


def hook(prompt: str, session_id: str, cwd: str) -> tuple[str, tuple[str, ...]]:
    """The block the hook hands, and every id the session has been handed so far (full, then pointers)."""
    out = io.StringIO()
    event = json.dumps({"session_id": session_id, "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    assert run_prompt_hook([], stdin=io.StringIO(event), stdout=out) == 0
    text = json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"] if out.getvalue() else ""
    full, pointers = injected_before(session_id, settings())
    return text, full + pointers


def test_a_session_is_not_handed_the_same_memories_twice(demo: Locations, billing_cwd: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("LORE_HOOK_COLD", "full")
    monkeypatch.setenv("LORE_HOOK_DEADLINE_MS", "20000")
    # The policy question: the other one's gate is 0.19 against the built-in null (this index has
    # no measured one) since the refit on 24 dev sessions; it passes with the store's own null.
    prompt = "what's our policy for exponential backoff with jitter when calling payment providers"
    first, seen = hook(prompt, "sess-a", billing_cwd)
    assert first and seen
    again, seen_after = hook(prompt + " Any update?", "sess-a", billing_cwd)
    repeated = [rid for rid in seen if rid in again]
    # Only the block's first item may come again (when the gate is sure of it); the second
    # prompt's first hit need not be the first prompt's.
    shown = re.findall(r"\(\S+ ([\w-]+), conf ", again)  # the compact format: "(decision dec-..., conf 0.9, 3mo)"
    assert repeated in ([], shown[:1]), (repeated, shown)
    assert set(seen) <= set(seen_after)
    other, _ = hook(prompt, "sess-b", billing_cwd)  # another session starts afresh
    assert other == first


# -- quotes are a hint -------------------------------------------------------------------------


def test_a_quoted_title_spelled_differently_still_finds_the_memory(data_dir: Path, billing_cwd: str) -> None:
    store = Store(data_dir, actor="test")
    store.init()
    target = capture.observe(store, "Nate is playing Xenoblade Chronicle 3, a JRPG with a huge open world",
                             project="games", options=PLAIN).record.id  # fmt: skip
    capture.observe(store, "Caroline adopted a second dog from the shelter in May", project="games", options=PLAIN)
    question = 'What is the type of game "Xenoblade Chronicles" that Nate is playing?'
    memory = Lore(data_dir=data_dir, project="games")
    assert target in [hit.id for hit in memory.search(question).hits]
    assert target in [item.id for item in memory.context(question).items]


def test_a_session_start_removes_the_state_of_sessions_long_over(data_dir: Path) -> None:
    import os
    import time

    from lore.agent.hook import SESSION_STATE_KEEP_S, prune_session_state, remember_injected
    from lore.paths import state_dir

    remember_injected("old-session", ((), ()), Handed("text", ("dec-1",)), settings())
    remember_injected("new-session", ((), ()), Handed("text", ("dec-2", "dec-3"), ("dec-3",)), settings())
    old = state_dir(settings()) / "injected" / "old-session.json"
    long_ago = time.time() - SESSION_STATE_KEEP_S - 60
    os.utime(old, (long_ago, long_ago))
    assert prune_session_state(settings()) == 1
    assert not old.exists() and injected_before("new-session", settings()) == (("dec-2",), ("dec-3",))


def test_null_evidence_for_a_generation_removed_meanwhile_makes_no_directory_again(demo: Locations) -> None:
    # A racing build published a newer generation and removed this one while its null was measured:
    # writing the null must not bring the directory back (it was left behind beside the live one).
    import shutil

    session = SearchSession(demo)
    directory = session.open("ignore").directory
    shutil.rmtree(directory)
    assert null.ensure(session) is False
    assert not directory.exists()

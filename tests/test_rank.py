"""Ranking stages as pure functions: fusion, decay, boosts, MMR, evidence gap, intent, budgets."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lore.context import ContextItem, render_items
from lore.rank import fusion, intent
from lore.rank.diversity import mmr
from lore.rank.gap import assess
from lore.rank.query import content_words, hyde_document, key_phrases, scrub_query
from lore.rank.stages import (
    Candidate,
    QueryContext,
    StageSettings,
    apply_stages,
    decay,
    decay_stage,
    half_life_days,
    rank,
)
from lore.render.text import shorten
from tests.conftest import resolve_locations

DAY = 86400.0
NOW = 1_800_000_000.0

# -- fusion -----------------------------------------------------------------------------


def test_score_fusion_matches_a_hand_computed_example() -> None:
    rankings = {"bm25": ["a", "b"], "vector": ["b", "c"]}
    scores = {"bm25": {"a": 10.0, "b": 5.0}, "vector": {"a": 0.2, "b": 0.8, "c": 0.4}}
    fused = fusion.score_fusion(rankings, scores, {"bm25": 1.0, "vector": 0.5})
    # a: 1.0 * 10/10 + 0.5 * 0.2/0.8; b: 1.0 * 5/10 + 0.5 * 0.8/0.8; c: no BM25 score, 0.5 * 0.4/0.8
    assert {k: round(v[0], 6) for k, v in fused.items()} == {"a": 1.125, "b": 1.0, "c": 0.25}
    assert fused["a"][1] == {"bm25": 1} and fused["b"][1] == {"bm25": 2, "vector": 1}
    assert fused["a"][2] == pytest.approx({"bm25": 1.0, "vector": 0.125})
    assert fusion.max_score_fusion(["bm25", "vector"], {"bm25": 1.0, "vector": 0.5}) == 1.5


@settings(max_examples=60)
@given(st.dictionaries(st.sampled_from(["bm25", "vector", "hyde"]),
                       st.dictionaries(st.sampled_from("abcdefgh"), st.floats(-1, 50), min_size=1, max_size=6),
                       min_size=1),
       st.floats(0, 2), st.floats(0, 2))  # fmt: skip
def test_score_fusion_is_bounded_and_monotone(channel_scores: dict[str, dict[str, float]], w1: float, w2: float) -> None:
    weights = {"bm25": 1.0, "vector": w1, "hyde": w2}
    rankings = {ch: sorted(values, key=lambda k: -values[k]) for ch, values in channel_scores.items()}
    fused = fusion.score_fusion(rankings, channel_scores, weights)
    ceiling = fusion.max_score_fusion(list(rankings), weights)
    for score, _, shares in fused.values():
        assert 0.0 <= score <= ceiling + 1e-9
        assert all(0.0 <= share <= weights[ch] + 1e-9 for ch, share in shares.items())
    # Raising one record's score in one channel never lowers its fused score.
    channel = next(iter(channel_scores))
    item = rankings[channel][-1]
    raised = {ch: dict(values) for ch, values in channel_scores.items()}
    raised[channel][item] = raised[channel][item] + 1.0
    again = fusion.score_fusion(rankings, raised, weights)
    assert again[item][0] >= fused[item][0] - 1e-9


def test_a_subnormal_score_takes_at_most_its_channels_weight() -> None:
    # Found by the property above: 1.5 * 5e-324 / 5e-324 is 2.0 (the product rounds up to 1e-323).
    fused = fusion.score_fusion({"vector": ["a"]}, {"vector": {"a": 5e-324}}, {"bm25": 1.0, "vector": 1.5})
    assert fused["a"][0] == 1.5 and fused["a"][2] == {"vector": 1.5}


def test_rrf_matches_the_formula() -> None:
    fused = fusion.rrf({"vector": ["a", "b"], "bm25": ["b", "c"]}, {"vector": 1.0, "bm25": 0.6})
    assert fused["a"][0] == pytest.approx(1.0 / 61)
    assert fused["b"][0] == pytest.approx(1.0 / 62 + 0.6 / 61)
    assert fused["c"][0] == pytest.approx(0.6 / 62)
    assert fused["b"][1] == {"vector": 2, "bm25": 1}


@given(
    rank_a=st.integers(1, 200), rank_b=st.integers(1, 200),
    weight=st.floats(0.01, 5.0), other=st.integers(1, 200),
)  # fmt: skip
def test_rrf_is_monotone_in_each_rank(rank_a: int, rank_b: int, weight: float, other: int) -> None:
    assume(rank_a < rank_b)

    def score(rank: int) -> float:
        rankings = {"x": ["pad"] * (rank - 1) + ["doc"], "y": ["pad2"] * (other - 1) + ["doc"]}
        return fusion.rrf(rankings, {"x": weight, "y": 1.0})["doc"][0]

    assert score(rank_a) > score(rank_b)


@given(st.dictionaries(st.sampled_from(["bm25", "vector", "hyde", "graph"]),
                       st.lists(st.sampled_from(list("abcdefgh")), max_size=8), max_size=4))  # fmt: skip
def test_rrf_never_exceeds_max_and_counts_each_channel_once(rankings: dict[str, list[str]]) -> None:
    fused = fusion.rrf(rankings)
    best = fusion.max_rrf(list(rankings))
    for score, ranks in fused.values():
        assert 0 <= score <= best + 1e-12  # 0 only for an item of zero-weight channels alone
        assert all(r >= 1 for r in ranks.values())


# -- decay and boosts -----------------------------------------------------------------------


@given(st.floats(0, 5000), st.floats(0, 5000), st.floats(1, 1000))
def test_decay_is_monotone_in_age(a: float, b: float, half_life: float) -> None:
    assume(a < b)
    assert decay(a, half_life) >= decay(b, half_life)
    assert 0 <= decay(b, half_life) <= 1


def test_decay_formula_and_tiers() -> None:
    assert decay(30, 30) == pytest.approx(0.5)
    s = StageSettings()
    base = Candidate(id="d", row=0, kind="decision", importance=3)
    assert half_life_days(base, s) == 30
    assert half_life_days(base.evolve(importance=5), s) == 300
    assert half_life_days(base.evolve(pinned=True), s) == 300
    assert half_life_days(base.evolve(kind="observation"), s) == 10


def _cand(i: int, **kw) -> Candidate:
    defaults = dict(id=f"r{i}", row=i, kind="decision", relevance=0.5, time=NOW - 10 * DAY)
    defaults.update(kw)
    return Candidate(**defaults)  # type: ignore[arg-type]


def test_evolve_is_replace_without_its_cost() -> None:
    base = _cand(1, factors={"confidence": 0.8}, tags=("a",))
    changed = base.evolve(coverage=0.5, relevance=0.25)
    assert changed == _cand(1, factors={"confidence": 0.8}, tags=("a",), coverage=0.5, relevance=0.25)
    assert changed != base and "coverage=0.5" in repr(changed)
    assert (base.coverage, base.relevance) == (None, 0.5)  # the original is untouched
    assert base.with_factor("decay", 0.9).factors == {"confidence": 0.8, "decay": 0.9} and base.factors == {"confidence": 0.8}
    with pytest.raises(TypeError, match="coverag"):
        base.evolve(coverag=1.0)
    with pytest.raises(AttributeError, match="immutable"):
        base.relevance = 1.0  # type: ignore[misc]


def test_decay_stage_prefers_recent_and_keeps_old_relevant_visible() -> None:
    ctx = QueryContext(now=NOW)
    fresh, old = decay_stage([_cand(1, time=NOW), _cand(2, time=NOW - 900 * DAY)], ctx)
    assert fresh.factors["decay"] == pytest.approx(1.0)
    assert old.factors["decay"] == pytest.approx(0.7, abs=1e-6)  # capped penalty: never buried entirely


@settings(max_examples=200)
@given(
    relevance=st.floats(0.01, 1.0), confidence=st.floats(0, 1), importance=st.integers(1, 5),
    age=st.floats(0, 2000), count=st.integers(0, 500), project=st.booleans(),
)  # fmt: skip
def test_boosts_never_reorder_equal_evidence_the_wrong_way(relevance, confidence, importance, age, count, project) -> None:
    ctx = QueryContext(now=NOW, project="p", access={"favoured": (count + 1, NOW)}, intents=("deploy",))
    common = dict(relevance=relevance, confidence=confidence, importance=importance, time=NOW - age * DAY, project="other")
    plain = _cand(1, **common)
    favoured_cases = [
        plain.evolve(id="favoured", row=2),  # more access
        plain.evolve(id="x2", row=3, project="p" if project else "other"),  # current project
        plain.evolve(id="x3", row=4, importance=min(5, importance + 1)),  # more important
        plain.evolve(id="x4", row=5, tags=("deploy",)),  # intent overlap
        plain.evolve(id="x5", row=6, time=plain.time + DAY),  # newer
    ]
    scored = {c.id: c.score for c in apply_stages([plain, *favoured_cases], ctx)}
    for case in favoured_cases:
        assert scored[case.id] >= scored[plain.id] - 1e-12


def _factor(stage_name: str, candidate: Candidate, ctx: QueryContext) -> float | None:
    (scored,) = apply_stages([candidate], ctx._replace(disabled=frozenset(
        n for n in ("status", "decay", "reinforcement", "project", "intent", "type", "coverage")
        if n != stage_name)))  # fmt: skip
    return scored.factors.get(stage_name)


@pytest.mark.parametrize(("stage", "candidate", "ctx", "expected"), [
    # reinforcement: never returned -> 1.0; 50+ returns just now -> the +15% and +10% caps
    ("reinforcement", _cand(1), QueryContext(now=NOW), 1.0),
    ("reinforcement", _cand(1), QueryContext(now=NOW, access={"r1": (50, NOW)}), 1.25),
    ("reinforcement", _cand(1), QueryContext(now=NOW, access={"r1": (5000, NOW)}), 1.25),
    ("reinforcement", _cand(1), QueryContext(now=NOW, access={"r1": (50, NOW - 7 * DAY)}), 1.20),
    ("reinforcement", _cand(1), QueryContext(now=NOW, access={"r1": (1, NOW - 700 * DAY)}),
     1.0 + 0.15 * math.log1p(1) / math.log1p(50)),
    # project: x1.5 for the current project, soft (others keep x1.0), no factor without a project
    ("project", _cand(1, project="p"), QueryContext(now=NOW, project="p"), 1.5),
    ("project", _cand(1, project="q"), QueryContext(now=NOW, project="p"), 1.0),
    ("project", _cand(1, project="p"), QueryContext(now=NOW), None),
    # intent: 1 + 0.25 x the share of --intent values found in tags and intent chain
    ("intent", _cand(1, tags=("Deploy",), intent_chain=("rollback",)), QueryContext(now=NOW, intents=("deploy", "rollback")), 1.25),
    ("intent", _cand(1, tags=("deploy",)), QueryContext(now=NOW, intents=("deploy", "rollback")), 1.125),
    ("intent", _cand(1), QueryContext(now=NOW, intents=("deploy",)), 1.0),
    # type: the classified intent's preference for the record's kind, 1.0 for kinds it does not name
    ("type", _cand(1, kind="failure"), QueryContext(now=NOW, type_preferences={"failure": 1.3}), 1.3),
    ("type", _cand(1, kind="decision"), QueryContext(now=NOW, type_preferences={"failure": 1.3}), 1.0),
    ("type", _cand(1, kind="decision"), QueryContext(now=NOW), None),
    # coverage: (0.8 + 0.2 x the share of the query's idf mass the record holds) ** (8 x 0.5),
    # i.e. that factor ** 0.5 on the scale of the fused score; none without BM25
    ("coverage", _cand(1, coverage=1.0), QueryContext(now=NOW), 1.0),
    ("coverage", _cand(1, coverage=0.0), QueryContext(now=NOW), 0.8 ** 4),
    ("coverage", _cand(1, coverage=0.5), QueryContext(now=NOW), 0.9 ** 4),
    ("coverage", _cand(1), QueryContext(now=NOW), None),
    # decay: at most 30% of the score, half of that for a record without a time
    ("decay", _cand(1, time=NOW), QueryContext(now=NOW), 1.0),
    ("decay", _cand(1, time=NOW - 30 * DAY), QueryContext(now=NOW), 0.85),
    ("decay", _cand(1, time=NOW - 3000 * DAY), QueryContext(now=NOW), 0.7),
    ("decay", _cand(1, time=None), QueryContext(now=NOW), 0.85),
    ("decay", _cand(1, time=NOW + 5 * DAY), QueryContext(now=NOW), 1.0),
])  # fmt: skip
def test_each_stage_factor(stage: str, candidate: Candidate, ctx: QueryContext, expected: float | None) -> None:
    factor = _factor(stage, candidate, ctx)
    if expected is None:
        assert factor is None
    else:
        assert factor == pytest.approx(expected, abs=1e-9)


def test_superseded_hidden_unless_all_then_marked_lower() -> None:
    active, superseded = _cand(1), _cand(2, status="superseded", relevance=0.9)
    assert [c.id for c in rank([active, superseded], QueryContext(now=NOW))] == ["r1"]
    shown = rank([active, superseded], QueryContext(now=NOW, include_all=True))
    assert {c.id for c in shown} == {"r1", "r2"}
    assert next(c for c in shown if c.id == "r2").factors["status"] == 0.5


def test_stages_are_switchable_and_intent_renormalises_away() -> None:
    ctx = QueryContext(now=NOW, project="p", disabled=frozenset({"decay", "project"}))
    (c,) = apply_stages([_cand(1, project="p")], ctx)
    assert "decay" not in c.factors and "project" not in c.factors and "intent" not in c.factors


def test_threshold_drops_noise() -> None:
    # The floor is on the unsharpened scale: relevance 0.05 ** 4 is a fused share of 0.05.
    settings = StageSettings(min_score=0.2)
    ctx = QueryContext(now=NOW, settings=settings)
    sharp = settings.relevance_sharpness
    kept = rank([_cand(1, relevance=0.9**sharp), _cand(2, relevance=0.05**sharp), _cand(3, relevance=0.3**sharp)], ctx)
    assert [c.id for c in kept] == ["r1", "r3"]


# -- MMR --------------------------------------------------------------------------------------


def _unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_mmr_lambda_extremes_and_no_duplicates() -> None:
    cands = [_cand(i, relevance=1.0 - i * 0.1) for i in range(4)]
    vecs = np.stack([_unit([1, 0, 0]), _unit([0.99, 0.1, 0]), _unit([0, 1, 0]), _unit([0, 0, 1])])
    by_relevance = mmr(cands, vecs, 3, lam=1.0, collapse_at=1.1)
    assert [c.id for c in by_relevance] == ["r0", "r1", "r2"]
    diverse = mmr(cands, vecs, 3, lam=0.3, collapse_at=1.1)
    assert [c.id for c in diverse] == ["r0", "r2", "r3"]
    assert len({c.id for c in diverse}) == len(diverse)


def test_mmr_records_each_picks_score_rank_and_penalty_for_explain() -> None:
    cands = [_cand(i, relevance=1.0 - i * 0.1) for i in range(4)]
    vecs = np.stack([_unit([1, 0, 0]), _unit([0.99, 0.1, 0]), _unit([0, 1, 0]), _unit([0, 0, 1])])
    diverse = mmr(cands, vecs, 3, lam=0.3, collapse_at=1.1)
    assert [(c.id, c.score_rank) for c in diverse] == [("r0", 1), ("r2", 3), ("r3", 4)]
    assert diverse[0].max_similarity is None
    assert [round(c.max_similarity or 0.0, 6) for c in diverse[1:]] == [0.0, 0.0]
    by_relevance = mmr(cands, vecs, 2, lam=1.0, collapse_at=1.1)
    assert by_relevance[1].max_similarity == pytest.approx(float(vecs[0] @ vecs[1]), abs=1e-6)


def test_explain_says_where_diversity_moved_a_hit(initialised, cli) -> None:
    for title in ("Retry payment calls with exponential backoff and jitter",
                  "Retry payment calls with exponential backoff, capped at four attempts",
                  "Cache invoice totals in Redis for five minutes"):  # fmt: skip
        # Near-duplicates on purpose (diversity has something to move): the duplicate check
        # refuses the second one (semantic, 81%), so it is written with --force.
        assert cli("remember", title, "--rationale", "payment retry backoff notes", "--force").exit_code == 0
    out = cli("search", "retry payment calls with backoff", "--explain", "--diversity").stdout
    assert "    diversity: #1 by score\n" in out
    assert ", cosine " in out and " to the closest hit above" in out
    hits = orjson.loads(cli("search", "retry payment calls with backoff", "--json", "--diversity").stdout)["results"]
    assert hits[0]["components"]["diversity"] == {"score_rank": 1, "max_similarity": None}
    assert sorted(h["components"]["diversity"]["score_rank"] for h in hits) == list(range(1, len(hits) + 1))
    plain = orjson.loads(cli("search", "retry payment calls with backoff", "--json").stdout)  # off by default
    assert all("diversity" not in h["components"] for h in plain["results"])


def test_mmr_collapses_near_identical_records() -> None:
    cands = [_cand(i, relevance=1.0 - i * 0.1) for i in range(3)]
    vecs = np.stack([_unit([1, 0]), _unit([1, 0.01]), _unit([0, 1])])
    picked = mmr(cands, vecs, 3)
    assert [(c.id, c.represents) for c in picked] == [("r0", 2), ("r2", 1)]


@given(st.integers(1, 12), st.floats(0, 1), st.integers(0, 10_000))
def test_mmr_returns_unique_subset(k: int, lam: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cands = [_cand(i, relevance=float(rng.random())) for i in range(10)]
    vecs = rng.normal(size=(10, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    picked = mmr(cands, vecs, k, lam=lam)
    ids = [c.id for c in picked]
    assert len(ids) == len(set(ids)) <= k
    assert sum(c.represents for c in picked) <= 10


# -- evidence gap on fixed distributions ---------------------------------------------------------


def _dist(top: float, rest: list[float], ranks: dict[str, int]) -> list[Candidate]:
    return [_cand(0, relevance=top, fused=top, ranks=ranks)] + [_cand(i + 1, relevance=r, fused=r) for i, r in enumerate(rest)]


def test_gap_when_best_similarity_is_below_the_floor() -> None:
    flat = _dist(0.40, [0.39, 0.38, 0.38, 0.37, 0.36], ranks={"vector": 1})
    verdict = assess(flat, 0.2, 0.2)  # the floor is 0.25
    assert verdict.gap is True and verdict.reason == "best similarity below the floor"
    assert assess([], 0.0, 0.9).gap is True


def test_no_gap_above_the_floor() -> None:
    strong = _dist(0.9, [0.3, 0.2, 0.2], ranks={"vector": 1, "bm25": 1})
    assert assess(strong, 0.3, 0.45).gap is False


def test_agreeing_standout_lexical_match_rescues_a_low_cosine() -> None:
    standout = _dist(1.0, [0.2] * 12, ranks={"vector": 1, "bm25": 1})
    verdict = assess(standout, 0.8, 0.2)
    assert verdict.gap is False and verdict.channels_agreeing == 2 and verdict.z_score >= 3.0
    assert assess(standout, 0.2, 0.2).gap is True  # not enough of the query matched


def test_rescue_is_reachable_in_a_young_store() -> None:
    # Two candidates: z is 1 at most, so a fixed 3.0 flagged every exact match there.
    pair = _dist(0.03, [0.001], ranks={"vector": 1, "bm25": 1})
    assert assess(pair, 1.0, 0.22).gap is False
    assert assess(pair, 0.2, 0.22).gap is True  # too little of the query matched
    few = _dist(0.03, [0.02, 0.019, 0.001], ranks={"vector": 1, "bm25": 1})
    assert assess(few, 1.0, 0.22).gap is True  # the leader is not near the bound sqrt(n - 1)
    near = _dist(0.03, [0.001, 0.001, 0.0012], ranks={"vector": 1, "bm25": 1})
    assert assess(near, 1.0, 0.22).gap is False


def test_lexical_only_verdict() -> None:
    def ranked(scores: list[float]) -> list[Candidate]:
        return [_cand(i, relevance=1.0 / (i + 1), ranks={"bm25": i + 1}, channel_scores={"bm25": v})
                for i, v in enumerate(scores)]  # fmt: skip

    standout = ranked([12.0, 5.0, 4.8, 4.5, 4.4, 4.0, 3.9, 3.5])
    verdict = assess(standout, 0.5, None, idf_coverage=0.6)
    assert verdict.gap is False and verdict.lexical_z >= 2.0
    assert assess(standout, 0.5, None, idf_coverage=0.1).gap is True  # too little of the query's information
    flat = ranked([5.0, 5.0, 4.9, 5.0, 4.9, 5.0, 4.9, 5.0])
    assert assess(flat, 1.0, None, idf_coverage=1.0).gap is True  # nothing stands out
    assert assess(ranked([9.0]), 1.0, None, idf_coverage=1.0).gap is True  # too few candidates to tell
    ties = ranked([9.0, 0.5, 0.5, 0.5])
    assert assess(ties, 1.0, None, idf_coverage=1.0).gap is False  # the rest tie: the leader stands out


def test_unknown_query_terms_mean_a_gap_only_in_a_broad_store() -> None:
    strong = _dist(0.9, [0.3, 0.2, 0.2], ranks={"vector": 1, "bm25": 1})
    verdict = assess(strong, 0.3, 0.45, unknown_share=0.3, store_size=5000)
    assert verdict.gap is True and verdict.reason == "the query names terms no record contains"
    assert verdict.figures()["unknown_share"] == 0.3
    assert assess(strong, 0.3, 0.45, unknown_share=0.1, store_size=5000).gap is False  # one unknown word in ten
    assert assess(strong, 0.3, 0.45, unknown_share=0.5, store_size=40).gap is False  # a small store's narrow vocabulary
    assert assess(strong, 0.3, None, unknown_share=0.5, store_size=5000).gap is True  # lexical-only too


# -- query handling ------------------------------------------------------------------------------


def test_scrub_query_strips_markup_and_secrets() -> None:
    q = scrub_query("**Why** did we `pin` <b>node</b>?  token=ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
    assert "ghp_" not in q.text and "**" not in q.text and "<b>" not in q.text
    assert q.text.startswith("Why did we pin node ?") and q.redactions


def test_hyde_template_and_phrases() -> None:
    assert key_phrases("retry logic for payment calls") == ["retry logic", "payment calls"]
    assert hyde_document("retry logic for payment calls") == (
        "[CONTEXT] retry logic for payment calls [ANSWER] retry logic, payment calls is relevant because it "
        "explains retry logic."
    )
    assert content_words("How do we deploy the app?") == ["deploy", "app"]


# -- intent ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def centroids() -> dict[str, list[float]]:
    from lore.embedder import get_query_encoder

    return intent.compute_centroids(get_query_encoder().encode)


def test_every_intent_has_a_centroid(centroids) -> None:
    assert set(centroids) == set(intent.INTENTS)
    for vector in centroids.values():
        assert math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-4)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("fix the crash when the payment job throws an exception", "fix_bug"),
        ("why did we choose postgres over mongodb for the queue", "find_decision"),
        ("security review of how we store api secrets and credentials", "security_audit"),
        ("refactor and clean up the billing module to remove duplication", "refactor"),
    ],
)
def test_canonical_queries_get_their_intent(centroids, query: str, expected: str) -> None:
    from lore.embedder import get_query_encoder

    vector = get_query_encoder().encode([query])[0]
    assert intent.classify(vector, centroids, query).intent == expected


def test_empty_query_falls_back_to_understand(centroids) -> None:
    result = intent.classify(np.zeros(len(next(iter(centroids.values()))), dtype=np.float32), centroids, "")
    assert (result.intent, result.fallback) == ("understand", True)
    assert intent.classify(None, None, "anything").intent == "understand"


# -- budgets ---------------------------------------------------------------------------------------

_words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=0, max_size=400)


@settings(max_examples=300)
@given(
    texts=st.lists(_words, min_size=0, max_size=8),
    budget=st.integers(0, 2500),
    fmt=st.sampled_from(["markdown", "compact"]),
    fenced=st.booleans(),
)  # fmt: skip
def test_context_never_exceeds_budget(texts: list[str], budget: int, fmt: str, fenced: bool) -> None:
    items = [ContextItem(f"dec-{i:08x}", "decision", t, 0.8, "3d", 0.5) for i, t in enumerate(texts)]
    text, kept = render_items(items, budget, fmt, fenced=fenced)
    assert len(text) <= budget
    assert len(kept) <= len(items)


@given(_words, st.integers(0, 500))
def test_shorten_never_cuts_a_word(text: str, limit: int) -> None:
    short = shorten(text, limit)
    assert len(short) <= limit
    if short and short != text.strip():
        assert short.endswith("…")
        body = short[:-1]
        words = text.split()
        assert all(w in words for w in body.split()[:-1])
        assert text.strip().startswith(body.rstrip(" ,;:.-")) or body == ""


def test_long_result_lists_are_not_capped_by_the_diversity_pool(data_dir, cli) -> None:
    from lore import capture
    from lore.capture import WriteOptions
    from lore.store import Store

    store = Store(data_dir, actor="test")
    store.init()
    for i in range(40):
        capture.observe(store, f"deploy pipeline note number {i} about canary rollout step {i}", project="p",
                        options=WriteOptions(check_duplicates=False))  # fmt: skip
    import orjson

    payload = orjson.loads(cli("search", "canary rollout deploy pipeline", "--limit", "35", "--json").stdout)
    assert len(payload["results"]) + sum(r.get("represents", 1) - 1 for r in payload["results"]) >= 30


def test_intent_option_favours_records_whose_chain_matches(data_dir, cli) -> None:
    import orjson

    lines = [
        {"id": "dec-00000001", "timestamp": "2026-01-01T00:00:00Z", "decision": "Cache invoice totals in Redis",
         "rationale": "Totals are recomputed on every page view", "project": "p", "intent_chain": ["performance"]},
        # The same evidence (only the intent chain differs): the intent factor breaks ties,
        # it does not overturn a difference in evidence.
        {"id": "dec-00000002", "timestamp": "2026-01-01T00:00:00Z", "decision": "Cache invoice totals in Redis",
         "rationale": "Totals are recomputed on every page view", "project": "p", "intent_chain": ["simplicity"]},
    ]  # fmt: skip
    (data_dir / "journal/data").mkdir(parents=True)
    (data_dir / "journal/data/decisions.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    for intent_name, expected in (("performance", "dec-00000001"), ("simplicity", "dec-00000002")):
        out = orjson.loads(cli("search", "cache invoice totals", "--intent", intent_name, "--json").stdout)
        assert out["results"][0]["id"] == expected
        assert out["results"][0]["components"]["factors"]["intent"] == 1.25


def _search_store(data_dir) -> object:
    from lore import capture
    from lore.capture import WriteOptions
    from lore.search import SearchSession
    from lore.store import Store

    store = Store(data_dir, actor="test")
    store.init()
    for text in ("Retry failed Stripe requests with exponential backoff and full jitter",
                 "Keep secrets in Vault and inject them at container start",
                 "Store money as integer minor units, never floats"):  # fmt: skip
        capture.remember(store, text, project="p", options=WriteOptions(check_duplicates=False))
    return SearchSession(resolve_locations(data_dir, data_dir.parent / "index"))


def test_default_weights_are_fixed_and_zero_weight_channels_are_skipped(data_dir) -> None:
    from lore.rank.pipeline import SearchOptions
    from lore.search import search

    session = _search_store(data_dir)
    plain = SearchOptions(adaptive=False, now=NOW)
    lexical = search(session, "stripe backoff", plain, log_access=False, use_llm=False)
    assert lexical.gap.idf_coverage == 1.0
    assert lexical.weights == fusion.DEFAULT_WEIGHTS
    # the graph channel weighs 0 by default: it is never computed
    assert "graph" not in lexical.channels_used and {"bm25", "vector", "hyde"} <= set(lexical.channels_used)

    other_words = search(session, "how are transient outages handled", plain, log_access=False, use_llm=False)
    assert other_words.gap.idf_coverage == 0.0
    assert other_words.weights == fusion.DEFAULT_WEIGHTS
    assert other_words.hits  # found by the vector channels alone

    fixed = {"vector": 1.0, "hyde": 0.8, "bm25": 0.6, "graph": 0.3}
    explicit = search(session, "stripe backoff", plain._replace(weights=fixed), log_access=False, use_llm=False)
    assert explicit.weights == fixed and "hyde" in explicit.channels_used


def test_search_hits_carry_their_text_and_the_callers_options_are_left_alone(data_dir, tmp_path, monkeypatch) -> None:
    import dataclasses
    import stat

    from lore.rank.pipeline import SearchOptions
    from lore.search import search

    script = tmp_path / "llm.sh"
    script.write_text("#!/bin/sh\ncat > /dev/null\necho 'Retries back off exponentially with jitter.'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    session = dataclasses.replace(_search_store(data_dir), llm_cmd=str(script))  # the surfaces pass LORE_LLM_CMD so
    options = SearchOptions(adaptive=False, now=NOW)
    response = search(session, "stripe backoff", options, log_access=False)
    # The LLM's pseudo-answer fed this search only: the caller's options are unchanged (and cannot change).
    assert options.hyde_text is None
    with pytest.raises(AttributeError):
        options.limit = 3  # type: ignore[misc]
    top = response.hits[0]
    assert top.title == "Retry failed Stripe requests with exponential backoff and full jitter"
    assert top.content.startswith(top.title) and top.kind == "decision" and top.score > 0


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0.5, 8))
def test_relevance_is_monotone_bounded_and_linear_at_sharpness_one(a: float, b: float, sharpness: float) -> None:
    best = 1.0
    assume(a < b)
    assert 0.0 <= fusion.relevance(a, best, sharpness) <= fusion.relevance(b, best, sharpness) <= 1.0
    assert fusion.relevance(b, best, 1.0) == pytest.approx(b)
    assert fusion.relevance(2.0, best, sharpness) == 1.0 and fusion.relevance(0.5, 0.0, sharpness) == 0.0


def test_metadata_does_not_overturn_a_clear_difference_in_evidence() -> None:
    weights = {"bm25": 1.0, "vector": 0.1}
    best = fusion.max_rrf(["bm25", "vector"], weights)
    fused = fusion.rrf({"bm25": [f"d{i}" for i in range(1, 11)], "vector": ["d1"]}, weights)
    first, sixth = fused["d1"][0], fused["d6"][0]  # BM25 and vectors agree on d1; d6 is BM25's sixth

    def order(sharpness: float) -> list[str]:
        answer = _cand(1, id="d1", fused=first, relevance=fusion.relevance(first, best, sharpness), time=NOW - 3000 * DAY)
        newer = _cand(6, id="d6", fused=sixth, relevance=fusion.relevance(sixth, best, sharpness), time=NOW)
        ctx = QueryContext(now=NOW, settings=StageSettings(relevance_sharpness=sharpness))
        return [c.id for c in rank([answer, newer], ctx)]

    assert order(fusion.RELEVANCE_SHARPNESS) == ["d1", "d6"]
    assert order(1.0) == ["d6", "d1"]  # unsharpened, the age decided


@pytest.mark.parametrize(("query", "expected"), [
    ("which postgres driver do we use", {"dec-66583753"}),
    # Both answer it: the dunning schedule retries failed renewal charges, the backoff
    # decision retries failed calls to the provider.
    ("how do we retry failed stripe charges", {"dec-d0a58788", "dec-d6ba0ba6"}),
])  # fmt: skip
def test_the_demo_data_answers_plain_questions_first(tmp_path, query: str, expected: set[str]) -> None:
    from lore.rank.pipeline import SearchOptions
    from lore.search import SearchSession, search
    from tests.conftest import PROJECT_ROOT, resolve_locations

    session = SearchSession(resolve_locations(PROJECT_ROOT / "data", tmp_path / "demo-index"))
    response = search(session, query, SearchOptions(limit=3, now=NOW), log_access=False, use_llm=False)
    assert response.hits[0].id in expected


# -- the access log -----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 2e9), st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3)),
                max_size=12),
       st.integers(0, 11))  # fmt: skip
def test_access_log_compaction_keeps_every_count_and_last_time(tmp_path_factory, searches, cut: int) -> None:
    from lore.rank import access

    path = tmp_path_factory.mktemp("access") / "access.jsonl"
    for ts, ids in searches[:cut]:
        access.record_access(path, "q", ids, ts)
    if path.exists():
        access.compact(path)  # what happens once the file passes MAX_BYTES
    for ts, ids in searches[cut:]:
        access.record_access(path, "q", ids, ts)
    expected: dict[str, tuple[int, float]] = {}
    for ts, ids in searches:
        for rid in ids:
            count, last = expected.get(rid, (0, 0.0))
            expected[rid] = (count + 1, max(last, round(ts, 3)))
    assert access.load_stats(path) == expected


def test_access_log_compacts_past_its_size_cap_and_skips_damaged_lines(tmp_path, monkeypatch) -> None:
    from lore.rank import access

    path = tmp_path / "access.jsonl"
    path.write_bytes(b'{"ts": 5, "ids": ["a"]}\nnot json\n[1, 2]\n{"ts": 7, "ids": ["a", "b"]}\n{"ts": 8, "ids"')
    assert access.load_stats(path) == {"a": (2, 7.0), "b": (1, 7.0)}  # a torn last line is skipped too
    monkeypatch.setattr(access, "MAX_BYTES", 200)
    for n in range(10):
        access.record_access(path, "query " * 10, ["c"], 100.0 + n)
    assert path.stat().st_size <= 200 + 120  # compacted, then at most a line or two appended
    assert access.load_stats(path) == {"a": (2, 7.0), "b": (1, 7.0), "c": (10, 109.0)}


def test_a_busy_access_log_stays_small_enough_to_read_on_every_prompt(tmp_path) -> None:
    from lore.rank import access

    path = tmp_path / "access.jsonl"
    for n in range(2000):  # two thousand prompts, each with a long question
        access.record_access(path, "why did we " + "pick this design " * 17, [f"dec-{n % 40:04d}", "dec-x"], 1000.0 + n)
    lines = path.read_bytes().splitlines()
    assert len(lines) <= 400 and path.stat().st_size <= access.MAX_BYTES + 1000
    stats = access.load_stats(path)
    assert stats["dec-x"] == (2000, 2999.0) and stats["dec-0000"] == (50, 2960.0)


def test_ages_never_use_m_for_minutes_beside_mo_for_months() -> None:
    from datetime import UTC, datetime, timedelta

    from lore.render.text import age

    now = datetime(2026, 11, 22, tzinfo=UTC)
    cases = {timedelta(seconds=30): "0min", timedelta(minutes=59): "59min", timedelta(hours=3): "3h",
             timedelta(days=3): "3d", timedelta(days=59): "59d", timedelta(days=90): "3mo", timedelta(days=800): "2y",
             timedelta(days=-2): "0min"}  # fmt: skip
    assert {delta: age(now - delta, now) for delta in cases} == cases
    assert age(None, now) == "?"

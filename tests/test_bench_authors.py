"""Leave-one-author-out (benchmarks.authors): the threshold search's replay, the fit, the rule and the length check."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import authors, stream
from lore.rank import inject


@pytest.fixture(scope="module")
def demo_stream(tmp_path_factory: pytest.TempPathFactory) -> list[stream.Observed]:
    """Four sessions of two author groups over the demo store, searched as the hook searches."""
    turns = [t for t in stream.load_groups() if t.session in ("demo-s01", "demo-s02", "authA-s01", "authA-s02")]
    stores = stream.observe(Path("/nonexistent"), tmp_path_factory.mktemp("stream"), turns=turns)
    return stores.observed["demo"]


@pytest.mark.parametrize("thresholds", [(0.4, 0.2, 0.3), (0.9, 0.05, 0.6), (0.2, 0.2, 0.0), (1.1, 1.1, 1.1)])
def test_the_search_replay_hands_the_ids_the_real_block_hands(demo_stream: list[stream.Observed],
                                                              thresholds: tuple[float, float, float]) -> None:  # fmt: skip
    full_t, pointer_t, item_t = thresholds
    settings = inject.DEFAULT_SETTINGS._replace(warm_gate_threshold=full_t, warm_pointer_threshold=pointer_t,
                                                warm_item_threshold=item_t)  # fmt: skip
    real = stream.replay(demo_stream, "warm", "lore", settings)
    simulated = authors.simulate(authors.score(authors.prepare(demo_stream, "warm"), settings), full_t, pointer_t, item_t)
    assert [(o.full, o.pointers) for o in simulated] == [(o.full, o.pointers) for o in real]
    for fast, slow in zip(simulated, real, strict=True):  # the block's length, to the character
        assert fast.chars == slow.chars
    always = authors.simulate(authors.score(authors.prepare(demo_stream, "warm"), settings), 0, 0, 0, always=True)
    assert [o.injected for o in always] == [o.injected for o in stream.replay(demo_stream, "warm", "always", settings)]


def test_the_rule_keeps_its_costs_on_what_it_chose_on(demo_stream: list[stream.Observed]) -> None:
    prepared = authors.prepare(demo_stream, "warm")
    scored = authors.score(prepared, inject.DEFAULT_SETTINGS)
    chosen = authors.choose(scored)
    figures = stream.measures(authors.simulate(scored, chosen["full"], chosen["pointer"], chosen["item"]))
    fallback = (chosen["full"], chosen["item"], chosen["pointer"]) == (authors.FULL_STEPS[-1],
                                                                        authors.ITEM_THRESHOLDS[-1], authors.POINTER_STEPS[-1])  # fmt: skip
    assert fallback or (figures["chars_per_prompt"] <= authors.MAX_CHARS and figures["left_empty"] >= authors.MIN_LEFT_EMPTY
                        and figures["precision_full"] >= authors.MIN_FULL_PRECISION
                        and figures["left_without_full"] >= authors.MIN_LEFT_WITHOUT_FULL)  # fmt: skip
    assert chosen["pointer"] <= chosen["full"]


@given(st.lists(st.tuples(st.floats(-3, 3), st.booleans()), min_size=20, max_size=60))
def test_a_monotone_fit_never_weighs_evidence_below_zero(points: list[tuple[float, bool]]) -> None:
    # Two copies of one evidence, the second a noisy negative of the first: unconstrained, one of them
    # takes a negative weight; held monotone, neither does.
    rows = [[1.0, x, -x + 0.1 * (i % 3), 1.0 if flag else 0.0] for i, (x, flag) in enumerate(points)]
    labels = [1.0 if x + (0.5 if flag else 0.0) > 0 else 0.0 for x, flag in points]
    weights = authors.logistic_fit(rows, labels, [False, True, True, False])
    assert weights[1] >= 0 and weights[2] >= 0


def test_length_alone_is_read_as_a_roc_area() -> None:
    turn = stream.Turn("demo", "s", 1, "p", "", "answerable", ("a",), "test", "g")
    long_answerable = [turn.__class__(**{**turn.__dict__, "prompt": "word " * 20}) for _ in range(3)]
    short_other = [turn.__class__(**{**turn.__dict__, "prompt": "word " * 5, "relevant": (), "kind": "task"}) for _ in range(3)]
    figures = authors.length_check(long_answerable + short_other)
    assert figures["g"]["length_auc"] == 1.0 and figures["pooled"]["answerable_median_words"] == 20
    assert authors.length_check(long_answerable + [t.__class__(**{**t.__dict__, "prompt": "word " * 20}) for t in
                                                   short_other])["g"]["length_auc"] == 0.5  # fmt: skip

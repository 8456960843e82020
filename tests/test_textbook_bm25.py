"""The bench's textbook BM25, pinned against scores computed by hand."""

from __future__ import annotations

import math

import pytest

from benchmarks.textbook import TextbookBM25, record_text

DOCS = [("d1", "The cat sat on the mat"), ("d2", "Dogs chase cats"), ("d3", "A bird")]


def test_scores_match_the_hand_computed_formula() -> None:
    bm25 = TextbookBM25(DOCS)
    # Stopwords go, stems stay: d1 = cat sat mat, d2 = dog chase cat, d3 = bird; avgdl = 7/3.
    assert bm25.lengths == [3, 3, 1] and bm25.avgdl == pytest.approx(7 / 3)
    # idf(cat) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6
    assert bm25.idf("cat") == pytest.approx(math.log(1.6))
    # d1: tf 1, |d| 3: 0.470004 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / (7/3))) = 0.420817
    scores = bm25.scores("cats")
    assert scores[0] == pytest.approx(0.420817, abs=1e-6)
    assert scores[1] == pytest.approx(0.420817, abs=1e-6)
    assert 2 not in scores
    # OR semantics: bird (idf ln(8/3), |d| 1) outscores mat (same idf, |d| 3).
    scores = bm25.scores("bird mat")
    assert scores[2] == pytest.approx(1.280065, abs=1e-6)
    assert scores[0] == pytest.approx(0.878185, abs=1e-6)
    assert bm25.search("bird mat") == ["d3", "d1"]


def test_ties_keep_insertion_order_and_stopword_queries_find_nothing() -> None:
    bm25 = TextbookBM25(DOCS)
    assert bm25.search("cat") == ["d1", "d2"]
    assert bm25.search("the of which") == []


def test_record_text_holds_every_text_field_and_no_metadata() -> None:
    raw = {"id": "dec-1", "decision": "Use asyncpg", "rationale": "fast", "alternatives": ["psycopg 3"],
           "tags": ["postgres"], "status": "active", "project": "billing", "confidence": 0.8}
    text = record_text(raw)
    for word in ("Use asyncpg", "fast", "psycopg 3", "postgres"):
        assert word in text
    for word in ("dec-1", "active", "billing"):
        assert word not in text

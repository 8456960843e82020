"""The per-question measures and the paired bootstrap behind docs/performance.md's noise statements."""

from __future__ import annotations

import math

import pytest

from benchmarks.matrix import paired_margin, per_question

QRELS = {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 1}}


def test_per_question_measures_by_hand() -> None:
    ranked = {"q1": ["d9", "d1"], "q2": ["d3", "d8", "d2"]}
    assert per_question(ranked, QRELS, "RR@10") == [0.5, 1.0]
    assert per_question(ranked, QRELS, "R@5") == [1.0, 1.0]
    assert per_question({"q2": ["d3"]}, QRELS, "R@10") == [0.0, 0.5]  # q1 returned nothing: 0
    ndcg = per_question(ranked, QRELS, "nDCG@10")
    ideal = 2 + 1 / math.log2(3)
    assert ndcg == pytest.approx([1 / math.log2(3), (1 + 2 / math.log2(4)) / ideal])


def test_paired_margin_is_seeded_and_brackets_the_mean() -> None:
    ours, theirs = [1.0, 0.5, 0.0, 1.0, 0.5, 1.0], [0.5, 0.5, 0.5, 0.0, 0.5, 1.0]
    margin = paired_margin(ours, theirs)
    assert margin == paired_margin(ours, theirs)  # same seed, same interval
    assert margin["diff"] == pytest.approx(1 / 6, abs=1e-4)
    assert margin["lo"] <= margin["diff"] <= margin["hi"]
    assert paired_margin([0.3] * 5, [0.3] * 5) == {"diff": 0.0, "lo": 0.0, "hi": 0.0}
    assert paired_margin([], []) == {"diff": 0.0, "lo": 0.0, "hi": 0.0}


def test_the_grep_baseline_finds_what_grep_ril_over_a_file_per_record_finds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from benchmarks import corpora
    from benchmarks.quality import GrepBaseline

    texts = ["Fix the PARSER\nleak in tokenizer", "parser: handle\r\nCRLF lines", "Kelvin \u212a and Straße",
             "multi\nline\nrecord with Timeout", "timeouts everywhere", "nothing here", "x" * 50 + "\nparse"]  # fmt: skip
    raws = [{"id": f"r{i}", "decision": text, "rationale": "second\nline" if i % 2 else "", "tags": []}
            for i, text in enumerate(texts)]  # fmt: skip
    per_file = tmp_path / "per-file"
    per_file.mkdir()
    for raw in raws:
        (per_file / f"{raw['id']}.txt").write_text(corpora.commit_text(raw), encoding="utf-8")
    baseline = GrepBaseline(tmp_path / "one-file", raws)
    for word in ("parser", "leak", "timeout", "crlf", "line", "second", "k", "strasse", "xparse", "absent"):
        found = subprocess.run(["grep", "-rilF", "-e", word, str(per_file)], capture_output=True, text=True).stdout
        assert baseline.files_with(word) == {line.rsplit("/", 1)[1][:-4] for line in found.splitlines()}, word
    # r0 holds two of the words; the others one each, in the store's order.
    assert baseline.search("the parser leak timeout") == ["r0", "r1", "r3", "r4"]

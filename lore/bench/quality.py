"""Retrieval quality: BEIR SciFact (nDCG@10, Recall@100) and known-item search over git commits.

Every figure is computed with ir-measures (pytrec_eval underneath), never by
hand. A query the system returns nothing for scores 0 and still counts in the
mean: means are over every judged query, not only the ones with results.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lore.bench import corpora

ANCHORS = {  # published SciFact nDCG@10 figures
    "BM25 (BEIR paper)": 0.665,
    "Anserini BM25 flat": 0.679,
    "potion-base-8M (MTEB)": 0.506,
    "BM25 + cross-encoder rerank (BEIR paper)": 0.688,
}
# (vector, hyde, bm25) settings for the fusion-weight sweep on the training queries; the
# default, evidence-gated weights (lore.rank.fusion.gated_weights) are always the first row.
SWEEP = (
    (0.3, 0.3, 1.0),
    (0.1, 0.0, 1.0),
    (0.1, 0.1, 1.0),
    (1.0, 0.8, 0.6),
    (0.6, 0.8, 1.0),
    (0.15, 0.15, 1.0),
    (1.0, 0.8, 0.3),
    (1.0, 0.8, 1.0),
    (1.0, 0.8, 1.5),
    (1.0, 1.0, 1.0),
    (0.6, 0.5, 1.0),
    (1.0, 0.0, 0.6),
    (1.0, 0.0, 1.0),
)
Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


# -- scoring ---------------------------------------------------------------------------
def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], measures: Sequence[str]) -> dict[str, float]:
    """Mean of each measure over every query in ``qrels`` (missing from ``run`` = 0)."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    qrel_rows = [ir_measures.Qrel(q, d, int(r)) for q, docs in qrels.items() for d, r in docs.items()]
    run_rows = [
        ir_measures.ScoredDoc(q, d, float(len(ranked) - i))
        for q, ranked in run.items() if q in qrels
        for i, d in enumerate(dict.fromkeys(ranked))
    ]  # fmt: skip
    totals = {str(m): 0.0 for m in parsed}
    for metric in ir_measures.iter_calc(parsed, qrel_rows, run_rows):
        totals[str(metric.measure)] += float(metric.value)
    count = max(len(qrels), 1)
    return {name: round(total / count, 4) for name, total in totals.items()}


def stage_names() -> frozenset[str]:
    from lore.rank.stages import SWITCHABLE

    return frozenset(SWITCHABLE)


def configs(limit: int, retrieval_limit: int, now: float) -> dict[str, Any]:
    """The compared systems as SearchOptions: single channels and fusion with every stage off."""
    from lore.rank.pipeline import CHANNELS, SearchOptions

    bare: dict[str, Any] = {"limit": limit, "retrieval_limit": retrieval_limit, "now": now, "disabled_stages": stage_names(),
            "diversity": False, "adaptive": False}  # fmt: skip
    return {
        "bm25": SearchOptions(channels=("bm25",), **bare),
        "vector": SearchOptions(channels=("vector",), **bare),
        "hyde": SearchOptions(channels=("hyde",), **bare),
        "hybrid": SearchOptions(channels=CHANNELS, **bare),
        "pipeline": SearchOptions(limit=limit, retrieval_limit=retrieval_limit, now=now),
        # What the prompt hook answers past its soft deadline, or any search without a model.
        "pipeline_lexical": SearchOptions(limit=limit, retrieval_limit=retrieval_limit, now=now, channels=("bm25", "graph")),
        "pipeline_no_mmr": SearchOptions(limit=limit, retrieval_limit=retrieval_limit, now=now, diversity=False),
    }


LABELS = {
    "bm25": "BM25 only",
    "vector": "vectors only",
    "hyde": "HyDE only",
    "hybrid": "fused hybrid (stages off)",
    "pipeline": "full pipeline (defaults)",
    "pipeline_lexical": "full pipeline, lexical only",
    "pipeline_no_mmr": "full pipeline, MMR off",
    "grep": "grep -il keyword baseline",
}


@dataclass
class Searcher:
    """An open in-process search session over one data dir (no access logging, no LLM)."""

    data_dir: Path
    index_dir: Path

    def __post_init__(self) -> None:
        from lore.paths import Locations
        from lore.search import SearchSession

        self.session = SearchSession(Locations(self.data_dir, self.index_dir))

    def build(self) -> Any:
        from lore.index.manager import IndexManager

        return IndexManager(self.session.locations).build()

    def query(self, text: str, options: Any) -> Any:
        from lore.search import search

        response, _ = search(self.session, text, replace(options, hyde_text=None), log_access=False, use_llm=False)
        return response

    def close(self) -> None:
        if self.session.reader is not None:
            self.session.reader.close()


def run_config(searcher: Searcher, queries: Mapping[str, str], options: Any,
               idf_coverage: dict[str, float] | None = None) -> tuple[dict[str, list[Any]], list[float]]:  # fmt: skip
    """qid -> hits (Candidates, best first), and per-query wall milliseconds.

    ``idf_coverage``, when given, receives each query's share of idf mass held by
    BM25's best record (what the evidence-gated fusion weights are chosen by).
    """
    hits: dict[str, list[Any]] = {}
    times = []
    for qid, text in queries.items():
        started = time.perf_counter()
        response = searcher.query(text, options)
        times.append((time.perf_counter() - started) * 1000)
        hits[qid] = response.hits
        if idf_coverage is not None:
            idf_coverage[qid] = response.gap.idf_coverage
    return hits, times


def channel_rankings(hits: Sequence[Any]) -> dict[str, list[str]]:
    """Each channel's own ranking, recovered from the fused candidates' per-channel ranks."""
    by_channel: dict[str, list[tuple[int, str]]] = {}
    for candidate in hits:
        for channel, rank in candidate.ranks.items():
            by_channel.setdefault(channel, []).append((rank, candidate.id))
    return {channel: [rid for _, rid in sorted(pairs)] for channel, pairs in by_channel.items()}


def fuse(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float], limit: int) -> list[str]:
    """Weighted RRF exactly as the pipeline orders it with every stage off (score, then id)."""
    from lore.rank import fusion

    fused = fusion.rrf(rankings, weights)
    ordered = sorted(fused.items(), key=lambda item: (-item[1][0], item[0]))
    return [rid for rid, _ in ordered[:limit]]


# -- SciFact ------------------------------------------------------------------------------
def scifact(shared: Path, work: Path, *, quick: bool, progress: Progress = _quiet, query_count: int = 50,
            sample_docs: int = 1000, sweep: bool = True) -> dict[str, Any]:  # fmt: skip
    """nDCG@10 and Recall@100 on the SciFact test queries for each system, plus the weight sweep."""
    data = corpora.load_scifact(shared)
    test_queries = {q: data.queries[q] for q in data.test_qrels if q in data.queries}
    docs = data.docs
    qrels_test = data.test_qrels
    if quick:
        chosen = sorted(test_queries, key=lambda q: int(q) if q.isdigit() else q)[:query_count]
        test_queries = {q: test_queries[q] for q in chosen}
        qrels_test = {q: data.test_qrels[q] for q in chosen}
        needed = {d for q in chosen for d in qrels_test[q]}
        rest = [d for d in docs if d[0] not in needed]
        docs = [d for d in docs if d[0] in needed] + rest[: max(0, sample_docs - len(needed))]
    data_dir, index_dir = work / "scifact-data", work / "scifact-index"
    mapping = corpora.write_scifact(data_dir, docs)
    searcher = Searcher(data_dir, index_dir)
    progress(f"SciFact: indexing {len(docs)} abstracts")
    report = searcher.build()
    now = corpora.epoch(corpora.SCIFACT_TIME)
    options = configs(100, 100, now)
    measures = ("nDCG@10", "R@100")
    results: dict[str, Any] = {
        "docs": len(docs), "queries": len(test_queries), "judged_queries": len(qrels_test),
        "index_seconds": round(report.seconds, 2), "quick": quick,
        # Published figures are for the full corpus and all 300 queries: not comparable with a quick subset.
        "anchors_ndcg10": {} if quick else ANCHORS, "systems": {},
        "note": "query_ms_* are in-process times of a warm session, not whole-process latency",
    }  # fmt: skip
    systems = ("bm25", "vector", "hyde", "hybrid", "pipeline") + (() if quick else ("pipeline_no_mmr",))
    for name in systems:
        progress(f"SciFact: {len(test_queries)} test queries, {LABELS[name]}")
        hits, times = run_config(searcher, test_queries, options[name])
        ranked = {q: [mapping[h.id] for h in found] for q, found in hits.items()}
        figures: dict[str, Any] = evaluate(ranked, qrels_test, measures)
        figures["mean_results"] = round(statistics.fmean(len(v) for v in hits.values()), 1) if hits else 0.0
        figures["query_ms_p50"] = round(statistics.median(times), 2) if times else None
        results["systems"][name] = figures

    if sweep:
        from lore.rank import fusion
        from lore.rank.fusion import DEFAULT_WEIGHTS

        progress("SciFact: fusion-weight sweep on the training queries")
        train_queries = {q: data.queries[q] for q in data.train_qrels if q in data.queries}
        train_qrels = {q: data.train_qrels[q] for q in train_queries}
        if quick:  # a quick run sweeps only over the sampled documents' training queries
            present = set(mapping.values())
            train_qrels = {q: r for q, r in train_qrels.items() if set(r) & present}
            train_queries = {q: train_queries[q] for q in list(train_qrels)[:query_count]}
            train_qrels = {q: train_qrels[q] for q in train_queries}
        # Fixed non-zero weights, so that every channel is computed for every query.
        channels_only = replace(options["hybrid"], channels=("bm25", "vector", "hyde"), limit=400,
                                weights={**DEFAULT_WEIGHTS, "vector": 1.0, "hyde": 1.0, "bm25": 1.0})  # fmt: skip
        coverage: dict[str, float] = {}
        train_hits, _ = run_config(searcher, train_queries, channels_only, coverage)
        train_rank = {q: channel_rankings(h) for q, h in train_hits.items()}
        # Recovered from a run with all three channels, as for train: the vector channel's
        # query then carries the BM25 feedback, which the vector-only run cannot have.
        test_hits, _ = run_config(searcher, test_queries, channels_only, coverage)
        test_rank = {q: channel_rankings(h) for q, h in test_hits.items()}
        rows = []
        # The first row is the default: weights gated per query on BM25's lexical evidence.
        settings: list[tuple[float, float, float] | None] = [None, *SWEEP]
        for setting in settings:

            def weights_for(qid: str, setting: tuple[float, float, float] | None = setting) -> dict[str, float]:
                if setting is None:
                    return fusion.gated_weights(coverage.get(qid, 0.0))
                vector_w, hyde_w, bm25_w = setting
                return {**DEFAULT_WEIGHTS, "vector": vector_w, "hyde": hyde_w, "bm25": bm25_w}

            def scored(rankings: Mapping[str, Mapping[str, Sequence[str]]], qrels: Mapping[str, Any],
                       weights_for: Callable[[str], dict[str, float]] = weights_for) -> dict[str, float]:  # fmt: skip
                ranked = {q: [mapping[r] for r in fuse(ch, weights_for(q), 100)] for q, ch in rankings.items()}
                return evaluate(ranked, qrels, measures)

            train = scored(train_rank, train_qrels)
            test = scored(test_rank, qrels_test)
            vector_w, hyde_w, bm25_w = setting or (None, None, None)
            rows.append({"vector": vector_w, "hyde": hyde_w, "bm25": bm25_w, "gated": setting is None,
                         "train_ndcg10": train["nDCG@10"], "train_r100": train["R@100"],
                         "test_ndcg10": test["nDCG@10"], "test_r100": test["R@100"]})  # fmt: skip
        best = max(rows, key=lambda r: (r["train_ndcg10"], r["train_r100"]))
        results["sweep"] = {
            "train_queries": len(train_queries), "rows": rows, "best_on_train": best,
            "default": rows[0],
            "gate": {"coverage": fusion.LEXICAL_EVIDENCE_COVERAGE, "lexical": fusion.LEXICAL_EVIDENCE_WEIGHTS,
                     "otherwise": DEFAULT_WEIGHTS},
            "note": "weighted RRF over the bm25, vector and hyde rankings, every stage off (as the 'hybrid' row)",
        }  # fmt: skip
    searcher.close()
    return results


# -- known-item search over git commits -------------------------------------------------------
def _content_words(question: str) -> list[str]:
    from whoosh.analysis import STOP_WORDS

    from lore.rank.query import STOPWORDS

    words = re.findall(r"[a-z0-9]+", question.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 2 and w not in STOPWORDS and w not in STOP_WORDS))


class GrepBaseline:
    """One file per commit; rank files by how many of the question's content words ``grep -il`` finds."""

    def __init__(self, directory: Path, raws: Sequence[dict[str, Any]]) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.order = {}
        for position, raw in enumerate(raws):
            (directory / f"{raw['id']}.txt").write_text(corpora.commit_text(raw), encoding="utf-8")
            self.order[raw["id"]] = position
        self._cache: dict[str, set[str]] = {}
        self.grep_calls = 0
        self.grep_seconds = 0.0

    def files_with(self, word: str) -> set[str]:
        if word not in self._cache:
            started = time.perf_counter()
            done = subprocess.run(["grep", "-rilF", "-e", word, str(self.directory)], capture_output=True, text=True,
                                  check=False)  # fmt: skip
            self.grep_seconds += time.perf_counter() - started
            self.grep_calls += 1
            self._cache[word] = {Path(line).stem for line in done.stdout.splitlines() if line}
        return self._cache[word]

    def search(self, question: str, limit: int = 10) -> list[str]:
        counts: dict[str, int] = {}
        for word in _content_words(question):
            for rid in self.files_with(word):
                counts[rid] = counts.get(rid, 0) + 1
        # Ties: newest commit first (the order `ls -t` would show).
        ranked = sorted(counts, key=lambda rid: (-counts[rid], self.order.get(rid, 0)))
        return ranked[:limit]


def known_item(shared: Path, work: Path, *, commits: int = 5000, progress: Progress = _quiet,
               grep: bool = True, max_questions: int | None = None) -> dict[str, Any]:  # fmt: skip
    """recall@5, recall@10 and MRR@10 over the hand-written questions, and evidence-gap abstention."""
    slice_ = corpora.load_commits(shared, commits)
    raws, mapping, duplicates = corpora.commit_raws(slice_)
    by_sha = {sha: rid for rid, sha in mapping.items()}
    questions = corpora.load_questions()
    answerable, qrels, unanswerable = {}, {}, {}
    for q in questions:
        if q.get("answerable", True):
            relevant = {by_sha[s]: 1 for s in q.get("relevant", []) if s in by_sha}
            if relevant:
                answerable[q["qid"]] = q["question"]
                qrels[q["qid"]] = relevant
        else:
            unanswerable[q["qid"]] = q["question"]
    if max_questions is not None:  # tests: a handful of each kind
        answerable = dict(list(answerable.items())[:max_questions])
        qrels = {q: qrels[q] for q in answerable}
        unanswerable = dict(list(unanswerable.items())[:max_questions])
    data_dir, index_dir = work / f"commits-{commits}-data", work / f"commits-{commits}-index"
    corpora.write_decisions(data_dir, raws)
    now = max(corpora.epoch(r["timestamp"]) for r in raws)
    searcher = Searcher(data_dir, index_dir)
    progress(f"known-item: indexing {len(raws)} commits")
    report = searcher.build()
    options = configs(10, 30, now)
    results: dict[str, Any] = {
        "commits": len(raws), "duplicate_short_ids_skipped": duplicates, "answerable": len(answerable),
        "unanswerable": len(unanswerable), "index_seconds": round(report.seconds, 2), "systems": {},
        "note": "query_ms_* are in-process times of a warm session, not whole-process latency",
    }  # fmt: skip
    measures = ("R@5", "R@10", "RR@10")
    everything = {**answerable, **unanswerable}
    for name in ("bm25", "vector", "hybrid", "pipeline", "pipeline_lexical"):
        progress(f"known-item: {len(everything)} questions, {LABELS[name]}")
        picked = everything if name.startswith("pipeline") else answerable
        hits_by_q: dict[str, list[Any]] = {}
        gaps: dict[str, bool] = {}
        times = []
        for qid, text in picked.items():
            started = time.perf_counter()
            response = searcher.query(text, options[name])
            times.append((time.perf_counter() - started) * 1000)
            hits_by_q[qid] = response.hits
            gaps[qid] = bool(response.gap.gap)
        figures: dict[str, Any] = evaluate({q: [h.id for h in hits_by_q[q]] for q in answerable}, qrels, measures)
        figures["query_ms_p50"] = round(statistics.median(times), 2) if times else None
        if name.startswith("pipeline"):
            flagged_u = sum(gaps[q] for q in unanswerable)
            flagged_a = sum(gaps[q] for q in answerable)
            figures["gap_unanswerable_flagged"] = round(flagged_u / max(len(unanswerable), 1), 4)
            figures["gap_answerable_flagged"] = round(flagged_a / max(len(answerable), 1), 4)
            # An answerable question wrongly flagged but whose answer is still in the top 10.
            figures["gap_answerable_flagged_with_answer_in_top10"] = sum(
                1 for q in answerable if gaps[q] and any(h.id in qrels[q] for h in hits_by_q[q])
            )
        results["systems"][name] = figures
    searcher.close()
    if grep:
        progress("known-item: grep -il baseline")
        baseline = GrepBaseline(work / f"commits-{commits}-files", raws)
        started = time.perf_counter()
        ranked = {qid: baseline.search(text) for qid, text in answerable.items()}
        grep_figures: dict[str, Any] = evaluate(ranked, qrels, measures)
        figures = grep_figures
        figures["grep_calls"] = baseline.grep_calls
        figures["grep_ms_per_call_mean"] = round(baseline.grep_seconds * 1000 / max(baseline.grep_calls, 1), 2)
        figures["seconds"] = round(time.perf_counter() - started, 2)
        results["systems"]["grep"] = figures
        shutil.rmtree(baseline.directory, ignore_errors=True)
    return results


def temporary_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="lore-bench-"))

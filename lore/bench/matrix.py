"""The evaluation matrix: every set, dev and test split, against baselines that are hard to beat.

Systems on every set:

* ``textbook``: the textbook BM25 of ``lore.bench.textbook`` (not lore's pipeline);
* ``grep``: ``grep -il`` per content word, files ranked by how many words they hold;
* ``bm25``, ``vector``, ``hyde``, ``graph``: each of lore's channels alone (no stages);
* ``default``: ``lore search`` as shipped (every default on);
* ``cold``: the prompt hook's cold lexical path (``lore.rank.cold``: the defaults with
  the BM25 channel alone, read without numpy), what a prompt gets before the warm helper runs.

Recall@5, recall@10 and MRR@10 on every set (nDCG@10 on SciFact too), and the
evidence gap's flag rate on answerable and unanswerable questions. Figures for
both splits are reported; only dev figures may justify a default.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lore.bench import corpora
from lore.bench.quality import GrepBaseline, Searcher, evaluate, stage_names
from lore.bench.sets import SPLITS, EvalSet
from lore.bench.textbook import TextbookBM25, record_text

MEASURES = ("R@5", "R@10", "RR@10")
Progress = Callable[[str], None]
SYSTEMS = ("textbook", "grep", "bm25", "vector", "hyde", "default", "cold")
LABELS = {
    "textbook": "textbook BM25",
    "grep": "grep -il",
    "bm25": "lore BM25 channel alone",
    "vector": "lore vector channel alone",
    "hyde": "lore HyDE channel alone",
    "default": "lore defaults",
    "cold": "lore hook, cold lexical path",
}


# The margin of the defaults over the textbook BM25 on each split, with a 95% paired
# bootstrap interval over the questions: a margin whose interval holds 0 is noise.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 14


def per_question(ranked: Mapping[str, list[str]], qrels: Mapping[str, Mapping[str, int]], measure: str) -> list[float]:
    """``measure`` (R@k, RR@10 or nDCG@10) of each judged question, in qrels order."""
    import math

    values = []
    for qid, relevant in qrels.items():
        ids = ranked.get(qid, [])[:10]
        if measure.startswith("R@"):
            k = int(measure[2:])
            values.append(sum(1 for i in ids[:k] if i in relevant) / len(relevant))
        elif measure == "RR@10":
            values.append(next((1.0 / (n + 1) for n, i in enumerate(ids) if i in relevant), 0.0))
        else:  # nDCG@10, graded
            dcg = sum(relevant.get(i, 0) / math.log2(n + 2) for n, i in enumerate(ids))
            ideal = sum(g / math.log2(n + 2) for n, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
            values.append(dcg / ideal if ideal else 0.0)
    return values


def paired_margin(ours: list[float], theirs: list[float]) -> dict[str, float]:
    """Mean of ``ours - theirs`` and its 95% paired bootstrap interval (seeded, so reruns agree)."""
    import random

    diffs = [a - b for a, b in zip(ours, theirs, strict=True)]
    if not diffs:
        return {"diff": 0.0, "lo": 0.0, "hi": 0.0}
    rng = random.Random(BOOTSTRAP_SEED)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOTSTRAP_RESAMPLES))
    lo, hi = means[int(0.025 * BOOTSTRAP_RESAMPLES)], means[int(0.975 * BOOTSTRAP_RESAMPLES) - 1]
    return {"diff": round(sum(diffs) / n, 4), "lo": round(lo, 4), "hi": round(hi, 4)}


def _quiet(message: str) -> None:
    return None


def options_for(system: str, now: float, limit: int = 10) -> Any:
    """SearchOptions for one of lore's systems."""
    from lore.rank.pipeline import SearchOptions

    if system == "default":
        return SearchOptions(limit=limit, now=now)
    return SearchOptions(channels=(system,), weights={system: 1.0}, limit=limit, now=now,
                         disabled_stages=stage_names(), diversity=False)  # fmt: skip


def _cold_reader(searcher: Searcher) -> Any:
    from lore.rank.cold import open_reader

    return open_reader(searcher.session.locations)


def _cold_query(reader: Any, text: str, now: float, limit: int = 10) -> Any:
    """The hook's cold lexical answer: the defaults with the BM25 channel alone (scrubbed like any search)."""
    from lore.rank.cold import LEXICAL, Declined, lexical_run
    from lore.rank.pipeline import SearchOptions
    from lore.rank.query import scrub_query

    query = scrub_query(text).text
    options = SearchOptions(limit=limit, now=now, channels=LEXICAL)
    try:
        return lexical_run(reader, query, options, access={})
    except Declined:
        return None


def open_set(evalset: EvalSet, work: Path) -> Searcher:
    """Write the set's store (unless it is an existing data dir) and build its index."""
    if evalset.data_dir is not None:
        data_dir = evalset.data_dir
    else:
        data_dir = work / f"{evalset.name}-data"
        corpora.write_decisions(data_dir, evalset.raws)
    searcher = Searcher(data_dir, work / f"{evalset.name}-index")
    searcher.build()
    return searcher


def store_texts(searcher: Searcher) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, all text, raw) of every active record, read back from the store as lore sees it."""
    from lore.store.store import Store

    snapshot = Store(searcher.data_dir).load()
    return [(r.id, record_text(r.raw), r.raw) for r in snapshot.records.values() if r.status == "active"]


def run_set(evalset: EvalSet, work: Path, *, systems: tuple[str, ...] = SYSTEMS, progress: Progress = _quiet,
            extra: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """Every system on both splits of one set; ``extra`` adds named SearchOptions (exploration)."""
    started = time.perf_counter()
    progress(f"{evalset.name}: building the index")
    searcher = open_set(evalset, work)
    texts = store_texts(searcher)
    label = evalset.label_of
    measures = (*MEASURES, "nDCG@10") if evalset.primary == "nDCG@10" else MEASURES
    result: dict[str, Any] = {"records": len(texts), "splits": {}, "primary": evalset.primary}
    named: dict[str, Any] = {s: None for s in systems}
    named.update(extra or {})
    textbook = TextbookBM25((rid, text) for rid, text, _ in texts) if "textbook" in named else None
    grep = None
    if "grep" in named:
        files = [{"id": rid, "decision": text, "rationale": "", "tags": []} for rid, text, _ in texts]
        grep = GrepBaseline(work / f"{evalset.name}-files", files)
    cold_reader = _cold_reader(searcher) if "cold" in named else None
    for split in SPLITS:
        answerable, unanswerable = evalset.answerable(split), evalset.unanswerable(split)
        if not answerable and not unanswerable:
            continue  # a held-out set has no dev split
        qrels = evalset.judged(split)
        figures: dict[str, Any] = {"answerable": len(answerable), "unanswerable": len(unanswerable), "systems": {}}
        rankings: dict[str, dict[str, list[str]]] = {}
        for name, custom in named.items():
            progress(f"{evalset.name} {split}: {LABELS.get(name, name)} ({len(answerable)} questions)")
            times: list[float] = []
            gaps: dict[str, bool] = {}
            ranked: dict[str, list[str]] = {}
            with_gap = name in ("default", "cold") or custom is not None
            asked = {**answerable, **unanswerable} if with_gap else answerable
            for qid, text in asked.items():
                t = time.perf_counter()
                if name == "textbook":
                    assert textbook is not None
                    ids = textbook.search(text, 10)
                elif name == "grep":
                    assert grep is not None
                    ids = grep.search(text, 10)
                elif name == "cold" and custom is None:
                    response = _cold_query(cold_reader, text, evalset.now)
                    if response is None:  # quoted phrases: the hook runs the whole pipeline
                        response = searcher.query(text, options_for("default", evalset.now))
                    ids = [h.id for h in response.hits]
                    gaps[qid] = bool(response.gap.gap)
                else:
                    opts = custom if custom is not None else options_for(name, evalset.now)
                    response = searcher.query(text, opts._replace(now=evalset.now))
                    ids = [h.id for h in response.hits]
                    gaps[qid] = bool(response.gap.gap)
                times.append((time.perf_counter() - t) * 1000)
                ranked[qid] = [label.get(i, i) for i in ids]
            row: dict[str, Any] = evaluate({q: ranked[q] for q in answerable}, qrels, measures)
            row["query_ms_p50"] = round(statistics.median(times), 2) if times else None
            if with_gap and unanswerable:
                row["gap_answerable"] = round(sum(gaps[q] for q in answerable) / max(len(answerable), 1), 4)
                row["gap_unanswerable"] = round(sum(gaps[q] for q in unanswerable) / len(unanswerable), 4)
            figures["systems"][name] = row
            rankings[name] = ranked
        if "default" in rankings and "textbook" in rankings:
            figures["margins"] = {m: paired_margin(per_question(rankings["default"], qrels, m),
                                                   per_question(rankings["textbook"], qrels, m))
                                  for m in measures}  # fmt: skip
        result["splits"][split] = figures
    searcher.close()
    if cold_reader is not None:
        cold_reader.close()
    if grep is not None:
        shutil.rmtree(grep.directory, ignore_errors=True)
    shutil.rmtree(work / f"{evalset.name}-index", ignore_errors=True)
    if evalset.data_dir is None:
        shutil.rmtree(work / f"{evalset.name}-data", ignore_errors=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result

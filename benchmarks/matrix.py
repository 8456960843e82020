"""The evaluation matrix: every set, dev and test split, against baselines that are hard to beat.

Systems on every set:

* ``textbook``: the textbook BM25 of ``benchmarks.textbook`` (not lore's pipeline);
* ``grep``: ``grep -il`` per content word, files ranked by how many words they hold;
* ``bm25``, ``vector``, ``hyde``, ``graph``: each of lore's channels alone (no stages);
* ``default``: ``lore search`` as shipped (every default on);
* ``cold``: the prompt hook's cold path (``lore.rank.cold``: the defaults with BM25's
  candidates reranked by their cosine, ``cold.RERANKED``, read without numpy), what a
  prompt gets before the warm helper runs.

Recall@5, recall@10 and MRR@10 on every set (nDCG@10 on SciFact too), and the
evidence gap's flag rate on answerable and unanswerable questions. Figures for
both splits are reported; only dev figures may justify a default.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import corpora
from benchmarks.quality import GrepBaseline, Searcher, evaluate, stage_names
from benchmarks.sets import SPLITS, EvalSet
from benchmarks.textbook import TextbookBM25, record_text

MEASURES = ("R@5", "R@10", "RR@10")
# A set whose questions count as found when any relevant record is retrieved (LoCoMo's
# evidence turns): the share of questions with one in the top k, ir-measures' Success@k.
ANY_MEASURES = ("Success@5", "Success@10", "RR@10")
Progress = Callable[[str], None]
SYSTEMS = ("textbook", "grep", "bm25", "vector", "hyde", "default", "cold", "block", "block-cold")
LABELS = {
    "textbook": "textbook BM25",
    "grep": "grep -il",
    "bm25": "lore BM25 channel alone",
    "vector": "lore vector channel alone",
    "hyde": "lore HyDE channel alone",
    "default": "lore defaults",
    "cold": "lore hook, cold path (BM25 reranked)",
    "block": "hook block as built, warm",
    "block-cold": "hook block as built, cold",
}
# The hook's block as built (before the injection decision may abstain): the records it
# carries, best first, to set beside `lore search`'s top 5; its "gap" is the injection
# decision's refusal (lore.rank.inject), so the abstention table shows the hook's own.
BLOCKS = ("block", "block-cold")


# The margin of the defaults over the textbook BM25 on each split, with a 95% paired
# bootstrap interval over the questions: a margin whose interval holds 0 is noise.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 14


def per_question(ranked: Mapping[str, list[str]], qrels: Mapping[str, Mapping[str, int]], measure: str) -> list[float]:
    """``measure`` (R@k, Success@k, RR@10 or nDCG@10) of each judged question, in qrels order."""
    import math

    values = []
    for qid, relevant in qrels.items():
        ids = ranked.get(qid, [])[:10]
        if measure.startswith("R@"):
            k = int(measure[2:])
            values.append(sum(1 for i in ids[:k] if i in relevant) / len(relevant))
        elif measure.startswith("Success@"):
            k = int(measure.split("@")[1])
            values.append(1.0 if any(i in relevant for i in ids[:k]) else 0.0)
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
    """The hook's cold answer: the defaults with BM25's candidates reranked by their cosine (scrubbed like any search)."""
    from lore.rank.cold import RERANKED, Declined, run_cold
    from lore.rank.pipeline import SearchOptions
    from lore.rank.query import scrub_query

    query = scrub_query(text).text
    options = SearchOptions(limit=limit, now=now, channels=RERANKED)
    try:
        return run_cold(reader, query, options, access={})
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
    return run_sets(evalset.name, [evalset], work, systems=systems, progress=progress, extra=extra)


@dataclass
class _Answers:
    """One system's answers on one split, gathered over every store of a set."""

    ranked: dict[str, list[str]] = field(default_factory=dict)  # qid -> ids as the qrels name them
    gaps: dict[str, bool] = field(default_factory=dict)  # qid -> flagged as an evidence gap
    times: list[float] = field(default_factory=list)


def _search_store(evalset: EvalSet, work: Path, named: Mapping[str, Any], answers: dict[tuple[str, str], _Answers],
                  progress: Progress) -> int:  # fmt: skip
    """Build one store, ask every system every question of both splits, add to ``answers``; return its records."""
    progress(f"{evalset.name}: building the index")
    searcher = open_set(evalset, work)
    texts = store_texts(searcher)
    label = evalset.label_of
    textbook = TextbookBM25((rid, text) for rid, text, _ in texts) if "textbook" in named else None
    grep = None
    if "grep" in named:
        files = [{"id": rid, "decision": text, "rationale": "", "tags": []} for rid, text, _ in texts]
        grep = GrepBaseline(work / f"{evalset.name}-files", files)
    cold_reader = _cold_reader(searcher) if "cold" in named or "block-cold" in named else None
    evidence = None
    if any(b in named for b in BLOCKS):
        from lore.rank import null

        null.ensure(searcher.session, evalset.now)
        evidence = null.load(searcher.session.open("ignore").directory)
    try:
        for split in SPLITS:
            answerable, unanswerable = evalset.answerable(split), evalset.unanswerable(split)
            if not answerable and not unanswerable:
                continue  # a held-out set has no dev split
            for name, custom in named.items():
                progress(f"{evalset.name} {split}: {LABELS.get(name, name)} ({len(answerable)} questions)")
                got = answers.setdefault((split, name), _Answers())
                asked = {**answerable, **unanswerable} if _with_gap(name, custom) else answerable
                for qid, text in asked.items():
                    t = time.perf_counter()
                    if name == "textbook":
                        assert textbook is not None
                        ids = textbook.search(text, 10)
                    elif name == "grep":
                        assert grep is not None
                        ids = grep.search(text, 10)
                    elif name in BLOCKS and custom is None:
                        ids, refused = _block(searcher, cold_reader, text, evalset.now, name == "block-cold", evidence)
                        got.gaps[qid] = refused
                    elif name == "cold" and custom is None:
                        response = _cold_query(cold_reader, text, evalset.now)
                        if response is None:  # quoted phrases: the hook runs the whole pipeline
                            response = searcher.query(text, options_for("default", evalset.now))
                        ids = [h.id for h in response.hits]
                        got.gaps[qid] = bool(response.gap.gap)
                    else:
                        opts = custom if custom is not None else options_for(name, evalset.now)
                        response = searcher.query(text, opts._replace(now=evalset.now))
                        ids = [h.id for h in response.hits]
                        got.gaps[qid] = bool(response.gap.gap)
                    got.times.append((time.perf_counter() - t) * 1000)
                    got.ranked[qid] = [label.get(i, i) for i in ids]
    finally:
        searcher.close()
        if cold_reader is not None:
            cold_reader.close()
        if grep is not None:
            shutil.rmtree(grep.directory, ignore_errors=True)
        shutil.rmtree(work / f"{evalset.name}-index", ignore_errors=True)
        if evalset.data_dir is None:
            shutil.rmtree(work / f"{evalset.name}-data", ignore_errors=True)
    return len(texts)


def _block(searcher: Searcher, cold_reader: Any, text: str, now: float, cold: bool, evidence: Any) -> tuple[list[str], bool]:
    """The hook's block as built for ``text`` (its ids), and whether the injection decision refuses it."""
    from lore.context import HOOK, block_for, decide
    from lore.rank import inject
    from lore.rank.cold import RERANKED, Declined, hook_options, run_cold
    from lore.rank.pipeline import CHANNELS
    from lore.rank.query import scrub_query

    response = None
    if cold:
        try:
            response = run_cold(cold_reader, scrub_query(text).text, hook_options(None, now, channels=RERANKED),
                                   access={})  # fmt: skip
        except Declined:
            response = None  # the hook hands these to the whole pipeline
    if response is None:
        response = searcher.query(text, hook_options(None, now, channels=CHANNELS))
    built = block_for(response, HOOK, null=evidence, settings=inject.DEFAULT_SETTINGS._replace(enabled=False))
    return [item.id for item in built.items], not decide(response, null=evidence).inject


def _with_gap(name: str, custom: Any) -> bool:
    """Whether a system's evidence-gap verdict is recorded (and so unanswerable questions asked)."""
    return name in ("default", "cold", *BLOCKS) or custom is not None


def _gap_share(gaps: Mapping[str, bool], qids: Collection[str]) -> float:
    return round(sum(gaps[q] for q in qids) / max(len(qids), 1), 4)


def _quoted(questions: Mapping[str, str], ranked: Mapping[str, list[str]]) -> dict[str, int]:
    """How many questions hold a double quote, and how many of those the system returned nothing for."""
    quoted = [q for q, text in questions.items() if '"' in text]
    return {"questions": len(quoted), "zero_hits": sum(1 for q in quoted if not ranked.get(q))}


def run_sets(name: str, evalsets: Sequence[EvalSet], work: Path, *, systems: tuple[str, ...] = SYSTEMS,
             progress: Progress = _quiet, extra: Mapping[str, Any] | None = None,
             groups: Mapping[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Every system on both splits of a set held in one or more stores (LoCoMo: one per conversation).

    Each store is searched on its own; the figures are then taken over every
    question of every store together. ``groups`` (qid -> label) adds the same
    figures per group (LoCoMo's question categories) under each split's ``groups``.
    """
    started = time.perf_counter()
    named: dict[str, Any] = {s: None for s in systems}
    named.update(extra or {})
    answers: dict[tuple[str, str], _Answers] = {}
    records = sum(_search_store(evalset, work, named, answers, progress) for evalset in evalsets)
    primary = evalsets[0].primary if evalsets else "R@10"
    measures: tuple[str, ...] = ANY_MEASURES if evalsets and evalsets[0].hit_any else MEASURES
    measures = (*measures, "nDCG@10") if primary == "nDCG@10" else measures
    result: dict[str, Any] = {"records": records, "splits": {}, "primary": primary, "measures": list(measures)}
    if len(evalsets) > 1:
        result["stores"] = len(evalsets)
    for split in SPLITS:
        answerable: dict[str, str] = {}
        unanswerable: dict[str, str] = {}
        qrels: dict[str, dict[str, int]] = {}
        for evalset in evalsets:
            answerable.update(evalset.answerable(split))
            unanswerable.update(evalset.unanswerable(split))
            qrels.update(evalset.judged(split))
        if not answerable and not unanswerable:
            continue
        figures: dict[str, Any] = {"answerable": len(answerable), "unanswerable": len(unanswerable), "systems": {}}
        for system, custom in named.items():
            got = answers[(split, system)]
            row: dict[str, Any] = evaluate({q: got.ranked[q] for q in answerable}, qrels, measures)
            row["query_ms_p50"] = round(statistics.median(got.times), 2) if got.times else None
            if _with_gap(system, custom) and unanswerable:
                row["gap_answerable"] = _gap_share(got.gaps, answerable)
                row["gap_unanswerable"] = _gap_share(got.gaps, unanswerable)
            figures["systems"][system] = row
        if "default" in named:
            figures["quoted"] = _quoted({**answerable, **unanswerable}, answers[(split, "default")].ranked)
        if "default" in named and "textbook" in named:
            ours, theirs = answers[(split, "default")].ranked, answers[(split, "textbook")].ranked
            figures["margins"] = {m: paired_margin(per_question(ours, qrels, m), per_question(theirs, qrels, m))
                                  for m in measures}  # fmt: skip
        if groups:
            figures["groups"] = _group_figures(named, answers, split, answerable, unanswerable, qrels, groups, measures)
        result["splits"][split] = figures
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _group_figures(named: Mapping[str, Any], answers: Mapping[tuple[str, str], _Answers], split: str,
                   answerable: Mapping[str, str], unanswerable: Mapping[str, str],
                   qrels: Mapping[str, Mapping[str, int]], groups: Mapping[str, str],
                   measures: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """The figures of one split per group of questions: measures on its answerable ones, gap shares on all."""
    out: dict[str, Any] = {}
    for group in sorted({groups[q] for q in (*answerable, *unanswerable) if q in groups}):
        yes = [q for q in answerable if groups.get(q) == group]
        no = [q for q in unanswerable if groups.get(q) == group]
        entry: dict[str, Any] = {"answerable": len(yes), "unanswerable": len(no), "systems": {}}
        for system, custom in named.items():
            got = answers[(split, system)]
            row: dict[str, Any] = {}
            if yes:
                row.update(evaluate({q: got.ranked[q] for q in yes}, {q: qrels[q] for q in yes}, measures))
            if _with_gap(system, custom):
                if yes:
                    row["gap_answerable"] = _gap_share(got.gaps, yes)
                if no:
                    row["gap_unanswerable"] = _gap_share(got.gaps, no)
            if row:
                entry["systems"][system] = row
        out[group] = entry
    return out

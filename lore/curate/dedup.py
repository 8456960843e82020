"""Write-time duplicate and contradiction detection.

Layers, cheapest first, against the ACTIVE records of the same kind (patterns and
lessons are compared together):

1. exact: the normalised text hashes are equal;
2. lexical: normalised BM25 >= ``LEXICAL_BM25`` or word Jaccard >= ``LEXICAL_JACCARD``;
3. guard: a lexical or semantic match whose texts name different specifics
   (a number, version, flag, identifier, file or product name) is vetoed;
4. semantic: embedding cosine >= ``SEMANTIC_COSINE``;
5. contradiction: same topic (cosine >= ``TOPIC_COSINE`` or BM25 >= ``TOPIC_BM25``)
   with opposite advice is reported as a contradiction; opposite advice (in the core
   advice or anywhere in the compared text) is never a duplicate.

Precision matters more than recall: a false duplicate throws away a real note,
a missed one only leaves two similar notes for ``lore consolidate``.

Cost: on the write path (``lore.curate.write_check.check_before_write``) a store with more than
``EMBED_CANDIDATES`` records of the kind is first narrowed to the
``EMBED_CANDIDATES`` records with the highest idf-weighted word overlap with the
new text (cached-stem tokens, no embedding); only those are compared in full and
embedded. Below that size every record is compared, as before. Decisions are
checked against ``lore.curate.pool`` (their word sets kept current, not the whole
store read on every write), patterns and lessons against the files that hold them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lore.curate.similarity import (
    Bm25Stats,
    bm25_symmetric,
    differs_in_specifics,
    jaccard,
    opposite_advice,
    substituted_slot,
    text_hash,
    tokens,
)
from lore.store.records import Record

if TYPE_CHECKING:
    from lore.store.store import Snapshot

Embed = Callable[[list[str]], np.ndarray]

# Chosen on the dev half of benchmarks/data/duplicate_pairs.jsonl (110 pairs): dev precision 1.00,
# recall 0.36. The dev sweep's best setting at precision >= 0.95 (semantic and core cosine 0.55:
# dev 0.95 / 0.42) was frozen, then reported once on the test half: precision 0.70, recall 0.32
# (6 of 15 contradictions called duplicates). Lower cosine bars let in contradictions and
# same-topic notes that the bundled model places as close as the paraphrases, so these stay.
# docs/search.md has the study (a stronger encoder, all-MiniLM-L6-v2, measured no better).
LEXICAL_BM25 = 0.60
LEXICAL_JACCARD = 0.80
SEMANTIC_COSINE = 0.80
# Same topic, for reporting opposite advice as a contradiction: 0.40 reports 10 of the 15 dev
# contradictions (0.60: 7) and no false notice on the dev pairs or their background records.
TOPIC_COSINE = 0.40
TOPIC_BM25 = 0.40
# The core of a record (a decision's decision line, a pattern's solution, a lesson's rule, an
# anti-pattern's fix) must itself be close: two patterns under the same generic name ("Logging in
# request handlers") with different solutions are different patterns.
CORE_COSINE = 0.60
CORE_BM25 = 0.50
# A decision is compared as 0.6 x (decision line) + 0.4 x (decision + rationale) when both have a
# rationale: the decision line is the claim, the rationale its support, which is worded differently
# each time the same decision is captured; but two identical one-liners with different rationales
# ("Use Postgres" for the queue / for analytics) must not score as identical.
PRIMARY_WEIGHT = 0.6
# On the write path, at most this many same-kind records (the closest by idf-weighted word overlap)
# are compared in full and embedded; the rest share too little wording to be a duplicate.
EMBED_CANDIDATES = 50

KIND_GROUPS = {"decision": ("decision",), "pattern": ("pattern", "lesson"), "lesson": ("pattern", "lesson"),
               "anti_pattern": ("anti_pattern",)}  # fmt: skip


@dataclass
class Match:
    record: Record
    similarity: float
    layer: str  # "exact" | "lexical" | "jaccard" | "semantic"


@dataclass
class DedupOutcome:
    merged: Record | None = None
    notices: list[str] = field(default_factory=list)
    duplicate: Match | None = None
    contradictions: list[Match] = field(default_factory=list)


# -- the text compared, per kind ---------------------------------------------------


def _s(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(_s(v) for v in value if _s(v))
    return str(value).strip()


def _join(*parts: Any) -> str:
    return "\n".join(t for t in (_s(p) for p in parts) if t)


def core_text(kind: str, raw: dict[str, Any]) -> str:
    """The part of a record that carries its advice."""
    if kind == "decision":
        return _s(raw.get("decision"))
    if kind == "anti_pattern":
        return _s(raw.get("fix")) or _s(raw.get("symptom")) or _s(raw.get("name"))
    return _s(raw.get("rule")) or _s(raw.get("solution")) or _s(raw.get("name"))


def compared_text(kind: str, raw: dict[str, Any]) -> tuple[str, str]:
    """(primary, secondary) text of a record: the claim, and what supports it."""
    if kind == "decision":
        return _s(raw.get("decision")), _s(raw.get("rationale"))
    if kind == "anti_pattern":
        return _join(raw.get("name"), raw.get("symptom"), raw.get("fix")), ""
    if kind == "lesson" or (kind == "pattern" and raw.get("rule")):
        primary = _join(raw.get("rule"), raw.get("error_pattern"))
        if primary:
            return primary, ""
    return _join(raw.get("name"), raw.get("solution")), _s(raw.get("problem"))


@dataclass
class _Prepared:
    record: Record | None
    primary: str
    full: str
    has_secondary: bool
    digest: str
    primary_tokens: list[str]
    full_tokens: list[str]
    core: str = ""
    core_tokens: list[str] = field(default_factory=list)
    rows: tuple[int, int, int] = (-1, -1, -1)  # the rows of the primary, full and core texts' vectors

    @classmethod
    def of(cls, kind: str, raw: dict[str, Any], record: Record | None = None) -> _Prepared:
        primary, secondary = compared_text(kind, raw)
        full = _join(primary, secondary)
        core = core_text(kind, raw) or primary
        return cls(record, primary, full, bool(secondary), text_hash(full), tokens(primary), tokens(full),
                   core, tokens(core))  # fmt: skip


@dataclass
class _Verdict:
    duplicate: Match | None = None
    contradiction: Match | None = None
    vetoed: str | None = None


def _weighted(a: _Prepared, b: _Prepared, primary: float, full: float) -> float:
    if a.has_secondary and b.has_secondary:
        return PRIMARY_WEIGHT * primary + (1.0 - PRIMARY_WEIGHT) * full
    return primary


def _compare(new: _Prepared, old: _Prepared, stats: Bm25Stats, vectors: np.ndarray | None) -> _Verdict:
    assert old.record is not None
    record = old.record
    if new.digest == old.digest:
        return _Verdict(duplicate=Match(record, 1.0, "exact"))
    bm25 = _weighted(new, old, bm25_symmetric(new.primary_tokens, old.primary_tokens, stats),
                     bm25_symmetric(new.full_tokens, old.full_tokens, stats))  # fmt: skip
    jac = _weighted(new, old, jaccard(new.primary_tokens, old.primary_tokens),
                    jaccard(new.full_tokens, old.full_tokens))  # fmt: skip
    cosine = 0.0
    if vectors is not None:
        cosine = _weighted(new, old, float(vectors[new.rows[0]] @ vectors[old.rows[0]]),
                           float(vectors[new.rows[1]] @ vectors[old.rows[1]]))  # fmt: skip
    same_topic = bm25 >= TOPIC_BM25 or jac >= TOPIC_BM25 or (vectors is not None and cosine >= TOPIC_COSINE)
    if same_topic and opposite_advice(new.core, old.core):
        return _Verdict(
            contradiction=Match(
                record, round(max(bm25, cosine), 4), "semantic" if cosine > bm25 else "lexical"
            )
        )
    candidates = []
    if bm25 >= LEXICAL_BM25 or jac >= LEXICAL_JACCARD:
        core_bm25 = bm25_symmetric(new.core_tokens, old.core_tokens, stats)
        if core_bm25 >= CORE_BM25 or jaccard(new.core_tokens, old.core_tokens) >= CORE_BM25:
            if bm25 >= LEXICAL_BM25:
                candidates.append(Match(record, bm25, "lexical"))
            if jac >= LEXICAL_JACCARD:
                candidates.append(Match(record, jac, "jaccard"))
    if (vectors is not None and cosine >= SEMANTIC_COSINE
            and float(vectors[new.rows[2]] @ vectors[old.rows[2]]) >= CORE_COSINE):  # fmt: skip
        candidates.append(Match(record, cosine, "semantic"))
    if not candidates:
        return _Verdict()
    reason = differs_in_specifics(new.full, old.full) or substituted_slot(new.core, old.core)
    if reason:
        return _Verdict(vetoed=reason)
    if (not same_topic and opposite_advice(new.core, old.core)) or opposite_advice(new.full, old.full):
        # Opposite advice is never a duplicate, even below the topic bar at which it is reported, and
        # also when the reversal sits in the name or rationale rather than in the core advice.
        return _Verdict(vetoed="opposite advice")
    best = max(candidates, key=lambda m: m.similarity)
    best.similarity = round(min(1.0, best.similarity), 4)
    return _Verdict(duplicate=best)


def _embed_all(items: list[_Prepared], embed: Embed | None) -> np.ndarray | None:
    if embed is None or not items:
        return None
    # Each distinct text once: a decision's core is its primary text, and a record without a
    # rationale has one text for all three (the same text has the same vector).
    rows: dict[str, int] = {}
    for item in items:
        primary, full, core = (rows.setdefault(text, len(rows)) for text in (item.primary, item.full, item.core))
        item.rows = (primary, full, core)
    return np.asarray(embed(list(rows)), dtype=np.float32)


def find_duplicate(candidates: list[Record], kind: str, raw: dict[str, Any], embed: Embed | None,
                   *, limit: int | None = None) -> tuple[Match | None, list[Match]]:  # fmt: skip
    """The best duplicate of ``raw`` among the active ``candidates`` of its kind, and contradictions.

    With ``limit``, a pool larger than ``limit`` is first narrowed to the ``limit`` records with the
    highest idf-weighted word overlap (``shortlist``); BM25 statistics still cover the whole pool,
    so the scores of the records kept are exactly those of an unlimited check.
    """
    group = KIND_GROUPS.get(kind, (kind,))
    records = [r for r in candidates if r.kind in group and r.active]
    if not records:
        return None, []
    new = _Prepared.of(kind, raw)
    if limit is None or len(records) <= limit:
        pool = [_Prepared.of(r.kind, r.raw, r) for r in records]
        stats = Bm25Stats.build([p.full_tokens for p in pool] + [new.full_tokens])
    else:
        full_tokens = [tokens(_join(*compared_text(r.kind, r.raw))) for r in records]
        stats = Bm25Stats.build([*full_tokens, new.full_tokens])
        keep = shortlist(new.full_tokens, full_tokens, stats, limit)
        pool = [_Prepared.of(records[i].kind, records[i].raw, records[i]) for i in keep]
    return judge(new, pool, stats, embed)


def judge(new: _Prepared, pool: list[_Prepared], stats: Bm25Stats, embed: Embed | None) -> tuple[Match | None, list[Match]]:
    """The best duplicate of ``new`` in ``pool`` (records compared in full, BM25 ``stats`` over all candidates), and contradictions."""
    vectors = _embed_all([new, *pool], embed) if pool else None
    best: Match | None = None
    contradictions: list[Match] = []
    for old in pool:
        verdict = _compare(new, old, stats, vectors)
        if verdict.contradiction is not None:
            contradictions.append(verdict.contradiction)
        match = verdict.duplicate
        if match is None:
            continue
        if (
            best is None
            or (match.layer == "exact") > (best.layer == "exact")
            or ((match.layer == "exact") == (best.layer == "exact") and match.similarity > best.similarity)
        ):
            best = match
    contradictions.sort(key=lambda m: -m.similarity)
    return best, contradictions


def shortlist(query: list[str], docs: list[list[str]], stats: Bm25Stats, limit: int) -> list[int]:
    """Indices of the ``limit`` docs closest to ``query`` by idf-weighted Jaccard (sharing a word at least).

    Weighted Jaccard (the idf mass of the shared words over that of all words of both) ranks a
    near-identical text above a long text that merely mentions many of the same words; a
    duplicate, lexical or paraphrased, shares its rare words with the original.
    """
    idf = {term: stats.idf(term) for term in stats.df}
    terms = set(query)
    query_mass = sum(idf.get(t, 0.0) for t in terms)
    scored: list[tuple[float, int]] = []
    for index, doc in enumerate(docs):
        doc_terms = set(doc)
        shared = terms.intersection(doc_terms)
        if not shared:
            continue
        shared_mass = sum(map(idf.__getitem__, shared))
        union_mass = query_mass + sum(map(idf.__getitem__, doc_terms)) - shared_mass
        scored.append((shared_mass / union_mass if union_mass > 0 else 1.0, index))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return sorted(index for _, index in scored[:limit])


# -- whole-store consolidation ---------------------------------------------------------


def consolidation_clusters(snapshot: Snapshot, embed: Embed | None,
                           kinds: tuple[str, ...] | None = None) -> list[list[Match]]:  # fmt: skip
    """Groups of near-duplicate active records (same layered rule, per kind), largest first.

    Each cluster lists its records oldest first; a member's ``similarity`` and ``layer`` are
    those of its strongest link inside the cluster. ``kinds`` limits the kind groups compared
    (a group is compared when it holds any of them; patterns and lessons form one group).
    """
    clusters: list[list[Match]] = []
    for group in (("decision",), ("pattern", "lesson"), ("anti_pattern",)):
        if kinds is not None and not set(group) & set(kinds):
            continue
        records = [r for r in snapshot.of_kind(*group) if r.active]
        if len(records) < 2:
            continue
        items = [_Prepared.of(r.kind, r.raw, r) for r in records]
        stats = Bm25Stats.build([p.full_tokens for p in items])
        vectors = _embed_all(items, embed)
        sets = _UnionFind(len(items))
        best: dict[int, Match] = {}
        for i, j in _candidate_pairs(items, vectors):
            verdict = _compare(items[i], items[j], stats, vectors)
            if verdict.duplicate is None:
                continue
            match = verdict.duplicate
            sets.union(i, j)
            for k, other in ((i, j), (j, i)):
                if k not in best or match.similarity > best[k].similarity:
                    best[k] = Match(items[other].record or records[other], match.similarity, match.layer)
        members: dict[int, list[int]] = {}
        for i in best:
            members.setdefault(sets.find(i), []).append(i)
        for indices in members.values():
            if len(indices) < 2:
                continue
            indices.sort(
                key=lambda k: (
                    records[k].raw.get("timestamp") or records[k].raw.get("created_at") or "",
                    records[k].id,
                )
            )
            clusters.append([Match(records[k], best[k].similarity, best[k].layer) for k in indices])
    clusters.sort(key=lambda c: -len(c))
    return clusters


class _UnionFind:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        self.parent[self.find(i)] = self.find(j)


def _candidate_pairs(items: list[_Prepared], vectors: np.ndarray | None) -> list[tuple[int, int]]:
    """Pairs worth a full comparison: same hash, a shared informative word, or a close vector."""
    n = len(items)
    pairs: set[tuple[int, int]] = set()
    postings: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        for term in set(item.full_tokens):
            postings.setdefault(term, []).append(index)
    common = max(50, n // 5)
    shared: dict[tuple[int, int], int] = {}
    for docs in postings.values():
        if len(docs) > common:
            continue  # too common to suggest a duplicate on its own
        for x in range(len(docs)):
            for y in range(x + 1, len(docs)):
                key = (docs[x], docs[y])
                shared[key] = shared.get(key, 0) + 1
    pairs.update(k for k, count in shared.items() if count >= 2)
    hashes: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        hashes.setdefault(item.digest, []).append(index)
    for docs in hashes.values():
        pairs.update((docs[x], docs[y]) for x in range(len(docs)) for y in range(x + 1, len(docs)))
    if vectors is not None:
        primary = vectors[[item.rows[0] for item in items]]
        sims = primary @ primary.T
        rows, cols = np.nonzero(np.triu(sims, k=1) >= SEMANTIC_COSINE - 0.05)
        pairs.update((int(r), int(c)) for r, c in zip(rows, cols, strict=True))
    return sorted(pairs)


# Kept for callers of the old private name.

"""The Whoosh BM25F index: the only module that imports whoosh.

Titles (a decision, a pattern's name) outweigh bodies through field boosts;
the analyser stems English and splits code identifiers (camelCase,
snake_case, dotted names, paths) while keeping the whole identifier too.
Only the record id is stored: everything shown comes from the records table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Titles outweigh bodies, but only by 1.5: 3.0 cost recall on both benchmarks
# (known-item recall@10 0.474 vs 0.537, SciFact-train BM25 nDCG@10 0.676 vs 0.691).
FIELD_BOOSTS = {"title": 1.5, "tags": 1.5, "body": 1.0, "extra": 0.6}
# Slightly lower b than the default 0.75: records are short and of uneven length.
BM25_B = 0.7
BM25_K1 = 1.2
_TOKEN = r"[\w][\w./\-]*\w|\w"
# Fields a query searches. Tags (often file paths) and extras (alternatives, examples)
# stay indexed but are not queried: on the known-item questions querying them cost
# recall@10 (0.537 with, 0.621 without), since paths like builtin/fetch.c match
# common words in hundreds of records.
QUERY_FIELDS = ("title", "body")
COMMON_TERM_SHARE = 0.25
MAX_QUERY_TERMS = 10
_QUERY_SPECIALS = re.compile(r"[\"'()\[\]{}^~*?:\\/+!&|<>=-]")


def analyzer() -> Any:
    from whoosh.analysis import IntraWordFilter, LowercaseFilter, RegexTokenizer, StemFilter, StopFilter

    return (
        RegexTokenizer(_TOKEN)
        | IntraWordFilter(mergewords=True, mergenums=True)
        | LowercaseFilter()
        | StopFilter()
        | StemFilter(cachesize=50000)
    )


def schema() -> Any:
    from whoosh.fields import ID, TEXT, Schema

    ana = analyzer()
    return Schema(
        id=ID(stored=True, unique=True),
        title=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["title"]),
        body=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["body"]),
        extra=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["extra"]),
        tags=TEXT(analyzer=ana, field_boost=FIELD_BOOSTS["tags"]),
    )


@dataclass(frozen=True)
class LexicalDoc:
    id: str
    title: str
    body: str
    extra: str
    tags: str


def create(directory: Path, docs: Iterable[LexicalDoc], *, procs: int = 1, limitmb: int = 256) -> int:
    """Build a fresh index in ``directory``; return the number of documents."""
    from whoosh import index

    directory.mkdir(parents=True, exist_ok=True)
    ix = index.create_in(str(directory), schema())
    kwargs: dict[str, Any] = {"limitmb": limitmb}
    if procs > 1:
        kwargs.update(procs=procs, multisegment=True)
    writer = ix.writer(**kwargs)
    count = 0
    try:
        for doc in docs:
            writer.add_document(id=doc.id, title=doc.title, body=doc.body, extra=doc.extra, tags=doc.tags)
            count += 1
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    ix.close()
    return count


def update(directory: Path, upserts: Iterable[LexicalDoc], deletes: Iterable[str]) -> None:
    """Apply an incremental change; Whoosh's commit swaps its table of contents atomically."""
    from whoosh import index

    ix = index.open_dir(str(directory))
    writer = ix.writer(limitmb=64)
    try:
        for record_id in deletes:
            writer.delete_by_term("id", record_id)
        for doc in upserts:
            writer.update_document(id=doc.id, title=doc.title, body=doc.body, extra=doc.extra, tags=doc.tags)
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    ix.close()


def query_terms(text: str) -> list[str]:
    """Analysed terms of a query (what BM25 will actually match)."""
    return [token.text for token in analyzer()(text)]


class LexicalSearcher:
    """An open searcher, reusable across queries (the warm helper keeps one)."""

    def __init__(self, directory: Path) -> None:
        from whoosh import index, scoring

        self._ix = index.open_dir(str(directory))
        self._searcher = self._ix.searcher(weighting=scoring.BM25F(B=BM25_B, K1=BM25_K1))
        self.doc_count = self._searcher.doc_count()

    def search(self, text: str, limit: int) -> list[tuple[str, float]]:
        """OR-grouped BM25F over every field: any matching term counts, more terms count more."""
        from whoosh import query as q

        terms = self._selective_terms(list(dict.fromkeys(query_terms(_QUERY_SPECIALS.sub(" ", text)))))
        if not terms:
            return []
        clauses = [q.Term(field, term) for term in terms for field in QUERY_FIELDS]
        results = self._searcher.search(q.Or(clauses), limit=limit)
        return [(hit["id"], float(hit.score)) for hit in results]

    def _selective_terms(self, terms: list[str]) -> list[str]:
        """Drop terms in more than a quarter of the records (when rarer ones exist), keep the 10 rarest.

        Such terms barely move BM25 (their idf is near zero) but make Whoosh score,
        in Python, every document that contains them: at 10k records they cost most
        of a query's time.
        """
        if len(terms) <= 1 or not self.doc_count:
            return terms
        reader = self._searcher.reader()
        frequency = {t: max(reader.doc_frequency(f, t) for f in ("title", "body")) for t in terms}
        limit = COMMON_TERM_SHARE * self.doc_count
        selective = [t for t in terms if frequency[t] <= limit] or terms
        return sorted(selective, key=lambda t: frequency[t])[:MAX_QUERY_TERMS]

    def close(self) -> None:
        self._searcher.close()
        self._ix.close()


def is_valid(directory: Path) -> bool:
    from whoosh import index

    try:
        return bool(index.exists_in(str(directory)))
    except Exception:
        return False
